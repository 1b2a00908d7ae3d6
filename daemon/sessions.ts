/**
 * Checkpoint sessions in the daemon (docs/checkpoints.md, docs/guide.md
 * "Checkpoint sessions"): `marsh session start`, `sessions`, `session rm`,
 * `log`, `rollback` and `fork`, each a journal transaction
 * (`journal/checkpoints.ts`) around the split-filesystem calls that make,
 * mount and close views. `marsh op` is `session_op.ts`; start-up recovery
 * is `session_recovery.ts`. Only the host may use them.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { CheckpointJournal } from "../journal/checkpoints.ts";
import { MARSH_DIR } from "../model/layout.ts";
import { SESSION_DIR, type SessionRecord, VIEW_DIR } from "../model/checkpoint.ts";
import type {
  LogEntryInfo,
  RolledBackReply,
  SessionClientFrame,
  SessionForkRequest,
  SessionLogReply,
  SessionRemovedReply,
  SessionRollbackRequest,
  SessionsReply,
  SessionStartedReply,
  SessionStartRequest,
} from "../protocol/daemon_session.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import type { Conn } from "./conn.ts";
import type { Log } from "./log.ts";
import { RequestError } from "./request_error.ts";
import {
  chooseSession,
  defaultSessionName,
  newRecordId,
  newSessionName,
  projectCheckpoints,
  resolveCheckpoint,
  type SessionAt,
  sessionInfo,
  type SessionStore,
  type ViewState,
} from "./session_context.ts";
import { logEntryInfo } from "./session_log.ts";
import { ViewMounts } from "./session_views.ts";
import { recoverOperations } from "./session_recovery.ts";
import { type OpDeps, runOperation } from "./session_op.ts";
import type { Compactor } from "./session_compact.ts";
import type { PhaseTimes } from "./session_seal.ts";

/** The step times kept for `marsh log --json`: the newest operations' only (memory stays bounded). */
const TIMINGS_KEPT = 4096;

/** Where a caller stands: the project, and its place in it or in a session's view. */
export interface Located {
  readonly root: string;
  /** Relative to the project's root (`.` at the top), as the op should run. */
  readonly rel: string;
  /** The session whose view holds the cwd, or null. */
  readonly view: string | null;
}

/** What the sessions need. */
export interface SessionsDeps {
  readonly journal: Journal;
  readonly store: SessionStore;
  /** The project of an absolute cwd (`locate` of the split-filesystem service). */
  readonly locate: (cwd: string) => Promise<{ root: string; cwd: string }>;
  readonly log: Log;
  readonly now: () => number;
  /** What `marsh op` needs besides (the worker, the control dir). */
  readonly op: Omit<OpDeps, "journal" | "store" | "views" | "now" | "log" | "compact">;
  /** Compacts deep head stacks in the background (absent: never). */
  readonly compactor?: Compactor;
}

/** The service's error as the caller's: 125, with its message. */
export function serviceFailure(what: string, error: unknown): RequestError {
  if (error instanceof SplitfsError) return new RequestError(125, `${what}: ${error.message}`);
  throw error;
}

/** The checkpoint session verbs. */
export class Sessions {
  readonly #d: SessionsDeps;
  readonly #views: ViewMounts;
  readonly #timings = new Map<string, PhaseTimes>();

  constructor(d: SessionsDeps) {
    this.#d = d;
    this.#views = new ViewMounts(d.store);
  }

  /** An unprivileged daemon's mounts are in its service's namespace only. */
  get #visible(): "host" | "service-namespace" {
    return this.#d.op.namespace === null ? "host" : "service-namespace";
  }

  get #j(): CheckpointJournal {
    return this.#d.journal.checkpoints;
  }

  /** Answers one session request on `conn` (the first frame of the connection). */
  async serve(conn: Conn, frame: SessionClientFrame): Promise<void> {
    if (conn.authority.kind !== "host") {
      throw new RequestError(
        2,
        "checkpoint sessions are the host's: run marsh session, op, log, rollback and fork " +
          "outside splits and Kit jobs",
      );
    }
    switch (frame.t) {
      case "session.start":
        await conn.send(await this.start(frame));
        return;
      case "sessions.list":
        await conn.send(await this.list(frame.cwd));
        return;
      case "session.rm":
        await conn.send(await this.remove(frame.cwd, frame.name));
        return;
      case "session.log":
        await conn.send(await this.log(frame.cwd, frame.session, frame.all));
        return;
      case "session.rollback":
        await conn.send(await this.rollback(frame));
        return;
      case "session.fork":
        await conn.send(await this.fork(frame));
        return;
      case "op.run": {
        const at = await this.locate(frame.cwd);
        const s = chooseSession(this.#j, at.root, frame.session ?? at.view);
        await runOperation(conn, frame, { at, session: s }, {
          ...this.#d.op,
          journal: this.#d.journal,
          store: this.#d.store,
          views: (sess, layers) => this.remount(sess, layers),
          timed: (op, timing) => {
            this.#timings.set(op, timing);
            const oldest = this.#timings.keys().next().value;
            if (this.#timings.size > TIMINGS_KEPT && oldest !== undefined) {
              this.#timings.delete(oldest);
            }
          },
          now: this.#d.now,
          log: this.#d.log,
          compact: (where, layers) => this.#d.compactor?.afterBind(where, layers),
        });
        return;
      }
      case "op.cancel":
        throw new RequestError(2, "op.cancel comes during marsh op, not as a request");
    }
  }

  /** The project of `cwd`, and the session view it is in, if any. */
  async locate(cwd: string): Promise<Located> {
    const parts = cwd.split("/");
    const at = parts.indexOf(MARSH_DIR);
    const from = at > 1 ? parts.slice(0, at).join("/") : cwd;
    let located: { root: string; cwd: string };
    try {
      located = await this.#d.locate(from);
    } catch (error) {
      if (error instanceof SplitfsError) throw new RequestError(2, error.message);
      throw error;
    }
    if (at <= 1) return { root: located.root, rel: located.cwd || ".", view: null };
    // `<root>/.marsh/session/<name>/view/<rel>`: the op runs at <rel>, in that session.
    const rest = parts.slice(at + 1);
    if (rest[0] === SESSION_DIR && rest.length >= 3 && rest[2] === VIEW_DIR) {
      const rel = rest.slice(3).filter((p) => p !== "").join("/");
      return { root: located.root, rel: rel || ".", view: rest[1]! };
    }
    return { root: located.root, rel: ".", view: null };
  }

  /** `marsh session start`: a snapshot, or a checkpoint (`--from`). */
  async start(req: SessionStartRequest): Promise<SessionStartedReply> {
    const { root } = await this.locate(req.cwd);
    const name = newSessionName(this.#j, root, req.name ?? defaultSessionName(this.#j, root));
    if (req.from !== null) {
      const from = resolveCheckpoint(projectCheckpoints(this.#j, root), req.from, root);
      return await this.#forkAt(root, name, from);
    }
    const at = { root, name };
    let snap;
    try {
      snap = await this.#d.store.open(at, req.withIgnored);
    } catch (error) {
      throw serviceFailure(`cannot take the snapshot of ${root}`, error);
    }
    let s: SessionRecord;
    try {
      s = this.#j.createSession({
        id: newRecordId("s"),
        project: root,
        name,
        withIgnored: req.withIgnored,
        start: { root: snap.rootId, layers: snap.layers },
        createdMs: this.#d.now(),
      });
    } catch (error) {
      // Nothing names the snapshot: its view goes, its layers wait for marsh gc.
      await this.#d.store.close(at).catch((e) => this.#d.log.info(`session close: ${e}`));
      if (error instanceof Deno.errors.AlreadyExists) throw new RequestError(1, error.message);
      throw error;
    }
    const t0 = performance.now();
    const view = await this.remount(s, snap.layers);
    const viewMs = view === null ? null : performance.now() - t0;
    const ignored = req.withIgnored ? " (ignored files included)" : "";
    return {
      v: 1,
      t: "session.started",
      session: sessionInfo(s, this.#head(s), view, this.#visible),
      from: "snapshot",
      files: snap.files,
      bytes: snap.bytes,
      fork_ms: null,
      view_ms: viewMs,
      message: `session ${name} started at checkpoint ${s.head.slice(0, 12)}: ${snap.files} ` +
        `file${snap.files === 1 ? "" : "s"}${ignored}; its view is ${s.view}`,
    };
  }

  async #forkAt(root: string, name: string, from: string): Promise<SessionStartedReply> {
    let s: SessionRecord;
    const t0 = performance.now();
    try {
      s = this.#j.forkSession({ id: newRecordId("s"), name, from, createdMs: this.#d.now() });
    } catch (error) {
      if (error instanceof Deno.errors.AlreadyExists) throw new RequestError(1, error.message);
      if (error instanceof Deno.errors.NotFound) throw new RequestError(2, error.message);
      throw error;
    }
    const forkMs = performance.now() - t0;
    const head = this.#head(s);
    let view: ViewState | null;
    const t1 = performance.now();
    try {
      view = await this.remount(s, head.layers, { create: true, strict: true });
    } catch (error) {
      // A session without its directory could never show anything: it is not kept.
      this.#j.removeSession(s.id, this.#d.now());
      throw serviceFailure(`session ${name} could not be made (nothing was kept)`, error);
    }
    return {
      v: 1,
      t: "session.started",
      session: sessionInfo(s, head, view, this.#visible),
      from: "checkpoint",
      files: null,
      bytes: null,
      fork_ms: forkMs,
      view_ms: performance.now() - t1,
      message: `session ${name} started at checkpoint ${from.slice(0, 12)} of ${root}; ` +
        `its view is ${s.view}`,
    };
  }

  /** `marsh fork [--from CHECKPOINT] NEW`: a new session at an existing checkpoint. */
  async fork(req: SessionForkRequest): Promise<SessionStartedReply> {
    const at = await this.locate(req.cwd);
    const name = newSessionName(this.#j, at.root, req.name);
    const from = req.from === null
      ? chooseSession(this.#j, at.root, req.session ?? at.view).head
      : resolveCheckpoint(projectCheckpoints(this.#j, at.root), req.from, at.root);
    return await this.#forkAt(at.root, name, from);
  }

  /**
   * What `marsh gc` of the project at `cwd` must keep besides what its
   * directories pin: every layer of the stack of every checkpoint an open
   * session can still reach (its line and its abandoned futures: `marsh
   * rollback`'s targets), each alone (the collector's `keepExact`: a
   * compacted stack does not keep the layers it replaced). A removed session's checkpoints that no open one reaches are
   * collected (docs/checkpoints.md "Rollback, fork, log").
   */
  async gcKeep(cwd: string): Promise<string[]> {
    let root: string;
    try {
      root = (await this.locate(cwd)).root;
    } catch (error) {
      // The collector refuses such a cwd with its own message.
      if (error instanceof RequestError) return [];
      throw error;
    }
    const keep = new Set<string>();
    for (const s of this.#j.listSessions({ project: root })) {
      for (const e of this.#j.sessionLog(s.id, { all: true })) {
        // Every layer, each kept alone: a stack may stand on a compacted bottom.
        for (const id of e.checkpoint.layers) keep.add(id);
      }
    }
    return [...keep];
  }

  /** `marsh sessions`. */
  async list(cwd: string): Promise<SessionsReply> {
    const { root } = await this.locate(cwd);
    const sessions = this.#j.listSessions({ project: root }).map((s) =>
      sessionInfo(s, this.#head(s), this.#views.shown(s.id), this.#visible)
    );
    return { v: 1, t: "sessions", root, sessions };
  }

  /** `marsh session rm NAME`: closed in the journal, its view and directory removed. */
  async remove(cwd: string, name: string): Promise<SessionRemovedReply> {
    const { root } = await this.locate(cwd);
    const s = chooseSession(this.#j, root, name);
    try {
      this.#j.removeSession(s.id, this.#d.now());
    } catch (error) {
      if (error instanceof Deno.errors.Busy) {
        throw new RequestError(
          1,
          `session ${name} is running an operation: wait for it to end, then try again; ` +
            `nothing was removed`,
        );
      }
      throw error;
    }
    await this.#views.idle(s.id);
    this.#views.forget(s.id);
    try {
      await this.#d.store.close({ root, name });
    } catch (error) {
      throw new RequestError(
        125,
        `session ${name} is removed, but its directory ${root}/${MARSH_DIR}/${SESSION_DIR}/${name} ` +
          `could not be: ${
            error instanceof Error ? error.message : error
          } (unmount and remove it ` +
          `by hand)`,
      );
    }
    return {
      v: 1,
      t: "session.removed",
      name,
      id: s.id,
      message: `session ${name} removed; its checkpoints stay until marsh gc`,
    };
  }

  /** `marsh log`. */
  async log(cwd: string, name: string | null, all: boolean): Promise<SessionLogReply> {
    const at = await this.locate(cwd);
    const s = chooseSession(this.#j, at.root, name ?? at.view);
    const names = new Map<string, string>();
    const nameOf = (id: string) => {
      let n = names.get(id);
      if (n === undefined) {
        const r = this.#j.getSession(id);
        n = r === null ? id : r.state === "open" ? r.name : `${r.name} (removed)`;
        names.set(id, n);
      }
      return n;
    };
    const entries: LogEntryInfo[] = this.#j.sessionLog(s.id, { all }).map((e) => ({
      ...logEntryInfo(e, {
        head: s.head,
        session: nameOf(e.checkpoint.session),
        changes: e.operation === null ? null : this.#j.changesOf(e.operation.id),
        view: e.operation === null ? null : this.#j.viewOf(e.operation.id),
      }),
      timing_ms: e.operation === null ? null : this.#timings.get(e.operation.id) ?? null,
    }));
    return { v: 1, t: "checkpoints", session: s.name, head: s.head, entries };
  }

  /** `marsh rollback CHECKPOINT`: a head compare-and-swap, then the view's remount. */
  async rollback(req: SessionRollbackRequest): Promise<RolledBackReply> {
    const at = await this.locate(req.cwd);
    const s = chooseSession(this.#j, at.root, req.session ?? at.view);
    const history = this.#j.sessionLog(s.id, { all: true }).map((e) => e.checkpoint.id);
    const target = resolveCheckpoint(history, req.checkpoint, `session ${s.name}`);
    const t0 = performance.now();
    const r = this.#j.rollback(s.id, target, s.head);
    const headMs = performance.now() - t0;
    if (r.kind === "stale") {
      throw new RequestError(
        1,
        `session "${s.name}" moved meanwhile (its head is ${r.current}, not ${r.expected}); ` +
          `nothing was rolled back: run marsh log and try again`,
      );
    }
    const head = this.#head(r.session);
    const t1 = performance.now();
    let viewMs: number | null = null, viewError: string | null = null;
    try {
      await this.remount(r.session, head.layers, { strict: true });
      viewMs = performance.now() - t1;
    } catch (error) {
      viewError = error instanceof Error ? error.message : String(error);
    }
    const same = target === s.head ? " (it was the head already)" : "";
    return {
      v: 1,
      t: "session.rolledback",
      session: s.name,
      from: s.head,
      to: target,
      root: head.root,
      head_ms: headMs,
      view_ms: viewMs,
      view_error: viewError,
      message: `session ${s.name}: head ${s.head.slice(0, 12)} -> ${target.slice(0, 12)}${same}` +
        (viewError === null
          ? `; the view shows root ${head.root.slice(0, 12)}`
          : `; the view could not be remounted: ${viewError}`),
    };
  }

  #head(s: SessionRecord) {
    const c = this.#j.getCheckpoint(s.head);
    if (c === null) throw new Error(`session ${s.name}'s head ${s.head} is not in the journal`);
    return c;
  }

  /**
   * Remounts a session's view on `layers`. One remount runs at a time per
   * session, in order. Returns the view's state, or null when it failed
   * (logged; `strict` throws instead).
   */
  async remount(
    s: SessionRecord,
    layers: readonly string[],
    opts: { readonly strict?: boolean; readonly create?: boolean } = {},
  ): Promise<ViewState | null> {
    try {
      const at: SessionAt = { root: s.project, name: s.name };
      return await this.#views.remount(s.id, at, layers, opts.create === true);
    } catch (error) {
      const why = error instanceof Error ? error.message : String(error);
      this.#d.log.info(`session ${s.name}: view remount failed: ${why}`);
      if (opts.strict === true) throw error;
      return null;
    }
  }

  /**
   * At start, before any request: settles the operations a stopped daemon
   * left live (`session_recovery.ts`), then remounts every open session's
   * view on its head (the last daemon's may show an older one, or none).
   */
  async recover(): Promise<void> {
    const d = this.#d;
    const done = await recoverOperations({
      journal: d.journal,
      store: d.store,
      now: d.now,
      log: d.log,
      pause: d.op.pause,
    });
    for (const r of done) {
      d.log.info(`restart: operation ${r.operation} ${r.from} -> ${r.to} (${r.action})`);
    }
    for (const s of this.#j.listSessions()) await this.remount(s, this.#head(s).layers);
  }
}
