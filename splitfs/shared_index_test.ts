import assert from "node:assert/strict";
import { gitOk, gitProject, put, sandbox, text, throwsA } from "./_testing.ts";
import { sharedIndexName } from "./admin.ts";
import { WorkspaceReplacedError } from "./errors.ts";
import { labelProblem } from "./layout.ts";
import { SplitWorkspace } from "./workspace.ts";

// Real files, real git, real overlay mounts (the tests run as root), as in
// workspace_test.ts: a shared fork's index is a hard link to the split's one
// read-only copy, and one fork's Git never changes another's index.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "umount"],
  env: ["PATH"],
};

const POLICIES = ["copy", "auto"] as const;

function splitDir(root: string, id = "s1"): string {
  return `${root}/.marsh/split/${id}`;
}

function inode(path: string): number {
  return Deno.lstatSync(path).ino!;
}

function mode(path: string): number {
  return Deno.lstatSync(path).mode! & 0o7777;
}

Deno.test("the shared index copies are named so no label can be them", () => {
  for (const name of ["index", "sharedindex.0123456789abcdef0123456789abcdef01234567"]) {
    assert.notEqual(labelProblem(sharedIndexName(name)), null);
  }
  assert.equal(sharedIndexName("index"), ".index");
});

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.fork with shareIndex links the split's read-only index; Git in one fork leaves the other's alone (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, { "a.txt": "a\n", "dir/b.txt": "b\n", "c.txt": "c\n" });
    const before = Deno.readFileSync(`${sb.root}/.git/index`);
    using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home }, forks });
    assert.equal(ws.forkChoice.strategy, forks === "auto" ? "overlay" : "copy");
    const admins = `${splitDir(sb.root)}/.admin`;
    const shared = `${admins}/.index`;

    const plain = ws.fork("plain");
    assert.equal(Deno.lstatSync(admins).isDirectory, true);
    // No shared fork yet: nothing split-level is written.
    assert.throws(() => Deno.lstatSync(shared), Deno.errors.NotFound);
    const a = ws.fork("a", { shareIndex: true });
    const b = ws.fork("b", { shareIndex: true });
    const c = ws.fork("c", { shareIndex: false });

    // One inode for the split and its shared forks, read-only; copies elsewhere.
    assert.equal(Deno.lstatSync(shared).isFile, true);
    assert.equal(mode(shared), 0o444);
    assert.deepEqual(Deno.readFileSync(shared), before);
    assert.equal(inode(`${admins}/a/index`), inode(shared));
    assert.equal(inode(`${admins}/b/index`), inode(shared));
    assert.equal(Deno.lstatSync(shared).nlink, 3);
    for (const label of ["plain", "c"]) {
      const own = `${admins}/${label}/index`;
      assert.notEqual(inode(own), inode(shared));
      assert.equal(Deno.lstatSync(own).nlink, 1);
      assert.equal(mode(own), 0o644);
      assert.deepEqual(Deno.readFileSync(own), before);
    }
    for (const f of [plain, a, c]) {
      assert.equal(await gitOk(f.path, ["status", "--porcelain"], opts), "");
    }

    // A commit in a: Git renames index.lock over a's link, the shared inode
    // stays; b's Git has not run yet, so b's index is still that inode.
    put(a.path, "a.txt", "a from a\n");
    put(a.path, "new.txt", "new\n");
    await gitOk(a.path, ["add", "-A"], opts);
    await gitOk(a.path, ["commit", "-q", "-m", "from a"], opts);
    assert.notEqual(inode(`${admins}/a/index`), inode(shared));
    assert.deepEqual(Deno.readFileSync(shared), before);
    assert.deepEqual(Deno.readFileSync(`${admins}/b/index`), before);
    assert.equal(inode(`${admins}/b/index`), inode(shared));
    assert.equal(mode(shared), 0o444);
    assert.equal(await gitOk(a.path, ["status", "--porcelain"], opts), "");
    // b's status may refresh b's index (its files' stats are new): by rename, again.
    assert.equal(await gitOk(b.path, ["status", "--porcelain"], opts), "");
    assert.deepEqual(Deno.readFileSync(shared), before);
    assert.equal(await gitOk(a.path, ["ls-files"], opts), "a.txt\nc.txt\ndir/b.txt\nnew.txt\n");
    assert.equal(await gitOk(b.path, ["ls-files"], opts), "a.txt\nc.txt\ndir/b.txt\n");

    // b's own work is seen by b's Git only; staging it breaks b's link, not a's index.
    put(b.path, "c.txt", "c from b\n");
    assert.equal(await gitOk(b.path, ["status", "--porcelain"], opts), " M c.txt\n");
    assert.equal(await gitOk(a.path, ["status", "--porcelain"], opts), "");
    await gitOk(b.path, ["add", "c.txt"], opts);
    assert.equal(await gitOk(b.path, ["status", "--porcelain"], opts), "M  c.txt\n");
    assert.equal(await gitOk(a.path, ["status", "--porcelain"], opts), "");
    assert.deepEqual(Deno.readFileSync(shared), before);
    assert.equal(Deno.lstatSync(shared).nlink, 1);

    // Capture accepts every admin dir: a link, a replaced link, a copy.
    assert.equal(ws.capture("a").files, 2);
    assert.equal(ws.capture("b").files, 1);
    assert.equal(ws.capture("c").files, 0);
    assert.equal(text(`${splitDir(sb.root)}/out/b/files`), "M\tc.txt\n");

    // Removing a fork leaves the shared copy; removing the split removes everything.
    const d = ws.fork("d", { shareIndex: true });
    assert.equal(inode(`${admins}/d/index`), inode(shared));
    assert.equal(await gitOk(d.path, ["status", "--porcelain"], opts), "");
    ws.removeFork("d");
    assert.throws(() => Deno.lstatSync(`${admins}/d`), Deno.errors.NotFound);
    assert.equal(Deno.lstatSync(shared).nlink, 1);
    ws.remove();
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
    // The user's index was never touched.
    assert.deepEqual(Deno.readFileSync(`${sb.root}/.git/index`), before);
  });
}

Deno.test({
  name: "SplitWorkspace.fork with shareIndex links a split index's sharedindex files too",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n", "b.txt": "b\n" });
  await gitOk(sb.root, ["update-index", "--split-index"], opts);
  const sharedNames = [...Deno.readDirSync(`${sb.root}/.git`)].map((e) => e.name)
    .filter((n) => n.startsWith("sharedindex."));
  assert.equal(sharedNames.length, 1);
  const sharedName = sharedNames[0]!;
  const sharedBytes = Deno.readFileSync(`${sb.root}/.git/${sharedName}`);
  using ws = SplitWorkspace.create({
    id: "s1",
    root: sb.root,
    env: { HOME: sb.home },
    forks: "copy",
  });
  const admins = `${splitDir(sb.root)}/.admin`;
  const a = ws.fork("a", { shareIndex: true });
  const b = ws.fork("b", { shareIndex: true });
  const c = ws.fork("c");
  const split = `${admins}/.${sharedName}`;
  assert.equal(mode(split), 0o444);
  assert.deepEqual(Deno.readFileSync(split), sharedBytes);
  for (const label of ["a", "b"]) {
    assert.equal(inode(`${admins}/${label}/${sharedName}`), inode(split));
    assert.equal(inode(`${admins}/${label}/index`), inode(`${admins}/.index`));
  }
  assert.notEqual(inode(`${admins}/c/${sharedName}`), inode(split));
  for (const f of [a, b, c]) {
    assert.equal(await gitOk(f.path, ["status", "--porcelain"], opts), "");
  }
  put(a.path, "a.txt", "a from a\n");
  await gitOk(a.path, ["add", "-A"], opts);
  await gitOk(a.path, ["commit", "-q", "-m", "from a"], opts);
  assert.deepEqual(Deno.readFileSync(split), sharedBytes);
  assert.equal(await gitOk(a.path, ["status", "--porcelain"], opts), "");
  assert.equal(await gitOk(b.path, ["status", "--porcelain"], opts), "");
  assert.equal(await gitOk(b.path, ["show", ":a.txt"], opts), "a\n");
  assert.equal(ws.capture("a").files, 1);
  assert.equal(ws.capture("b").files, 0);
  ws.remove();
  assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);
});

Deno.test({
  name: "SplitWorkspace.fork with shareIndex refuses a shared index copy replaced behind its back",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  using ws = SplitWorkspace.create({
    id: "s1",
    root: sb.root,
    env: { HOME: sb.home },
    forks: "copy",
  });
  const shared = `${splitDir(sb.root)}/.admin/.index`;
  ws.fork("a", { shareIndex: true });
  Deno.removeSync(shared);
  throwsA(() => ws.fork("b", { shareIndex: true }), WorkspaceReplacedError);
  Deno.writeTextFileSync(shared, "not an index");
  throwsA(() => ws.fork("c", { shareIndex: true }), WorkspaceReplacedError);
  // A fork that copies does not need it.
  ws.fork("d");
  assert.equal(ws.capture("a").files, 0);
  ws.remove();
});
