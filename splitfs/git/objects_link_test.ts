import assert from "node:assert/strict";
import { alternateOf } from "../../protocol/fork_view.ts";
import { gitOk, gitProject, put, sandbox, text } from "../_testing.ts";
import { SnapshotError } from "../errors.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";

// Real files and real git: the forks' alternates name the user's objects as
// <root>/.marsh/git-objects, a relative symlink splitfs makes.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git"],
  env: ["PATH"],
};

Deno.test("alternateOf names only the user's .git/objects through .marsh", () => {
  assert.equal(alternateOf("/p/.git/objects"), "/p/.marsh/git-objects");
  assert.equal(
    alternateOf("/p/.marsh/split/s1/store.git/objects"),
    "/p/.marsh/split/s1/store.git/objects",
  );
  assert.equal(
    alternateOf("/p/.marsh/split/s1/.admin/a/objects"),
    "/p/.marsh/split/s1/.admin/a/objects",
  );
});

Deno.test({
  name: "a Git split makes .marsh/git-objects; the fork's alternates use it and host git works",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  // A stale link from elsewhere is replaced.
  Deno.mkdirSync(`${sb.root}/.marsh`);
  Deno.symlinkSync("/nowhere", `${sb.root}/.marsh/git-objects`);
  using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home } });
  assert.equal(Deno.readLinkSync(`${sb.root}/.marsh/git-objects`), "../.git/objects");
  const fork = ws.fork("a");
  assert.equal(
    text(`${sb.root}/.marsh/split/s1/.admin/a/objects/info/alternates`),
    `${sb.root}/.marsh/split/s1/store.git/objects\n${sb.root}/.marsh/git-objects\n`,
  );
  // The user's commit is reachable only through the link.
  assert.equal(
    (await gitOk(fork.path, ["cat-file", "-t", "HEAD"], { home: sb.home })).trim(),
    "commit",
  );
  // A second split keeps it.
  using _two = SplitWorkspace.create({ id: "s2", root: sb.root, env: { HOME: sb.home } });
  assert.equal(Deno.readLinkSync(`${sb.root}/.marsh/git-objects`), "../.git/objects");
});

Deno.test({
  name: "a directory at .marsh/git-objects refuses the split; a project without Git has no link",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  Deno.mkdirSync(`${sb.root}/.marsh/git-objects`, { recursive: true });
  assert.throws(
    () => SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home } }),
    (e: unknown) =>
      e instanceof SnapshotError && /git-objects is a dir, not marsh's link/.test(e.message),
  );
  assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);

  using plain = sandbox();
  put(plain.root, "a.txt", "a\n");
  using _ws = SplitWorkspace.create({ id: "s1", root: plain.root, env: { HOME: plain.home } });
  assert.throws(() => Deno.lstatSync(`${plain.root}/.marsh/git-objects`), Deno.errors.NotFound);
});
