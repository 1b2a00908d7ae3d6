import assert from "node:assert/strict";
import { gitProject, put, sandbox } from "../_testing.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";
import { RefusedError } from "../errors.ts";

// Real files, real git, a real split (copy forks): the counts `marsh compare`
// shows come from the patches capture wrote.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "umount"],
  env: ["PATH"],
};

Deno.test({
  name: "branch stats count lines, binary files and the paths two branches share",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, {
    "a.txt": "1\n2\n3\n",
    "b.txt": "x\n",
    "logo.bin": "\0\x01\x02",
  });
  using ws = SplitWorkspace.create({
    id: "s1",
    root: sb.root,
    env: { HOME: sb.home },
    forks: "copy",
  });
  const one = ws.fork("one");
  const two = ws.fork("two");
  ws.fork("idle");
  put(one.path, "a.txt", "1\nTWO\n3\nfour\n");
  put(one.path, "logo.bin", "\0\x09");
  put(two.path, "a.txt", "1\n2\n");
  put(two.path, "new.txt", "n\n");
  Deno.removeSync(`${two.path}/b.txt`);
  ws.capture("one");
  ws.capture("two");
  ws.capture("idle");
  const stats = ws.branchStats(["one", "two", "idle", "never"]);
  assert.deepEqual(stats, [
    {
      label: "one",
      present: true,
      files: 2,
      added: 2,
      removed: 1,
      binary: 1,
      overlaps: [{ label: "two", paths: 1 }],
    },
    {
      label: "two",
      present: true,
      files: 3,
      added: 1,
      removed: 2,
      binary: 0,
      overlaps: [{ label: "one", paths: 1 }],
    },
    { label: "idle", present: true, files: 0, added: 0, removed: 0, binary: 0, overlaps: [] },
    { label: "never", present: false, files: 0, added: 0, removed: 0, binary: 0, overlaps: [] },
  ]);
  assert.throws(() => ws.branchStats(["one", "one"]), RefusedError);
  assert.throws(() => ws.branchStats(["../x"]), RefusedError);
  ws.remove();
});
