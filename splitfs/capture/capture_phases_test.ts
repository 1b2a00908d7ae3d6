import assert from "node:assert/strict";
import { blobId } from "../../patch/blob_id.ts";
import { gitProject, put, sandbox, text, throwsA } from "../_testing.ts";
import { CAPTURE_PHASES, PhaseClock } from "./capture_phases.ts";
import { Dir, WrongKindError } from "../fd/dir.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";

// Real files, real git, a real overlay fork (the tests run as root).
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk", "umount"],
  env: ["PATH"],
};

/** The descriptors this process holds, by number (read through FFI: Deno refuses /proc/self). */
function openFds(): Set<string> {
  using fds = Dir.openAbsolute("/proc/self/fd");
  return new Set(fds.entries().map((e) => e.name));
}

Deno.test({
  name: "a capture given a clock times each phase and writes what a capture without one writes",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "one\ntwo\n", "dir/b.bin": "\0old", "gone.txt": "bye\n" });
  using ws = SplitWorkspace.create({ root: sb.root, id: "s1", env: {}, forks: "auto" });
  assert.equal(ws.forkChoice.strategy, "overlay");
  for (const label of ["plain", "timed", "same"]) {
    const f = ws.fork(label);
    if (label === "same") continue;
    put(f.path, "a.txt", "one\nTWO\n");
    put(f.path, "dir/b.bin", "\0new");
    put(f.path, "new.txt", "hello\n");
    Deno.removeSync(`${f.path}/gone.txt`);
  }
  const plain = ws.capture("plain");
  const clock = new PhaseClock();
  const timed = ws.capture("timed", { clock });
  assert.deepEqual({ ...timed }, { ...plain });
  const out = `${ws.dirPath}/out`;
  assert.equal(text(`${out}/timed/files`), text(`${out}/plain/files`));
  assert.equal(text(`${out}/timed/diff.patch`), text(`${out}/plain/diff.patch`));
  assert.equal(timed.files, 4);
  for (const p of CAPTURE_PHASES) assert.ok(clock.ms[p] >= 0, p);
  for (const p of ["compare", "store blobs", "patch text", "out files"] as const) {
    assert.ok(clock.ms[p] > 0, `${p} was timed`);
  }
  // An unchanged fork writes no blob and no patch: those phases never run.
  const idle = new PhaseClock();
  assert.equal(ws.capture("same", { clock: idle }).files, 0);
  assert.equal(idle.ms["store blobs"], 0);
  assert.equal(idle.ms["patch text"], 0);
  assert.ok(idle.ms["identity checks"] > 0);
});

Deno.test({
  name: "a capture with a clock that fails mid-walk closes the comparison's descriptors",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "z/deep/c.txt": "deep\n" });
  using ws = SplitWorkspace.create({ root: sb.root, id: "s1", env: {}, forks: "auto" });
  const f = ws.fork("b");
  put(f.path, "z/deep/c.txt", "changed\n");
  // The old side's fan-out directory is a file: storing its blob fails while
  // the comparison is suspended two directories down, holding both sides open.
  const fan = blobId(new TextEncoder().encode("deep\n")).slice(0, 2);
  put(`${ws.dirPath}/store.git/objects`, fan, "planted");
  const before = openFds();
  throwsA(() => ws.capture("b", { clock: new PhaseClock() }), WrongKindError);
  assert.deepEqual([...openFds()].filter((fd) => !before.has(fd)), []);
  // Nothing partial is left in out/.
  assert.deepEqual([...Deno.readDirSync(`${ws.dirPath}/out/b`)].map((e) => e.name), []);
});
