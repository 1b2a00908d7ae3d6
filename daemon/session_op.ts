/**
 * `marsh op`: one command as one checkpoint (docs/checkpoints.md "An
 * operation"): the journal's record, the op's private overlay
 * (`op-prepare`), the worker's launch (argv, the caller's FIFOs, the
 * overlay at the project's path), the drain, the capture, then either a
 * no-change bind, or the three durability steps (intent, the layer's seal,
 * the bind with the head's compare-and-swap), and last the view's remount.
 * The command is never run twice; a cancel drains first, then seals or
 * discards as asked.
 *
 * @module
 */

import {
  argvProblem,
  cwdProblem,
  type ExecutionOutcome,
  type SessionRecord,
} from "../model/checkpoint.ts";
import { exitCodeOf } from "../model/exit_code.ts";
import { MAX_SESSION_LAYERS } from "../protocol/splitfs_session.ts";
import type { OpDoneReply, OpLingeringReply, OpRunRequest } from "../protocol/daemon_session.ts";
import type { LingeringEvent } from "../protocol/worker.ts";
import type { Conn } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import type { ViewState } from "./session_context.ts";
import { newRecordId } from "./session_context.ts";
import {
  captureAndPublish,
  dropOp,
  type PhaseTimes,
  type Published,
  type SealDeps,
} from "./session_seal.ts";
import type { AttemptEvents, OperationLaunchSpec } from "./worker_link.ts";

/** The FIFO names in the caller's io dir. */
export const IO_FIFOS = { stdin: "in", stdout: "out", stderr: "err" } as const;
/** The io dirs' parent in the control dir. */
export const IO_DIR = "io";
const IO_ID = /^[A-Za-z0-9_-]{1,64}$/;

/** What an operation needs. */
export interface OpDeps extends SealDeps {
  /** Remounts a session's view on a stack (null: it failed, logged). */
  readonly views: (s: SessionRecord, layers: readonly string[]) => Promise<ViewState | null>;
  readonly worker: {
    launchOperation(spec: OperationLaunchSpec, events: AttemptEvents): Promise<void>;
    cancel(attempt: string, graceMs: number): Promise<void>;
  };
  /** The control dir, canonical. */
  readonly home: string;
  /** Keeps an operation's step times for `marsh log --json` (`timing_ms`). */
  readonly timed?: (operation: string, timing: PhaseTimes) => void;
  /** The split-filesystem service's namespace, where its mounts live (unprivileged daemon). */
  readonly namespace: { readonly pid: number } | null;
  /**
   * The daemon's shell view (`daemon/shell_view.ts`): `project`, the op sees
   * its overlay at the project's own path in a private mount namespace; else
   * it runs with its cwd in the overlay (`relative`), and an absolute path
   * can leave it (docs/containment.md). Recorded with the operation.
   */
  readonly view: { readonly view: "project" | "fork"; readonly reason: string };
  readonly graceMs: number;
  /**
   * After a bound operation's answer: compacts the new head's stack in the
   * background when it is deep (`session_compact.ts`); absent: never.
   */
  readonly compact?: (at: { root: string; name: string }, layers: readonly string[]) => void;
}

/** How the command ended, as the worker reported it. */
interface Ended {
  readonly launched: boolean;
  readonly code: number | null;
  readonly signal: string | null;
  /** The worker's error, when the attempt ended by one. */
  readonly error: string | null;
}

/** The caller's FIFOs, checked: `<home>/io/<id>/{in,out,err}`, each a FIFO. */
function fifos(home: string, io: string): OperationLaunchSpec["stdio"] {
  const prefix = `${home}/${IO_DIR}/`;
  const id = io.startsWith(prefix) ? io.slice(prefix.length) : "";
  if (!IO_ID.test(id)) {
    throw new RequestError(2, `the FIFO dir must be ${prefix}<id>, not ${io}`);
  }
  const paths = {
    stdin: `${io}/${IO_FIFOS.stdin}`,
    stdout: `${io}/${IO_FIFOS.stdout}`,
    stderr: `${io}/${IO_FIFOS.stderr}`,
  };
  for (const p of Object.values(paths)) {
    let fifo = false;
    try {
      fifo = Deno.lstatSync(p).isFifo === true;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    if (!fifo) throw new RequestError(2, `${p} is not a FIFO the caller made`);
  }
  return paths;
}

/** The `op.lingering` frame for the worker's `lingering` event. */
export function lingeringReply(
  operation: string,
  session: string,
  ev: Pick<LingeringEvent, "processes" | "more">,
): OpLingeringReply {
  const n = ev.processes.length + ev.more;
  const listed = ev.processes.map((p) => `${p.pid} (${p.command})`).join(", ") +
    (ev.more > 0 ? ` and ${ev.more} more` : "");
  return {
    v: 1,
    t: "op.lingering",
    operation,
    session,
    processes: ev.processes.map((p) => ({ pid: p.pid, command: p.command })),
    more: ev.more,
    message: `marsh: the command exited, but ${n} process${n === 1 ? "" : "es"} it started ` +
      `still run${n === 1 ? "s" : ""}: ${listed}; the operation ends, and is checkpointed, ` +
      `when ${n === 1 ? "it has" : "they have"} ended (Ctrl-C stops ${n === 1 ? "it" : "them"})`,
  };
}

/**
 * Runs `req` in session `s` (located at `where`) and answers on `conn`:
 * `op.launched`, then `op.done`.
 *
 * @throws {RequestError} before anything ran (2: usage; 1: the session is busy), or 125
 */
export async function runOperation(
  conn: Conn,
  req: OpRunRequest,
  where: {
    readonly at: { readonly root: string; readonly rel: string };
    readonly session: SessionRecord;
  },
  d: OpDeps,
): Promise<void> {
  const j = d.journal.checkpoints;
  const { root, rel } = where.at;
  const s = where.session;
  const problem = argvProblem(req.argv) ?? cwdProblem(rel);
  if (problem !== null) throw new RequestError(2, problem);
  const stdio = fifos(d.home, req.io);
  const head = j.getCheckpoint(s.head);
  if (head === null) throw new Error(`session ${s.name}'s head ${s.head} is not in the journal`);
  // A new layer goes on top of the head's stack: refused before the command runs, not at its seal.
  if (head.layers.length >= MAX_SESSION_LAYERS) {
    throw new RequestError(
      1,
      `session ${s.name}'s head is a stack of ${head.layers.length} layers, and an operation's ` +
        `layer can go on at most ${MAX_SESSION_LAYERS - 1}: its compaction, which runs in the ` +
        `background after each operation, has not caught up; nothing ran: try again once it ` +
        `has (see marshd.log), roll back (marsh rollback), or start a new session`,
    );
  }
  const id = newRecordId("o");
  let rec;
  try {
    rec = j.recordOperation({
      id,
      session: s.id,
      expectedHead: s.head,
      argv: req.argv,
      cwd: rel,
      createdMs: d.now(),
    });
  } catch (error) {
    if (error instanceof Deno.errors.Busy) {
      throw new RequestError(
        1,
        `session ${s.name} is running another operation (one at a time): wait for it to end, ` +
          `then try again; nothing ran`,
      );
    }
    if (error instanceof Deno.errors.NotFound) throw new RequestError(2, error.message);
    throw error;
  }
  if (rec.kind === "stale") {
    throw new RequestError(1, `session ${s.name} moved meanwhile; try again`);
  }
  await d.pause("op-recorded");
  const at = { root, name: s.name };
  const done = (r: Omit<OpDoneReply, "v" | "t" | "operation" | "session">) =>
    conn.send({ v: 1, t: "op.done", operation: id, session: s.name, ...r });
  let merged: string;
  const tp = performance.now();
  try {
    merged = (await d.store.prepareOp(at, id, head.layers)).merged;
  } catch (error) {
    const why = `its overlay could not be made: ${error instanceof Error ? error.message : error}`;
    j.failOperation(id, why, d.now());
    throw new RequestError(125, `${why}; nothing ran`);
  }
  const prepareMs = performance.now() - tp;

  const project = d.view.view === "project";
  j.recordView(id, { view: project ? "project" : "relative", reason: d.view.reason });

  // Cancel: an op.cancel frame, or the caller's connection closing.
  let cancelled = false;
  let launchedSeen = false;
  const ended = Promise.withResolvers<Ended>();
  let exit: { code: number | null; signal: string | null } = { code: null, signal: null };
  let over = false;
  const cancel = () => {
    // After the end the attempt is gone: a cancel for it would be a worker error.
    if (cancelled || over) return;
    cancelled = true;
    void d.worker.cancel(id, d.graceMs);
  };
  void (async () => {
    for (;;) {
      const f = await conn.next();
      if (f === null || f.t === "op.cancel") return cancel();
    }
  })();
  await d.worker.launchOperation({
    attempt: id,
    argv: req.argv,
    cwd: `${project ? root : merged}${rel === "." ? "" : `/${rel}`}`,
    env: req.env,
    stdio,
    ...(project
      ? { view: { root, fork: merged, admin: null, objectDirs: [], control: d.home } }
      : {}),
    ...(d.namespace === null ? {} : { namespace: d.namespace }),
  }, {
    launched: (_pid, mechanism) => {
      launchedSeen = true;
      // With what will prove its tree gone: the completeness receipt's drain proof.
      j.launchOperation(id, d.now(), mechanism);
      void conn.send({ v: 1, t: "op.launched", operation: id, session: s.name, head: s.head });
    },
    exited: (code, signal) => exit = { code, signal },
    // The command exited but left processes running: the operation stays open (step 3).
    lingering: (ev) => void conn.send(lingeringReply(id, s.name, ev)),
    settled: () => ended.resolve({ launched: launchedSeen, ...exit, error: null }),
    outputLimit: () => {},
    error: (message) => ended.resolve({ launched: launchedSeen, ...exit, error: message }),
  });
  const end = await ended.promise;
  over = true;
  const t0 = performance.now();
  // Each step's time from the drain on, and the overlay's making before the launch
  // (docs/checkpoints.md "An operation").
  const timing: PhaseTimes = { prepare: prepareMs };
  d.timed?.(id, timing);
  const drop = () => dropOp({ id, at, head, timing }, d);

  if (!end.launched) {
    const why = `the command could not start: ${end.error ?? "no launch was reported"}`;
    j.failOperation(id, why, d.now());
    await drop();
    throw new RequestError(125, `${why}; nothing was checkpointed`);
  }
  if (end.error !== null) {
    // The worker lost track of the process tree: a writer may outlive it, so
    // nothing of its overlay may be sealed (docs/checkpoints.md "An operation", step 3).
    j.escapeOperation(id, end.error, d.now());
    d.log.info(`op ${id}: escaped: ${end.error}`);
    // Its overlay goes: nothing will ever seal it, and a writer left behind
    // writes to nothing a checkpoint can reach.
    await drop();
    throw new RequestError(
      125,
      `the operation escaped: ${end.error}; its process tree was not seen to end, so nothing ` +
        `was checkpointed and session ${s.name}'s head did not move: make sure nothing the ` +
        `command started still runs (ps -ef), then run the command again`,
    );
  }
  const outcome: ExecutionOutcome = cancelled
    ? { kind: "cancelled" }
    : exit.code === null
    ? { kind: "signaled", signal: exit.signal ?? "SIGKILL" }
    : { kind: "exited", code: exit.code };
  j.drainOperation(id, outcome, d.now());
  timing.drain = performance.now() - t0;
  await d.pause("op-drained");
  const status = cancelled ? 130 : exitCodeOf(exit.code, exit.signal);
  const execution = {
    execution: outcome.kind,
    exit: outcome.kind === "exited" ? outcome.code : null,
    signal: outcome.kind === "signaled" ? outcome.signal : null,
  };

  if (cancelled && req.onCancel === "discard") {
    await drop();
    j.discardOperation(id, d.now());
    await done({
      ...execution,
      checkpoint: null,
      root: null,
      disposition: "discarded",
      state: "discarded",
      changed: 0,
      status,
      bind_ms: null,
      view_ms: null,
      message: `marsh: cancelled; its changes were discarded (--on-cancel=discard)`,
    });
    return;
  }
  const answer = async (pub: Published, bindMs: number): Promise<void> => {
    if (pub.kind === "failed") {
      await done({
        ...execution,
        checkpoint: null,
        root: null,
        disposition: null,
        state: "failed",
        changed: 0,
        status: 125,
        bind_ms: null,
        view_ms: null,
        message:
          `marsh op: ${pub.why}; nothing was checkpointed (the command's status was ${status})`,
      });
      return;
    }
    const bound = pub.result;
    if (bound.kind === "stale") {
      await done({
        ...execution,
        checkpoint: null,
        root: null,
        disposition: null,
        state: "stale",
        changed: pub.changed,
        status: 1,
        bind_ms: bindMs,
        view_ms: null,
        message: `marsh op: session ${s.name} moved while the command ran (its head is ` +
          `${bound.current}, not ${bound.expected}); nothing was published: run marsh log, ` +
          `then the command again`,
      });
      return;
    }
    const c = bound.checkpoint;
    // Durable, not yet visible: the head moved, the view not (tests hold it here).
    await d.pause("op-bound");
    const t1 = performance.now();
    const view = await d.views(s, c.layers);
    const viewMs = view === null ? null : performance.now() - t1;
    if (viewMs !== null) timing.view = viewMs;
    const changed = c.kind === "operation" && c.delta.kind === "no-change" ? 0 : pub.changed;
    const what = changed === 0 ? "no change" : `${changed} path${changed === 1 ? "" : "s"} changed`;
    // Durable and visible are two results, timed apart (docs/checkpoints.md, step 7).
    d.log.info(
      `op ${id}: checkpoint ${c.id} bound ${bindMs.toFixed(2)} ms after the drain; view ` +
        (viewMs === null ? "not remounted" : `remounted in ${viewMs.toFixed(2)} ms`),
    );
    await done({
      ...execution,
      checkpoint: c.id,
      root: c.root,
      disposition: changed === 0 ? "no-change" : "sealed",
      state: "bound",
      changed,
      status,
      bind_ms: bindMs,
      view_ms: viewMs,
      timing_ms: timing,
      message: `marsh: checkpoint ${c.id} (${what})` +
        (project
          ? ""
          : "; relative: the command saw the project by its cwd only, so a write by absolute " +
            "path may have left the session") +
        (view === null ? "; the view could not be remounted (see marsh sessions)" : ""),
    });
  };
  const pub = await captureAndPublish({ id, at, head, timing }, d);
  const bindMs = performance.now() - t0;
  try {
    await answer(pub, bindMs);
  } finally {
    // After the answer: removing the op dir is on the way to neither the head nor the view.
    if (pub.kind === "bound") await drop();
  }
  // Compaction starts after the answer and runs in the background: never on the op's path.
  if (pub.kind === "bound" && pub.result.kind === "bound") {
    d.compact?.(at, pub.result.checkpoint.layers);
  }
}
