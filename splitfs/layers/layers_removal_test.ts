import assert from "node:assert/strict";
import { isMounted as mounted, mountTool as tool, put, sandbox, throwsA } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { LayerStore } from "./layers.ts";
import { MountPointError } from "../fd/mount_boundary.ts";

// Real files and real bind mounts (the tests run as root).
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["mount", "umount", "awk"],
};

Deno.test({
  name:
    "collect stops at a bind mount in a layer it discards: the outside files stay, the other layers still go, and the next collect sweeps it after umount",
  permissions: perms,
}, () => {
  using sb = sandbox("marsh-layers-removal-test-");
  put(sb.outside, "keep.txt", "keep\n");
  put(sb.outside, "deep/keep2.txt", "keep2\n");
  Deno.mkdirSync(`${sb.root}/.marsh`);
  using root = Dir.openAbsolute(sb.root);
  using marsh = root.openDir(".marsh");
  using store = LayerStore.open(marsh);
  const snap = () =>
    store.snapshot({
      source: root,
      ignore: null,
      skipTop: new Set([".marsh"]),
      chain: "tracked",
      maxDepth: 1,
    });
  // At depth 1 every change rebases: the two older layers are left to collect.
  const old: string[] = [];
  for (const n of ["1", "2", "3"]) {
    put(sb.root, "f", n);
    old.push(...snap().layers);
  }
  const [withMount, plain, head] = old as [string, string, string];
  const layers = `${sb.root}/.marsh/layers`;
  const vm = `${layers}/${withMount}/data/vm`;
  Deno.mkdirSync(vm);
  let point = vm;
  try {
    tool("mount", ["--bind", sb.outside, vm]);
    const err = throwsA(() => store.collect(new Set(), false), MountPointError);
    // Discarding renames the layer into the trash first: the mount moved with it.
    const trash = `${sb.root}/.marsh/.trash`;
    const [moved] = [...Deno.readDirSync(trash)].map((e) => e.name);
    assert.match(moved ?? "", new RegExp(`^layer-${withMount}-`));
    point = `${trash}/${moved}/data/vm`;
    assert.deepEqual(err.mountPoints, [point]);
    assert.equal(err.then, "marsh gc");
    assert.equal(
      err.message,
      `cannot remove ${trash}/${moved}: ${point} is a mount point (umount ${point}, then marsh gc)`,
    );
    assert.equal(Deno.readTextFileSync(`${sb.outside}/keep.txt`), "keep\n");
    assert.equal(Deno.readTextFileSync(`${sb.outside}/deep/keep2.txt`), "keep2\n");
    assert.ok(mounted(point), "the mount stays");
    assert.deepEqual(store.list().map((l) => l.id), [head], `${plain} went all the same`);

    tool("umount", [point]);
    assert.deepEqual(store.collect(new Set(), false).removed, []);
    assert.deepEqual([...Deno.readDirSync(trash)], [], "the trashed layer is swept");
    assert.equal(Deno.readTextFileSync(`${sb.outside}/deep/keep2.txt`), "keep2\n");
  } finally {
    if (mounted(point)) tool("umount", [point]);
  }
});
