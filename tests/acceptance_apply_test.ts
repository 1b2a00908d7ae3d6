/**
 * Acceptance (issue 10 §5): the apply recipe in docs/guide.md, exactly as
 * written, leaves the project's Git repository whole. Before the consumer
 * runs, join writes the blobs the patches need into the project's own
 * object store; `git apply --3way` with the split's store as an alternate
 * then stages blobs that outlive the split.
 */

import assert from "node:assert/strict";
import {
  exists,
  handleId,
  NINE,
  PERMISSIONS,
  Sandbox,
  show,
  uncommittedNine,
} from "./_acceptance.ts";
/** `git hash-object` of {@linkcode NINE}: the committed a.txt, a loose object in the project. */
const NINE_ID = "07193989308c972f8a2d0f1b3a15c29ea4ac565b";

/** The branch: a text edit, a new text file and a new binary file. */
const BRANCH = String.raw`sed -i 's/^5$/five/' a.txt; printf 'new\n' > new.txt; ` +
  String.raw`printf '\211PNG\r\n\032\n\0\0\0\rIHDR\0\0\0\20' > logo.png`;

/** docs/guide.md, "Applying a branch's patch", word for word (with the CLI as `$M`). */
const RECIPE = String.raw`"$M" split -b fix='${BRANCH}' | "$M" join -- sh -c '
  cd "${"$"}{SPLIT_ROOT:?}" &&
  git apply --3way --check "$SPLIT_DIR/fix/diff.patch" &&
  GIT_ALTERNATE_OBJECT_DIRECTORIES="$SPLIT_OBJECTS" git apply --3way "$SPLIT_DIR/fix/diff.patch"'`;

/** Git must find every object the index and HEAD name, and be able to save and commit them. */
async function assertRepositoryWhole(sb: Sandbox): Promise<void> {
  const fsck = await sb.runGit(["fsck", "--full", "--no-dangling"]);
  assert.equal(fsck.code, 0, `git fsck --full: ${show(fsck)}`);
  assert.doesNotMatch(fsck.stdout + fsck.stderr, /missing|invalid|corrupt/, show(fsck));
  const stash = await sb.runGit(["stash"]);
  assert.equal(stash.code, 0, `git stash: ${show(stash)}`);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), NINE, "stashed: a.txt as committed");
  const pop = await sb.runGit(["stash", "pop", "--index"]);
  assert.equal(pop.code, 0, `git stash pop --index: ${show(pop)}`);
  const commit = await sb.runGit(["commit", "-q", "-m", "applied"]);
  assert.equal(commit.code, 0, `git commit: ${show(commit)}`);
  const after = await sb.runGit(["fsck", "--full", "--no-dangling"]);
  assert.equal(after.code, 0, `git fsck --full after the commit: ${show(after)}`);
}

Deno.test({
  name: "the documented recipe, then join: git fsck, git stash and git commit succeed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": NINE } });
  const r = await sb.bash(`set -o pipefail\n${RECIPE}`);
  assert.equal(r.code, 0, show(r));
  const [s] = await sb.splits();
  assert.equal(s?.state, "joined");
  assert.ok(!exists(s.dir), "the consumer exited 0: the split's directory is removed");
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), NINE.replace("5\n", "five\n"));
  assert.equal(
    await sb.git("status", "--short"),
    "M  a.txt\nA  logo.png\nA  new.txt\n",
    "the recipe staged all three changes",
  );
  await assertRepositoryWhole(sb);
  assert.equal(
    await sb.git("show", "HEAD:logo.png").then((t) => t.length > 0),
    true,
    "the committed binary file is readable",
  );
});

Deno.test({
  name: "a conflicted 3-way merge through the recipe: every stage's blob is in the project",
  permissions: PERMISSIONS,
}, async () => {
  // An uncommitted edit goes into the snapshot: the patch's pre-image is in no commit.
  await using sb = await uncommittedNine();
  const r = await sb.bash(String.raw`
set -o pipefail
"$M" split -b fix="sed -i 's/^9\$/nine/' a.txt" | "$M" join -- sh -c '
  # The host changed the same line after the snapshot: the merge conflicts.
  sed -i "s/^9\$/NINE/" a.txt && git add -A
  GIT_ALTERNATE_OBJECT_DIRECTORIES="$SPLIT_OBJECTS" git apply --3way "$SPLIT_DIR/fix/diff.patch"'
`);
  assert.equal(r.code, 1, `git apply --3way reports the conflict: ${show(r)}`);
  const [s] = await sb.splits();
  assert.equal(s?.state, "kept", "the consumer failed: the split is kept");
  // The index holds the pre-image (stage 1) and the branch's side (stage 3).
  assert.match(await sb.git("ls-files", "--stage", "a.txt"), /^100644 [0-9a-f]{40} 3\ta.txt$/m);
  const fsck = await sb.runGit(["fsck", "--full", "--no-dangling"]);
  assert.equal(fsck.code, 0, `git fsck --full: ${show(fsck)}`);
  await sb.git("checkout", "--theirs", "a.txt");
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "one\n2\n3\n4\n5\n6\n7\n8\nnine\n");
  await sb.git("add", "a.txt");
  const commit = await sb.runGit(["commit", "-q", "-m", "merged"]);
  assert.equal(commit.code, 0, `git commit: ${show(commit)}`);
});

Deno.test({
  name: "a bare join writes the patch's blobs into the project before the rendering",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": NINE } });
  const split = await sb.marsh(["split", "-b", `fix=${BRANCH}`]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const patch = Deno.readTextFileSync(`${sb.project}/.marsh/split/${id}/out/fix/diff.patch`);
  const ids = [...patch.matchAll(/^index ([0-9a-f]{40})\.\.([0-9a-f]{40})/gm)]
    .flatMap((m) => [m[1]!, m[2]!]).filter((x) => !/^0+$/.test(x));
  assert.equal(ids.length, 4, `a.txt's two sides, new.txt and logo.png: ${patch}`);
  // All but a.txt's pre-image (committed) exist only in the split's store.
  const absent: string[] = [];
  for (const x of ids) if ((await sb.runGit(["cat-file", "-e", x])).code !== 0) absent.push(x);
  assert.equal(absent.length, 3, "three blobs are not in the project before the join");
  const join = await sb.marsh(["join"], { stdin: split.stdout });
  assert.equal(join.code, 0, show(join));
  assert.match(join.stdout, /^== fix: exited 0 \(3 files changed\)$/m);
  for (const x of ids) {
    const found = await sb.runGit(["cat-file", "-e", x]);
    assert.equal(found.code, 0, `${x} is in the project after the join: ${show(found)}`);
    const obj = Deno.statSync(`${sb.project}/.git/objects/${x.slice(0, 2)}/${x.slice(2)}`);
    assert.equal(obj.mode! & 0o777, 0o444, "read-only, as Git writes its loose objects");
  }
  assert.equal((await sb.split(id))?.state, "joined");
});

Deno.test({
  name:
    "a store object that does not hash to its name: join refuses, runs nothing, keeps the split",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": NINE } });
  const split = await sb.marsh(["split", "-b", "fix=printf 'new\\n' > new.txt"]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const dir = `${sb.project}/.marsh/split/${id}`;
  const newId = "3e757656cf36eca53338e520d134963a44f793f8"; // git hash-object of "new\n"
  const obj = `${dir}/store.git/objects/${newId.slice(0, 2)}/${newId.slice(2)}`;
  const other = `${sb.project}/.git/objects/${NINE_ID.slice(0, 2)}/${NINE_ID.slice(2)}`;
  // Another valid object under this name: a swap a branch could make.
  Deno.writeFileSync(obj, Deno.readFileSync(other));
  const marker = `${sb.scratch}/consumer-ran`;
  const join = await sb.marsh(["join", "--", "sh", "-c", `touch ${marker}`], {
    stdin: split.stdout,
  });
  assert.equal(join.code, 2, show(join));
  assert.match(
    join.stderr,
    new RegExp(
      `split ${id}: the objects its patches need could not be written into ${sb.project}/\\.git/objects: object ${newId} in .* is corrupt: its content hashes to ${NINE_ID}; .*marsh splits rm ${id}`,
    ),
  );
  assert.ok(!exists(marker), "the consumer never ran");
  assert.equal((await sb.runGit(["cat-file", "-e", newId])).code, 1, "nothing was written");
  const s = await sb.split(id);
  assert.equal(s?.state, "kept");
  assert.match(s?.reason ?? "", /the join failed: .*is corrupt/);
  assert.ok(exists(dir), "the split is kept on disk");
  const rm = await sb.marsh(["splits", "rm", id]);
  assert.equal(rm.code, 0, show(rm));
});
