/**
 * `marsh discard ID [LABEL...]` (docs/guide.md "Discarding branches";
 * docs/rules.md "States and records"): running branches are stopped through
 * the split's own cancellation (SIGINT, the grace, SIGKILL; a Kit
 * container's removal verified), then each branch is journaled `discarded`
 * with who, why and when, and only then is its fork removed. Without labels
 * the whole split goes: it is cancelled if it runs, every branch is
 * discarded, and its directory is removed as `marsh splits rm` removes it,
 * while its record stays (`cancelled`) until `marsh splits rm`. With labels
 * the split stays, and each fork goes alone (the service's `drop-fork`);
 * `out/<label>/` stays as the branch's record.
 *
 * @module
 */

import type { BranchRecord, Creator, DiscardNote, SplitRecord } from "../journal/records.ts";
import type {
  DiscardedBranch,
  DiscardedReply,
  DiscardRequest,
} from "../protocol/daemon_discard.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { removeAttemptsOf } from "./attempts.ts";
import { noBranch } from "./branch_controls.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";
import { holderOf } from "./manifest.ts";
import { RequestError } from "./request_error.ts";
import type { LiveSplit, SplitContext } from "./split_context.ts";
import { ensureOpen } from "./split_join.ts";
import { cancel, stopBranch } from "./split_lease.ts";
import { moveBranch, moveSplit } from "./split_moves.ts";

/** Exit status of a refusal that changed nothing (docs/messages.md "marsh discard"). */
const REFUSED = 1;
/** Exit status of a discard whose journal moves were made but whose removal failed. */
const FAILED = 125;

/** What a discard did: the `split.discarded` reply without `v` and `t`. */
export type DiscardResult = Omit<DiscardedReply, "v" | "t">;

/** Who may discard a split made by `c`, in words for a refusal. */
export function whoMay(c: Creator): string {
  if (c.kind === "host") return "the host, from a session shell (marsh discard there)";
  if (c.kind === "session") return `the shell branch that made it (session ${c.id})`;
  return `the Kit job that made it (job ${c.id})`;
}

/**
 * `marsh discard` over a connection: only the split's creator may
 * (docs/rules.md "States and records"); a branch never discards its own
 * split or a sibling's, and a Kit job's capability refuses the verb before
 * it gets here (`daemon/server.ts`).
 *
 * @throws {RequestError} 2 for an unknown split or label, 1 for a refusal, 125 for a failure
 */
export async function discardRequest(
  cx: SplitContext,
  auth: Authority,
  req: DiscardRequest,
): Promise<DiscardResult> {
  const s = cx.d.journal.getSplit(req.id);
  if (!s) throw new RequestError(2, `no split ${req.id}`);
  if (!sameCreator(creatorOf(auth), s.creator)) {
    const own = auth.kind === "branch" && (auth.split === s.id || s.parent === null);
    throw new RequestError(
      REFUSED,
      `refused: ${
        own ? "a branch cannot discard its own split or its siblings" : "not this caller's split"
      }; only split ${s.id}'s creator may discard it: ${whoMay(s.creator)}. Nothing was changed`,
    );
  }
  return await discardBranches(cx, req.id, req.labels, req.reason, creatorOf(auth));
}

/**
 * Discards branches `labels` of split `splitId` (all of them, and the
 * split's directory, when `labels` is empty), journaled as done by `who`
 * with `reason`. The caller has checked that `who` may (the split's
 * creator). Running branches are stopped first and awaited.
 *
 * @throws {RequestError} 2 for an unknown split or label (nothing changed),
 *   1 for a refusal that changed nothing (joined, being joined, a Kit
 *   container that may still run), 125 when a fork or the directory could not
 *   be removed after the journal recorded the discard (run it again)
 */
export async function discardBranches(
  cx: SplitContext,
  splitId: string,
  labels: readonly string[],
  reason: string | null,
  who: Creator,
): Promise<DiscardResult> {
  const { journal } = cx.d;
  const s = journal.getSplit(splitId);
  if (!s) throw new RequestError(2, `no split ${splitId}`);
  const all = journal.branches(splitId);
  const unknown = [...new Set(labels)].filter((l) => !all.some((b) => b.label === l));
  if (unknown.length > 0) {
    throw new RequestError(2, `${noBranch(splitId, unknown[0]!, all)}; nothing was discarded`);
  }
  const whole = labels.length === 0;
  const chosen = whole ? all.map((b) => b.label) : [...new Set(labels)];
  refuseEarly(cx, s, all, chosen);
  const note: DiscardNote = { reason, by: who, atMs: Date.now() };
  const why = `discarded by ${holderOf(who)}${reason === null ? "" : `: ${reason}`}`;
  const stopped = await stopRunning(cx, s, chosen, whole, why);
  const before = new Map(journal.branches(splitId).map((b) => [b.label, b]));
  const moved = record(cx, s.id, chosen, before, note, whole ? why : null);
  const removal = whole ? await removeDir(cx, s.id) : await dropForks(cx, s.id, chosen);
  const problems = removal.problems;
  const after = journal.branches(splitId);
  const branches: DiscardedBranch[] = chosen.map((label) => {
    const b = after.find((x) => x.label === label)!;
    return {
      label,
      after: b.discard?.after ?? "cancelled",
      status: b.status,
      stopped: stopped.has(label),
      already: !moved.has(label),
    };
  });
  const state = journal.getSplit(splitId)?.state ?? "cancelled";
  if (!whole && journal.getSplit(splitId)?.identity) await cx.writeManifest(splitId);
  if (problems.length > 0) {
    throw new RequestError(FAILED, `split ${splitId}: ${problems.join("; ")}`);
  }
  const what = whole
    ? `split ${splitId} discarded`
    : `split ${splitId}: discarded ${chosen.length === 1 ? "branch" : "branches"} ${
      chosen.join(", ")
    }`;
  if (moved.size === 0 && !removal.removed) {
    throw new RequestError(
      REFUSED,
      whole
        ? `split ${splitId} was discarded already; nothing was changed`
        : `split ${splitId}: ${
          chosen.length === 1 ? `branch ${chosen[0]} was` : `branches ${chosen.join(", ")} were`
        } discarded already; nothing was changed`,
    );
  }
  cx.d.log.info(`${what} (${why})`);
  return {
    id: splitId,
    scope: whole ? "split" : "branches",
    reason,
    by: holderOf(who),
    at_unix_ms: note.atMs,
    branches,
    state,
    message: whole
      ? `${what}: ${all.length} ${
        all.length === 1 ? "branch" : "branches"
      } discarded, its directory removed; the record stays in marsh splits until marsh splits rm ${splitId}`
      : s.identity !== null
      ? `${what}: ${chosen.length === 1 ? "its fork" : "their forks"} removed, out/ kept`
      : `${what}: nothing of ${chosen.length === 1 ? "it" : "them"} was left on disk`,
  };
}

/** Refusals that must come before anything changes. */
function refuseEarly(
  cx: SplitContext,
  s: SplitRecord,
  all: readonly BranchRecord[],
  chosen: readonly string[],
): void {
  if (s.state === "joined") {
    throw new RequestError(
      REFUSED,
      `split ${s.id} was joined: its consumer took its result and its forks are gone; nothing to discard`,
    );
  }
  const live = cx.live.get(s.id);
  if (live?.joinConn && !live.joinConn.isClosed) {
    throw new RequestError(REFUSED, `split ${s.id} is being joined; discard it after the join`);
  }
  if (s.state === "run" && !live) {
    throw new RequestError(REFUSED, `split ${s.id} is running, but not in this daemon`);
  }
  if (s.state === "run" && chosen.length < all.length) {
    const unborn = chosen.find((l) => {
      const b = all.find((x) => x.label === l)!;
      return (b.state === "pending" || b.state === "running") && !live!.branches.has(l);
    });
    if (unborn !== undefined) {
      throw new RequestError(
        REFUSED,
        `split ${s.id} is still making its forks; nothing was changed: discard branch ${unborn} once it runs`,
      );
    }
  }
  // NoRemoveWhileLive: a container this daemon no longer tracks may still write its fork.
  if (s.state !== "run") {
    const held = heldContainer(cx, s.id, chosen);
    if (held !== null) throw new RequestError(REFUSED, `${held}; nothing was changed`);
  }
}

/**
 * Why a fork of `labels` must stay: the container of one of their Kit jobs
 * may still run (its removal not verified), or null.
 */
function heldContainer(cx: SplitContext, id: string, labels: readonly string[]): string | null {
  const held = cx.d.journal.listJobs({ split: id, cleanups: ["live", "uncertain"] })
    .find((j) => labels.includes(j.label));
  return held === undefined
    ? null
    : `split ${id}: the container of branch ${held.label} (kit ${held.kit}, job ${held.id}) may still run, so its fork stays: remove the container with marsh workers reset ${held.kit}, then discard again`;
}

/**
 * Stops what still runs: the whole split through its cancellation, or each
 * chosen branch alone; returns once every stopped branch has settled (the
 * worker confirmed its end), and the labels it stopped.
 */
async function stopRunning(
  cx: SplitContext,
  s: SplitRecord,
  chosen: readonly string[],
  whole: boolean,
  why: string,
): Promise<Set<string>> {
  const stopped = new Set<string>();
  const live = cx.live.get(s.id);
  if (s.state !== "run" || !live) return stopped;
  const running = cx.d.journal.branches(s.id)
    .filter((b) => chosen.includes(b.label) && (b.state === "pending" || b.state === "running"));
  for (const b of running) {
    stopped.add(b.label);
    live.discarding.add(b.label);
  }
  if (whole) {
    for (const b of chosen) live.discarding.add(b);
    cancel(cx, s.id, why);
    await live.ended.promise;
    return stopped;
  }
  for (const b of running) stopBranch(cx, live, b.label, "cancelled");
  await Promise.all(running.map((b) => live.branches.get(b.label)!.settled.promise));
  return stopped;
}

/**
 * Journals the discard of every chosen branch that has ended (and of the
 * split, for a whole discard), in one transaction, before any removal.
 * Returns the labels moved now.
 */
function record(
  cx: SplitContext,
  id: string,
  chosen: readonly string[],
  before: ReadonlyMap<string, BranchRecord>,
  note: DiscardNote,
  splitReason: string | null,
): Set<string> {
  const { journal } = cx.d;
  const moved = new Set<string>();
  journal.immediate(() => {
    for (const label of chosen) {
      if (before.get(label)?.state === "discarded") continue;
      if (moveBranch(journal, id, label, "discard", { discard: note })) moved.add(label);
    }
    if (splitReason === null) return;
    const s = journal.getSplit(id)!;
    if (!moveSplit(journal, id, "discard", { reason: splitReason, finishedMs: note.atMs })) {
      // Cancelled (or uncertain) already: it keeps its state, with the discard as its reason.
      if (moved.size > 0 || s.reason === null) journal.updateSplit(id, { reason: splitReason });
    }
  });
  return moved;
}

/** What a removal did: whether anything went, and what could not be done. */
interface Removal {
  readonly removed: boolean;
  readonly problems: readonly string[];
}

/** Removes the whole split's directory; the record stays. */
async function removeDir(cx: SplitContext, id: string): Promise<Removal> {
  const { journal, splitfs } = cx.d;
  const s = journal.getSplit(id)!;
  const live = cx.liveOf(id, s.session);
  clearTimeout(live.leaseTimer);
  journal.revokeCapabilitiesOfSplit(id);
  const held = s.identity ? heldContainer(cx, id, journal.branches(id).map((b) => b.label)) : null;
  if (held !== null) return { removed: false, problems: [`discarded, but ${held}`] };
  if (!s.identity) {
    cx.forget(live);
    return { removed: false, problems: [] };
  }
  try {
    await ensureOpen(cx, live, s);
    await splitfs.request({ v: 1, t: "remove", id });
    live.open = false;
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    if (!(error instanceof SplitfsError && error.kind === "replaced")) {
      cx.d.log.info(`split ${id}: discarded, not removed: ${why}`);
      return {
        removed: false,
        problems: [
          `discarded, but its directory was not removed: ${why}; finish with: marsh splits rm ${id}`,
        ],
      };
    }
    // Not ours any more: nothing is deleted; our own overlays there are unmounted.
    if (live.open) {
      await splitfs.request({ v: 1, t: "release", id }).catch((e) =>
        cx.d.log.info(`split ${id}: release failed: ${e}`)
      );
      live.open = false;
    }
    try {
      await splitfs.request({ v: 1, t: "unmount", id, root: s.root });
    } catch (unmounting) {
      return {
        removed: false,
        problems: [
          `discarded, but its directory was removed or replaced and ${
            unmounting instanceof Error ? unmounting.message : unmounting
          }; finish with: marsh splits rm ${id}`,
        ],
      };
    }
  }
  journal.updateSplit(id, { identity: null });
  removeAttemptsOf(cx.d.home, id, journal.branches(id), cx.d.log);
  cx.forget(live);
  return { removed: true, problems: [] };
}

/** Removes each discarded branch's fork, keeping the split. */
async function dropForks(
  cx: SplitContext,
  id: string,
  chosen: readonly string[],
): Promise<Removal> {
  const { journal, splitfs } = cx.d;
  const s = journal.getSplit(id)!;
  if (!s.identity) return { removed: false, problems: [] };
  let removed = false;
  const live: LiveSplit = cx.liveOf(id, s.session);
  const problems: string[] = [];
  for (const label of chosen) {
    const b = journal.getBranch(id, label)!;
    if (b.state !== "discarded" || b.forkIdentity === null) continue;
    const held = heldContainer(cx, id, [label]);
    if (held !== null) {
      problems.push(`branch ${label} discarded, but ${held.replace(`split ${id}: `, "")}`);
      continue;
    }
    try {
      await ensureOpen(cx, live, s);
      await splitfs.request({ v: 1, t: "drop-fork", id, label });
      journal.updateBranch(id, label, { forkIdentity: null });
      removed = true;
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      cx.d.log.info(`split ${id}/${label}: discarded, fork not removed: ${why}`);
      problems.push(
        `branch ${label} discarded, but its fork was not removed: ${why}; run marsh discard ${id} ${label} again`,
      );
    }
  }
  return { removed, problems };
}
