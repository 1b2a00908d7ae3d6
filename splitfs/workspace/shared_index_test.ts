import assert from "node:assert/strict";
import { gitOk, gitProject, put, sandbox } from "../_testing.ts";
import { SplitWorkspace } from "./workspace.ts";

// Real files, real git, real overlay mounts (the tests run as root), as in
// workspace_test.ts: no index file is shared between forks (issue 10 §6: a
// branch that may write its admin dir could write a shared inode in place).
// Each fork's index, and a split index's sharedindex files, are its own copy.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "umount"],
  env: ["PATH"],
};

function splitDir(root: string, id = "s1"): string {
  return `${root}/.marsh/split/${id}`;
}

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name:
      `every fork's index is its own copy; one written in place leaves the others alone (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, { "a.txt": "a\n", "dir/b.txt": "b\n" });
    await gitOk(sb.root, ["update-index", "--split-index"], opts);
    const names = [
      "index",
      ...[...Deno.readDirSync(`${sb.root}/.git`)].map((e) => e.name)
        .filter((n) => n.startsWith("sharedindex.")),
    ];
    assert.equal(names.length, 2, "a split index and its shared part");
    using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home }, forks });
    const a = ws.fork("a");
    const b = ws.fork("b");
    const admins = `${splitDir(sb.root)}/.admin`;
    // Nothing split-level, nothing linked: each file once, with the user's bytes.
    assert.deepEqual([...Deno.readDirSync(admins)].map((e) => e.name).sort(), ["a", "b"]);
    for (const name of names) {
      const user = Deno.readFileSync(`${sb.root}/.git/${name}`);
      const [sa, sbb] = ["a", "b"].map((l) => Deno.lstatSync(`${admins}/${l}/${name}`));
      assert.notEqual(sa!.ino, sbb!.ino, name);
      assert.equal(sa!.nlink, 1, name);
      assert.equal(sa!.mode! & 0o777, 0o644, name);
      for (const l of ["a", "b"]) {
        assert.deepEqual(Deno.readFileSync(`${admins}/${l}/${name}`), user);
      }
    }
    // What a root branch can do: write its index in place (no rename).
    for (const name of names) {
      const f = Deno.openSync(`${admins}/a/${name}`, { write: true, truncate: true });
      f.writeSync(new TextEncoder().encode("junk"));
      f.close();
    }
    // b's Git is unaffected; a's own is broken, by its own hand.
    put(b.path, "a.txt", "a from b\n");
    assert.equal(await gitOk(b.path, ["status", "--porcelain"], opts), " M a.txt\n");
    await gitOk(b.path, ["commit", "-qam", "from b"], opts);
    await assert.rejects(gitOk(a.path, ["status", "--porcelain"], opts));
    assert.equal(ws.capture("b").files, 1);
    ws.remove();
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);
  });
}
