import assert from "node:assert/strict";
import { throwsA } from "../_testing.ts";
import { MountPointError } from "../fd/mount_boundary.ts";
import { parseMountinfo } from "../fd/mountinfo.ts";
import { isSplitOverlay, refuseForeignMounts } from "./split_mounts.ts";

const DIR = "/p/.marsh/split/ab";
const mounts = parseMountinfo(
  [
    `40 1 0:50 / ${DIR}/base rw - overlay marsh ro,lowerdir=/x`,
    `41 1 0:51 / ${DIR}/a rw - overlay marsh rw,lowerdir=/x`,
    // A branch's bind mount of a cache into its fork, and one into an upper dir.
    `42 41 8:1 /home/u/cache ${DIR}/a/vm rw - ext4 /dev/sda1 rw`,
    `43 1 8:1 /home/u/cache ${DIR}/.overlay/b/upper/vm rw - ext4 /dev/sda1 rw`,
    // An overlay that says marsh, deeper than marsh mounts any.
    `44 41 0:52 / ${DIR}/a/deep rw - overlay marsh rw,lowerdir=/y`,
    // Another split whose id shares the prefix.
    `45 1 0:53 / ${DIR}c/a rw - tmpfs tmpfs rw`,
    `46 1 0:54 / ${DIR}/c rw - tmpfs marsh rw`,
  ].join("\n"),
);
const byId = (id: number) => mounts.find((m) => m.id === id)!;

Deno.test("isSplitOverlay: marsh's overlays on a direct child of the split dir, nothing else", () => {
  assert.deepEqual(mounts.filter((m) => isSplitOverlay(m, DIR)).map((m) => m.id), [40, 41]);
  assert.equal(isSplitOverlay(byId(40), "/p/.marsh/split"), false);
});

Deno.test("refuseForeignMounts names every other mount at or below the roots, deepest first", () => {
  const err = throwsA(
    () =>
      refuseForeignMounts(DIR, [DIR], "marsh splits rm ab", (m) => isSplitOverlay(m, DIR), mounts),
    MountPointError,
  );
  assert.deepEqual(err.mountPoints, [
    `${DIR}/.overlay/b/upper/vm`,
    `${DIR}/a/deep`,
    `${DIR}/a/vm`,
    `${DIR}/c`,
  ]);
  assert.equal(
    err.message,
    `cannot remove ${DIR}: ${err.mountPoints.join(", ")} are mount points (umount ${
      err.mountPoints.join(" ")
    }, then marsh splits rm ab)`,
  );
  // One fork: its own tree, upper dir and admin dir only.
  const fork = throwsA(
    () =>
      refuseForeignMounts(
        `${DIR}/b`,
        [`${DIR}/b`, `${DIR}/.overlay/b`, `${DIR}/.admin/b`],
        "marsh splits rm ab",
        () => false,
        mounts,
      ),
    MountPointError,
  );
  assert.deepEqual(fork.mountPoints, [`${DIR}/.overlay/b/upper/vm`]);
  refuseForeignMounts(`${DIR}/d`, [`${DIR}/d`], "x", () => false, mounts);
});

Deno.test("MountPointError quotes a path a shell would split", () => {
  const err = new MountPointError("/p/a b", ["/p/a b/it's"], "marsh gc");
  assert.equal(
    err.message,
    `cannot remove /p/a b: /p/a b/it's is a mount point (umount '/p/a b/it'\\''s', then marsh gc)`,
  );
});
