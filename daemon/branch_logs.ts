/**
 * `marsh logs ID LABEL [-f]` (docs/guide.md, "Watching and stopping a
 * branch"): a branch's stdout and stderr as `logs.chunk` frames, each
 * stream in its own order, then `logs.end`.
 *
 * Where the bytes are depends on where the branch is: while it runs, in
 * its attempt's files in the control dir, which the worker writes as the
 * branch prints and which this module reads; once its output was published,
 * in `out/<label>/`, which only the split-filesystem service reads. A
 * follower holds the attempt's files open, so their removal after publish
 * loses nothing, and reads them to their end once the branch has ended.
 *
 * Needs read access to the control dir.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Journal } from "../journal/journal.ts";
import type { BranchRecord } from "../journal/records.ts";
import { ATTEMPTS_DIR } from "../protocol/control_dir.ts";
import type { LogsRequest } from "../protocol/daemon.ts";
import { noBranch } from "./branch_controls.ts";
import type { Conn } from "./conn.ts";
import { mayView } from "./creator.ts";
import { RequestError } from "./request_error.ts";
import type { Splits } from "./splits.ts";

/** How often a follower looks for new output. */
const POLL_MS = 100;
/** Bytes per `logs.chunk`: base64 of it stays far below a daemon frame. */
const PIECE = 256 * 1024;

type Stream = "stdout" | "stderr";

/** What `streamLogs` needs of the daemon. */
export interface LogsDeps {
  readonly journal: Journal;
  readonly splits: Splits;
  /** The control dir. */
  readonly home: string;
}

function streamsOf(req: LogsRequest): Stream[] {
  return req.streams === "both" ? ["stdout", "stderr"] : [req.streams];
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

async function isDir(path: string): Promise<boolean> {
  try {
    return (await Deno.lstat(path)).isDirectory;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

async function openIfExists(path: string): Promise<Deno.FsFile | null> {
  try {
    return await Deno.open(path, { read: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/**
 * Answers one `splits.logs` request on `conn`: refuses an unknown split, a
 * split the caller did not create (the host sees all) or an unknown label
 * (naming the split's labels); else streams the output and ends with
 * `logs.end`. A follower's stream ends when the branch has ended, or when
 * the caller hangs up.
 *
 * @throws {RequestError} (status 2) for a refusal, before anything is sent
 */
export async function streamLogs(conn: Conn, req: LogsRequest, d: LogsDeps): Promise<void> {
  const s = d.journal.getSplit(req.id);
  if (!s) {
    throw new RequestError(2, `no split ${req.id}; marsh splits lists the splits you may see`);
  }
  if (!mayView(conn.authority, s.creator)) {
    throw new RequestError(2, `split ${req.id} was not created by this caller`);
  }
  const branches = d.journal.branches(req.id);
  if (!branches.some((b) => b.label === req.label)) {
    throw new RequestError(2, noBranch(req.id, req.label, branches));
  }
  const current = () => d.journal.getBranch(req.id, req.label) ?? null;
  const send = (stream: Stream, bytes: Uint8Array) =>
    conn.send({ v: 1, t: "logs.chunk", stream, data: Buffer.from(bytes).toString("base64") });

  // A branch that has not started yet has no output: a follower waits for its start.
  let b = current();
  while (req.follow && b?.state === "pending" && !conn.isClosed) {
    await sleep(POLL_MS);
    b = current();
  }
  const live = b?.state === "running" ? d.splits.liveOutput(req.id, req.label) : null;
  let left = streamsOf(req);
  if (live?.dir) left = await tail(live.dir, live.ended, req, send, conn);
  if (conn.isClosed) return;
  b = current();
  if (left.length > 0 && b !== null && b.state !== "pending" && b.state !== "running") {
    await finished(b, left, req, d, send);
  }
  await conn.send({
    v: 1,
    t: "logs.end",
    state: b?.state ?? "pending",
    ...(b?.status ? { status: b.status } : {}),
  });
}

/**
 * Sends what the attempt's files hold, and with `follow` what they get
 * until `ended`. Returns the streams whose file was gone before it could be
 * opened once the branch had ended (its output was published meanwhile:
 * read those from `out/`).
 */
async function tail(
  dir: string,
  ended: Promise<void>,
  req: LogsRequest,
  send: (stream: Stream, bytes: Uint8Array) => Promise<void>,
  conn: Conn,
): Promise<Stream[]> {
  let over = false;
  void ended.then(() => over = true);
  const files = new Map<Stream, Deno.FsFile>();
  try {
    const buf = new Uint8Array(PIECE);
    for (;;) {
      // Read after the end is known, so the last pass sees every byte.
      const last = over || !req.follow;
      for (const stream of streamsOf(req)) {
        let f = files.get(stream) ?? null;
        if (f === null) {
          f = await openIfExists(`${dir}/${stream}`);
          if (f === null) continue;
          files.set(stream, f);
        }
        for (;;) {
          const n = await f.read(buf);
          if (n === null || n === 0) break;
          await send(stream, buf.subarray(0, n));
        }
      }
      if (conn.isClosed) return [];
      if (last) return over ? streamsOf(req).filter((x) => !files.has(x)) : [];
      await Promise.race([ended, conn.closed, sleep(POLL_MS)]);
    }
  } finally {
    for (const f of files.values()) f.close();
  }
}

/** Sends a branch's output once it has ended: its attempt's files if kept, else `out/<label>/`. */
async function finished(
  b: BranchRecord,
  streams: readonly Stream[],
  req: LogsRequest,
  d: LogsDeps,
  send: (stream: Stream, bytes: Uint8Array) => Promise<void>,
): Promise<void> {
  // An uncertain branch's output (or one whose publish failed, or a failed
  // attempt's) stays with its attempt, whose files may never have been made.
  const kept = b.attempt === null ? null : `${d.home}/${ATTEMPTS_DIR}/${b.attempt}`;
  const keptThere = kept !== null && await isDir(kept);
  const buf = new Uint8Array(PIECE);
  for (const stream of streams) {
    const f = keptThere ? await openIfExists(`${kept}/${stream}`) : null;
    if (keptThere) {
      if (f === null) continue;
      try {
        for (;;) {
          const n = await f.read(buf);
          if (n === null || n === 0) break;
          await send(stream, buf.subarray(0, n));
        }
      } finally {
        f.close();
      }
      continue;
    }
    const s = d.journal.getSplit(req.id);
    if (!s?.identity) {
      throw new RequestError(
        2,
        `split ${req.id} is ${
          s?.state ?? "gone"
        } and its directory was removed: no output of branch ${req.label} is left`,
      );
    }
    await d.splits.readOut(req.id, req.label, stream, (bytes) => send(stream, bytes));
  }
}
