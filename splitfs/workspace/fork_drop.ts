/**
 * Discarding one branch's fork while its split stays (docs/guide.md
 * "Discarding branches"; docs/engine.md "Removal"): the same rules as a
 * split's removal, for one label. Identities are re-checked; any mount marsh
 * did not make at or below the fork, its `.overlay/<label>` or its
 * `.admin/<label>` refuses it before anything changes; marsh's own overlay
 * on the fork is unmounted and verified gone; then the fork, its overlay
 * layer and its Git metadata are deleted through the split dir's held
 * descriptor, stopping at any mount boundary. `out/<label>/` stays: it is
 * the branch's record.
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to unmount.
 *
 * @module
 */

import { readMounts } from "../fd/mountinfo.ts";
import { RefusedError } from "../errors.ts";
import { quarantinedAdminName } from "../fork/quarantine.ts";
import { unmountPath } from "../fork/overlay.ts";
import { isSplitOverlay, refuseForeignMounts } from "../fork/split_mounts.ts";
import { checkFork, checkSplit, closeFork, type Held, isGone } from "./split_held.ts";
import { ADMIN_DIR, labelProblem, OVERLAY_DIR } from "../../model/layout.ts";

/**
 * Removes fork `label` of `held` (a fork already gone is fine), keeping
 * `out/<label>/` and every other fork.
 *
 * @throws {RefusedError} for an invalid label
 * @throws {WorkspaceReplacedError} and removes nothing when an identity differs
 * @throws {MountPointError} and removes nothing when a mount marsh did not make is there
 * @throws {MountBusyError} when the fork's overlay is still in use; nothing is deleted
 */
export function dropFork(held: Held, label: string): void {
  const problem = labelProblem(label);
  if (problem !== null) throw new RefusedError(problem);
  checkSplit(held);
  const f = held.forks.get(label);
  if (f) checkFork(held, f);
  const forkPath = `${held.dirPath}/${label}`;
  const mounts = readMounts();
  const ours = (m: Parameters<typeof isSplitOverlay>[0]) =>
    m.mountPoint === forkPath && isSplitOverlay(m, held.dirPath);
  refuseForeignMounts(
    forkPath,
    [
      forkPath,
      `${held.dirPath}/${OVERLAY_DIR}/${label}`,
      `${held.dirPath}/${ADMIN_DIR}/${label}`,
      `${held.dirPath}/${ADMIN_DIR}/${quarantinedAdminName(label)}`,
    ],
    `marsh discard ${held.id} ${label}`,
    ours,
    mounts,
  );
  // Our own descriptors on the overlay would keep it busy.
  if (f) {
    closeFork(f);
    held.forks.delete(label);
  }
  const stacked = mounts.filter(ours);
  // Of two stacked on the fork, the upper one (its parent is the other) first.
  stacked.sort((a, b) => (a.parentId === b.id ? -1 : b.parentId === a.id ? 1 : 0));
  for (const m of stacked) unmountPath(m);
  held.dir.removeTree(label);
  removeUnder(held, OVERLAY_DIR, [label]);
  removeUnder(held, ADMIN_DIR, [label, quarantinedAdminName(label)]);
}

/** Deletes `names` under the split's `parent` dir; a parent or name already gone is fine. */
function removeUnder(held: Held, parent: string, names: readonly string[]): void {
  let dir;
  try {
    dir = held.dir.openDir(parent);
  } catch (error) {
    if (isGone(error)) return;
    throw error;
  }
  try {
    for (const name of names) dir.removeTree(name);
  } finally {
    dir.close();
  }
}
