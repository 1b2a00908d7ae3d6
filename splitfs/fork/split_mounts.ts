/**
 * The mounts at and below a split dir, for removing it (docs/engine.md
 * "Removal"). marsh's own overlays (the read-only base and each overlay
 * fork: source `marsh`, type `overlay`, mounted on a direct child of the
 * split dir) are unmounted, each unmount verified in `/proc/self/mountinfo`.
 * Any other mount there (a branch's or a user's bind mount) is never
 * unmounted and never deleted through: the removal is refused before
 * anything changes, naming it.
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to unmount.
 *
 * @module
 */

import { MountPointError } from "../fd/mount_boundary.ts";
import { type MountInfo, readMounts } from "../fd/mountinfo.ts";
import { unmountPath } from "./overlay.ts";

/** The source marsh gives its overlays (overlay.ts), so they can be told from others. */
const OUR_SOURCE = "marsh";

/** Whether `path` is `root` or below it. */
function atOrBelow(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith("/") ? root : `${root}/`);
}

/** Whether `m` is one of the overlays marsh mounts for the split at `dir`. */
export function isSplitOverlay(m: MountInfo, dir: string): boolean {
  const slash = m.mountPoint.lastIndexOf("/");
  return m.fsType === "overlay" && m.source === OUR_SOURCE && slash > 0 &&
    m.mountPoint.slice(0, slash) === dir;
}

/**
 * Refuses a removal of `tree` when anything other than `ours` is mounted at
 * or below any of `roots`.
 *
 * @param then the command that finishes the removal once they are unmounted
 * @throws {MountPointError} naming every such mount point; nothing is changed
 */
export function refuseForeignMounts(
  tree: string,
  roots: readonly string[],
  then: string,
  ours: (m: MountInfo) => boolean,
  mounts: readonly MountInfo[] = readMounts(),
): void {
  const foreign = mounts.filter((m) => roots.some((r) => atOrBelow(m.mountPoint, r)) && !ours(m))
    .map((m) => m.mountPoint);
  if (foreign.length > 0) throw new MountPointError(tree, [...new Set(foreign)], then);
}

/**
 * Unmounts marsh's overlays at and below the split dir `dir` (forks before
 * the base, deepest first), each verified gone; refuses first, changing
 * nothing, when anything else is mounted there.
 *
 * @param then the command that finishes the removal (`marsh splits rm ID`)
 * @returns how many mounts were unmounted
 * @throws {MountPointError} when a mount marsh did not make is there
 * @throws {MountBusyError} when one of ours is in use; those before it are unmounted
 * @throws {MountError} when an unmount fails or does not take
 */
export function unmountSplit(dir: string, then: string): number {
  const mounts = readMounts();
  const ours = (m: MountInfo) => isSplitOverlay(m, dir);
  refuseForeignMounts(dir, [dir], then, ours, mounts);
  const below = mounts.filter((m) => atOrBelow(m.mountPoint, dir));
  // Deepest first; of two stacked on one point, the upper one (its parent is the other) first.
  below.sort((a, b) =>
    b.mountPoint.length - a.mountPoint.length ||
    (a.parentId === b.id ? -1 : b.parentId === a.id ? 1 : 0)
  );
  for (const m of below) unmountPath(m);
  return below.length;
}
