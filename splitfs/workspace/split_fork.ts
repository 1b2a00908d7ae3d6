/**
 * Making a branch's fork in a split (docs/engine.md, "Forks"): the fork by
 * the split's strategy (overlay or copy), its Git admin dir for a Git
 * project, and its `out/<label>/` whose ctime marks when the fork was ready.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type AdminSpec, writeAdmin } from "../fork/admin.ts";
import { SnapshotError } from "../errors.ts";
import type { CopyProgress, Fork } from "../fork/fork.ts";
import { removeOverlayFork } from "../fork/overlay.ts";
import {
  checkSplit,
  type Engine,
  type Held,
  type Identity,
  madeEngine,
  outDir,
  upperIdentityOf,
} from "./split_held.ts";
import { alternateOf } from "../../protocol/fork_view.ts";
import { ADMIN_DIR, labelProblem } from "../../model/layout.ts";

/** A fork plus what the journal needs to know about it. */
export interface ForkInfo {
  readonly label: string;
  readonly path: string;
  readonly strategy: Fork["strategy"];
  /**
   * What {@linkcode SplitWorkspace.open} checks: the fork root's `(dev, ino)`;
   * for `userns-overlay`, its upper dir's. That mount lives in the service's
   * user and mount namespace and dies with it, so after a restart the fork's
   * name shows the bare mount point while the upper dir holds the branch's work.
   */
  readonly identity: Identity;
}

/** The Git admin dir marsh writes for the fork `label` (and verifies at capture). */
export function adminSpecOf(held: Held, engine: Engine, label: string): AdminSpec {
  return {
    adminPath: `${held.dirPath}/${ADMIN_DIR}/${label}`,
    head: engine.git?.head ?? null,
    objectFormat: engine.git?.objectFormat ?? "sha1",
    index: engine.git?.index ?? null,
    sharedIndexes: engine.sharedIndexes,
    packedRefs: engine.git?.packedRefs ?? null,
    infoExclude: engine.ignore?.infoExclude ?? null,
    alternates: held.objectDirs.map(alternateOf),
  };
}

/**
 * Makes the fork `<label>` (and its Git metadata for a Git project) and
 * holds it. `progress` is called after each file copied. Each fork gets its
 * own copy of the index (`writeAdmin`).
 *
 * @throws {SnapshotError} for an invalid or duplicate label
 * @throws {RefusedError} for a split reopened after a restart
 * @throws {WorkspaceReplacedError} when the split dir was replaced
 */
export function makeFork(
  held: Held,
  label: string,
  opts: { progress?: CopyProgress } = {},
): ForkInfo {
  const problem = labelProblem(label);
  if (problem) throw new SnapshotError(problem);
  const engine = madeEngine(held, "forking");
  if (held.forks.has(label)) throw new SnapshotError(`duplicate label "${label}"`);
  checkSplit(held);
  const out = outDir(held);
  const made = engine.strategy.create(held.dir, engine.base, label, opts.progress);
  try {
    if (engine.git) {
      writeAdmin(engine.admins, label, made.dir, adminSpecOf(held, engine, label));
    }
    out.mkdir(label, 0o755);
    // A marker written after the copy: its ctime is the fork's ready time on
    // the file system's own clock, the clock that stamps the branch's writes.
    out.openDir(label).close();
    const readyNs = out.statAt(label)!.ctimeNs;
    const upper = made.mount ? upperIdentityOf(held.dir, label) : null;
    held.forks.set(label, {
      label,
      dir: made.dir,
      identity: made.identity,
      made: { ...made, readyNs },
      upper,
    });
  } catch (error) {
    made.close();
    if (made.mount) removeOverlayFork(held.dir, label, made.mount);
    throw error;
  }
  const upper = held.forks.get(label)!.upper;
  return {
    label,
    path: `${held.dirPath}/${label}`,
    strategy: made.strategy,
    identity: made.strategy === "userns-overlay" && upper ? upper : made.identity,
  };
}
