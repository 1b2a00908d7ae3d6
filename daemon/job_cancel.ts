/**
 * The cancel of a job tree (docs/rules.md, "Kit jobs" and "Cancel"): one
 * journal transaction marks every job capability at and below the root
 * `cancelling` and revokes every branch capability there (nothing in the
 * tree starts anything after it), then every container and shell branch of
 * the tree gets SIGINT in the same turn of the event loop — the nested
 * splits' as much as the root's, never after the root's container ended —
 * and SIGKILL after the one grace; the worker verifies each deletion, and
 * the split's settlement records it (`removed`, else `uncertain` with the
 * slot held until `marsh workers reset KIT`).
 *
 * The one entry for every cancel: a split's (`marsh splits cancel`,
 * Ctrl-C, its deadline, a limit), one branch's stop, a job's end (what it
 * started is cancelled the moment its container exits), and a `marsh run`
 * job's tree (the run path registers its jobs in
 * {@linkcode SplitContext.runJobs}).
 *
 * @module
 */

import { launchedAttempt } from "../model/branch_phase.ts";
import type { TreeRoot, TreeScope } from "../journal/job_tree.ts";
import type { LiveSplit, SplitContext } from "./split_context.ts";

export type { TreeRoot, TreeScope } from "../journal/job_tree.ts";

/** How a tree cancel treats its root. */
export interface TreeCancelOptions {
  /**
   * The root has ended already (a job's exit, a branch's settlement): only
   * what is below it is cancelled, and the root is not signalled.
   */
  readonly below?: boolean;
}

function describe(root: TreeRoot): string {
  switch (root.kind) {
    case "job":
      return `job ${root.id}`;
    case "split":
      return `split ${root.id}`;
    case "branch":
      return `branch ${root.split}/${root.label}`;
  }
}

/**
 * SIGINT to every launched branch of a running split, SIGKILL after the
 * grace; its pending branches never start. False when the split does not
 * run in this daemon; a second cancel keeps the first reason.
 */
function signalSplit(cx: SplitContext, live: LiveSplit, reason: string): boolean {
  if (cx.d.journal.getSplit(live.id)?.state !== "run") return false;
  if (live.cancelReason) return true;
  live.move({ kind: "cancelling", reason });
  cx.d.log.info(`split ${live.id}: cancelling: ${reason}`);
  for (const b of live.branches.values()) {
    const attempt = launchedAttempt(b.phase);
    if (attempt) void cx.d.worker.cancel(attempt, cx.d.settings.graceMs);
  }
  return true;
}

/**
 * Stops one branch: it ends with `status`, not captured, its siblings go
 * on; SIGINT now, SIGKILL after the grace, or it never starts.
 */
function signalBranch(cx: SplitContext, live: LiveSplit, label: string, status: string): void {
  if (live.cancelReason || live.stopped.has(label)) return;
  live.stopped.set(label, status);
  cx.d.log.info(`split ${live.id}/${label}: stopping the branch: ${status}`);
  const b = live.branches.get(label);
  const attempt = b ? launchedAttempt(b.phase) : null;
  if (attempt) void cx.d.worker.cancel(attempt, cx.d.settings.graceMs);
}

/**
 * Cancels everything at and below `root` at once (the module's rules):
 * the journal's one step (`Journal.jobTree.cancelScope`), then every
 * signal, synchronously. The root split is cancelled with `reason`, the
 * root branch stopped with it as its status; everything below gets
 * `its tree was cancelled: <reason>`. With `below`, the root is left
 * alone. Returns the scope.
 */
export function cancelJobTree(
  cx: SplitContext,
  root: TreeRoot,
  reason: string,
  opts: TreeCancelOptions = {},
): TreeScope {
  const { journal, log } = cx.d;
  // Read first: a cancel that would change nothing writes nothing (no commit, no fsync).
  let scope = journal.jobTree.scope(root);
  if (opts.below && scope.below === 0) return scope;
  if (scope.live) scope = journal.jobTree.cancelScope(root);
  const rootSplit = root.kind === "split" ? root.id : null;
  const rootJob = root.kind === "job" ? root.id : null;
  const rootBranch = root.kind === "branch" ? `${root.split}/${root.label}` : null;
  const inherited = opts.below ? reason : `its tree was cancelled: ${reason}`;
  const nested = scope.splits.filter((id) => id !== rootSplit && cx.live.get(id));
  if (nested.length > 0 || scope.jobs.length > 1) {
    log.info(
      `${
        describe(root)
      }: cancelling its tree at once (${scope.jobs.length} jobs, ${scope.splits.length} splits): ${reason}`,
    );
  }
  if (!opts.below) {
    if (rootSplit !== null) {
      const live = cx.live.get(rootSplit);
      if (live) signalSplit(cx, live, reason);
    } else if (rootBranch !== null && root.kind === "branch") {
      const live = cx.live.get(root.split);
      if (live) signalBranch(cx, live, root.label, reason);
    }
  }
  for (const id of nested) signalSplit(cx, cx.live.get(id)!, inherited);
  for (const id of scope.jobs) {
    if (opts.below && id === rootJob) continue;
    const stop = cx.runJobs.get(id);
    if (stop !== undefined) stop(id === rootJob ? reason : inherited);
  }
  if (!opts.below && rootJob !== null && !cx.runJobs.has(rootJob)) {
    // A split branch's job: its branch is stopped.
    const job = journal.getJob(rootJob);
    const live = job && job.split !== "" ? cx.live.get(job.split) : undefined;
    if (job && live) signalBranch(cx, live, job.label, reason);
  }
  return scope;
}

/** {@linkcode cancelJobTree} of a split: false when it does not run in this daemon. */
export function cancelSplitTree(cx: SplitContext, id: string, reason: string): boolean {
  const live = cx.live.get(id);
  if (!live || cx.d.journal.getSplit(id)?.state !== "run") return false;
  if (live.cancelReason) return true;
  cancelJobTree(cx, { kind: "split", id }, reason);
  return true;
}
