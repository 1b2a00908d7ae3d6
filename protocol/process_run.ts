/**
 * The `process.run` frames of the daemon protocol (part of
 * `protocol/daemon.ts`; docs/rules.md "Running a registered command as a
 * job"): `marsh run NAME ARGS...` and a job's link in its child case. One
 * request per connection, accepted on the host socket, on a shell branch's
 * socket and on a job's `cap.sock`; the socket decides the new job's
 * parent, never a frame.
 *
 * The caller sends `process.run`, then its stdin as `process.stdin` frames
 * and `process.stdin.end` (at once when it has none), and may send
 * `process.signal` (Ctrl-C) at any time. The daemon answers
 * `process.started` once the job is admitted and its record written, then
 * `process.out` frames as the command writes, then one `process.exit`
 * after the container's deletion was verified. A refusal is an `error`
 * frame (exit 125; 126 for a link refused by its job's spawn set; 2 for
 * usage). A connection that drops before `process.exit` cancels the job
 * and its subtree.
 *
 * @module
 */

import { fieldReaders, isObject } from "./frame_fields.ts";
import { parseFanoutBranch } from "../model/fanout.ts";
import { splitIdProblem } from "../model/layout.ts";

/** Most arguments after the name, and their bytes (as `execve` counts them). */
export const MAX_RUN_ARGS = 65_536;
export const MAX_RUN_ARGV_BYTES = 1024 * 1024;
/** Bytes of stdin or output per frame before base64 (it grows by a third). */
export const RUN_CHUNK = 128 * 1024;

/** How the launch was asked for: `run` (`marsh run`) or `link` (a job's link, child case). */
export type RunVia = "run" | "link";

/** The spawn narrowing the caller gave: `MARSH_SPAWN`, `--spawn`, `--no-spawn`. */
export interface RunSpawn {
  /** `MARSH_SPAWN`'s value where the caller ran; absent when unset. */
  readonly env?: string;
  /** `--spawn`'s value; absent when not given. */
  readonly flag?: string;
  /** `--no-spawn`. */
  readonly none?: boolean;
}

/** `marsh run [--spawn a,b | --no-spawn] NAME ARGS...`, or a link's child case. */
export interface ProcessRunRequest {
  readonly v: 1;
  readonly t: "process.run";
  /** The registered name. */
  readonly name: string;
  /** The arguments after the name. */
  readonly args: readonly string[];
  /** The caller's working directory (absolute): the child's, which must lie in its view. */
  readonly cwd: string;
  /** The caller's exported environment, offered (the daemon filters it). */
  readonly env: Readonly<Record<string, string>>;
  /**
   * From a job: the starting digest of each offered name the job did not
   * receive (docs/rules.md, "Environment forwarding"); ignored from any
   * other caller.
   */
  readonly envDigests?: Readonly<Record<string, string>>;
  readonly spawn: RunSpawn;
  /** The caller's stdin or stdout is a terminal. */
  readonly tty: boolean;
  readonly via: RunVia;
  /**
   * The caller's `FANOUT_BRANCH` (`<fanout id>/<label>`), when it has a
   * well-formed one: a job with no parent job records it as
   * `lineage.fanout` (docs/rules.md "Lineage"; display only).
   */
  readonly fanout?: string;
  /**
   * The caller's `SPLIT_ID` (it runs as a stage after `marsh join`), when
   * it is a split id: a root job records it as `lineage.consumes` if the
   * daemon finds the split joined by this caller (display only).
   */
  readonly consumes?: string;
}

/** A piece of the caller's stdin (base64). */
export interface ProcessStdinFrame {
  readonly v: 1;
  readonly t: "process.stdin";
  readonly data: string;
}

/** The caller's stdin ended. */
export interface ProcessStdinEndFrame {
  readonly v: 1;
  readonly t: "process.stdin.end";
}

/** The signals a caller forwards: each cancels the job's whole subtree. */
export type RunSignal = "INT" | "TERM" | "HUP";

/** Ctrl-C (or TERM, HUP) at the caller. */
export interface ProcessSignalFrame {
  readonly v: 1;
  readonly t: "process.signal";
  readonly signal: RunSignal;
}

/** Every `process.*` frame a caller sends. */
export type ProcessClientFrame =
  | ProcessRunRequest
  | ProcessStdinFrame
  | ProcessStdinEndFrame
  | ProcessSignalFrame;

/** The `t` of every {@linkcode ProcessClientFrame}. */
export const PROCESS_CLIENT_FRAMES: ReadonlySet<string> = new Set([
  "process.run",
  "process.stdin",
  "process.stdin.end",
  "process.signal",
]);

/** The job is admitted and recorded; the caller prints `warnings` on its stderr. */
export interface ProcessStartedReply {
  readonly v: 1;
  readonly t: "process.started";
  readonly job: string;
  /** `--spawn`/`MARSH_SPAWN` names left out (a spawn set only narrows). */
  readonly warnings: readonly string[];
}

/** A piece of the command's stdout or stderr (base64). */
export interface ProcessOutReply {
  readonly v: 1;
  readonly t: "process.out";
  readonly stream: "stdout" | "stderr";
  readonly data: string;
}

/** The job's end, after its container's deletion was verified (or found uncertain). */
export interface ProcessExitReply {
  readonly v: 1;
  readonly t: "process.exit";
  readonly job: string;
  /** The command's exit code, or null when it did not exit by itself. */
  readonly code: number | null;
  /** The signal that ended it (`INT`, `KILL`, ...), or null. */
  readonly signal: string | null;
  /** The exit status the caller ends with (docs/messages.md). */
  readonly status: number;
  /** Why it ended other than by exiting (`cancelled`, `limit:wall`, `failed: …`); null for an exit. */
  readonly cause: string | null;
}

/** Every `process.*` frame the daemon sends. */
export type ProcessDaemonFrame = ProcessStartedReply | ProcessOutReply | ProcessExitReply;

/** The `t` of every {@linkcode ProcessDaemonFrame}. */
export const PROCESS_DAEMON_FRAMES: ReadonlySet<string> = new Set([
  "process.started",
  "process.out",
  "process.exit",
]);

/** A malformed `process.*` frame. */
export class ProcessFrameError extends Error {
  override name = "ProcessFrameError";
}

function fail(t: unknown, what: string): never {
  throw new ProcessFrameError(`malformed ${String(t)} frame: ${what}`);
}

const enc = new TextEncoder();

function text(x: Record<string, unknown>, key: string, max: number, empty = false): string {
  const v = x[key];
  if (typeof v !== "string" || (!empty && v === "") || v.length > max || v.includes("\0")) {
    fail(x.t, key);
  }
  return v;
}

function spawnOf(x: Record<string, unknown>): RunSpawn {
  const s = x.spawn;
  if (!isObject(s)) fail(x.t, "spawn");
  const out: { env?: string; flag?: string; none?: boolean } = {};
  if (s.env !== undefined) out.env = text(s, "env", 64 * 1024, true);
  if (s.flag !== undefined) out.flag = text(s, "flag", 64 * 1024, true);
  if (s.none !== undefined) {
    if (typeof s.none !== "boolean") fail(x.t, "spawn.none");
    out.none = s.none;
  }
  return out;
}

function envOf(x: Record<string, unknown>): Record<string, string> {
  const e = x.env;
  if (!isObject(e)) fail(x.t, "env");
  const out: Record<string, string> = {};
  let bytes = 0;
  for (const [k, v] of Object.entries(e)) {
    if (
      typeof v !== "string" || k === "" || k.includes("=") || k.includes("\0") || v.includes("\0")
    ) {
      fail(x.t, "env");
    }
    bytes += enc.encode(k).length + enc.encode(v).length + 2;
    if (bytes > 1024 * 1024) fail(x.t, "env is larger than 1 MiB");
    out[k] = v;
  }
  return out;
}

/** The display marks a caller offers: each optional, each well-formed when given. */
function marksOf(x: Record<string, unknown>): { fanout?: string; consumes?: string } {
  const out: { fanout?: string; consumes?: string } = {};
  if (x.fanout !== undefined) {
    if (typeof x.fanout !== "string" || parseFanoutBranch(x.fanout) === null) fail(x.t, "fanout");
    out.fanout = x.fanout;
  }
  if (x.consumes !== undefined) {
    if (typeof x.consumes !== "string" || splitIdProblem(x.consumes) !== null) {
      fail(x.t, "consumes");
    }
    out.consumes = x.consumes;
  }
  return out;
}

/** `envDigests`: an offer's starting digests, by the rule every frame family shares. */
function envDigestsOf(x: Record<string, unknown>): Record<string, string> {
  return fieldReaders(ProcessFrameError).envDigests(
    x.envDigests,
    `${String(x.t)} frame: envDigests`,
  );
}

function argsOf(x: Record<string, unknown>): string[] {
  const a = x.args;
  if (!Array.isArray(a) || a.length > MAX_RUN_ARGS) fail(x.t, "args");
  let bytes = 0;
  for (const s of a) {
    if (typeof s !== "string" || s.includes("\0")) fail(x.t, "args");
    bytes += enc.encode(s).length + 1;
  }
  if (bytes > MAX_RUN_ARGV_BYTES) fail(x.t, `args are larger than ${MAX_RUN_ARGV_BYTES} bytes`);
  return a as string[];
}

/**
 * Validates a `process.*` frame from a caller.
 *
 * @throws {ProcessFrameError} naming the field that is wrong
 */
export function parseProcessClientFrame(x: Record<string, unknown>): ProcessClientFrame {
  switch (x.t) {
    case "process.run": {
      if (typeof x.tty !== "boolean") fail(x.t, "tty");
      if (x.via !== "run" && x.via !== "link") fail(x.t, "via");
      const cwd = text(x, "cwd", 4096);
      if (!cwd.startsWith("/")) fail(x.t, "cwd is not absolute");
      return {
        v: 1,
        t: "process.run",
        name: text(x, "name", 256),
        args: argsOf(x),
        cwd,
        env: envOf(x),
        ...(x.envDigests === undefined ? {} : { envDigests: envDigestsOf(x) }),
        spawn: spawnOf(x),
        tty: x.tty,
        via: x.via,
        ...marksOf(x),
      };
    }
    case "process.stdin":
      return { v: 1, t: "process.stdin", data: text(x, "data", 1024 * 1024, true) };
    case "process.stdin.end":
      return { v: 1, t: "process.stdin.end" };
    case "process.signal":
      if (x.signal !== "INT" && x.signal !== "TERM" && x.signal !== "HUP") fail(x.t, "signal");
      return { v: 1, t: "process.signal", signal: x.signal };
  }
  return fail(x.t, "unknown type");
}

/** Whether `x` is a well-formed `process.*` frame from the daemon. */
export function processReplyOk(x: Record<string, unknown>): boolean {
  const strs = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === "string");
  const intOrNull = (v: unknown) => v === null || (typeof v === "number" && Number.isInteger(v));
  switch (x.t) {
    case "process.started":
      return typeof x.job === "string" && strs(x.warnings);
    case "process.out":
      return (x.stream === "stdout" || x.stream === "stderr") && typeof x.data === "string";
    case "process.exit":
      return typeof x.job === "string" && intOrNull(x.code) &&
        (x.signal === null || typeof x.signal === "string") &&
        typeof x.status === "number" && Number.isInteger(x.status) &&
        (x.cause === null || typeof x.cause === "string");
  }
  return false;
}
