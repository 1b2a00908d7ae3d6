/**
 * The frames between the daemon and the branch runner (`worker/main.ts`)
 * over the worker's stdin (requests) and stdout (events), each one a
 * length-prefixed JSON frame (`protocol/frame.ts`).
 *
 * Life of an attempt, as the daemon sees it:
 *
 * - `launch` → `launched` → zero or one `output-limit` → `exited` →
 *   zero or more `lingering` → `settled`. `exited` is the branch's status
 *   (`bash` itself ended); `lingering` names the processes still running
 *   after it (each time that set changes); `settled` says every process of
 *   the attempt is gone and the output files are closed, so capture may
 *   start.
 * - An `error` that names an attempt ends that attempt: no other event for
 *   it follows. It comes instead of `launched` when the launch was refused
 *   or set-up failed, and instead of `settled` when the worker lost track of
 *   the attempt's processes (its end is then unconfirmed).
 * - An `error` without an attempt is about a frame (malformed, an unknown
 *   attempt, a duplicate id) or a note that changes no attempt's state.
 *
 * A checkpoint operation's attempt (a `launch` with `argv` and `stdio`,
 * docs/checkpoints.md "An operation") has the same events; `exited` is the
 * status of `argv[0]`'s process, and there is never an `output-limit`.
 *
 * An argv branch's attempt (`kit-launch`, one Kit container) has the same
 * events with these differences:
 *
 * - `launched` carries the container's id (`container`) instead of pids, and
 *   comes once the container exists (before it starts);
 * - `exited` may say `wall: true` (the Kit's wall clock stopped it), and is
 *   absent when the container never started (cancelled first);
 * - `settled` comes only after the container's removal was verified;
 * - an `error` naming the attempt means no container of it exists any more
 *   (none was made, or it was removed, verified): the attempt failed;
 * - `unreaped` ends the attempt instead when a container of it may still
 *   exist (its removal failed or could not be verified): the branch is
 *   uncertain and its slot stays held until `marsh workers reset KIT`.
 *
 * `kit-reset` (for `marsh workers reset KIT`) is answered by one
 * `kit-reset-done` with the same `id`.
 *
 * @module
 */

import { isCleanAbsolute, isWithin, type KitLaunch, parseKitLaunch } from "./kit_launch.ts";
import { ATTEMPT_ID, MAX_OUTPUT_LIMIT, MAX_PATH_BYTES } from "./launch_fields.ts";
import { KIT_NAME_RULE } from "../model/kit_name.ts";
import { isEnvEntryName } from "../model/env_name.ts";
import { argvProblem, MAX_ARGV_BYTES } from "../model/checkpoint.ts";
import {
  type ArgvProgram,
  FIFO_OPEN_MS,
  type FifoStdio,
  type FileStdio,
  isOpFork,
  type LaunchProgram,
  type LaunchStdio,
  opForkPath,
  type ScriptProgram,
  type StdioFifos,
} from "./worker_op.ts";

// Part of the worker's frame contract: its importers need not know the leaf.
export { ATTEMPT_ID, FIFO_OPEN_MS, MAX_ARGV_BYTES, MAX_OUTPUT_LIMIT, MAX_PATH_BYTES, opForkPath };
export type {
  ArgvProgram,
  FifoStdio,
  FileStdio,
  LaunchProgram,
  LaunchStdio,
  ScriptProgram,
  StdioFifos,
};

/** Bumped when a frame's shape changes incompatibly. */
export const WORKER_PROTOCOL = 1;

/**
 * Default for {@linkcode CancelRequest.graceMs}: SIGINT, 10 s, SIGKILL (docs/rules.md "Cancel").
 */
export const DEFAULT_GRACE_MS = 10_000;
/** The longest grace a cancel may ask for: the 1 h split deadline. */
export const MAX_GRACE_MS = 3_600_000;
/** A script travels as one argument of `bash -c`; the kernel caps one argument at 128 KiB. */
export const MAX_SCRIPT_BYTES = 131_071;
/** Most environment entries a launch may carry. */
export const MAX_ENV_ENTRIES = 4096;
/** Most bytes of `NAME=VALUE` entries a launch may carry; `execve` takes 2 MiB with argv. */
export const MAX_ENV_BYTES = 1024 * 1024;
/** Longest error message; longer ones are cut when sent. */
export const MAX_MESSAGE = 4096;
/** Linux's largest pid (`pid_max` at most 2^22). */
const MAX_PID = 2 ** 22;

/**
 * Run one shell branch (`bash -c script`, output to files) or one
 * checkpoint operation (`argv` exec'd as it is, stdio on FIFOs): the
 * fields every launch has, then what it runs ({@linkcode LaunchProgram}),
 * then where its stdio goes ({@linkcode LaunchStdio}). Each pair is
 * exactly one of its two shapes; a shell branch's frame is unchanged.
 */
export type LaunchRequest = LaunchBase & LaunchProgram & LaunchStdio;

/** The fields of every {@linkcode LaunchRequest}. */
export interface LaunchBase {
  readonly v: 1;
  readonly t: "launch";
  readonly attempt: string;
  /**
   * Absolute; the fork's subdirectory matching the caller's cwd, as the
   * branch sees it: with {@linkcode view}, `<root>/<the caller's relative
   * cwd>` (the fork is mounted at the root); without, inside the fork.
   */
  readonly cwd: string;
  /** The caller's exported environment, already filtered; the worker filters it again. */
  readonly env: Readonly<Record<string, string>>;
  /**
   * Absolute path of the branch's own daemon socket, handed to the branch as
   * `MARSH_SOCK` after the filter (which drops every `MARSH_*` the caller sent).
   */
  readonly socket?: string;
  /**
   * Run the branch inside the user and mount namespace of this process (the
   * split-filesystem service of an unprivileged daemon, whose fork mounts
   * exist only there): the supervisor's child enters both (`setns`), keeping
   * its credentials, then builds the {@linkcode view} there. Inside, the
   * branch is uid 0, mapped to the daemon's own uid outside, with the
   * capabilities of that namespace (but `CAP_SYS_ADMIN` with a view) and none
   * outside it. Absent: the host namespaces.
   */
  readonly namespace?: { readonly pid: number };
  /**
   * The branch sees its fork at the project's own path, in a private mount
   * namespace (made inside {@linkcode namespace} when that is given); absent:
   * it runs where its fork is (docs/engine.md, "Containment").
   */
  readonly view?: ShellView;
}

/**
 * What a branch's project view is built from (`worker/shell_view.ts`). Every
 * path is absolute and clean; the admin dir and every object dir but the
 * user's `<root>/.git/objects` lie in `<root>/.marsh/split/`; the fork is a
 * split's (`<root>/.marsh/split/<id>/<label>`) or an operation's
 * ({@linkcode opForkPath}).
 */
export interface ShellView {
  /** The project root (canonical): the fork is mounted over it. */
  readonly root: string;
  /**
   * The fork as mounted where the branch starts: a split's
   * `<root>/.marsh/split/<id>/<label>`, or an operation's
   * `<root>/.marsh/session/<name>/op/<op>/merged`.
   */
  readonly fork: string;
  /**
   * `<root>/.marsh/split/<id>/.admin/<label>` for a split of a Git project,
   * else `null`; with `null` and an operation's fork, the user's own
   * `<root>/.git`, when there is one, is bound read-only at its place.
   */
  readonly admin: string | null;
  /** The object dirs the admin dir's alternates name, as real paths. */
  readonly objectDirs: readonly string[];
  /** The daemon's control dir (journal, sockets, attempt files), canonical: bound read-only. */
  readonly control: string;
}

/** Most object dirs a view binds (as a Kit launch). */
export const MAX_VIEW_OBJECT_DIRS = 16;

/** SIGINT to every process of the attempt, then SIGKILL to whatever is left after the grace. */
export interface CancelRequest {
  readonly v: 1;
  readonly t: "cancel";
  readonly attempt: string;
  /** Default {@linkcode DEFAULT_GRACE_MS}. */
  readonly graceMs?: number;
}

/** Cancel every attempt (with this grace) and exit once all have ended. */
export interface ShutdownRequest {
  readonly v: 1;
  readonly t: "shutdown";
  /** Default {@linkcode DEFAULT_GRACE_MS}. */
  readonly graceMs?: number;
}

/**
 * Run one argv branch attempt as a Kit container (`worker/kit_container.ts`):
 * the envelope around a {@linkcode KitLaunch}, which `parseKitLaunch`
 * validates. A `cancel` of its attempt aborts it (SIGINT, then SIGKILL after
 * this launch's `graceMs`, not the cancel's).
 */
export type KitLaunchRequest = KitLaunch & {
  readonly v: 1;
  readonly t: "kit-launch";
  /** SIGINT to SIGKILL when the attempt is cancelled; default {@linkcode DEFAULT_GRACE_MS}. */
  readonly graceMs?: number;
};

/**
 * `marsh workers reset KIT`: remove (verified) every container of Kit `kit`
 * that no live attempt of this worker runs.
 */
export interface KitResetRequest {
  readonly v: 1;
  readonly t: "kit-reset";
  /** Echoed in the answer. */
  readonly id: string;
  readonly kit: string;
}

/** Every request the worker accepts. */
export type WorkerRequest =
  | LaunchRequest
  | KitLaunchRequest
  | CancelRequest
  | ShutdownRequest
  | KitResetRequest;

/** How the worker knows when every process of an attempt is gone. */
export type Mechanism = "cgroup" | "subreaper";

/** The branch is running. */
export interface LaunchedEvent {
  readonly v: 1;
  readonly t: "launched";
  readonly attempt: string;
  /** The branch's `bash`. */
  readonly pid: number;
  /** The attempt's supervisor process, the parent of `bash`. */
  readonly supervisor: number;
  readonly mechanism: Mechanism;
  /** The attempt's cgroup directory when `mechanism` is `"cgroup"`. */
  readonly cgroup?: string;
}

/** An argv branch's container exists (it starts next): its id. */
export interface KitLaunchedEvent {
  readonly v: 1;
  readonly t: "launched";
  readonly attempt: string;
  /** The engine's container id (64 hex). */
  readonly container: string;
}

/** The branch's `bash` ended: `exited N` (`code`), or killed by `signal` (e.g. `"SIGINT"`). */
export interface ExitedEvent {
  readonly v: 1;
  readonly t: "exited";
  readonly attempt: string;
  readonly code: number | null;
  readonly signal: string | null;
  /** A Kit container stopped because the Kit's wall clock ran out. */
  readonly wall?: true;
}

/**
 * A Kit attempt's last event when a container of it may still exist: its
 * removal failed or could not be verified.
 */
export interface UnreapedEvent {
  readonly v: 1;
  readonly t: "unreaped";
  readonly attempt: string;
  /** The container's id, or null when a create's outcome is unknown. */
  readonly container: string | null;
  readonly message: string;
}

/** One container `kit-reset` found. */
export interface ResetContainer {
  readonly container: string;
  /** Its labels (`marsh.attempt`, `marsh.job`, `marsh.split`, `marsh.label`), when it has them. */
  readonly attempt: string | null;
  readonly job: string | null;
  readonly split: string | null;
  readonly label: string | null;
}

/** The answer to a `kit-reset`. */
export interface KitResetDoneEvent {
  readonly v: 1;
  readonly t: "kit-reset-done";
  readonly id: string;
  /** Removed, and verified gone. */
  readonly removed: readonly ResetContainer[];
  /** Left alone: a live attempt of this worker runs them. */
  readonly live: readonly ResetContainer[];
  /** Not shown gone; `message` says why. */
  readonly failed: readonly (ResetContainer & { readonly message: string })[];
  /** Set when the engine could not even be asked; nothing was removed then. */
  readonly error?: string;
}

/** Most processes one {@linkcode LingeringEvent} names; `more` counts the rest. */
export const MAX_LINGERING = 16;
/** Longest command line a {@linkcode LingeringEvent} carries for one process, in characters. */
export const MAX_COMMAND = 256;

/** One process of an attempt, as `/proc` showed it. */
export interface ProcessInfo {
  readonly pid: number;
  /** Its command line, arguments joined by spaces (cut), or `[comm]` when it has none. */
  readonly command: string;
}

/**
 * A shell branch's `bash` exited, but processes it started (a `setsid`
 * daemon, a background job) still run, so the attempt cannot settle: which
 * ones. Sent about a second after `exited`, then whenever the set changes.
 */
export interface LingeringEvent {
  readonly v: 1;
  readonly t: "lingering";
  readonly attempt: string;
  /** When `bash` exited (Unix ms): since then only these processes keep the attempt alive. */
  readonly since: number;
  /** At most {@linkcode MAX_LINGERING}, by pid. */
  readonly processes: readonly ProcessInfo[];
  /** How many more there are. */
  readonly more: number;
}

/** Every process of the attempt is gone and its output files (or FIFOs) are closed. */
export interface SettledEvent {
  readonly v: 1;
  readonly t: "settled";
  readonly attempt: string;
  /**
   * Bytes kept in the stdout and stderr files; with {@linkcode FifoStdio},
   * bytes delivered to each FIFO's reader (what came after it went away is
   * not counted).
   */
  readonly stdoutBytes: number;
  readonly stderrBytes: number;
}

/** Stdout and stderr together went past the limit; nothing more is written. Sent once. */
export interface OutputLimitEvent {
  readonly v: 1;
  readonly t: "output-limit";
  readonly attempt: string;
  /** Bytes seen when the limit was crossed (more than the limit; the limit is kept). */
  readonly bytes: number;
}

/** See the module documentation for when an error ends an attempt. */
export interface ErrorEvent {
  readonly v: 1;
  readonly t: "error";
  readonly attempt?: string;
  readonly message: string;
}

/** The events of shell branch attempts (`launch`). */
export type ShellWorkerEvent =
  | LaunchedEvent
  | ExitedEvent
  | LingeringEvent
  | SettledEvent
  | OutputLimitEvent
  | ErrorEvent;

/** Every event the worker sends. */
export type WorkerEvent =
  | ShellWorkerEvent
  | KitLaunchedEvent
  | UnreapedEvent
  | KitResetDoneEvent;

/** A value that is not a valid frame of this protocol. */
export class WorkerProtocolError extends Error {
  override name = "WorkerProtocolError";
}

const enc = new TextEncoder();

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function fail(x: Record<string, unknown>, what: string): never {
  throw new WorkerProtocolError(`malformed ${JSON.stringify(String(x.t))} frame: ${what}`);
}

/** A string of at most `max` UTF-8 bytes without NUL (it will reach `execve`). */
function text(x: Record<string, unknown>, key: string, max: number): string {
  const v = x[key];
  if (typeof v !== "string") fail(x, `${key} must be a string`);
  if (v.length > max || enc.encode(v).length > max) fail(x, `${key} is longer than ${max} bytes`);
  if (v.includes("\0")) fail(x, `${key} contains a NUL byte`);
  return v;
}

function absolute(x: Record<string, unknown>, key: string): string {
  const v = text(x, key, MAX_PATH_BYTES);
  if (!v.startsWith("/")) fail(x, `${key} must be an absolute path`);
  return v;
}

function attempt(x: Record<string, unknown>): string {
  const v = x.attempt;
  if (typeof v !== "string" || !ATTEMPT_ID.test(v)) {
    fail(x, `attempt must match ${ATTEMPT_ID.source}`);
  }
  return v;
}

function int(x: Record<string, unknown>, key: string, min: number, max: number): number {
  const v = x[key];
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < min || v > max) {
    fail(x, `${key} must be an integer from ${min} to ${max}`);
  }
  return v;
}

function optInt(
  x: Record<string, unknown>,
  key: string,
  min: number,
  max: number,
): number | undefined {
  return x[key] === undefined ? undefined : int(x, key, min, max);
}

function env(x: Record<string, unknown>): Record<string, string> {
  const v = x.env;
  if (!isObject(v)) fail(x, "env must be an object");
  const out: Record<string, string> = {};
  let entries = 0, bytes = 0;
  for (const [name, value] of Object.entries(v)) {
    if (++entries > MAX_ENV_ENTRIES) fail(x, `env has more than ${MAX_ENV_ENTRIES} entries`);
    if (!isEnvEntryName(name)) {
      fail(x, `env name ${JSON.stringify(name)} is not a variable name`);
    }
    if (typeof value !== "string" || value.includes("\0")) {
      fail(x, `env value of ${name} must be a string without NUL`);
    }
    bytes += enc.encode(name).length + enc.encode(value).length + 2;
    if (bytes > MAX_ENV_BYTES) fail(x, `env is larger than ${MAX_ENV_BYTES} bytes`);
    out[name] = value;
  }
  return out;
}

function cleanPath(x: Record<string, unknown>, v: unknown, key: string): string {
  if (typeof v !== "string" || !isCleanAbsolute(v) || v === "/") {
    fail(x, `${key} must be an absolute path without ".", ".." or empty components`);
  }
  return v;
}

function view(x: Record<string, unknown>, cwd: string): ShellView {
  const v = x.view;
  if (!isObject(v)) fail(x, "view must be an object");
  const root = cleanPath(x, v.root, "view.root");
  const marsh = `${root}/.marsh`;
  const splits = `${marsh}/split`;
  const inSplits = (p: string, key: string) => {
    if (!isWithin(p, splits) || p === splits) {
      fail(
        x,
        key === "view.fork"
          ? `view.fork must lie in ${splits} or be ${root}/.marsh/session/<name>/op/<op>/merged`
          : `${key} must lie in ${splits}`,
      );
    }
    return p;
  };
  const forkPath = cleanPath(x, v.fork, "view.fork");
  if (!isOpFork(root, forkPath)) inSplits(forkPath, "view.fork");
  const fork = forkPath;
  const admin = v.admin === null
    ? null
    : inSplits(cleanPath(x, v.admin, "view.admin"), "view.admin");
  if (!Array.isArray(v.objectDirs) || v.objectDirs.length > MAX_VIEW_OBJECT_DIRS) {
    fail(x, `view.objectDirs must be a list of at most ${MAX_VIEW_OBJECT_DIRS} paths`);
  }
  const objectDirs = v.objectDirs.map((d: unknown) => {
    const p = cleanPath(x, d, "view.objectDirs");
    return p === `${root}/.git/objects` ? p : inSplits(p, "view.objectDirs");
  });
  const control = cleanPath(x, v.control, "view.control");
  // Under the root the control dir would be hidden by the fork; under it, the fork would be bound read-only.
  if (isWithin(control, root) || isWithin(root, control)) {
    fail(x, "view.control must lie outside view.root");
  }
  cleanPath(x, cwd, "cwd");
  if (!isWithin(cwd, root) || isWithin(cwd, marsh)) {
    fail(x, "cwd must lie in view.root and outside its .marsh");
  }
  return { root, fork, admin, objectDirs, control };
}

function program(x: Record<string, unknown>): LaunchProgram {
  if ((x.script === undefined) === (x.argv === undefined)) {
    fail(x, "exactly one of script and argv");
  }
  if (x.script !== undefined) return { script: text(x, "script", MAX_SCRIPT_BYTES) };
  const argv = x.argv;
  if (!Array.isArray(argv) || argv.some((a) => typeof a !== "string")) {
    fail(x, "argv must be a list of strings");
  }
  const problem = argvProblem(argv);
  if (problem !== null) fail(x, `argv: ${problem}`);
  return { argv: [...argv] };
}

function stdio(x: Record<string, unknown>, view: ShellView | undefined): LaunchStdio {
  if (x.stdio === undefined) {
    const limit = optInt(x, "outputLimit", 0, MAX_OUTPUT_LIMIT);
    return {
      stdin: x.stdin === null ? null : absolute(x, "stdin"),
      stdout: absolute(x, "stdout"),
      stderr: absolute(x, "stderr"),
      ...(limit === undefined ? {} : { outputLimit: limit }),
    };
  }
  for (const key of ["stdin", "stdout", "stderr", "outputLimit"]) {
    if (x[key] !== undefined) fail(x, `${key} is not used with stdio`);
  }
  const v = x.stdio;
  if (!isObject(v)) fail(x, "stdio must be an object");
  const paths = (["stdin", "stdout", "stderr"] as const).map((k) =>
    cleanPath(x, v[k], `stdio.${k}`)
  );
  const [stdin, stdout, stderr] = paths as [string, string, string];
  const dir = stdin.slice(0, stdin.lastIndexOf("/"));
  const io = dir.slice(0, dir.lastIndexOf("/"));
  if (paths.some((p) => p.slice(0, p.lastIndexOf("/")) !== dir) || !io.endsWith("/io")) {
    fail(x, "stdio's FIFOs must lie in one directory <control dir>/io/<id>/");
  }
  if (new Set(paths).size !== 3) fail(x, "stdio's FIFOs must be three distinct paths");
  if (view !== undefined && io !== `${view.control}/io`) {
    fail(x, `stdio's FIFOs must lie in ${view.control}/io/`);
  }
  return { stdio: { stdin, stdout, stderr } };
}

function namespace(x: Record<string, unknown>): { pid: number } {
  const v = x.namespace;
  if (!isObject(v)) fail(x, "namespace must be an object");
  const pid = v.pid;
  // pid 1 is init's namespace: the host's, never one marsh made.
  if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid < 2 || pid > MAX_PID) {
    fail(x, `namespace.pid must be an integer from 2 to ${MAX_PID}`);
  }
  return { pid };
}

/**
 * Validates a request frame from the daemon.
 *
 * @throws {WorkerProtocolError} when `x` is not a request of this protocol
 */
export function parseWorkerRequest(x: unknown): WorkerRequest {
  if (!isObject(x) || x.v !== WORKER_PROTOCOL) {
    throw new WorkerProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "launch": {
      const base: LaunchBase = {
        v: 1,
        t: "launch",
        attempt: attempt(x),
        cwd: absolute(x, "cwd"),
        env: env(x),
        ...(x.socket === undefined ? {} : { socket: absolute(x, "socket") }),
        ...(x.namespace === undefined ? {} : { namespace: namespace(x) }),
        ...(x.view === undefined ? {} : { view: view(x, absolute(x, "cwd")) }),
      };
      return { ...base, ...program(x), ...stdio(x, base.view) };
    }
    case "kit-launch": {
      let launch: KitLaunch;
      try {
        launch = parseKitLaunch(x);
      } catch (error) {
        fail(x, (error as Error).message);
      }
      const grace = optInt(x, "graceMs", 0, MAX_GRACE_MS);
      return {
        v: 1,
        t: "kit-launch",
        ...launch,
        ...(grace === undefined ? {} : { graceMs: grace }),
      };
    }
    case "kit-reset": {
      const id = text(x, "id", 128);
      const kit = x.kit;
      if (typeof kit !== "string" || !KIT_NAME_RULE.test(kit)) {
        fail(x, `kit must match ${KIT_NAME_RULE.source}`);
      }
      return { v: 1, t: "kit-reset", id, kit };
    }
    case "cancel": {
      const grace = optInt(x, "graceMs", 0, MAX_GRACE_MS);
      const req: CancelRequest = { v: 1, t: "cancel", attempt: attempt(x) };
      return grace === undefined ? req : { ...req, graceMs: grace };
    }
    case "shutdown": {
      const grace = optInt(x, "graceMs", 0, MAX_GRACE_MS);
      return grace === undefined
        ? { v: 1, t: "shutdown" }
        : { v: 1, t: "shutdown", graceMs: grace };
    }
  }
  throw new WorkerProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

const SIGNAL_NAME = /^SIG[A-Z0-9+-]{1,16}$/;
/** A container id as the engine gives it. */
const CONTAINER_ID = /^[0-9a-f]{12,64}$/;
/** Most containers one `kit-reset-done` lists. */
export const MAX_RESET_CONTAINERS = 4096;

function containerId(x: Record<string, unknown>, key: string): string {
  const v = x[key];
  if (typeof v !== "string" || !CONTAINER_ID.test(v)) fail(x, `${key} must be a container id`);
  return v;
}

/**
 * Validates an event frame from the worker.
 *
 * @throws {WorkerProtocolError} when `x` is not an event of this protocol
 */
export function parseWorkerEvent(x: unknown): WorkerEvent {
  if (!isObject(x) || x.v !== WORKER_PROTOCOL) {
    throw new WorkerProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "launched": {
      if (x.container !== undefined) {
        return { v: 1, t: "launched", attempt: attempt(x), container: containerId(x, "container") };
      }
      if (x.mechanism !== "cgroup" && x.mechanism !== "subreaper") fail(x, "mechanism");
      const ev: LaunchedEvent = {
        v: 1,
        t: "launched",
        attempt: attempt(x),
        pid: int(x, "pid", 1, MAX_PID),
        supervisor: int(x, "supervisor", 1, MAX_PID),
        mechanism: x.mechanism,
      };
      if (x.cgroup === undefined) {
        if (x.mechanism === "cgroup") fail(x, "a cgroup mechanism names its cgroup");
        return ev;
      }
      return { ...ev, cgroup: absolute(x, "cgroup") };
    }
    case "exited": {
      const code = x.code === null ? null : int(x, "code", 0, 255);
      let signal: string | null = null;
      if (x.signal !== null) {
        if (typeof x.signal !== "string" || !SIGNAL_NAME.test(x.signal)) fail(x, "signal");
        signal = x.signal;
      }
      if ((code === null) === (signal === null)) fail(x, "exactly one of code and signal");
      if (x.wall !== undefined && x.wall !== true) fail(x, "wall is true when present");
      return {
        v: 1,
        t: "exited",
        attempt: attempt(x),
        code,
        signal,
        ...(x.wall === true ? { wall: true as const } : {}),
      };
    }
    case "lingering": {
      const list = x.processes;
      if (!Array.isArray(list) || list.length > MAX_LINGERING) {
        fail(x, `processes must be a list of at most ${MAX_LINGERING}`);
      }
      return {
        v: 1,
        t: "lingering",
        attempt: attempt(x),
        since: int(x, "since", 0, Number.MAX_SAFE_INTEGER),
        processes: list.map((p: unknown) => {
          if (
            !isObject(p) || typeof p.pid !== "number" || !Number.isSafeInteger(p.pid) ||
            p.pid < 1 || p.pid > MAX_PID
          ) {
            fail(x, `processes must hold {pid, command} with a pid from 1 to ${MAX_PID}`);
          }
          const command = p.command;
          if (typeof command !== "string" || command.length > MAX_COMMAND) {
            fail(x, `a process's command must be a string of at most ${MAX_COMMAND} characters`);
          }
          return { pid: p.pid, command };
        }),
        more: int(x, "more", 0, MAX_PID),
      };
    }
    case "settled":
      return {
        v: 1,
        t: "settled",
        attempt: attempt(x),
        // An operation's FIFOs have no output limit.
        stdoutBytes: int(x, "stdoutBytes", 0, Number.MAX_SAFE_INTEGER),
        stderrBytes: int(x, "stderrBytes", 0, Number.MAX_SAFE_INTEGER),
      };
    case "output-limit":
      return {
        v: 1,
        t: "output-limit",
        attempt: attempt(x),
        bytes: int(x, "bytes", 1, Number.MAX_SAFE_INTEGER),
      };
    case "unreaped":
      return {
        v: 1,
        t: "unreaped",
        attempt: attempt(x),
        container: x.container === null ? null : containerId(x, "container"),
        message: text(x, "message", MAX_MESSAGE * 4),
      };
    case "kit-reset-done": {
      const list = (key: string, withMessage: boolean) => {
        const v = x[key];
        if (!Array.isArray(v) || v.length > MAX_RESET_CONTAINERS) fail(x, `${key} must be a list`);
        return v.map((c: unknown) => {
          if (!isObject(c)) fail(x, `${key} must hold objects`);
          const opt = (k: string) => c[k] === null ? null : text(c, k, MAX_PATH_BYTES);
          const r: ResetContainer = {
            container: containerId(c, "container"),
            attempt: opt("attempt"),
            job: opt("job"),
            split: opt("split"),
            label: opt("label"),
          };
          return withMessage ? { ...r, message: text(c, "message", MAX_MESSAGE * 4) } : r;
        });
      };
      const ev: KitResetDoneEvent = {
        v: 1,
        t: "kit-reset-done",
        id: text(x, "id", 128),
        removed: list("removed", false),
        live: list("live", false),
        failed: list("failed", true) as (ResetContainer & { message: string })[],
      };
      return x.error === undefined ? ev : { ...ev, error: text(x, "error", MAX_MESSAGE * 4) };
    }
    case "error": {
      const message = text(x, "message", MAX_MESSAGE * 4);
      return x.attempt === undefined
        ? { v: 1, t: "error", message }
        : { v: 1, t: "error", attempt: attempt(x), message };
    }
  }
  throw new WorkerProtocolError(`unknown event type: ${JSON.stringify(x.t)}`);
}

/** Cuts a message to {@linkcode MAX_MESSAGE} characters for an {@linkcode ErrorEvent}. */
export function boundMessage(message: string): string {
  return message.length <= MAX_MESSAGE ? message : `${message.slice(0, MAX_MESSAGE - 1)}…`;
}
