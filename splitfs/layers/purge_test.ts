/**
 * `purgeProject` (`marsh gc --all`'s store part) on real files and real bind
 * mounts (the tests run as root): every layer and head goes, then `.marsh`;
 * what marsh did not make stays; a mount inside stops only what is below it.
 */

import assert from "node:assert/strict";
import { isMounted as mounted, mountTool as tool, put, sandbox } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { LayerStore } from "./layers.ts";
import { ProjectLocks } from "../project_lock.ts";
import { purgeProject } from "./purge.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["mount", "umount", "awk"],
};

/** Three snapshots at depth 1 (each a full layer); the last is the chain's head. */
function store3(root: string): string[] {
  Deno.mkdirSync(`${root}/.marsh/split`, { recursive: true });
  Deno.writeTextFileSync(`${root}/.marsh/.gitignore`, "*\n");
  Deno.symlinkSync("../.git/objects", `${root}/.marsh/git-objects`);
  using rootDir = Dir.openAbsolute(root);
  using marsh = rootDir.openDir(".marsh");
  using store = LayerStore.open(marsh);
  const ids: string[] = [];
  for (const n of ["1", "2", "3"]) {
    put(root, "f", n);
    ids.push(
      ...store.snapshot({
        source: rootDir,
        ignore: null,
        skipTop: new Set([".marsh"]),
        chain: "tracked",
        maxDepth: 1,
      }).layers,
    );
  }
  return ids.sort();
}

Deno.test({
  name:
    "purge: a dry run removes nothing; then every layer, the head, the link, the lock and .marsh go; the project stays",
  permissions: perms,
}, () => {
  using sb = sandbox("marsh-purge-test-");
  const layers = store3(sb.root);
  assert.ok(Deno.lstatSync(`${sb.root}/.marsh/layers/tracked.head`).isFile);
  Deno.mkdirSync(`${sb.root}/.marsh/split/abc12345`);
  const locks = new ProjectLocks({ pid: 1, home: "/h" });
  // The split dir is one the caller will have removed: a dry run may see it.
  const dry = purgeProject(sb.root, locks, { known: new Set(["abc12345"]), dryRun: true });
  assert.deepEqual(dry.layers, layers);
  assert.equal(dry.bytes, 3);
  assert.equal(dry.gone, true);
  assert.deepEqual(dry.left, []);
  assert.equal(dry.problem, null);
  assert.ok(Deno.lstatSync(`${sb.root}/.marsh/layers/${layers[0]}`).isDirectory);
  // Not known (no split of the daemon's): refused, nothing removed.
  assert.throws(
    () => purgeProject(sb.root, locks, { known: new Set(), dryRun: false }),
    new RegExp(`^RefusedError: ${sb.root}/.marsh/split/abc12345 is not a split this daemon knows`),
  );
  assert.deepEqual(
    [...Deno.readDirSync(`${sb.root}/.marsh/layers`)].filter((e) => !e.name.startsWith("."))
      .length,
    4,
  );
  Deno.removeSync(`${sb.root}/.marsh/split/abc12345`);
  const r = purgeProject(sb.root, locks, { known: new Set(), dryRun: false });
  assert.deepEqual(r, { layers, bytes: 3, gone: true, left: [], problem: null });
  assert.deepEqual([...Deno.readDirSync(sb.root)].map((e) => e.name), ["f"]);
  assert.equal(locks.size, 0, "the lock was dropped with its file");
  // Nothing there: nothing to do.
  assert.deepEqual(purgeProject(sb.root, locks, { known: new Set(), dryRun: false }), {
    layers: [],
    bytes: 0,
    gone: true,
    left: [],
    problem: null,
  });
});

Deno.test({
  name: "purge leaves what marsh did not make, and .marsh with it",
  permissions: perms,
}, () => {
  using sb = sandbox("marsh-purge-test-");
  const layers = store3(sb.root);
  put(`${sb.root}/.marsh`, "notes.txt", "mine\n");
  // A name marsh uses, but not as marsh makes it: not deleted either.
  Deno.removeSync(`${sb.root}/.marsh/git-objects`);
  Deno.mkdirSync(`${sb.root}/.marsh/git-objects`);
  put(`${sb.root}/.marsh/git-objects`, "x", "x\n");
  const r = purgeProject(sb.root, new ProjectLocks(null), { known: new Set(), dryRun: false });
  assert.deepEqual(r.layers, layers);
  assert.equal(r.gone, false);
  assert.deepEqual(r.left, ["git-objects", "notes.txt"]);
  assert.equal(r.problem, null);
  assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh`)].map((e) => e.name).sort(), [
    "git-objects",
    "notes.txt",
  ]);
  assert.equal(Deno.readTextFileSync(`${sb.root}/.marsh/notes.txt`), "mine\n");
});

Deno.test({
  name:
    "purge stops at a bind mount in a layer: the outside files stay, the other layers go, and after umount it finishes",
  permissions: perms,
}, () => {
  using sb = sandbox("marsh-purge-test-");
  put(sb.outside, "keep.txt", "keep\n");
  const layers = store3(sb.root);
  const [withMount] = layers as [string];
  const vm = `${sb.root}/.marsh/layers/${withMount}/data/vm`;
  Deno.mkdirSync(vm);
  let point = vm;
  const locks = new ProjectLocks(null);
  try {
    tool("mount", ["--bind", sb.outside, vm]);
    const r = purgeProject(sb.root, locks, { known: new Set(), dryRun: false });
    // Discarding renames a layer into the trash first: the mount moved with it.
    const trash = `${sb.root}/.marsh/.trash`;
    const [moved] = [...Deno.readDirSync(trash)].map((e) => e.name);
    point = `${trash}/${moved}/data/vm`;
    assert.equal(
      r.problem,
      `cannot remove ${trash}/${moved}: ${point} is a mount point (umount ${point}, then marsh gc --all)`,
    );
    assert.deepEqual(r.layers, layers.slice(1), "the others went");
    assert.equal(r.gone, false);
    assert.ok(mounted(point), "the mount stays");
    assert.equal(Deno.readTextFileSync(`${sb.outside}/keep.txt`), "keep\n");

    tool("umount", [point]);
    const again = purgeProject(sb.root, locks, { known: new Set(), dryRun: false });
    assert.equal(again.problem, null);
    assert.equal(again.gone, true);
    assert.deepEqual([...Deno.readDirSync(sb.root)].map((e) => e.name), ["f"]);
    assert.equal(Deno.readTextFileSync(`${sb.outside}/keep.txt`), "keep\n");
  } finally {
    if (mounted(point)) tool("umount", [point]);
  }
});

Deno.test({
  name:
    "purge refuses while a checkpoint session dir is left, removing nothing; an empty session/ goes",
  permissions: perms,
}, () => {
  using sb = sandbox("marsh-purge-test-");
  const layers = store3(sb.root);
  Deno.mkdirSync(`${sb.root}/.marsh/session/fix`, { recursive: true });
  const locks = new ProjectLocks(null);
  assert.throws(
    () => purgeProject(sb.root, locks, { known: new Set(), dryRun: false }),
    /^RefusedError: checkpoint session fix is still in .*: nothing was removed; remove it \(marsh session rm NAME\)/,
  );
  assert.deepEqual(
    [...Deno.readDirSync(`${sb.root}/.marsh/layers`)].map((e) => e.name).filter((n) =>
      layers.includes(n)
    ).sort(),
    layers,
  );
  Deno.removeSync(`${sb.root}/.marsh/session/fix`);
  const r = purgeProject(sb.root, locks, { known: new Set(), dryRun: false });
  assert.deepEqual(r, { layers, bytes: 3, gone: true, left: [], problem: null });
});
