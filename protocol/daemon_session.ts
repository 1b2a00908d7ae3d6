/**
 * The checkpoint session frames of the daemon protocol (part of
 * `protocol/daemon.ts`; docs/guide.md "Checkpoint sessions",
 * docs/checkpoints.md): `marsh session start`, `sessions`, `session rm`,
 * `log`, `rollback`, `fork` and `op`. Each request is answered by one reply
 * frame, or an `error` frame (its `code` is the exit status,
 * docs/messages.md). `op.run` is answered by `op.launched`, then any number
 * of `op.lingering`, then `op.done`;
 * the caller may send `op.cancel` between them, and closing the connection
 * cancels too.
 *
 * @module
 */

import type { CompletenessReceipt } from "../model/op_receipt.ts";

/** Which session a request means: by name, or null for the project's one open session. */
type SessionChoice = string | null;

/** `marsh session start [NAME] [--from CHECKPOINT] [--with-ignored]`. */
export interface SessionStartRequest {
  readonly v: 1;
  readonly t: "session.start";
  /** The caller's working directory, absolute: its project is the session's. */
  readonly cwd: string;
  /** Null: the daemon picks `s1`, `s2`, ... (the first not open in the project). */
  readonly name: string | null;
  /** A checkpoint id or a unique prefix of at least 8 hex digits; null: a snapshot. */
  readonly from: string | null;
  readonly withIgnored: boolean;
}

/** `marsh sessions`: the project's open sessions. */
export interface SessionsListRequest {
  readonly v: 1;
  readonly t: "sessions.list";
  readonly cwd: string;
}

/** `marsh session rm NAME`. */
export interface SessionRmRequest {
  readonly v: 1;
  readonly t: "session.rm";
  readonly cwd: string;
  readonly name: string;
}

/** `marsh log [--session NAME] [--all]`. */
export interface SessionLogRequest {
  readonly v: 1;
  readonly t: "session.log";
  readonly cwd: string;
  readonly session: SessionChoice;
  readonly all: boolean;
}

/** `marsh rollback [--session NAME] CHECKPOINT`. */
export interface SessionRollbackRequest {
  readonly v: 1;
  readonly t: "session.rollback";
  readonly cwd: string;
  readonly session: SessionChoice;
  readonly checkpoint: string;
}

/** `marsh fork [--session NAME] [--from CHECKPOINT] NEW`. */
export interface SessionForkRequest {
  readonly v: 1;
  readonly t: "session.fork";
  readonly cwd: string;
  /** Without `from`: this session's head (null: the one open session). */
  readonly session: SessionChoice;
  readonly from: string | null;
  readonly name: string;
}

/** What to do with a cancelled operation's changes (`--on-cancel`). */
export type OnCancel = "seal" | "discard";

/** `marsh op [--session NAME] [--on-cancel seal|discard] -- CMD ARGS...`. */
export interface OpRunRequest {
  readonly v: 1;
  readonly t: "op.run";
  readonly cwd: string;
  readonly session: SessionChoice;
  readonly argv: readonly string[];
  /**
   * `<control dir>/io/<random>`, made by the caller, holding the FIFOs `in`,
   * `out` and `err` (mode 0600) the command's stdin, stdout and stderr go
   * through; the caller opens all three as soon as it has sent this frame.
   */
  readonly io: string;
  readonly onCancel: OnCancel;
  /** The caller's exported environment (the worker filters it as for a shell branch). */
  readonly env: Readonly<Record<string, string>>;
}

/** Sent during an `op.run`: cancel the command (drain, then seal or discard as asked). */
export interface OpCancelFrame {
  readonly v: 1;
  readonly t: "op.cancel";
}

/** Every session frame a caller sends. */
export type SessionClientFrame =
  | SessionStartRequest
  | SessionsListRequest
  | SessionRmRequest
  | SessionLogRequest
  | SessionRollbackRequest
  | SessionForkRequest
  | OpRunRequest
  | OpCancelFrame;

/** The `t` of every {@linkcode SessionClientFrame}. */
export const SESSION_CLIENT_FRAMES: ReadonlySet<string> = new Set([
  "session.start",
  "sessions.list",
  "session.rm",
  "session.log",
  "session.rollback",
  "session.fork",
  "op.run",
  "op.cancel",
]);

/** One session as `marsh sessions --json` prints it. */
export interface SessionInfo {
  readonly name: string;
  readonly id: string;
  /** The head checkpoint. */
  readonly head: string;
  /** The head's root id (the Git tree id of what it binds). */
  readonly root: string;
  /** The checkpoint the session started from, and its root. */
  readonly base: string;
  readonly base_root: string;
  /** The view's path. */
  readonly view: string;
  /** The root the view is mounted on now (null: not mounted); it follows the head. */
  readonly view_root: string | null;
  /** `virtual` (a read-only overlay) or `copy_fallback`; null when not mounted. */
  readonly view_class: string | null;
  /**
   * Where the view's mount can be seen: `host` (a root daemon's), or
   * `service-namespace` (an unprivileged daemon's: only inside the
   * split-filesystem service's namespace, where `marsh op` runs; the host's
   * directory is empty).
   */
  readonly view_visible: "host" | "service-namespace";
  readonly with_ignored: boolean;
  readonly created_unix_ms: number;
  /** The journal is a local file its owner may replace: no rollback protection (DG-R07). */
  readonly rollback_protection: "unavailable";
}

/** `session.start`'s and `session.fork`'s reply. */
export interface SessionStartedReply {
  readonly v: 1;
  readonly t: "session.started";
  readonly session: SessionInfo;
  /** How it started: a snapshot of the project, or an existing checkpoint. */
  readonly from: "snapshot" | "checkpoint";
  /** For a snapshot: what it holds. */
  readonly files: number | null;
  readonly bytes: number | null;
  /** For a checkpoint: the journal's fork (one transaction), in ms; null for a snapshot. */
  readonly fork_ms: number | null;
  /** The view's first mount, after it, in ms. */
  readonly view_ms: number | null;
  readonly message: string;
}

/** `sessions.list`'s reply. */
export interface SessionsReply {
  readonly v: 1;
  readonly t: "sessions";
  /** The project root. */
  readonly root: string;
  readonly sessions: readonly SessionInfo[];
}

/** `session.rm`'s reply. */
export interface SessionRemovedReply {
  readonly v: 1;
  readonly t: "session.removed";
  readonly name: string;
  readonly id: string;
  readonly message: string;
}

/** One changed path of a checkpoint. */
export interface LogPath {
  readonly path: string;
  readonly change: string;
}

/** The operation of a checkpoint, as the log shows it. */
export interface LogOperation {
  readonly id: string;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly state: string;
  /** `exited`, `signaled`, `timed-out`, `cancelled`, `failed-to-start` (or null). */
  readonly execution: string | null;
  /** The exit code for `exited`, else null. */
  readonly exit: number | null;
  /** The signal for `signaled`, else null. */
  readonly signal: string | null;
  /** `sealed`, `no-change`, `discarded` (or null). */
  readonly disposition: string | null;
  readonly reason: string | null;
  /**
   * `project` (it saw its overlay at the project's path) or `relative` (its
   * cwd only: a write by absolute path may have left the session); null when
   * it never got that far.
   */
  readonly view: string | null;
  readonly view_reason: string | null;
  /**
   * Its completeness receipt (docs/checkpoints.md "An operation", step 3):
   * complete only when its process tree was seen gone and its overlay was
   * the only writable view; null when it ran without a kept view.
   */
  readonly receipt: CompletenessReceipt | null;
}

/** One line of `marsh log --json`. */
export interface LogEntryInfo {
  readonly checkpoint: string;
  /** `start` (a session's snapshot) or `operation`. */
  readonly kind: string;
  readonly parent: string | null;
  readonly root: string;
  /** The session that made it (its name, or its id once removed). */
  readonly session: string;
  /** False: an abandoned future (only with `--all`). */
  readonly on_head: boolean;
  /** Whether it is the session's head. */
  readonly head: boolean;
  readonly created_unix_ms: number;
  readonly operation: LogOperation | null;
  /** How many paths it changed (0 for no change; null for a `start`). */
  readonly changed: number | null;
  /** The first {@linkcode MAX_LOG_PATHS} of them. */
  readonly paths: readonly LogPath[];
  readonly truncated: boolean;
  /** As `op.done`'s `timing_ms`, for an operation this daemon ran (else null). */
  readonly timing_ms?: Readonly<Record<string, number>> | null;
}

/** At most this many changed paths a log entry lists. */
export const MAX_LOG_PATHS = 1000;

/** `session.log`'s reply. */
export interface SessionLogReply {
  readonly v: 1;
  readonly t: "checkpoints";
  readonly session: string;
  readonly head: string;
  readonly entries: readonly LogEntryInfo[];
}

/** `session.rollback`'s reply: the head's move and the view's remount, timed apart. */
export interface RolledBackReply {
  readonly v: 1;
  readonly t: "session.rolledback";
  readonly session: string;
  readonly from: string;
  readonly to: string;
  readonly root: string;
  /** The head's compare-and-swap (one journal transaction). */
  readonly head_ms: number;
  /** The view's remount, after it; null when it failed (`view_error`). */
  readonly view_ms: number | null;
  readonly view_error: string | null;
  readonly message: string;
}

/** `op.run`'s first reply: the operation is journaled and launched. */
export interface OpLaunchedReply {
  readonly v: 1;
  readonly t: "op.launched";
  readonly operation: string;
  readonly session: string;
  readonly head: string;
}

/**
 * Between `op.launched` and `op.done`, each time it changes after the command
 * exited: the processes it left running, which keep the operation open
 * (docs/checkpoints.md "An operation", step 3).
 */
export interface OpLingeringReply {
  readonly v: 1;
  readonly t: "op.lingering";
  readonly operation: string;
  readonly session: string;
  /** The first of them, by pid, each with its command line (cut). */
  readonly processes: readonly { readonly pid: number; readonly command: string }[];
  /** How many more there are. */
  readonly more: number;
  /** A line for stderr. */
  readonly message: string;
}

/** `op.run`'s last reply. */
export interface OpDoneReply {
  readonly v: 1;
  readonly t: "op.done";
  readonly operation: string;
  readonly session: string;
  /** The checkpoint bound, or null (discarded, stale, failed). */
  readonly checkpoint: string | null;
  readonly root: string | null;
  /** `exited`, `signaled`, `timed-out`, `cancelled`, `failed-to-start`. */
  readonly execution: string;
  readonly exit: number | null;
  readonly signal: string | null;
  /** `sealed`, `no-change`, `discarded`, or null (nothing published). */
  readonly disposition: string | null;
  /** The operation's final state (`bound`, `discarded`, `stale`, `failed`, ...). */
  readonly state: string;
  readonly changed: number;
  /** The exit status `marsh op` ends with (docs/messages.md). */
  readonly status: number;
  /** From the command's end to the head's move (durable), and the view's remount (visible). */
  readonly bind_ms: number | null;
  readonly view_ms: number | null;
  /**
   * Each step's time in ms: `prepare` (the op's overlay, before the launch), then from the
   * drain on `drain`, `capture`, `intent`, `seal`, `bind`, `drop`, `view`.
   */
  readonly timing_ms?: Readonly<Record<string, number>>;
  /** Lines for stderr (the checkpoint line, or why nothing was published). */
  readonly message: string;
}

/** Every session frame the daemon sends. */
export type SessionDaemonFrame =
  | SessionStartedReply
  | SessionsReply
  | SessionRemovedReply
  | SessionLogReply
  | RolledBackReply
  | OpLaunchedReply
  | OpLingeringReply
  | OpDoneReply;

/** The `t` of every {@linkcode SessionDaemonFrame}. */
export const SESSION_DAEMON_FRAMES: ReadonlySet<string> = new Set([
  "session.started",
  "sessions",
  "session.removed",
  "checkpoints",
  "session.rolledback",
  "op.launched",
  "op.lingering",
  "op.done",
]);

/** A session frame that is malformed. */
export class SessionFrameError extends Error {
  override name = "SessionFrameError";
}

const MAX_STRING = 4096;

function bad(x: Record<string, unknown>, what: string): SessionFrameError {
  return new SessionFrameError(`malformed ${String(x.t)} frame: ${what}`);
}

function str(x: Record<string, unknown>, key: string, max = MAX_STRING): string {
  const v = x[key];
  if (typeof v !== "string" || v.length === 0 || v.length > max) throw bad(x, key);
  return v;
}

function optStr(x: Record<string, unknown>, key: string): string | null {
  return x[key] === null ? null : str(x, key);
}

function bool(x: Record<string, unknown>, key: string): boolean {
  if (typeof x[key] !== "boolean") throw bad(x, key);
  return x[key] as boolean;
}

function absolute(x: Record<string, unknown>, key: string): string {
  const p = str(x, key);
  if (!p.startsWith("/") || p.includes("\0")) throw bad(x, key);
  return p;
}

/** Most argv words (the byte bound is the model's `argvProblem`, checked by the daemon). */
const MAX_ARGV_WORDS = 65_536;
const MAX_ENV = 4096;

function argv(x: Record<string, unknown>): string[] {
  const v = x.argv;
  if (
    !Array.isArray(v) || v.length === 0 || v.length > MAX_ARGV_WORDS ||
    !v.every((a) => typeof a === "string")
  ) throw bad(x, "argv");
  return v as string[];
}

function env(x: Record<string, unknown>): Record<string, string> {
  const e = x.env;
  if (typeof e !== "object" || e === null || Array.isArray(e)) throw bad(x, "env");
  const entries = Object.entries(e);
  if (entries.length > MAX_ENV) throw bad(x, "env");
  const out: Record<string, string> = {};
  for (const [k, v] of entries) {
    if (typeof v !== "string" || k.length > 1024 || v.length > 256 * 1024) throw bad(x, "env");
    out[k] = v;
  }
  return out;
}

/** Validates a session frame (`v` is checked by the caller; `t` is one of {@linkcode SESSION_CLIENT_FRAMES}). */
export function parseSessionClientFrame(x: Record<string, unknown>): SessionClientFrame {
  switch (x.t) {
    case "session.start":
      return {
        v: 1,
        t: "session.start",
        cwd: absolute(x, "cwd"),
        name: optStr(x, "name"),
        from: optStr(x, "from"),
        withIgnored: bool(x, "withIgnored"),
      };
    case "sessions.list":
      return { v: 1, t: "sessions.list", cwd: absolute(x, "cwd") };
    case "session.rm":
      return { v: 1, t: "session.rm", cwd: absolute(x, "cwd"), name: str(x, "name") };
    case "session.log":
      return {
        v: 1,
        t: "session.log",
        cwd: absolute(x, "cwd"),
        session: optStr(x, "session"),
        all: bool(x, "all"),
      };
    case "session.rollback":
      return {
        v: 1,
        t: "session.rollback",
        cwd: absolute(x, "cwd"),
        session: optStr(x, "session"),
        checkpoint: str(x, "checkpoint"),
      };
    case "session.fork":
      return {
        v: 1,
        t: "session.fork",
        cwd: absolute(x, "cwd"),
        session: optStr(x, "session"),
        from: optStr(x, "from"),
        name: str(x, "name"),
      };
    case "op.run": {
      const onCancel = x.onCancel;
      if (onCancel !== "seal" && onCancel !== "discard") throw bad(x, "onCancel");
      return {
        v: 1,
        t: "op.run",
        cwd: absolute(x, "cwd"),
        session: optStr(x, "session"),
        argv: argv(x),
        io: absolute(x, "io"),
        onCancel,
        env: env(x),
      };
    }
    case "op.cancel":
      return { v: 1, t: "op.cancel" };
  }
  throw bad(x, "t");
}

/** Whether a session reply has its shape (its `t` is one of {@linkcode SESSION_DAEMON_FRAMES}). */
export function sessionReplyOk(x: Record<string, unknown>): boolean {
  const s = (k: string) => typeof x[k] === "string";
  switch (x.t) {
    case "session.started":
      return typeof x.session === "object" && x.session !== null && s("message");
    case "sessions":
      return s("root") && Array.isArray(x.sessions);
    case "session.removed":
      return s("name") && s("message");
    case "checkpoints":
      return s("session") && s("head") && Array.isArray(x.entries);
    case "session.rolledback":
      return s("session") && s("to") && s("message");
    case "op.launched":
      return s("operation") && s("session");
    case "op.lingering":
      return s("operation") && Array.isArray(x.processes) && s("message");
    case "op.done":
      return s("operation") && typeof x.status === "number" && s("message") && s("state");
  }
  return false;
}
