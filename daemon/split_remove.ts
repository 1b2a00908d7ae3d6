/**
 * Removal and listing: `marsh splits rm` of a split that no longer runs,
 * `marsh splits`, the leases of awaiting splits found at start-up, and the
 * daemon's stop (docs/guide.md, "Housekeeping"; docs/engine.md,
 * "Removal").
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { removeAttemptsOf } from "./attempts.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";
import { manifestOf } from "./manifest.ts";
import { RequestError } from "./request_error.ts";
import type { SplitContext } from "./split_context.ts";
import { ensureOpen } from "./split_join.ts";
import { cancel, startLease } from "./split_lease.ts";

/** `marsh splits [ID]`: the host sees all; a branch its own. */
export function list(cx: SplitContext, auth: Authority, id?: string) {
  const { journal } = cx.d;
  const all = id
    ? [journal.getSplit(id)].filter((s): s is SplitRecord => s !== null && s !== undefined)
    : journal.listSplits(auth.kind === "host" ? {} : { creator: creatorOf(auth) });
  if (id && all.length === 0) throw new RequestError(2, `no split ${id}`);
  const visible = all.filter((s) =>
    auth.kind === "host" || sameCreator(creatorOf(auth), s.creator)
  );
  if (id && visible.length === 0) {
    throw new RequestError(2, `split ${id} was not created by this caller`);
  }
  // `marsh splits ID` shows the splits made under it too (its branches' jobs' and theirs):
  // they are part of the tree the caller may see (docs/guide.md "marsh splits").
  if (id) visible.push(...nestedSplits(cx, id));
  return visible.map((s) => cx.controls.decorate(manifestOf(s, journal.branches(s.id))));
}

/** Every split made under split `id`'s branches, theirs, and so on, newest first per level. */
function nestedSplits(cx: SplitContext, id: string): SplitRecord[] {
  const out: SplitRecord[] = [];
  const seen = new Set([id]);
  for (let frontier = [id]; frontier.length > 0;) {
    const next: string[] = [];
    for (const parent of frontier) {
      for (const s of cx.d.journal.listSplits({ parent })) {
        if (seen.has(s.id)) continue;
        seen.add(s.id);
        out.push(s);
        next.push(s.id);
      }
    }
    frontier = next;
  }
  return out;
}

/** `marsh splits rm ID`: removes a kept (or cancelled, joined, uncertain) split. */
export async function remove(cx: SplitContext, auth: Authority, id: string): Promise<string> {
  const { journal, splitfs } = cx.d;
  const s = journal.getSplit(id);
  if (!s) throw new RequestError(2, `no split ${id}`);
  if (auth.kind !== "host" && !sameCreator(creatorOf(auth), s.creator)) {
    throw new RequestError(2, `split ${id} was not created by this caller`);
  }
  if (s.state === "run") {
    throw new RequestError(
      2,
      `split ${id} is running; cancel it first with: marsh splits cancel ${id}`,
    );
  }
  // NoRemoveWhileLive: a container of one of its Kit jobs may still write its fork.
  const held = journal.listJobs({ split: id, cleanups: ["live", "uncertain"] })[0];
  if (held !== undefined) {
    throw new RequestError(
      2,
      `split ${id} not removed: the container of branch ${held.label} (kit ${held.kit}, job ${held.id}) may still run; remove it first with: marsh workers reset ${held.kit}`,
    );
  }
  const live = cx.liveOf(id, s.session);
  if (live.joinConn && !live.joinConn.isClosed) {
    throw new RequestError(2, `split ${id} is being joined`);
  }
  let said = `split ${id} removed`;
  if (s.identity) {
    try {
      await ensureOpen(cx, live, s);
      await splitfs.request({ v: 1, t: "remove", id });
    } catch (error) {
      if (!(error instanceof SplitfsError && error.kind === "replaced")) {
        const why = error instanceof Error ? error.message : String(error);
        cx.d.log.info(`split ${id}: not removed: ${why}`);
        throw new RequestError(2, `split ${id} not removed: ${why}`);
      }
      // What is there now is not ours: nothing is deleted. The overlays marsh
      // mounted there are still its own: they are unmounted, or the record
      // stays, saying what is left (docs/engine.md, "Removal").
      if (live.open) {
        await splitfs.request({ v: 1, t: "release", id }).catch((error) =>
          cx.d.log.info(`split ${id}: release failed: ${error}`)
        );
        live.open = false;
      }
      try {
        await splitfs.request({ v: 1, t: "unmount", id, root: s.root });
      } catch (unmounting) {
        const why = unmounting instanceof Error ? unmounting.message : String(unmounting);
        const reason = `its directory was removed or replaced, and ${why}`;
        cx.d.log.info(`split ${id}: not removed: ${reason}`);
        journal.updateSplit(id, { reason });
        throw new RequestError(2, `split ${id} not removed: ${reason}`);
      }
      said =
        `split ${id}: its directory was removed or replaced, so nothing was removed from disk; record dropped`;
    }
  }
  clearTimeout(live.leaseTimer);
  journal.revokeCapabilitiesOfSplit(id);
  const branches = journal.branches(id);
  journal.deleteSplit(id);
  // What the attempts kept (a failed publish, an uncertain branch) goes with the split.
  removeAttemptsOf(cx.d.home, id, branches, cx.d.log);
  cx.forget(live);
  return said;
}

/** Starts lease timers for awaiting splits found at start-up. */
export function adoptAwaiting(cx: SplitContext): void {
  for (const s of cx.d.journal.listSplits({ states: ["await"] })) {
    startLease(cx, cx.liveOf(s.id, s.session));
  }
}

/** Cancels every running split and waits for them to settle (daemon stop). */
export async function stop(cx: SplitContext): Promise<void> {
  cx.stopping = true;
  for (const id of cx.live.keys()) cancel(cx, id, "the daemon is stopping");
  const deadline = Date.now() + cx.d.settings.graceMs + 5000;
  while (Date.now() < deadline && [...cx.live.values()].some((l) => l.cancelReason)) {
    await new Promise((r) => setTimeout(r, 50));
  }
  for (const l of cx.live.values()) {
    clearTimeout(l.leaseTimer);
    clearTimeout(l.deadlineTimer);
  }
}
