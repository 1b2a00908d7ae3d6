import assert from "node:assert/strict";
import { zlibSync } from "fflate";
import { blobId } from "../../patch/blob_id.ts";
import { looseObject } from "../../patch/loose_object.ts";
import { writeFilePatch } from "../../patch/writer.ts";
import { git, gitOk, gitProject, put, type Sandbox, sandbox, throwsA } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { exportObjects, ObjectExportError, patchBlobIds } from "./object_export.ts";
import { RefusedError } from "../errors.ts";
import { ObjectStore } from "./store.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";

// Real files and real Git: what the export writes must be what Git reads,
// and what the project already holds must not change at all.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "umount", "awk"],
  env: ["PATH"],
};

const enc = new TextEncoder();

/** A store like a split's (`<top>/store.git`) holding `blobs`; returns their ids. */
function storeWith(sb: Sandbox, blobs: readonly Uint8Array[]): string[] {
  using top = Dir.openAbsolute(sb.outside);
  using store = ObjectStore.create(top, "store.git");
  return blobs.map((b) => store.writeBlob(b));
}

function objectPath(objects: string, id: string): string {
  return `${objects}/${id.slice(0, 2)}/${id.slice(2)}`;
}

/** Runs the export from the sandbox's store into the project's `.git/objects`. */
function exportInto(sb: Sandbox, ids: readonly string[]) {
  using store = Dir.openAbsolute(`${sb.outside}/store.git/objects`);
  using target = Dir.openAbsolute(`${sb.root}/.git/objects`);
  return exportObjects(store, target, ids);
}

function leftovers(objects: string): string[] {
  const found: string[] = [];
  for (const fan of Deno.readDirSync(objects)) {
    if (!fan.isDirectory) continue;
    for (const e of Deno.readDirSync(`${objects}/${fan.name}`)) {
      if (e.name.startsWith("tmp_")) found.push(`${fan.name}/${e.name}`);
    }
  }
  return found;
}

Deno.test({
  name: "exportObjects writes new blobs Git reads (0444) and leaves existing objects untouched",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "committed\n" });
  const objects = `${sb.root}/.git/objects`;
  const committed = enc.encode("committed\n");
  const fresh = [enc.encode("new text\n"), new Uint8Array([0x89, 0x50, 0x4e, 0x47, 0, 1, 2])];
  const ids = storeWith(sb, [committed, ...fresh]);
  const existing = objectPath(objects, ids[0]!);
  const before = { stat: Deno.statSync(existing), bytes: Deno.readFileSync(existing) };

  const r = exportInto(sb, ids);
  assert.deepEqual(r, { written: 2, present: 1 });
  const after = Deno.statSync(existing);
  assert.equal(after.ino, before.stat.ino, "the existing object is the same file");
  assert.equal(after.mtime?.getTime(), before.stat.mtime?.getTime());
  assert.deepEqual(Deno.readFileSync(existing), before.bytes);
  for (const [i, bytes] of fresh.entries()) {
    const id = ids[i + 1]!;
    assert.equal(Deno.statSync(objectPath(objects, id)).mode! & 0o7777, 0o444);
    assert.equal((await gitOk(sb.root, ["cat-file", "-t", id], opts)).trim(), "blob");
    const shown = await new Deno.Command("git", {
      args: ["cat-file", "blob", id],
      cwd: sb.root,
      env: { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
      stdout: "piped",
    }).output();
    assert.deepEqual(shown.stdout, bytes);
  }
  const fsck = await git(sb.root, ["fsck", "--full", "--strict"], opts);
  assert.equal(fsck.code, 0, fsck.stderr);
  assert.deepEqual(leftovers(objects), []);

  // Again: everything is there now, and nothing is rewritten.
  const inodes = ids.map((id) => Deno.statSync(objectPath(objects, id)).ino);
  assert.deepEqual(exportInto(sb, ids), { written: 0, present: 3 });
  assert.deepEqual(ids.map((id) => Deno.statSync(objectPath(objects, id)).ino), inodes);
});

Deno.test({
  name: "exportObjects never overwrites: an object file already named so is kept as it is",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  const [id] = storeWith(sb, [enc.encode("theirs\n")]);
  // Whatever the project holds under that name is the project's business.
  put(sb.root, `.git/objects/${id!.slice(0, 2)}/${id!.slice(2)}`, "not ours", 0o444);
  assert.deepEqual(exportInto(sb, [id!]), { written: 0, present: 1 });
  assert.equal(Deno.readTextFileSync(objectPath(`${sb.root}/.git/objects`, id!)), "not ours");
});

Deno.test({
  name:
    "exportObjects refuses a corrupt, missing or non-blob store object and writes nothing for it",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  const objects = `${sb.root}/.git/objects`;
  const [good, victim] = storeWith(sb, [enc.encode("good\n"), enc.encode("victim\n")]);
  const store = `${sb.outside}/store.git/objects`;
  const plant = (id: string, bytes: Uint8Array) => {
    Deno.chmodSync(objectPath(store, id), 0o644);
    Deno.writeFileSync(objectPath(store, id), bytes);
  };
  const cases: [string, Uint8Array, RegExp][] = [
    // Another blob's object under this name: well formed, but not this id.
    [
      "another blob",
      looseObject(enc.encode("evil\n")).compressed,
      /is corrupt: its content hashes to/,
    ],
    ["a tree", zlibSync(enc.encode("tree 0\0")), /is not a well-formed blob/],
    ["a wrong length", zlibSync(enc.encode("blob 99\0victim\n")), /is not a well-formed blob/],
    ["not zlib", enc.encode("plain text"), /is not a zlib stream/],
  ];
  for (const [what, bytes, message] of cases) {
    plant(victim!, bytes);
    const error = throwsA(() => exportInto(sb, [victim!]), ObjectExportError);
    assert.match(error.message, message, what);
    assert.match(error.message, new RegExp(`object ${victim} in ${store}`), what);
    assert.throws(() => Deno.lstatSync(objectPath(objects, victim!)), Deno.errors.NotFound, what);
  }
  assert.deepEqual(leftovers(objects), []);

  Deno.removeSync(objectPath(store, victim!));
  const missing = throwsA(() => exportInto(sb, [good!, victim!].sort()), ObjectExportError);
  assert.match(missing.message, /is missing/);
  const bad = throwsA(() => exportInto(sb, ["../../etc/passwd"]), ObjectExportError);
  assert.match(bad.message, /not a SHA-1 object id/);
});

Deno.test({
  name: "exportObjects refuses an object that inflates past the capture's file limit",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  const [id] = storeWith(sb, [enc.encode("small\n")]);
  const store = `${sb.outside}/store.git/objects`;
  // 40 MiB of zeros deflates to ~40 KiB: a store object no capture writes.
  const big = new Uint8Array(40 * 1024 * 1024 + 16);
  big.set(enc.encode("blob 41943040\0"));
  Deno.chmodSync(objectPath(store, id!), 0o644);
  Deno.writeFileSync(objectPath(store, id!), zlibSync(big));
  const error = throwsA(() => exportInto(sb, [id!]), ObjectExportError);
  assert.match(error.message, /inflates past/);
});

Deno.test({
  name: "exportObjects makes a new fan-out dir with the objects dir's mode (a shared repository)",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  await gitOk(sb.root, ["config", "core.sharedRepository", "group"], { home: sb.home });
  const objects = `${sb.root}/.git/objects`;
  Deno.chmodSync(objects, 0o2775);
  const [id] = storeWith(sb, [enc.encode("shared\n")]);
  assert.throws(() => Deno.lstatSync(`${objects}/${id!.slice(0, 2)}`), Deno.errors.NotFound);
  assert.deepEqual(exportInto(sb, [id!]), { written: 1, present: 0 });
  assert.equal(Deno.statSync(`${objects}/${id!.slice(0, 2)}`).mode! & 0o7777, 0o2775);
});

Deno.test({
  name: "patchBlobIds reads the index lines of a patch and nothing inside its hunks",
  permissions: { read: true, write: true, ffi: true },
}, () => {
  using sb = sandbox();
  const decoy = `index ${"1".repeat(40)}..${"2".repeat(40)} 100644`;
  const old = enc.encode(`x\n${decoy}\n`);
  // A line longer than the read chunk, so a line crosses a chunk boundary.
  const long = enc.encode(`${"y".repeat(1_500_000)}\n${decoy}\nz\n`);
  const binary = new Uint8Array(3000).map((_, i) => (i * 7) & 0xff);
  const parts = [
    writeFilePatch({
      path: "a.txt",
      old: { mode: 0o100644, bytes: old },
      new: { mode: 0o100644, bytes: long },
    }).patch,
    writeFilePatch({ path: "bin", old: null, new: { mode: 0o100644, bytes: binary } }).patch,
    writeFilePatch({ path: "gone", old: { mode: 0o100755, bytes: old }, new: null }).patch,
  ];
  const patch = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    patch.set(p, at);
    at += p.length;
  }
  Deno.writeFileSync(`${sb.outside}/diff.patch`, patch);
  using dir = Dir.openAbsolute(sb.outside);
  using file = dir.openFile("diff.patch");
  const ids = new Set<string>();
  patchBlobIds(file, ids);
  assert.deepEqual([...ids].sort(), [blobId(old), blobId(long), blobId(binary)].sort());
});

/** Every loose object file under `objects` (`ab/cdef…`), sorted. */
function looseIn(objects: string): string[] {
  const found: string[] = [];
  for (const fan of Deno.readDirSync(objects)) {
    if (!fan.isDirectory || !/^[0-9a-f]{2}$/.test(fan.name)) continue;
    for (const e of Deno.readDirSync(`${objects}/${fan.name}`)) found.push(`${fan.name}${e.name}`);
  }
  return found.sort();
}

Deno.test({
  name:
    "SplitWorkspace.exportObjects: a root split's blobs go to .git/objects, a nested split's to its creator fork's admin objects",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n" });
  const userObjects = `${sb.root}/.git/objects`;
  using parent = SplitWorkspace.create({ root: sb.root, id: "p1", env: { HOME: sb.home } });
  const fa = parent.fork("a");
  put(fa.path, "a.txt", "a from the branch\n");
  parent.capture("a");
  const want = blobId(enc.encode("a from the branch\n"));
  assert.ok(!looseIn(userObjects).includes(want));

  // The creator branch makes a nested split; its branch adds a file.
  using nested = SplitWorkspace.create({
    root: sb.root,
    id: "n1",
    env: { HOME: sb.home },
    parent: { split: "p1", label: "a" },
  });
  const x = nested.fork("x");
  put(x.path, "nested.txt", "nested\n");
  nested.capture("x");
  const nestedId = blobId(enc.encode("nested\n"));
  const userBefore = looseIn(userObjects);
  const adminObjects = `${sb.root}/.marsh/split/p1/.admin/a/objects`;
  // Only its own creator's objects: another parent is refused.
  throwsA(() => nested.exportObjects(["x"], null), RefusedError);
  throwsA(() => nested.exportObjects(["x"], { split: "p1", label: "b" }), RefusedError);
  const r = nested.exportObjects(["x"], { split: "p1", label: "a" });
  assert.deepEqual(r, { written: 1, present: 0, target: adminObjects });
  assert.deepEqual(
    looseIn(userObjects),
    userBefore,
    "the user's objects are not the nested target",
  );
  // Git in the creator's fork (its .git is the admin dir) has the blob.
  assert.equal((await gitOk(fa.path, ["cat-file", "-t", nestedId], opts)).trim(), "blob");
  nested.remove();

  // The root split: into the project's own objects (and nothing for a branch without a patch).
  parent.fork("b");
  parent.capture("b");
  const rootR = parent.exportObjects(["a", "b"], null);
  assert.deepEqual(rootR, { written: 1, present: 1, target: userObjects });
  assert.ok(looseIn(userObjects).includes(want));
  assert.equal((await git(sb.root, ["fsck", "--full"], opts)).code, 0);
  parent.remove();
});

Deno.test({
  name: "SplitWorkspace.exportObjects writes nothing into a SHA-256 repository",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitOk(sb.root, ["init", "-q", "--object-format=sha256", "-b", "main"], opts);
  put(sb.root, "a.txt", "a\n");
  await gitOk(sb.root, ["add", "-A"], opts);
  await gitOk(sb.root, ["commit", "-q", "-m", "initial"], opts);
  using ws = SplitWorkspace.create({ root: sb.root, id: "s1", env: { HOME: sb.home } });
  const f = ws.fork("a");
  put(f.path, "a.txt", "changed\n");
  ws.capture("a");
  const before = looseIn(`${sb.root}/.git/objects`);
  assert.equal(ws.exportObjects(["a"], null), null);
  assert.deepEqual(looseIn(`${sb.root}/.git/objects`), before);
  assert.equal((await git(sb.root, ["fsck", "--full"], opts)).code, 0);
  ws.remove();
});

Deno.test({
  name: "exportObjects as root hands new fan-out dirs and objects to the objects dir's owner",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  const objects = `${sb.root}/.git/objects`;
  // The tests run as root (overlay mounts need it); the project belongs to a user.
  const user = 65534;
  Deno.chownSync(objects, user, null);
  const [id] = storeWith(sb, [enc.encode("for the user\n")]);
  assert.deepEqual(exportInto(sb, [id!]), { written: 1, present: 0 });
  assert.equal(Deno.statSync(`${objects}/${id!.slice(0, 2)}`).uid, user);
  assert.equal(Deno.statSync(objectPath(objects, id!)).uid, user);
});
