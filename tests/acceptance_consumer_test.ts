/**
 * Acceptance (issue 11 §2, §3): a join consumer run from a subdirectory.
 * `git apply` below a project's top directory skips every path outside the
 * directory it runs in and exits 0, so a consumer that applies there loses
 * those changes and join removes the split. The consumer gets `SPLIT_ROOT`;
 * the recipe in docs/guide.md ("Applying a branch's patch") applies from
 * there, and fails (so join keeps the split) when it cannot get there.
 * Also what a bare `join --json` says about the release.
 */

import assert from "node:assert/strict";
import { exists, handleId, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

const FILES = { "README.md": "# Project\n", "src/greet.txt": "Hello\n" };

/** A branch run in src/: an edit there and one at the project's top. */
const BRANCH = String.raw`sed -i 's/Hello/Hi/' greet.txt; echo 'More.' >> ../README.md`;

/** A branch run in src/ that changes only the README, outside src/. */
const README_ONLY = String.raw`echo 'More.' >> ../README.md`;

/**
 * The recipe of docs/guide.md, "Applying a branch's patch", as written there
 * (its first `sh` block), with the test's branch and the CLI as `$M`: the
 * test follows the docs, whatever they say.
 */
function guideRecipe(branch: string): string {
  const guide = Deno.readTextFileSync(new URL("../docs/guide.md", import.meta.url));
  const section = guide.slice(guide.indexOf("\n## Applying a branch's patch\n"));
  const block = /\n```sh\n([\s\S]*?)\n```\n/.exec(section)?.[1];
  assert.ok(block, "docs/guide.md has a recipe under Applying a branch's patch");
  const split = "marsh split -b fix='./fix.sh' | marsh join -- ";
  assert.ok(block.startsWith(split), `the recipe starts with ${split}: ${block}`);
  return `"$M" split -b fix='${branch}' | "$M" join -- ${block.slice(split.length)}`;
}

/** The consumer of the recipe (what follows `marsh join -- `), for a join of a handle. */
function guideConsumer(): string {
  return guideRecipe("").replace(/^.*? join -- /, "");
}

Deno.test({
  name: "from src/, the guide's recipe applies a branch's change outside src/ (README at the top)",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const r = await sb.bash(`set -o pipefail\n${guideRecipe(BRANCH)}`, {
    cwd: `${sb.project}/src`,
  });
  assert.equal(r.code, 0, show(r));
  assert.equal(Deno.readTextFileSync(`${sb.project}/README.md`), "# Project\nMore.\n");
  assert.equal(Deno.readTextFileSync(`${sb.project}/src/greet.txt`), "Hi\n");
  assert.equal(await sb.git("status", "--short"), "M  README.md\nM  src/greet.txt\n");
  const [s] = await sb.splits();
  assert.equal(s?.state, "joined");
  assert.ok(!exists(s.dir), "the consumer exited 0: the split is removed");
});

Deno.test({
  name: "SPLIT_ROOT is the project root for a consumer run in a subdirectory",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const out = `${sb.scratch}/env`;
  const r = await sb.bash(
    String.raw`"$M" split -b fix=true | "$M" join -- sh -c 'cat >/dev/null; ` +
      String.raw`printf "%s\n%s\n" "$SPLIT_ROOT" "$PWD" > ${out}'`,
    { cwd: `${sb.project}/src` },
  );
  assert.equal(r.code, 0, show(r));
  assert.equal(Deno.readTextFileSync(out), `${sb.project}\n${sb.project}/src\n`);
});

Deno.test({
  name:
    "from src/, git apply in place skips the README, exits 0, and join removes the split: the change is lost",
  permissions: PERMISSIONS,
}, async () => {
  // What the guide warns about, as git does it: join cannot tell this from a
  // consumer that chose not to apply the branch (docs/guide.md).
  await using sb = await Sandbox.create({ files: FILES });
  const r = await sb.bash(
    String.raw`set -o pipefail
"$M" split -b fix='${README_ONLY}' | "$M" join -- sh -c '
  git apply --3way --check "$SPLIT_DIR/fix/diff.patch" &&
  git apply --3way "$SPLIT_DIR/fix/diff.patch"'`,
    { cwd: `${sb.project}/src` },
  );
  assert.equal(r.code, 0, show(r));
  assert.equal(Deno.readTextFileSync(`${sb.project}/README.md`), "# Project\n", "not applied");
  assert.equal(await sb.git("status", "--short"), "");
  const [s] = await sb.splits();
  assert.equal(s?.state, "joined", "the consumer exited 0, so the split was removed");
  assert.ok(!exists(s.dir));
});

Deno.test({
  name:
    "the recipe's consumer without SPLIT_ROOT (a join that does not give it) fails: join keeps the split, nothing applied",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const src = `${sb.project}/src`;
  const split = await sb.marsh(["split", "-b", `fix=${README_ONLY}`], { cwd: src });
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const r = await sb.bash(`"$M" join -- env -u SPLIT_ROOT ${guideConsumer()} <<<"$MARSH_HANDLE"`, {
    cwd: src,
    env: { MARSH_HANDLE: split.stdout },
  });
  assert.notEqual(r.code, 0, show(r));
  assert.match(r.stderr, /SPLIT_ROOT/, "the shell names what is missing");
  assert.match(r.stderr, new RegExp(`split ${id} kept: the consumer exited ${r.code}`));
  assert.equal(Deno.readTextFileSync(`${sb.project}/README.md`), "# Project\n");
  assert.equal((await sb.split(id))?.state, "kept");
  // Joined again as the recipe says, the change arrives.
  const again = await sb.bash(`"$M" join -- ${guideConsumer()} <<<"$MARSH_HANDLE"`, {
    cwd: src,
    env: { MARSH_HANDLE: split.stdout },
  });
  assert.equal(again.code, 0, show(again));
  assert.equal(Deno.readTextFileSync(`${sb.project}/README.md`), "# Project\nMore.\n");
  assert.equal((await sb.split(id))?.state, "joined");
});

/** The one JSON line of a bare `join --json`. */
function jsonLine(stdout: string): Record<string, unknown> {
  assert.match(stdout, /^\{.*\}\n$/, "one JSON line");
  return JSON.parse(stdout) as Record<string, unknown>;
}

Deno.test({
  name: "bare join --json says whether the split was removed or kept, and why",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const cases: [string[], string[], string, string, string][] = [
    [["-b", "a=true"], [], "removed", "every branch exited 0", "joined"],
    [["-b", "a=true", "-b", "b=exit 3"], [], "kept", "branch b: exited 3", "kept"],
    [["-b", "a=true"], ["--keep"], "kept", "--keep was given", "kept"],
  ];
  for (const [branches, flags, released, reason, state] of cases) {
    const split = await sb.marsh(["split", ...branches]);
    const id = handleId(split.stdout);
    const join = await sb.marsh(["join", "--json", ...flags], { stdin: split.stdout });
    assert.equal(join.code, 0, show(join));
    const line = jsonLine(join.stdout);
    assert.equal(line.released, released, join.stdout);
    assert.equal(line.reason, reason, join.stdout);
    // The manifest's own fields stay, as they are after the release.
    assert.equal(line.id, id);
    assert.equal(line.version, 2);
    assert.equal(line.state, state);
    assert.equal((line.branches as unknown[]).length, branches.length / 2);
    assert.equal((await sb.split(id))?.state, state);
    if (released === "kept") {
      assert.equal(
        join.stderr,
        `split ${id} kept: ${reason}; remove it with: marsh splits rm ${id}\n`,
      );
    } else {
      assert.equal(join.stderr, "");
    }
  }
});

Deno.test({
  name:
    "bare join --json whose reader is gone: exit 1, saying whether the split was removed or kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: FILES });
  const cases: [string, string, string][] = [
    ["true", "joined", "was removed"],
    ["exit 3", "kept", "is kept"],
  ];
  for (const [branch, state, says] of cases) {
    const split = await sb.marsh(["split", "-b", `a=${branch}`]);
    const id = handleId(split.stdout);
    // The reader closes its end first; only then does join start (its line comes after the release).
    const mark = `${sb.scratch}/reader-gone-${state}`;
    const r = await sb.bash(
      String.raw`set -o pipefail
{ while [ ! -e "$MARK" ]; do sleep 0.05; done; "$M" join --json <<<"$MARSH_HANDLE" 2>"$MARSH_ERR"; } \
  | { exec 0<&-; : > "$MARK"; }
echo "${"$"}{PIPESTATUS[0]}"`,
      { env: { MARSH_HANDLE: split.stdout, MARSH_ERR: `${sb.scratch}/err`, MARK: mark } },
    );
    assert.equal(r.stdout, "1\n", show(r));
    const err = Deno.readTextFileSync(`${sb.scratch}/err`);
    assert.match(
      err,
      new RegExp(
        `^marsh join: stdout closed before the manifest was written; split ${id} ${says}`,
        "m",
      ),
    );
    assert.equal((await sb.split(id))?.state, state);
  }
});
