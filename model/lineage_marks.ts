/**
 * A job's display marks (docs/rules.md, "Lineage"): `lineage.fanout`, the
 * `marsh fanout` branch (`<fanout id>/<label>`) that started a job with no
 * parent job, and `lineage.consumes`, the split a root job's stage after
 * `marsh join` consumes. Both only group and annotate what `marsh jobs`
 * draws: they add no authority, no limit and no lifecycle.
 *
 * Which launch records which mark is this one rule, applied by the
 * daemon's one admission entry (`daemon/job_admit.ts`) to what the caller
 * offered. Pure, importing only `model/`.
 *
 * @module
 */

import { parseFanoutBranch } from "./fanout.ts";
import type { JobParent } from "./job_admission.ts";
import { splitIdProblem } from "./layout.ts";

/** What a launch's caller offered: its `FANOUT_BRANCH` and the `SPLIT_ID` of a join it runs under. */
export interface OfferedMarks {
  /** The caller's `FANOUT_BRANCH`. */
  readonly fanout?: string;
  /** The split the caller's `marsh join` handed over (already checked real by the daemon). */
  readonly consumes?: string;
}

/** The marks a job records: each absent when it does not apply. */
export interface LineageMarks {
  readonly fanout?: string;
  readonly consumes?: string;
}

/**
 * The marks a job started by `parent` records from `offered`:
 *
 * - `fanout` for a job with no parent job (a root job, or a split
 *   branch's job or shell-branch command of a session's split), from a
 *   well-formed `FANOUT_BRANCH`; a job's child is an ordinary child and
 *   gets none, however the variable reached it;
 * - `consumes` for a root job started by `marsh run` (a session's or a
 *   shell branch's, never a split argv branch's job, never a job's child),
 *   from a well-formed split id.
 *
 * A malformed offer is left out, never an error: the marks are display
 * only, so a stray variable must not stop a launch.
 *
 * @param branch the launch is a split argv branch's job
 */
export function lineageMarks(
  parent: JobParent,
  branch: boolean,
  offered: OfferedMarks,
): LineageMarks {
  if (parent.kind === "job") return {};
  const fanout = offered.fanout !== undefined && parseFanoutBranch(offered.fanout) !== null
    ? offered.fanout
    : undefined;
  const consumes = !branch && offered.consumes !== undefined &&
      splitIdProblem(offered.consumes) === null
    ? offered.consumes
    : undefined;
  return {
    ...(fanout === undefined ? {} : { fanout }),
    ...(consumes === undefined ? {} : { consumes }),
  };
}
