/**
 * Removing a split (docs/engine.md, "Removal"): identities re-checked, any
 * mount marsh did not make refused before anything changes, marsh's own
 * mounts unmounted and verified gone, then a rename into `.marsh/.trash`
 * through descriptors and deletion there; and closing what a split holds.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { MountPointError } from "../fd/mount_boundary.ts";
import { checkFork, checkSplit, closeFork, type Held } from "./split_held.ts";
import { isSplitOverlay, refuseForeignMounts, unmountSplit } from "../fork/split_mounts.ts";
import { TRASH_DIR } from "../../model/layout.ts";

/**
 * Removes the whole split: identity checks, then a rename into
 * `.marsh/.trash` through descriptors, then deletion there. Forks never
 * made (a branch that failed before its fork) need nothing; out/ stays
 * readable until the rename. marsh's own mounts are unmounted first, each
 * verified; any other mount in the split refuses the removal before
 * anything changes (docs/engine.md "Removal").
 *
 * @throws {WorkspaceReplacedError} and removes nothing when an identity differs
 * @throws {MountPointError} and removes nothing when a mount marsh did not make is there
 */
export function removeSplit(held: Held): void {
  const finishWith = `marsh splits rm ${held.id}`;
  checkSplit(held);
  for (const f of held.forks.values()) checkFork(held, f);
  // Checked before anything is let go, so a refusal leaves the split as it was.
  refuseForeignMounts(
    held.dirPath,
    [held.dirPath],
    finishWith,
    (m) => isSplitOverlay(m, held.dirPath),
  );
  // The trash is opened before anything is let go: a planted one refuses the
  // removal while the forks are still held and mounted.
  using trash = held.marsh.ensureDir(TRASH_DIR, 0o700);
  // Mounts go first, and are verified gone, before anything is deleted; our
  // own descriptors on them would keep them busy.
  for (const f of held.forks.values()) closeFork(f);
  held.forks.clear();
  held.engine?.base.close();
  unmountSplit(held.dirPath, finishWith);
  const name = `${held.id}-${crypto.randomUUID().slice(0, 8)}`;
  held.splits.rename(held.id, trash, name);
  try {
    held.dir.clear();
  } catch (error) {
    // Only a mount made after the check above: the rest stays in the trash.
    if (error instanceof MountPointError) throw error.withFix(`rm -r ${trash.path}/${name}`);
    throw error;
  }
  trash.rmdir(name);
  closeHeld(held);
}

/** Closes every descriptor `held` holds; a second call does nothing. */
export function closeHeld(held: Held): void {
  for (const f of held.forks.values()) closeFork(f);
  held.forks.clear();
  const e = held.engine;
  e?.store.close();
  for (const d of e?.layered?.lowers ?? []) d.close();
  for (const d of [held.out, e?.admins, e?.base, held.dir, held.splits, held.marsh]) {
    d?.close();
  }
  held.rootDir.close();
}
