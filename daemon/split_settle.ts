/**
 * Settlement and publication: a branch's end (captured, rejected, failed,
 * cancelled), its status and output published to `out/<label>`, and the
 * split's end: awaiting a join with its manifest written, or cancelled, or
 * failed in its setup (docs/engine.md, "Capture and verification"). Every
 * journal record is written before the effect it describes.
 *
 * @module
 */

import { endEvent } from "../model/branch_state.ts";
import type { AttemptRef } from "../model/branch_phase.ts";
import { endUnconfirmed } from "../model/branch_phase.ts";
import { branchCode, splitCode } from "../protocol/manifest.ts";
import type { CapturedReply } from "../protocol/splitfs.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { removeAttemptsOf } from "./attempts.ts";
import { stoppedState } from "./branch_controls.ts";
import type { LiveBranch, LiveSplit, SplitContext } from "./split_context.ts";
import { cancel, checkOutput, startLease } from "./split_lease.ts";
import { moveBranch, moveSplit } from "./split_moves.ts";
import { outputSize } from "./split_settings.ts";
import { exitCodeOf } from "../model/exit_code.ts";

function exitStatus(code: number | null, signal: string | null): string {
  return `exited ${exitCodeOf(code, signal)}`;
}

/**
 * A branch's (or its job's) end: its socket closes, its capability is
 * revoked, and every split it created that still runs is cancelled
 * (docs/guide.md, "Life of a split").
 */
export function revoke(cx: SplitContext, live: LiveSplit, b: LiveBranch): void {
  const { journal, sockets } = cx.d;
  const label = b.label;
  if (b.socket) sockets.close(b.socket);
  b.socket = null;
  journal.revokeCapability(`${live.id}/${label}`);
  for (const child of cx.live.values()) {
    if (child === live || child.cancelReason !== null) continue;
    const rec = journal.getSplit(child.id);
    if (rec?.state !== "run" || rec.parent?.split !== live.id || rec.parent.label !== label) {
      continue;
    }
    const by = b.jobId !== null ? `job ${b.jobId}` : "branch";
    cancel(cx, child.id, `its creator (${by}, ${live.id}/${label}) ended`);
  }
}

/** Gives back the branch's pool slot, once. */
export function releaseSlot(cx: SplitContext, live: LiveSplit, b: LiveBranch): void {
  if (b.slot) cx.d.pool.release(live.session, `${live.id}/${b.label}`);
  b.slot = false;
}

/** A branch that never starts still ends with a status and an out/ entry. */
export async function endUnlaunched(
  cx: SplitContext,
  live: LiveSplit,
  b: LiveBranch,
  state: "cancelled" | "failed",
  status: string,
): Promise<void> {
  const { journal } = cx.d;
  const now = Date.now();
  const code = branchCode(status) ?? 125;
  const jobId = b.jobId;
  journal.immediate(() => {
    moveBranch(journal, live.id, b.label, state === "cancelled" ? "skip" : "refuse", {
      status,
      code,
      finishedMs: now,
    });
    if (jobId !== null) {
      journal.updateJob(jobId, { state, cleanup: "none", status, code, finishedMs: now });
    }
  });
  b.move({ kind: "ended", state, attempt: null, end: "unlaunched", outputBytes: null });
  await publish(cx, live, b.label, status, null);
  b.settled.resolve();
}

/** Branches that never launched end as cancelled (a cancel, or a setup failure). */
function cancelPending(cx: SplitContext, id: string): void {
  for (const b of cx.d.journal.branches(id)) {
    moveBranch(cx.d.journal, id, b.label, "skip", {
      status: "cancelled",
      code: 130,
      finishedMs: Date.now(),
    });
  }
}

/**
 * The worker confirmed the attempt's end (every process, or the container,
 * is gone): the branch's fork is captured unless it was stopped, its
 * status and output are published, and its slot frees.
 */
export async function settled(
  cx: SplitContext,
  live: LiveSplit,
  b: LiveBranch,
  attempt: AttemptRef,
): Promise<void> {
  const { journal, splitfs } = cx.d;
  const label = b.label;
  const dir = attempt.dir;
  const was = b.phase;
  const exit = was.kind === "exited" ? was.exit : null;
  const wall = was.kind === "exited" && was.wall;
  const container = was.kind === "running" || was.kind === "exited" ? was.container : null;
  const outputBytes = outputSize(dir);
  b.move({ kind: "settling", attempt, container, exit, wall, outputBytes });
  cx.controls.ended(live.id, label);
  revoke(cx, live, b);
  // The Kit jobs the branch started write its fork until their containers are gone.
  await cx.d.branchRuns?.settled(live.id, label);
  const outputs = { stdout: `${dir}/stdout`, stderr: `${dir}/stderr` };
  checkOutput(cx, live);
  let state: "captured" | "rejected" | "failed" | "cancelled";
  let status: string;
  let files = 0;
  // A branch stopped alone keeps its own status, even when the split is cancelled after.
  const stop = live.stopped.get(label) ?? (live.cancelReason ? "cancelled" : undefined);
  if (stop !== undefined) {
    state = stoppedState(stop);
    status = stop;
  } else {
    status = exitStatus(exit?.code ?? null, exit?.signal ?? null);
    if (wall) status = `failed: wall clock limit of ${b.kit?.wallS} s reached`;
    await cx.pause("mid-capture");
    const t0 = performance.now();
    try {
      const c = await splitfs.request<CapturedReply>({ v: 1, t: "capture", id: live.id, label });
      state = c.rejected === undefined ? "captured" : "rejected";
      if (c.rejected !== undefined) status = `rejected: ${c.rejected}`;
      files = c.files;
    } catch (error) {
      if (error instanceof SplitfsError && error.kind === "rejected") {
        // The fork is kept: it is the branch's work (docs/engine.md, "Capture and verification").
        state = "rejected";
        status = `rejected: ${error.message}`;
      } else if (error instanceof SplitfsError && error.kind === "replaced") {
        state = "failed";
        status = "failed: workspace replaced";
        journal.updateSplit(live.id, { reason: "workspace replaced" });
      } else {
        state = "failed";
        status = `failed: ${error instanceof Error ? error.message : String(error)}`;
      }
    }
    live.timing[`capture:${label}`] = Math.round(performance.now() - t0);
  }
  const published = await publish(cx, live, label, status, outputs);
  if (!published.ok && state === "captured") {
    state = "rejected";
    status = `rejected: ${published.reason}`;
  }
  if (published.ok) {
    // out/<label> holds the copy now; the control dir must not keep every branch's output.
    await Deno.remove(dir, { recursive: true }).catch((error) =>
      cx.d.log.info(`split ${live.id}/${label}: ${dir} not removed: ${error}`)
    );
  }
  const code = branchCode(status) ?? 125;
  const now = Date.now();
  const jobId = b.jobId;
  // The branch's end and its job's, in one transaction (one fsync).
  journal.immediate(() => {
    moveBranch(journal, live.id, label, endEvent(state), {
      status,
      code,
      files,
      finishedMs: now,
      // Consumers apply what they trust; a rejected result is for recovery only.
      ...(state === "rejected" ? { trust: "untrusted" as const } : {}),
    });
    if (jobId !== null) {
      // Settled means its container's removal was verified (protocol/worker.ts).
      journal.updateJob(jobId, {
        state: state === "cancelled" ? "cancelled" : "finished",
        cleanup: "removed",
        status,
        code,
        finishedMs: now,
      });
    }
  });
  b.move({ kind: "ended", state, attempt, end: "settled", outputBytes });
  releaseSlot(cx, live, b);
  b.settled.resolve();
}

/** Publishes a branch's status and output to `out/<label>` (nothing once the split is closed). */
export async function publish(
  cx: SplitContext,
  live: LiveSplit,
  label: string,
  status: string,
  outputs: { stdout: string; stderr: string } | null,
): Promise<{ ok: true } | { ok: false; reason: string }> {
  if (!live.open) return { ok: true };
  try {
    await cx.d.splitfs.request({
      v: 1,
      t: "publish",
      id: live.id,
      label,
      status,
      stdout: outputs?.stdout ?? null,
      stderr: outputs?.stderr ?? null,
    });
    return { ok: true };
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    cx.d.log.info(`split ${live.id}/${label}: publish failed: ${reason}`);
    return { ok: false, reason };
  }
}

/** The snapshot or a fork failed: the split is cancelled with status 2, removed when `remove`. */
export async function setupFailed(
  cx: SplitContext,
  live: LiveSplit,
  spool: string | null,
  error: unknown,
  remove: boolean,
): Promise<void> {
  const message = error instanceof Error ? error.message : String(error);
  let left = "";
  if (remove && live.open) {
    try {
      await cx.d.splitfs.request({ v: 1, t: "remove", id: live.id });
      live.open = false;
      cx.d.journal.updateSplit(live.id, { identity: null });
    } catch (removal) {
      // The record keeps its identity, so marsh splits rm can finish the removal.
      const why = removal instanceof Error ? removal.message : String(removal);
      cx.d.log.info(`split ${live.id}: not removed after its setup failed: ${why}`);
      left = `; not removed: ${why}`;
    }
  }
  cancelPending(cx, live.id);
  moveSplit(cx.d.journal, live.id, "setupFailed", {
    status: 2,
    reason: `setup failed: ${message}${left}`,
    finishedMs: Date.now(),
  });
  cx.d.journal.revokeCapabilitiesOfSplit(live.id);
  cleanup(cx, live, spool);
  await live.creatorConn?.send({ v: 1, t: "error", code: 2, message });
  cx.forget(live);
}

function cleanup(cx: SplitContext, live: LiveSplit, spool: string | null): void {
  cx.controls.forget(live.id);
  clearTimeout(live.deadlineTimer);
  clearInterval(live.outputTimer);
  if (spool) Deno.remove(spool).catch(() => {});
}

/** Every branch settled: the split awaits its join, its manifest written, its lease started. */
export async function finishAwait(
  cx: SplitContext,
  live: LiveSplit,
  spool: string | null,
): Promise<void> {
  const { journal } = cx.d;
  // A branch being discarded is the creator's choice, not the split's result.
  const code = splitCode(
    journal.branches(live.id).filter((b) => !live.discarding.has(b.label) && !b.discard)
      .map((b) => ({ status: b.status ?? undefined })),
  );
  moveSplit(journal, live.id, "finish", {
    status: code,
    finishedMs: Date.now(),
    timing: { ...live.timing },
  });
  live.move({ kind: "held" });
  cleanup(cx, live, spool);
  const conn = live.creatorConn;
  live.creatorConn = null;
  const unwritten = await cx.writeManifest(live.id);
  if (unwritten !== null && conn && !conn.isClosed) {
    await conn.send({
      v: 1,
      t: "notice",
      message: `marsh split: out/manifest.json was not written: ${unwritten}; ` +
        "marsh join writes it again and refuses to run a consumer until it can",
    });
  }
  if (conn && !conn.isClosed) {
    // The create stream holds the lease until it ends.
    conn.closed.then(() => startLease(cx, live));
    await conn.send({
      v: 1,
      t: "split.done",
      id: live.id,
      code,
      manifest: cx.manifest(live.id),
    });
    await conn.flush();
  } else {
    startLease(cx, live);
  }
}

/**
 * A cancelled split's end: removed when every launched branch's end is
 * confirmed, else kept, saying which branches are unconfirmed.
 */
export async function finishCancelled(
  cx: SplitContext,
  live: LiveSplit,
  spool: string | null,
): Promise<void> {
  const { journal, splitfs } = cx.d;
  const reason = live.cancelReason ?? "cancelled";
  // Every branch's end is confirmed once it settled (the worker reaps or kills all).
  const unconfirmed = [...live.branches.values()].filter((b) => endUnconfirmed(b.phase))
    .map((b) => b.label);
  let message = `split ${live.id} cancelled: ${reason}`;
  if (live.open && unconfirmed.length === 0) {
    try {
      await splitfs.request({ v: 1, t: "remove", id: live.id });
      live.open = false;
      journal.updateSplit(live.id, { identity: null });
      removeAttemptsOf(cx.d.home, live.id, journal.branches(live.id), cx.d.log);
    } catch (error) {
      message += `; kept (${
        error instanceof Error ? error.message : error
      }): remove it with: marsh splits rm ${live.id}`;
    }
  } else if (unconfirmed.length > 0) {
    message += `; kept because these branches' ends are unconfirmed: ${unconfirmed.join(", ")}`;
  }
  cancelPending(cx, live.id);
  moveSplit(journal, live.id, "cancel", {
    status: 130,
    reason,
    finishedMs: Date.now(),
    timing: { ...live.timing },
  });
  journal.revokeCapabilitiesOfSplit(live.id);
  cleanup(cx, live, spool);
  const conn = live.creatorConn;
  if (conn && !conn.isClosed) {
    await conn.send({
      v: 1,
      t: "split.done",
      id: live.id,
      code: 130,
      message,
      manifest: cx.manifest(live.id),
    });
  }
  cx.d.log.info(message);
  if (live.open) {
    await splitfs.request({ v: 1, t: "release", id: live.id }).catch(() => {});
    live.open = false;
  }
  cx.forget(live);
}
