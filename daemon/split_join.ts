/**
 * Join: a held split handed to its creator's consumer (rendering, `join
 * --`, release), and what reads a held split (its `out/` files). A held
 * split's descriptors are reopened in the split-filesystem service first
 * (docs/guide.md, "marsh join"; docs/engine.md, "Removal").
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { BranchRecord, SplitRecord } from "../journal/records.ts";
import type { JoinRequest } from "../protocol/daemon.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { removeAttemptsOf } from "./attempts.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";
import { consumerEnv } from "./join_env.ts";
import { writeJoinObjects } from "./join_objects.ts";
import { completeOut } from "./join_out.ts";
import { holderOf, keptWork } from "./manifest.ts";
import { RequestError } from "./request_error.ts";
import type { LiveSplit, SplitConn, SplitContext } from "./split_context.ts";
import { moveSplit } from "./split_moves.ts";

/**
 * Streams `out/<label>/<name>` of split `id` to `onChunk`, through the
 * split-filesystem service (the daemon reads no project file).
 *
 * @throws {RequestError} when the split's directory is gone or the file is missing
 */
export async function readOut(
  cx: SplitContext,
  id: string,
  label: string,
  name: "stdout" | "stderr",
  onChunk: (bytes: Uint8Array) => Promise<void>,
): Promise<void> {
  const s = cx.d.journal.getSplit(id);
  if (!s) throw new RequestError(2, `no split ${id}`);
  try {
    await ensureOpen(cx, cx.liveOf(id, s.session), s);
    await cx.d.splitfs.request({ v: 1, t: "out-read", id, label, name }, onChunk);
  } catch (error) {
    throw error instanceof SplitfsError ? refusal(id, error) : error;
  }
}

function authorize(auth: Authority, s: SplitRecord): void {
  if (auth.kind === "host" && s.creator.kind === "host") return;
  if (sameCreator(creatorOf(auth), s.creator)) return;
  throw new RequestError(
    2,
    `split ${s.id} was not created by this caller; only its creator may join it`,
  );
}

/**
 * Has the split-filesystem service hold the split's descriptors again
 * (after a restart or a kept split), checking each against its identity.
 *
 * @throws {RequestError} when the split has no workspace left
 * @throws {SplitfsError} when the service refuses (the caller says what it means)
 */
export async function ensureOpen(cx: SplitContext, live: LiveSplit, s: SplitRecord): Promise<void> {
  if (live.open) return;
  if (!s.identity) throw new RequestError(2, `split ${s.id} has no workspace left`);
  // Every fork still on disk is checked too. A rejected one is not held: it
  // may be gone (daemons before this one removed it at capture), and the
  // split's removal empties the whole split dir either way. A discarded
  // one is gone, or going (marsh discard removes it by name).
  const forks = cx.d.journal.branches(s.id)
    .filter((b) => b.forkIdentity !== null && b.state !== "rejected" && b.state !== "discarded")
    .map((b) => ({
      label: b.label,
      identity: b.forkIdentity!,
      ...(b.forkStrategy !== null ? { strategy: b.forkStrategy } : {}),
    }));
  await cx.d.splitfs.request({
    v: 1,
    t: "reopen",
    id: s.id,
    root: s.root,
    identity: s.identity,
    forks,
    git: s.git !== null,
  });
  live.open = true;
}

/** A split-filesystem failure on a held split, as the caller's message. */
function refusal(id: string, error: unknown): RequestError {
  if (error instanceof SplitfsError && error.kind === "replaced") {
    return new RequestError(
      2,
      `split ${id}: workspace replaced: its directory was removed or replaced (git clean -xfd?), so nothing was read or removed; marsh splits rm ${id} forgets it`,
    );
  }
  return new RequestError(2, `split ${id}: ${error instanceof Error ? error.message : error}`);
}

/** `marsh join`: rendering, consumer, release. */
export async function join(cx: SplitContext, conn: SplitConn, req: JoinRequest): Promise<void> {
  const { journal, splitfs } = cx.d;
  const s = journal.getSplit(req.id);
  if (!s) throw new RequestError(2, `no split ${req.id}`);
  authorize(conn.authority, s);
  if (s.state === "cancelled") {
    // `split | join` after a cancel: join does not run, and the pipeline keeps 130.
    const all = journal.branches(s.id);
    const discarded = all.length > 0 && all.every((b) => b.state === "discarded");
    throw new RequestError(
      130,
      discarded
        ? `split ${s.id} was discarded (${s.reason ?? "marsh discard"}): nothing to join`
        : `split ${s.id} was cancelled: nothing to join`,
    );
  }
  if (s.state === "uncertain") {
    // The root client of a tree a restart interrupted (docs/rules.md "Kit jobs"): 125, like split's.
    throw new RequestError(
      125,
      `job uncertain: split ${s.id} was running when the daemon restarted: its branches' ends are unknown and nothing of it was run again; see marsh splits ${s.id} (marsh splits rm ${s.id} removes it)`,
    );
  }
  if (s.state !== "await" && s.state !== "kept") {
    throw new RequestError(
      2,
      `split ${s.id} is ${s.state}: only awaiting or kept splits can be joined`,
    );
  }
  const live = cx.liveOf(s.id, s.session);
  if (live.joinConn && !live.joinConn.isClosed) {
    throw new RequestError(2, `split ${s.id} is already being joined`);
  }
  live.joinConn = conn;
  clearTimeout(live.leaseTimer);
  try {
    await ensureOpen(cx, live, s);
    // A consumer never reads a half out/ (a full disk): what failed is tried again first.
    const incomplete = await completeOut(
      cx.d,
      s.id,
      () => JSON.stringify(cx.manifest(s.id), null, 2) + "\n",
    );
    if (incomplete !== null) {
      throw new RequestError(
        2,
        `cannot hand split ${s.id} to the consumer: ${incomplete}; the split is kept: ` +
          `free space (or fix what is named), then run marsh join again, or remove it with: marsh splits rm ${s.id}`,
      );
    }
    const unwritten = await writeJoinObjects(cx.d, s);
    if (unwritten !== null) throw new RequestError(2, unwritten);
    const manifest = cx.manifest(s.id);
    const creator = s.parent ? journal.getBranch(s.parent.split, s.parent.label) : null;
    const env = consumerEnv(s, manifest, creator);
    await conn.send({ v: 1, t: "join.ready", manifest, env });
    // A discarded branch is not the consumer's input: it is named, not shown.
    const all = journal.branches(s.id);
    const branches = all.filter((b) => b.state !== "discarded");
    await splitfs.request({
      v: 1,
      t: "render",
      id: s.id,
      terminal: req.terminal,
      branches: branches.map((b) => ({
        label: b.label,
        status: b.status ?? b.state,
        files: b.files,
        ...(b.state === "rejected" ? { untrusted: true as const } : {}),
      })),
    }, (bytes) => conn.send({ v: 1, t: "chunk", data: Buffer.from(bytes).toString("base64") }));
    const named = discardedLines(all);
    if (named !== "") {
      await conn.send({ v: 1, t: "chunk", data: Buffer.from(named).toString("base64") });
    }
    await conn.send({ v: 1, t: "join.rendered" });
    const t0 = performance.now();
    let frame = await conn.next();
    while (frame !== null && frame.t !== "join.release") frame = await conn.next();
    const consumerMs = Math.round(performance.now() - t0);
    if (frame === null) {
      keep(cx, s.id, "the join did not release it");
      return;
    }
    const uncertain = branches.some((b) => b.state === "uncertain");
    const rejected = branches.find((b) => b.state === "rejected");
    let reason: string | null = null;
    if (req.keep) reason = "--keep was given";
    else if (uncertain) reason = "a branch is uncertain";
    else if (rejected) reason = keptWork(manifest, rejected);
    else if (req.consumer && frame.consumerStatus !== 0) {
      reason = `the consumer exited ${frame.consumerStatus}`;
    } else if (!req.consumer) {
      const bad = branches.find((b) => (b.code ?? 125) !== 0);
      if (bad) reason = `branch ${bad.label}: ${bad.status ?? bad.state}`;
    }
    const timing = { ...s.timing, consumer: consumerMs };
    if (reason === null) {
      await cx.pause("mid-release");
      // The state is journaled before the release it describes, with the
      // consumer's time in the same transaction (one fsync).
      moveSplit(journal, s.id, "join", { reason: null, timing });
      try {
        await splitfs.request({ v: 1, t: "remove", id: s.id });
        live.open = false;
        journal.immediate(() => {
          journal.updateSplit(s.id, { identity: null });
          journal.revokeCapabilitiesOfSplit(s.id);
        });
        removeAttemptsOf(cx.d.home, s.id, all, cx.d.log);
        await conn.send({
          v: 1,
          t: "join.released",
          removed: true,
          reason: req.consumer ? "the consumer exited 0" : "every branch exited 0",
          manifest: cx.manifest(s.id),
        });
        cx.forget(live);
        return;
      } catch (error) {
        reason = error instanceof Error ? error.message : String(error);
        cx.d.log.info(`split ${s.id}: not removed at its join: ${reason}`);
        moveSplit(journal, s.id, "releaseFailed", { reason });
      }
    } else {
      journal.updateSplit(s.id, { timing });
    }
    keep(cx, s.id, reason);
    await conn.send({
      v: 1,
      t: "join.released",
      removed: false,
      reason,
      manifest: cx.manifest(s.id),
      message: `split ${s.id} kept: ${reason}; remove it with: marsh splits rm ${s.id}`,
    });
  } catch (error) {
    // A join that cannot finish leaves the split kept, never awaiting without a lease.
    const replaced = error instanceof SplitfsError && error.kind === "replaced";
    keep(
      cx,
      s.id,
      replaced
        ? "workspace replaced"
        : `the join failed: ${error instanceof Error ? error.message : error}`,
    );
    throw error instanceof SplitfsError ? refusal(s.id, error) : error;
  } finally {
    live.joinConn = null;
  }
}

/**
 * `== <label>: discarded (<reason>; by <who>), not shown` per discarded
 * branch, after the others (docs/guide.md "Discarding branches"). Control
 * characters in a reason come out as `\xNN`.
 */
export function discardedLines(branches: readonly BranchRecord[]): string {
  const clean = (t: string) =>
    [...t].map((c) => {
      const n = c.charCodeAt(0);
      return n < 0x20 || (n >= 0x7f && n <= 0x9f) ? `\\x${n.toString(16).padStart(2, "0")}` : c;
    }).join("");
  return branches.filter((b) => b.discard !== null).map((b) => {
    const d = b.discard!;
    const why = d.reason === null ? "" : `${clean(d.reason)}; `;
    return `== ${b.label}: discarded (${why}by ${holderOf(d.by)}), not shown\n\n`;
  }).join("");
}

function keep(cx: SplitContext, id: string, reason: string): void {
  moveSplit(cx.d.journal, id, "keep", { reason });
  void cx.writeManifest(id);
}
