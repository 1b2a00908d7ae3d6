/**
 * Acceptance for overlay forks (the daemon's default, `MARSH_FORKS=auto`,
 * where the host can mount; the tests run as root): a branch unmounting its
 * own fork, the manifest's fork strategy and root id, `marsh status`'s fork
 * report, and `--with-ignored` snapshots. The real `./marsh` CLI and daemon
 * in temp dirs.
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../splitfs/_testing.ts";
import { exists, handleId, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";
import type { Manifest } from "../protocol/manifest.ts";

/** `marsh split ARGS` to its end, returning the split's manifest. */
async function split(sb: Sandbox, args: readonly string[]): Promise<Manifest> {
  const r = await sb.marsh(["split", "-n", ...args]);
  assert.equal(r.code, 0, show(r));
  const s = await sb.split(handleId(r.stdout));
  assert.ok(s, `no split ${r.stdout}`);
  return s;
}

/** A branch's `out/<label>/files`, one `<A|M|D|T>\t<path>` per line. */
function filesOf(s: Manifest, label: string): string[] {
  return Deno.readTextFileSync(`${s.out}/${label}/files`).split("\n").filter((l) => l !== "");
}

function outText(s: Manifest, label: string, name: string): string {
  return Deno.readTextFileSync(`${s.out}/${label}/${name}`);
}

/** `marsh join` (no CMD): the split goes when every branch exited 0. */
async function join(sb: Sandbox, s: Manifest): Promise<string> {
  const r = await sb.marsh(["join"], { stdin: `{"marsh_split":1,"id":"${s.id}"}\n` });
  assert.equal(r.code, 0, show(r));
  assert.equal((await sb.split(s.id))?.state, "joined");
  assert.ok(!exists(s.dir), "the split's directory is removed");
  return r.stdout;
}

Deno.test({
  name:
    "a branch cannot unmount its view (CAP_SYS_ADMIN left its bounding set): umount and umount -l fail, and every write lands in its fork",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const s = await split(sb, [
    "-b",
    'busy=echo before > before.txt; umount "$PWD"; echo "umount exited $?"; echo after > after.txt',
    "-b",
    'lazy=echo before > before.txt; umount -l "$PWD" && echo "umount exited 0"; echo leak > "$PWD/leak.txt"; ls -A "$PWD"',
    "-b",
    'cwd=echo before > before.txt; umount -l "$PWD" && echo "umount exited 0"; echo after > after.txt',
  ]);
  assert.deepEqual(s.branches.map((b) => [b.label, b.status, b.fork_strategy]), [
    ["busy", "exited 0", "overlay"],
    ["lazy", "exited 0", "overlay"],
    ["cwd", "exited 0", "overlay"],
  ]);
  // Before the project view, a plain umount failed busy (the daemon holds the
  // fork's root) and umount -l detached it; now neither is permitted.
  assert.match(outText(s, "busy", "stderr"), /permission denied|not permitted|superuser/i);
  assert.match(outText(s, "busy", "stdout"), /^umount exited [1-9]\d*$/m);
  assert.deepEqual(filesOf(s, "busy"), ["A\tafter.txt", "A\tbefore.txt"]);
  assert.match(outText(s, "lazy", "stderr"), /permission denied|not permitted|superuser/i);
  assert.equal(outText(s, "lazy", "stdout"), ".git\n.marsh\na.txt\nbefore.txt\nleak.txt\n");
  assert.deepEqual(filesOf(s, "lazy"), ["A\tbefore.txt", "A\tleak.txt"]);
  assert.deepEqual(filesOf(s, "cwd"), ["A\tafter.txt", "A\tbefore.txt"]);

  const rendering = await join(sb, s);
  assert.match(rendering, /^\+leak$/m);
  for (const name of ["before.txt", "after.txt", "leak.txt"]) {
    assert.ok(!exists(`${sb.project}/${name}`), `${name} reached the project`);
  }
  assert.deepEqual(mountsBelow(sb.base), [], "the split's mounts are gone");
});

for (const forks of ["auto", "copy"] as const) {
  Deno.test({
    name:
      `the manifest's fork_strategy and marsh status --json's forks (MARSH_FORKS=${forks}): overlay by default, a copy method with copy`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({
      env: forks === "copy" ? { MARSH_FORKS: "copy" } : {},
    });
    const s = await split(sb, ["-b", "a=echo x > x.txt", "-b", "b=true"]);
    for (const b of s.branches) {
      if (forks === "auto") assert.equal(b.fork_strategy, "overlay", b.label);
      else {
        assert.ok(
          ["reflink", "copy_file_range", "copy"].includes(b.fork_strategy ?? ""),
          `${b.label}: ${b.fork_strategy}`,
        );
      }
    }
    // Only a layered snapshot has a root id.
    assert.equal(typeof s.root_id, forks === "auto" ? "string" : "undefined");
    const st = await sb.marsh(["status", "--json"]);
    assert.equal(st.code, 0, show(st));
    const status = JSON.parse(st.stdout) as {
      forks: { strategy: string; reason: string; policy: string };
    };
    assert.equal(status.forks.strategy, forks === "auto" ? "overlay" : "copy");
    assert.equal(status.forks.policy, forks);
    assert.ok(status.forks.reason.length > 0, "a reason is given");
    if (forks === "copy") assert.match(status.forks.reason, /MARSH_FORKS=copy/);
    await join(sb, s);
  });
}

Deno.test({
  name:
    "root_id in the manifest is the Git tree id of the snapshot: HEAD^{tree} for a clean tree, git write-tree after staged edits",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({
    files: {
      "a.txt": "a\n",
      "empty": "",
      "dir/sub/deep.txt": "deep\n",
      "dir/b.txt": "b\n",
      "z-last.txt": "z\n",
      "crlf.txt": "x\r\ny\r\n",
    },
  });
  Deno.chmodSync(`${sb.project}/dir/b.txt`, 0o755);
  Deno.symlinkSync("dir/sub", `${sb.project}/link`);
  await sb.git("add", "-A");
  await sb.git("commit", "-q", "-m", "mode and link");
  assert.equal(await sb.git("status", "--porcelain", "--ignored"), "");
  const clean = await split(sb, ["-b", "a=true"]);
  assert.equal(clean.root_id, (await sb.git("rev-parse", "HEAD^{tree}")).trim());
  await join(sb, clean);

  Deno.writeTextFileSync(`${sb.project}/a.txt`, "edited\n");
  Deno.removeSync(`${sb.project}/dir/sub/deep.txt`);
  Deno.writeTextFileSync(`${sb.project}/dir-new.txt`, "new\n");
  Deno.chmodSync(`${sb.project}/z-last.txt`, 0o755);
  await sb.git("add", "-A");
  // .marsh/ is ignored by its own .gitignore, so the staged tree is the snapshot's.
  assert.equal(
    await sb.git("status", "--porcelain", "--untracked-files=all"),
    [
      "M  a.txt\n",
      // Git sorts a tree's "dir" as "dir/", after "dir-new.txt".
      "A  dir-new.txt\n",
      "D  dir/sub/deep.txt\n",
      "M  z-last.txt\n",
    ].join(""),
  );
  const edited = await split(sb, ["-b", "a=true"]);
  const tree = (await sb.git("write-tree")).trim();
  assert.notEqual(tree, clean.root_id);
  assert.equal(edited.root_id, tree);
  await join(sb, edited);
});

for (const forks of ["auto", "copy"] as const) {
  Deno.test({
    name:
      `--with-ignored (MARSH_FORKS=${forks}): a branch sees ignored files only then; an edit to a snapshotted ignored file is in the patch, a new ignored file is not`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({
      env: forks === "copy" ? { MARSH_FORKS: "copy" } : {},
      files: { ".gitignore": "node_modules/\n.env\n", "a.txt": "a\n" },
    });
    Deno.mkdirSync(`${sb.project}/node_modules`);
    Deno.writeTextFileSync(`${sb.project}/node_modules/x.js`, "module.exports = 1;\n");
    Deno.writeTextFileSync(`${sb.project}/.env`, "SECRET=1\n");
    assert.equal(
      await sb.git("status", "--porcelain", "--ignored"),
      "!! .env\n!! node_modules/\n",
    );
    const look =
      'for f in .env node_modules/x.js; do if [ -e "$f" ]; then cat "$f"; else echo "no $f"; fi; done';
    const edit = 'echo SECRET=2 > .env; echo "module.exports = 2;" > node_modules/x.js; ' +
      'echo new > node_modules/y.js; echo new > .env.local; echo "debug" > x.log';

    const plain = await split(sb, ["-b", `look=${look}`, "-b", `edit=${edit}`]);
    assert.equal(plain.with_ignored, undefined);
    assert.equal(outText(plain, "look", "stdout"), "no .env\nno node_modules/x.js\n");
    // Nothing ignored was in the snapshot, so each is a new ignored path: skipped.
    assert.deepEqual(filesOf(plain, "edit"), ["A\t.env.local", "A\tx.log"]);
    await join(sb, plain);

    const r = await sb.marsh([
      "split",
      "--with-ignored",
      "-n",
      "-b",
      `look=${look}`,
      "-b",
      `edit=${edit}`,
    ]);
    assert.equal(r.code, 0, show(r));
    const withIgnored = (await sb.split(handleId(r.stdout)))!;
    assert.equal(withIgnored.with_ignored, true);
    assert.equal(
      outText(withIgnored, "look", "stdout"),
      "SECRET=1\nmodule.exports = 1;\n",
    );
    // Snapshotted paths are always compared, ignored or not; a new path under
    // an ignore rule (node_modules/y.js) is still skipped.
    assert.deepEqual(filesOf(withIgnored, "edit"), [
      "M\t.env",
      "A\t.env.local",
      "M\tnode_modules/x.js",
      "A\tx.log",
    ]);
    assert.match(outText(withIgnored, "edit", "diff.patch"), /^-SECRET=1\n\+SECRET=2$/m);
    await join(sb, withIgnored);
    // The project's ignored files are untouched.
    assert.equal(Deno.readTextFileSync(`${sb.project}/.env`), "SECRET=1\n");
  });
}
