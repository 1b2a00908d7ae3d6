/**
 * Capturing a fork (docs/engine.md, "Capture and verification"): the
 * split's and the fork's identities re-checked, its Git metadata verified,
 * its changes against the base written to `out/<label>/` and the store, and
 * a rejected fork's Git metadata set aside.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import {
  type CaptureResult,
  type CaptureSummary,
  captureToDir,
  FILES_FILE,
  PATCH_FILE,
  RAW_FILE,
} from "../capture/capture.ts";
import type { CandidateDir } from "../capture/compare.ts";
import { type PhaseClock, timed } from "../capture/capture_phases.ts";
import { type Dir, InvalidNameError } from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { UPPER_DIR } from "../fork/overlay.ts";
import {
  type ForkGit,
  setAsideForkGit,
  setAsideNestedGits,
  verifyForkGit,
} from "../fork/quarantine.ts";
import { adminSpecOf } from "./split_fork.ts";
import {
  checkFork,
  checkLayers,
  checkSplit,
  type Held,
  heldFork,
  madeEngine,
  outDir,
} from "./split_held.ts";
import { OVERLAY_DIR } from "../../model/layout.ts";

/**
 * Verifies and captures a fork into `out/<label>/`. A fork whose Git
 * metadata fails verification is still captured, its result marked
 * `rejected` (untrusted), and that metadata is set aside so a host Git in
 * the kept fork meets nothing the branch wrote (see `setAsideForkGit` in quarantine.ts).
 *
 * @throws {WorkspaceReplacedError} when the split dir or the fork was replaced
 * @throws {RejectedError} when the tree cannot be captured (a nested `.git`,
 *   a name that is not UTF-8, a capture limit)
 * @throws {RefusedError} for a split reopened after a restart
 */
export function captureFork(
  held: Held,
  label: string,
  opts: { textDiffTimeoutMs?: number; clock?: PhaseClock } = {},
): CaptureResult {
  const clock = opts.clock;
  const engine = madeEngine(held, "capture");
  const fork = heldFork(held, label);
  const f = fork.made!;
  timed(clock, "identity checks", () => {
    checkSplit(held);
    checkFork(held, fork);
    checkLayers(held, engine);
  });
  const git: ForkGit = {
    admins: engine.admins,
    label,
    fork: f.dir,
    spec: engine.git ? adminSpecOf(held, engine, label) : null,
    path: `${held.dirPath}/${label}`,
  };
  const rejected = timed(
    clock,
    "admin verify",
    () => verifyForkGit(git, (error) => shown(held, error, label)),
  );
  let summary: CaptureSummary;
  // Where capture looks, and so where a rejected fork's nested .git is searched for.
  let scope: CandidateDir = "all";
  try {
    using out = timed(clock, "out files", () => openOut(held, label));
    // An overlay fork names what its branch touched: only those paths are compared.
    const candidates = timed(clock, "upper listing", () => f.candidates());
    if (candidates.kind === "tree") scope = candidates.tree;
    summary = captureToDir(
      {
        candidates: scope,
        old: engine.base,
        oldIndex: engine.baseIndex,
        new: f.dir,
        readyNs: f.readyNs,
        nestedGit: "reject",
        // The info/exclude marsh wrote, never one the branch changed.
        newIgnore: engine.captureIgnore,
        prunedIgnores: engine.prunedIgnores,
      },
      out,
      engine.store,
      opts.textDiffTimeoutMs,
      clock,
    );
  } catch (error) {
    const refused = error instanceof InvalidNameError
      ? new RejectedError(
        `file name is not valid UTF-8: ${shown(held, error, label)}${
          error.fix ? `; ${error.fix}` : ""
        }`,
        { cause: error },
      )
      : error;
    if (rejected !== null) setAsideForkGit(git, rejected);
    if (!(refused instanceof RejectedError)) throw refused;
    const reason = rejected === null ? refused.reason : `${rejected}; ${refused.reason}`;
    // The walk stopped there: a nested .git (a cloned dependency) may be kept in the fork.
    setAsideNestedGits(git, scope, reason);
    throw rejected === null ? refused : new RejectedError(reason, { cause: refused });
  }
  if (rejected !== null) setAsideForkGit(git, rejected);
  return { ...summary, rejected };
}

/** Where a name that is not UTF-8 was found, relative to the split dir. */
function shown(held: Held, error: InvalidNameError, label: string): string {
  // An overlay fork's candidates are listed in its upper layer: name the fork instead.
  const upper = `${OVERLAY_DIR}/${label}/${UPPER_DIR}`;
  let where = error.dir.slice(held.dirPath.length + 1);
  if (where === upper || where.startsWith(`${upper}/`)) {
    where = label + where.slice(upper.length);
  }
  return `${where}/${error.shown}`;
}

/** `out/<label>/`, checked empty of capture's results. */
function openOut(held: Held, label: string): Dir {
  let out: Dir;
  try {
    out = outDir(held).openDir(label);
  } catch (cause) {
    throw new RejectedError(`out/${label} was tampered with`, { cause });
  }
  // Capture creates its results O_EXCL, so one already there (a planted
  // symlink above all) would fail it anyway; say what happened.
  for (const name of [PATCH_FILE, FILES_FILE, RAW_FILE]) {
    if (out.statAt(name) !== null) {
      out.close();
      throw new RejectedError(`out/${label} was tampered with`, {
        cause: new Error(`out/${label}/${name} existed before capture`),
      });
    }
  }
  return out;
}
