/**
 * The cancel of a `marsh run` job's subtree (docs/rules.md "Running a
 * registered command as a job"): a dropped caller stream, Ctrl-C, or the
 * job's own end. First, in one journal transaction, every capability of
 * the subtree becomes `cancelling` (admission refuses their spawns from
 * then on; a spawn that took the lock first is found and cancelled too);
 * then every live container of the subtree gets INT now, and KILL after the
 * grace, all at once (the worker's cancel). Each job's own end records it
 * and verifies its container's deletion.
 *
 * One function in its own module: tree-wide cancellation (split branches'
 * jobs included) replaces it.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";

/** A `marsh run` job this daemon drives, while it runs. */
export interface LiveRun {
  /** Its worker attempt, once launched. */
  readonly attempt: string;
  /** Why it was cancelled (`cancelled`), or null while nobody cancelled it. */
  cancelled: string | null;
}

/** What a cancel needs. */
export interface RunCancelDeps {
  readonly journal: Pick<Journal, "jobTree">;
  /** The live runs, by job id. */
  readonly runs: ReadonlyMap<string, LiveRun>;
  readonly worker: { cancel(attempt: string, graceMs: number): Promise<void> };
  readonly graceMs: number;
  readonly log: { info(line: string): void };
}

/**
 * Cancels `id` and its whole subtree for `reason`. A job that is not
 * live here (ended, or a split's) is only marked cancelling.
 *
 * @returns the ids of the subtree, `id` first
 */
export function cancelRunTree(d: RunCancelDeps, id: string, reason: string): string[] {
  const ids = d.journal.jobTree.cancelTree(id);
  for (const job of ids) {
    const run = d.runs.get(job);
    if (run === undefined || run.cancelled !== null) continue;
    run.cancelled = reason;
    d.worker.cancel(run.attempt, d.graceMs).catch((error) =>
      d.log.info(`run ${job}: cancel not sent: ${error}`)
    );
  }
  return ids;
}
