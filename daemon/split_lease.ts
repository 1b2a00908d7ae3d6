/**
 * Lease and cancellation: a cancel of a whole split (SIGINT, the grace,
 * SIGKILL to every branch), a stop of one branch (a cancel, its time limit),
 * the captured-output limit that cancels, the lease that keeps an awaiting
 * split nobody joins, and what `marsh logs` follows of a running branch
 * (docs/guide.md, "Life of a split" and "Watching and stopping a branch").
 *
 * @module
 */

import { attemptDir, finalOutputBytes, launchedAttempt } from "../model/branch_phase.ts";
import { branchCancelProblem } from "./branch_controls.ts";
import type { Authority } from "./conn.ts";
import { mayView } from "./creator.ts";
import type { SplitSignals } from "./job_cancel.ts";
import { OUTPUT_LIMIT } from "../model/limits.ts";
import { RequestError } from "./request_error.ts";
import type { LiveSplit, SplitContext } from "./split_context.ts";
import { moveSplit } from "./split_moves.ts";
import { OUTPUT_LIMIT_REASON, outputSize } from "./split_settings.ts";

/**
 * Cancels a running split and everything below it at once
 * (`daemon/job_cancel.ts`): SIGINT to every process of every branch, and of
 * every split and job its branches started, the grace, then SIGKILL;
 * branches not yet launched never start. Returns whether the split runs in
 * this daemon (a second cancel keeps the first reason).
 */
export function cancel(cx: SplitContext, id: string, reason: string): boolean {
  const live = cx.live.get(id);
  if (!live || cx.d.journal.getSplit(id)?.state !== "run") return false;
  if (live.cancelReason) return true;
  cx.tree.cancel({ kind: "split", id }, reason);
  return true;
}

/**
 * Stops one branch (a cancel, its time limit), and everything it started:
 * SIGINT to its processes, SIGKILL after the grace, or it never starts; it
 * ends with `status`, not captured, and its siblings go on.
 */
export function stopBranch(cx: SplitContext, live: LiveSplit, label: string, status: string): void {
  if (live.cancelReason || live.stopped.has(label)) return;
  cx.tree.cancel({ kind: "branch", split: live.id, label }, status);
}

/** How a tree cancel signals this daemon's splits and branches (`daemon/job_cancel.ts`). */
export function splitSignals(cx: SplitContext): SplitSignals {
  return {
    split: (id, reason) => {
      const live = cx.live.get(id);
      if (!live || cx.d.journal.getSplit(id)?.state !== "run") return false;
      if (live.cancelReason) return true;
      live.move({ kind: "cancelling", reason });
      cx.d.log.info(`split ${id}: cancelling: ${reason}`);
      for (const b of live.branches.values()) {
        const attempt = launchedAttempt(b.phase);
        if (attempt) void cx.d.worker.cancel(attempt, cx.d.settings.graceMs);
      }
      return true;
    },
    branch: (split, label, status) => {
      const live = cx.live.get(split);
      if (!live || live.cancelReason || live.stopped.has(label)) return;
      live.stopped.set(label, status);
      cx.d.log.info(`split ${split}/${label}: stopping the branch: ${status}`);
      const b = live.branches.get(label);
      const attempt = b ? launchedAttempt(b.phase) : null;
      if (attempt) void cx.d.worker.cancel(attempt, cx.d.settings.graceMs);
    },
    quiet: (id) => cx.live.get(id)?.quiet.promise ?? Promise.resolve(),
  };
}

/** `marsh splits cancel ID [LABEL]`: the split, or one branch (daemon/branch_controls.ts). */
export function cancelRequest(
  cx: SplitContext,
  auth: Authority,
  id: string,
  label?: string,
): string {
  const s = cx.d.journal.getSplit(id);
  if (!s) throw new RequestError(2, `no split ${id}`);
  if (!mayView(auth, s.creator)) {
    throw new RequestError(2, `split ${id} was not created by this caller`);
  }
  if (label !== undefined) {
    const problem = branchCancelProblem(s, cx.d.journal.branches(id), label);
    if (problem) throw new RequestError(2, problem);
    const live = cx.live.get(id);
    if (!live) throw new RequestError(2, `split ${id} is not running in this daemon`);
    if (live.cancelReason) {
      throw new RequestError(2, `split ${id} is being cancelled already: ${live.cancelReason}`);
    }
    const was = live.stopped.get(label);
    if (was !== undefined) {
      return `split ${id}: branch ${label} is being stopped already (${was})`;
    }
    stopBranch(cx, live, label, "cancelled");
    return `split ${id}: cancelling branch ${label}`;
  }
  if (s.state !== "run") {
    throw new RequestError(2, `split ${id} is not running (state ${s.state})`);
  }
  if (!cancel(cx, id, "cancelled with marsh splits cancel")) {
    throw new RequestError(2, `split ${id} is not running in this daemon`);
  }
  return `split ${id}: cancelling`;
}

/**
 * Captured output is a hard limit of the whole split (docs/guide.md,
 * "Limits"): every branch's stdout and stderr together. The worker stops a
 * single attempt at the limit; this catches several that cross it together.
 */
export function checkOutput(cx: SplitContext, live: LiveSplit): void {
  if (live.cancelReason) return;
  let total = 0;
  for (const b of live.branches.values()) {
    const dir = attemptDir(b.phase);
    if (dir) total += finalOutputBytes(b.phase) ?? outputSize(dir);
  }
  if (total > OUTPUT_LIMIT) cancel(cx, live.id, OUTPUT_LIMIT_REASON);
}

/** What `marsh logs` follows of a branch this daemon runs (`daemon/branch_logs.ts`), or null. */
export function liveOutput(
  cx: SplitContext,
  id: string,
  label: string,
): { dir: string | null; ended: Promise<void> } | null {
  const b = cx.live.get(id)?.branches.get(label);
  return b ? { dir: attemptDir(b.phase), ended: b.settled.promise } : null;
}

/** Starts the lease of an awaiting split: unjoined when it ends, the split is kept. */
export function startLease(cx: SplitContext, live: LiveSplit): void {
  if (live.joinConn) return;
  clearTimeout(live.leaseTimer);
  live.leaseTimer = setTimeout(() => {
    if (live.joinConn) return;
    if (
      moveSplit(cx.d.journal, live.id, "leaseExpired", {
        reason: `not joined within ${Math.round(cx.d.settings.leaseMs / 1000)} s`,
      })
    ) {
      cx.d.log.info(`split ${live.id}: lease expired, kept`);
      void cx.writeManifest(live.id);
    }
  }, cx.d.settings.leaseMs);
}
