/**
 * The request protocol between callers (the CLI on the host socket, a shell
 * branch on its branch socket) and the daemon: length-prefixed frames
 * (protocol/frame.ts) carrying these typed envelopes. One request per
 * connection; the connection's life is the request's stream, so a dropped
 * connection is a dropped stream.
 *
 * Authority is never in a frame: it comes from the socket the daemon
 * accepted the connection on.
 *
 * @module
 */

import { fieldReaders, isObject, MAX_STRING } from "./frame_fields.ts";
import {
  type GcAllReply,
  type GcAllRequest,
  HousekeepingFrameError,
  housekeepingReplyOk,
  parseHousekeepingRequest,
  type PrunedReply,
  type SplitsPruneRequest,
} from "./housekeeping.ts";
import type { Manifest } from "./manifest.ts";
import {
  parseResolveClientFrame,
  RESOLVE_CLIENT_FRAMES,
  RESOLVE_DAEMON_FRAMES,
  type ResolveClientFrame,
  type ResolveDaemonFrame,
  ResolveFrameError,
  resolveReplyOk,
} from "./daemon_resolve.ts";
import {
  type DiscardedReply,
  discardedReplyOk,
  DiscardFrameError,
  type DiscardRequest,
  parseDiscardRequest,
} from "./daemon_discard.ts";
import {
  CHECKPOINT_CLIENT_FRAMES,
  CHECKPOINT_DAEMON_FRAMES,
  type CheckpointClientFrame,
  type CheckpointDaemonFrame,
  CheckpointFrameError,
  checkpointReplyOk,
  parseCheckpointClientFrame,
} from "./daemon_checkpoint.ts";
import {
  parseSessionClientFrame,
  SESSION_CLIENT_FRAMES,
  SESSION_DAEMON_FRAMES,
  type SessionClientFrame,
  type SessionDaemonFrame,
  SessionFrameError,
  sessionReplyOk,
} from "./daemon_session.ts";
import {
  CHECKOUT_CLIENT_FRAMES,
  CheckoutFrameError,
  type CheckoutRequest,
  parseCheckoutClientFrame,
} from "./daemon_checkout.ts";
import {
  parseProcessClientFrame,
  PROCESS_CLIENT_FRAMES,
  PROCESS_DAEMON_FRAMES,
  type ProcessClientFrame,
  type ProcessDaemonFrame,
  ProcessFrameError,
  processReplyOk,
} from "./process_run.ts";
import {
  type CompareCancelFrame,
  type CompareReply,
  compareReplyOk,
  type CompareRequest,
  compareTestProblem,
  type CompareTestRequest,
} from "./daemon_compare.ts";

import type {
  JobsListRequest,
  JobsReply,
  KitAddedReply,
  KitInfo,
  KitRemovedReply,
  KitsAddRequest,
  KitsListRequest,
  KitsReply,
  KitsRmRequest,
  WorkersResetReply,
  WorkersResetRequest,
} from "./daemon_kits.ts";

export type {
  JobsListRequest,
  JobsReply,
  KitAddedReply,
  KitInfo,
  KitRemovedReply,
  KitsAddRequest,
  KitsListRequest,
  KitsReply,
  KitsRmRequest,
  ResetContainerInfo,
  WorkersResetReply,
  WorkersResetRequest,
} from "./daemon_kits.ts";

/** Bumped when a frame's shape changes incompatibly. */
export const DAEMON_PROTOCOL = 1;

/** The largest frame on a daemon socket. */
export const MAX_DAEMON_FRAME = 1024 * 1024;

/** Spool bytes per `spool` frame (base64 grows it by a third). */
export const SPOOL_CHUNK = 256 * 1024;

/** A branch as the caller declared it. */
export type BranchSpec =
  | {
    readonly kind: "shell";
    readonly label: string;
    readonly script: string;
    /**
     * `-t LABEL=SECONDS`: the branch is stopped this long after it started
     * (1 to `SPLIT_DURATION_S` of `model/limits.ts`; the daemon checks the range).
     */
    readonly timeLimitS?: number;
  }
  | { readonly kind: "argv"; readonly label: string; readonly argv: readonly string[] };

/** `marsh split`: spool frames follow when `spool` is true, then `spool.end`. */
export interface SplitCreateRequest {
  readonly v: 1;
  readonly t: "split.create";
  readonly cwd: string;
  readonly branches: readonly BranchSpec[];
  readonly env: Readonly<Record<string, string>>;
  /**
   * From a job: the starting digest of each offered name the job did not
   * receive (`linkOffer` of `model/job_env.ts`); `env` is then its offer.
   * Ignored from any other caller (docs/rules.md, "Environment forwarding").
   */
  readonly envDigests?: Readonly<Record<string, string>>;
  readonly spool: boolean;
  /** Snapshot ignored files too (`--with-ignored`). */
  readonly withIgnored: boolean;
}

/** A piece of the spool (base64). */
export interface SpoolFrame {
  readonly v: 1;
  readonly t: "spool";
  readonly data: string;
}

/** The spool is complete. */
export interface SpoolEndFrame {
  readonly v: 1;
  readonly t: "spool.end";
}

/** Ctrl-C at the client: cancel the split this connection created. */
export interface CancelFrame {
  readonly v: 1;
  readonly t: "split.cancel";
}

/** `marsh join`. */
export interface JoinRequest {
  readonly v: 1;
  readonly t: "split.join";
  readonly id: string;
  readonly keep: boolean;
  /** A consumer command (`-- CMD`) will run and report its status. */
  readonly consumer: boolean;
  /** Escape control bytes in the rendering (the client's stdout is a terminal). */
  readonly terminal: boolean;
}

/** After the rendering: the consumer's status (null for a bare join). */
export interface ReleaseFrame {
  readonly v: 1;
  readonly t: "join.release";
  readonly consumerStatus: number | null;
}

/** `marsh splits [ID]`. */
export interface SplitsListRequest {
  readonly v: 1;
  readonly t: "splits.list";
  readonly id?: string;
  /** The caller's cwd: only that project's splits (absent: every project's, `--all`). */
  readonly cwd?: string;
}

/** `marsh splits cancel ID [LABEL]` / `marsh splits rm ID`. */
export interface SplitsActionRequest {
  readonly v: 1;
  readonly t: "splits.cancel" | "splits.rm";
  readonly id: string;
  /** `splits.cancel` only: cancel this one branch; its siblings go on. */
  readonly label?: string;
}

/** Which of a branch's streams `marsh logs` shows. */
export type LogStreams = "both" | "stdout" | "stderr";

/**
 * `marsh logs ID LABEL [-f]`: a branch's stdout and stderr so far, as
 * `logs.chunk` replies, then `logs.end`; with `follow`, new output as it
 * comes until the branch has ended.
 */
export interface LogsRequest {
  readonly v: 1;
  readonly t: "splits.logs";
  readonly id: string;
  readonly label: string;
  readonly follow: boolean;
  readonly streams: LogStreams;
}

/** `marsh status`, `marsh daemon status`, `marsh daemon stop`. */
export interface SimpleRequest {
  readonly v: 1;
  readonly t: "status" | "daemon.stop";
}

/** `marsh gc [--dry-run]`: collect the project's unreferenced snapshot layers. */
export interface GcRequest {
  readonly v: 1;
  readonly t: "gc";
  readonly cwd: string;
  readonly dryRun: boolean;
}

/** Every frame a caller sends. */
export type ClientFrame =
  | SplitCreateRequest
  | SpoolFrame
  | SpoolEndFrame
  | CancelFrame
  | JoinRequest
  | ReleaseFrame
  | SplitsListRequest
  | SplitsActionRequest
  | LogsRequest
  | SimpleRequest
  | GcRequest
  | GcAllRequest
  | SplitsPruneRequest
  | KitsAddRequest
  | KitsListRequest
  | KitsRmRequest
  | JobsListRequest
  | WorkersResetRequest
  | CompareRequest
  | ResolveClientFrame
  | DiscardRequest
  | CheckpointClientFrame
  | SessionClientFrame
  | CheckoutRequest
  | CompareCancelFrame
  | ProcessClientFrame;

/** The split was accepted and journaled; its id. */
export interface AcceptedReply {
  readonly v: 1;
  readonly t: "split.accepted";
  readonly id: string;
}

/** A line for the caller's stderr (progress, a branch's state). */
export interface NoticeReply {
  readonly v: 1;
  readonly t: "notice";
  readonly message: string;
  /** A progress line: shown only when the caller's stderr is a terminal. */
  readonly progress?: boolean;
}

/** Every branch is settled: the split's exit status and manifest. */
export interface SplitDoneReply {
  readonly v: 1;
  readonly t: "split.done";
  readonly id: string;
  readonly code: number;
  readonly message?: string;
  readonly manifest: Manifest;
}

/** The join is granted: what a consumer needs, then the rendering follows in chunks. */
export interface JoinReadyReply {
  readonly v: 1;
  readonly t: "join.ready";
  readonly manifest: Manifest;
  readonly env: Readonly<Record<string, string>>;
}

/** A piece of the rendering (base64). */
export interface ChunkReply {
  readonly v: 1;
  readonly t: "chunk";
  readonly data: string;
}

/** The rendering is complete; the daemon waits for `join.release`. */
export interface RenderedReply {
  readonly v: 1;
  readonly t: "join.rendered";
}

/** The split was released: removed, or kept with the reason and `marsh splits rm ID`. */
export interface ReleasedReply {
  readonly v: 1;
  readonly t: "join.released";
  readonly removed: boolean;
  /**
   * Why it was removed (`every branch exited 0`, `the consumer exited 0`) or
   * kept. Absent from a daemon older than the CLI, as is `manifest`.
   */
  readonly reason?: string;
  /** The split's manifest after the release (`state` `joined` or `kept`). */
  readonly manifest?: Manifest;
  /** For the caller's stderr: `split ID kept: REASON; remove it with: ...` when kept. */
  readonly message?: string;
}

/** `marsh splits`. */
export interface SplitsReply {
  readonly v: 1;
  readonly t: "splits";
  readonly splits: readonly Manifest[];
  /** The project listed, when the request named a cwd. */
  readonly root?: string;
  /** With `root`: how many splits the caller may see in other projects. */
  readonly elsewhere?: number;
}

/** Bytes a branch wrote to one of its streams (base64), in order per stream. */
export interface LogsChunkReply {
  readonly v: 1;
  readonly t: "logs.chunk";
  readonly stream: "stdout" | "stderr";
  readonly data: string;
}

/** The end of `marsh logs`: the branch's state then (and its status once it has one). */
export interface LogsEndReply {
  readonly v: 1;
  readonly t: "logs.end";
  readonly state: string;
  readonly status?: string;
}

/** `marsh status`. */
export interface StatusReply {
  readonly v: 1;
  readonly t: "status";
  readonly daemon: {
    readonly pid: number;
    readonly home: string;
    readonly started_unix_ms: number;
  };
  readonly splits: { readonly active: number; readonly awaiting: number; readonly kept: number };
  /** The fork strategy new splits will use, why, and the `MARSH_FORKS` policy. */
  readonly forks: { readonly strategy: string; readonly reason: string; readonly policy: string };
  /**
   * What shell branches see (docs/engine.md, "Containment"): `project`, their
   * fork at the project's path in a private mount namespace; `fork`, the
   * host's view from their fork's directory. `reason` says why.
   */
  readonly view: { readonly view: "project" | "fork"; readonly reason: string };
  /** The job tree's counts (docs/rules.md "Lineage"). */
  readonly processes: { readonly running: number; readonly refused: number; readonly held: number };
}

/** What `marsh gc` removed (or would, with `dry_run`). */
export interface GcReply {
  readonly v: 1;
  readonly t: "gc";
  readonly root: string;
  readonly dry_run: boolean;
  readonly removed: readonly string[];
  readonly bytes: number;
  readonly kept: number;
}

/** A request that finished with nothing more to say. */
export interface OkReply {
  readonly v: 1;
  readonly t: "ok";
  readonly message?: string;
}

/** The request failed: `code` is the exit status the CLI should use. */
export interface ErrorReply {
  readonly v: 1;
  readonly t: "error";
  readonly code: number;
  readonly message: string;
}

/** Every frame the daemon sends. */
export type DaemonFrame =
  | AcceptedReply
  | NoticeReply
  | SplitDoneReply
  | JoinReadyReply
  | ChunkReply
  | RenderedReply
  | ReleasedReply
  | SplitsReply
  | LogsChunkReply
  | LogsEndReply
  | StatusReply
  | GcReply
  | GcAllReply
  | PrunedReply
  | KitsReply
  | KitAddedReply
  | KitRemovedReply
  | JobsReply
  | WorkersResetReply
  | CompareReply
  | ResolveDaemonFrame
  | DiscardedReply
  | CheckpointDaemonFrame
  | SessionDaemonFrame
  | ProcessDaemonFrame
  | OkReply
  | ErrorReply;

/** A frame that is not valid for this protocol. */
export class DaemonProtocolError extends Error {
  override name = "DaemonProtocolError";
}

const { str, bool, strings, env, envDigests: envDigestsOf } = fieldReaders(DaemonProtocolError);

function branchSpec(x: unknown): BranchSpec {
  if (!isObject(x)) throw new DaemonProtocolError("malformed branch");
  // Any string: the daemon checks it with the one label rule (labelProblem
  // in model/layout.ts), whose message names what is wrong with it.
  const label = str(x, "label");
  if (x.kind === "shell") {
    const spec = { kind: "shell" as const, label, script: str(x, "script") };
    if (x.timeLimitS === undefined) return spec;
    // The range is the daemon's to check, with a message that names the branch.
    if (typeof x.timeLimitS !== "number" || !Number.isSafeInteger(x.timeLimitS)) {
      throw new DaemonProtocolError("malformed branch time limit");
    }
    return { ...spec, timeLimitS: x.timeLimitS };
  }
  if (x.kind === "argv" && Array.isArray(x.argv) && x.argv.length > 0 && x.argv.length <= 4096) {
    return {
      kind: "argv",
      label,
      argv: x.argv.map((a) => {
        if (typeof a !== "string" || a.length > MAX_STRING) {
          throw new DaemonProtocolError("malformed branch argv");
        }
        return a;
      }),
    };
  }
  throw new DaemonProtocolError("malformed branch");
}

function compareTest(x: Record<string, unknown>): CompareTestRequest {
  const t = x.test;
  if (!isObject(t)) throw new DaemonProtocolError("malformed resolve.compare frame: test");
  const problem = compareTestProblem(t.timeoutS);
  if (problem !== null) {
    throw new DaemonProtocolError(`malformed resolve.compare frame: test: ${problem}`);
  }
  const script = str(t, "script");
  if (script === "") throw new DaemonProtocolError("malformed resolve.compare frame: test.script");
  return { script, timeoutS: t.timeoutS as number, env: env(t.env) };
}

/**
 * An offer's starting digests (`envDigests`): per name, 64 lowercase hex
 * digits (an HMAC-SHA256, `protocol/job_env_digest.ts`).
 *
 * @throws {DaemonProtocolError} for anything else
 */
export function envDigests(x: unknown): Record<string, string> {
  return envDigestsOf(x);
}

function kitsAdd(x: Record<string, unknown>): KitsAddRequest {
  const wallS = x.wallS;
  if (typeof wallS !== "number" || !Number.isSafeInteger(wallS)) {
    throw new DaemonProtocolError("malformed kits.add frame: wallS");
  }
  return {
    v: 1,
    t: "kits.add",
    name: str(x, "name", 256),
    image: str(x, "image", 1024),
    imageId: str(x, "imageId", 128),
    entrypoint: x.entrypoint === null ? null : strings(x, "entrypoint", 256, 8192),
    network: str(x, "network", 256),
    env: strings(x, "env", 256, 256),
    wallS,
    home: x.home === null ? null : str(x, "home", 4096),
    replace: bool(x, "replace"),
  };
}

/**
 * The frame families that parse themselves in their own modules: the frame
 * types each takes, its parser, and the error its parser throws for a
 * malformed frame (answered as a protocol error).
 */
const CLIENT_FAMILIES: readonly {
  readonly frames: ReadonlySet<string>;
  readonly parse: (x: Record<string, unknown>) => ClientFrame;
  readonly error: new (...args: never[]) => Error;
}[] = [
  {
    frames: CHECKPOINT_CLIENT_FRAMES,
    parse: parseCheckpointClientFrame,
    error: CheckpointFrameError,
  },
  { frames: SESSION_CLIENT_FRAMES, parse: parseSessionClientFrame, error: SessionFrameError },
  { frames: CHECKOUT_CLIENT_FRAMES, parse: parseCheckoutClientFrame, error: CheckoutFrameError },
  { frames: RESOLVE_CLIENT_FRAMES, parse: parseResolveClientFrame, error: ResolveFrameError },
  { frames: PROCESS_CLIENT_FRAMES, parse: parseProcessClientFrame, error: ProcessFrameError },
];

/** Validates a frame from a caller. */
export function parseClientFrame(x: unknown): ClientFrame {
  if (!isObject(x) || x.v !== DAEMON_PROTOCOL) {
    throw new DaemonProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "split.create": {
      if (!Array.isArray(x.branches) || x.branches.length > 1024) {
        throw new DaemonProtocolError("malformed split.create frame: branches");
      }
      return {
        v: 1,
        t: "split.create",
        cwd: str(x, "cwd", 4096),
        branches: x.branches.map(branchSpec),
        env: env(x.env),
        ...(x.envDigests === undefined ? {} : { envDigests: envDigests(x.envDigests) }),
        spool: bool(x, "spool"),
        withIgnored: x.withIgnored === undefined ? false : bool(x, "withIgnored"),
      };
    }
    case "spool":
      return { v: 1, t: "spool", data: str(x, "data", MAX_DAEMON_FRAME) };
    case "spool.end":
    case "split.cancel":
      return { v: 1, t: x.t };
    case "split.join":
      return {
        v: 1,
        t: "split.join",
        id: str(x, "id", 128),
        keep: bool(x, "keep"),
        consumer: bool(x, "consumer"),
        terminal: bool(x, "terminal"),
      };
    case "join.release": {
      const s = x.consumerStatus;
      if (s !== null && (typeof s !== "number" || !Number.isInteger(s))) {
        throw new DaemonProtocolError("malformed join.release frame: consumerStatus");
      }
      return { v: 1, t: "join.release", consumerStatus: s };
    }
    case "splits.list":
      return {
        v: 1,
        t: "splits.list",
        ...(x.id === undefined ? {} : { id: str(x, "id", 128) }),
        ...(x.cwd === undefined ? {} : { cwd: str(x, "cwd", 4096) }),
      };
    case "splits.prune":
    case "gc.all":
      try {
        return parseHousekeepingRequest(x);
      } catch (error) {
        if (error instanceof HousekeepingFrameError) throw new DaemonProtocolError(error.message);
        throw error;
      }
    case "split.discard":
      try {
        return parseDiscardRequest(x);
      } catch (error) {
        if (error instanceof DiscardFrameError) throw new DaemonProtocolError(error.message);
        throw error;
      }
    case "splits.cancel":
      return x.label === undefined
        ? { v: 1, t: x.t, id: str(x, "id", 128) }
        : { v: 1, t: x.t, id: str(x, "id", 128), label: str(x, "label", 4096) };
    case "splits.rm":
      return { v: 1, t: x.t, id: str(x, "id", 128) };
    case "splits.logs": {
      const streams = x.streams;
      if (streams !== "both" && streams !== "stdout" && streams !== "stderr") {
        throw new DaemonProtocolError("malformed splits.logs frame: streams");
      }
      return {
        v: 1,
        t: "splits.logs",
        id: str(x, "id", 128),
        label: str(x, "label", 4096),
        follow: bool(x, "follow"),
        streams,
      };
    }
    case "status":
    case "daemon.stop":
      return { v: 1, t: x.t };
    case "gc":
      return { v: 1, t: "gc", cwd: str(x, "cwd", 4096), dryRun: bool(x, "dryRun") };
    case "kits.add":
      return kitsAdd(x);
    case "kits.list":
      return { v: 1, t: "kits.list" };
    case "kits.rm":
      return { v: 1, t: "kits.rm", name: str(x, "name", 256) };
    case "jobs.list": {
      if (x.view !== "list" && x.view !== "tree" && x.view !== "show") {
        throw new DaemonProtocolError("malformed jobs.list frame: view");
      }
      const job = x.view === "show" ? { job: str(x, "job", 256) } : {};
      return {
        v: 1,
        t: "jobs.list",
        view: x.view,
        all: bool(x, "all"),
        json: bool(x, "json"),
        ...job,
      };
    }
    case "workers.reset":
      return { v: 1, t: "workers.reset", kit: str(x, "kit", 256) };
    case "resolve.compare":
      return {
        v: 1,
        t: "resolve.compare",
        id: str(x, "id", 128),
        ...(x.test === undefined ? {} : { test: compareTest(x) }),
      };
    case "resolve.compare.cancel":
      return { v: 1, t: "resolve.compare.cancel" };
  }
  for (const family of CLIENT_FAMILIES) {
    if (typeof x.t !== "string" || !family.frames.has(x.t)) continue;
    try {
      return family.parse(x);
    } catch (error) {
      if (error instanceof family.error) throw new DaemonProtocolError(error.message);
      throw error;
    }
  }
  throw new DaemonProtocolError(`unknown frame type: ${JSON.stringify(x.t)}`);
}

/**
 * Validates a frame from the daemon. The manifest inside is trusted as the
 * daemon's own output (same build); its outer shape is checked.
 */
export function parseDaemonFrame(x: unknown): DaemonFrame {
  if (!isObject(x) || x.v !== DAEMON_PROTOCOL) {
    throw new DaemonProtocolError("unsupported frame version");
  }
  const known = [
    "split.accepted",
    "notice",
    "split.done",
    "join.ready",
    "chunk",
    "join.rendered",
    "join.released",
    "splits",
    "logs.chunk",
    "logs.end",
    "status",
    "gc",
    "gc.all",
    "splits.pruned",
    "kits",
    "kits.added",
    "kits.removed",
    "jobs",
    "workers.reset",
    "compare",
    "split.discarded",
    "ok",
    "error",
    ...RESOLVE_DAEMON_FRAMES,
    ...CHECKPOINT_DAEMON_FRAMES,
    ...SESSION_DAEMON_FRAMES,
    ...PROCESS_DAEMON_FRAMES,
  ];
  if (typeof x.t !== "string" || !known.includes(x.t)) {
    throw new DaemonProtocolError(`unknown frame type: ${JSON.stringify(x.t)}`);
  }
  if (x.t === "error" && (typeof x.code !== "number" || typeof x.message !== "string")) {
    throw new DaemonProtocolError("malformed error frame");
  }
  if ((x.t === "split.done" || x.t === "join.ready") && !isObject(x.manifest)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame: manifest`);
  }
  if (x.t === "chunk") str(x, "data", MAX_DAEMON_FRAME);
  if (
    x.t === "join.released" &&
    (typeof x.removed !== "boolean" || !(x.reason === undefined || typeof x.reason === "string") ||
      !(x.manifest === undefined || isObject(x.manifest)))
  ) throw new DaemonProtocolError("malformed join.released frame: removed, reason, manifest");
  if (x.t === "logs.chunk") {
    str(x, "data", MAX_DAEMON_FRAME);
    if (x.stream !== "stdout" && x.stream !== "stderr") {
      throw new DaemonProtocolError("malformed logs.chunk frame: stream");
    }
  }
  if (x.t === "logs.end") str(x, "state", 64);
  if (x.t === "kits" && (!Array.isArray(x.kits) || !x.kits.every(isKitInfo))) {
    throw new DaemonProtocolError("malformed kits frame: kits");
  }
  if ((x.t === "gc.all" || x.t === "splits.pruned") && !housekeepingReplyOk(x)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame`);
  }
  if (x.t === "split.discarded" && !discardedReplyOk(x)) {
    throw new DaemonProtocolError("malformed split.discarded frame");
  }
  if (
    x.t === "workers.reset" &&
    !(["removed", "live", "failed", "released"] as const).every((k) => Array.isArray(x[k]))
  ) {
    throw new DaemonProtocolError("malformed workers.reset frame");
  }
  if (x.t === "compare" && !compareReplyOk(x)) {
    throw new DaemonProtocolError("malformed compare frame");
  }
  if (CHECKPOINT_DAEMON_FRAMES.has(x.t) && !checkpointReplyOk(x)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame`);
  }
  if (PROCESS_DAEMON_FRAMES.has(x.t) && !processReplyOk(x)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame`);
  }
  if (SESSION_DAEMON_FRAMES.has(x.t) && !sessionReplyOk(x)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame`);
  }
  if (RESOLVE_DAEMON_FRAMES.has(x.t) && !resolveReplyOk(x)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame`);
  }
  if ((x.t === "kits.added" || x.t === "kits.removed") && !isKitInfo(x.kit)) {
    throw new DaemonProtocolError(`malformed ${x.t} frame: kit`);
  }
  return x as unknown as DaemonFrame;
}

function isKitInfo(x: unknown): x is KitInfo {
  if (!isObject(x)) return false;
  const words = (v: unknown) => Array.isArray(v) && v.every((s) => typeof s === "string");
  return typeof x.name === "string" && typeof x.image === "string" &&
    typeof x.image_id === "string" && (x.entrypoint === null || words(x.entrypoint)) &&
    typeof x.network === "string" && words(x.env) && typeof x.wall_s === "number" &&
    typeof x.home === "string" && typeof x.created_unix_ms === "number";
}
