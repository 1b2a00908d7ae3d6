/**
 * The `marsh commit` and `marsh show` frames of the daemon protocol (part of
 * `protocol/daemon.ts`; docs/checkpoints.md "Checkout and commit", docs/guide.md
 * "Committing a checkpoint").
 *
 * `marsh commit` is two steps: the daemon resolves the checkpoint and has
 * the split-filesystem service export its root into the project's object
 * store (`checkpoint.export`); then the CLI, which runs as the user and may
 * run programs, makes the commit and moves the ref with hardened Git.
 *
 * @module
 */

import type { CompletenessReceipt } from "../model/op_receipt.ts";

/** The longest session name or checkpoint id (or prefix) a frame may carry. */
const MAX_NAME = 256;

/**
 * Export a checkpoint's root into the project's Git object store: the
 * checkpoint `checkpoint` (an id or a unique prefix of one), else the head
 * of session `session`, else the head of the project's one open session.
 * Answered with `checkpoint.exported`.
 */
export interface CheckpointExportRequest {
  readonly v: 1;
  readonly t: "checkpoint.export";
  /** The caller's cwd: the project is located from it. */
  readonly cwd: string;
  readonly session: string | null;
  readonly checkpoint: string | null;
}

/**
 * `marsh show`: a checkpoint's record and changed paths; with `patch`, its
 * patch against its parent first, as `chunk` frames. Answered with
 * `checkpoint.shown`.
 */
export interface CheckpointShowRequest {
  readonly v: 1;
  readonly t: "checkpoint.show";
  readonly cwd: string;
  readonly checkpoint: string;
  readonly patch: boolean;
}

/** A checkpoint as `marsh show --json` prints it. */
export interface CheckpointInfo {
  readonly id: string;
  readonly kind: "start" | "operation";
  /** The session that made it: its name and id. */
  readonly session: { readonly id: string; readonly name: string };
  readonly project: string;
  readonly root: string;
  readonly parent: string | null;
  readonly parent_root: string | null;
  readonly layers: readonly string[];
  readonly created_unix_ms: number;
  /** The operation that made it; null for a session's start. */
  readonly operation: {
    readonly id: string;
    readonly argv: readonly string[];
    readonly cwd: string;
    readonly state: string;
    /** `exited 3`, `signaled SIGKILL`, `cancelled`, ...; null before its end. */
    readonly exit: string | null;
    /** `sealed`, `no-change` or `discarded`. */
    readonly disposition: string | null;
    /** Its completeness receipt, as `marsh log --json` has it (null: no view was kept). */
    readonly receipt: CompletenessReceipt | null;
  } | null;
}

/** One changed path, as Git's name-status letters say. */
export interface ShownPath {
  readonly path: string;
  readonly status: "A" | "M" | "D" | "T";
}

/** The answer to `checkpoint.show`. */
export interface CheckpointShownReply {
  readonly v: 1;
  readonly t: "checkpoint.shown";
  readonly checkpoint: CheckpointInfo;
  /** Paths changed against the parent (a start: against the empty tree). */
  readonly changed: number;
  /** The first 1,000 of them. */
  readonly paths: readonly ShownPath[];
}

/** The root is in the object store, or could not be (`unsupported`). */
export interface CheckpointExportedReply {
  readonly v: 1;
  readonly t: "checkpoint.exported";
  /** The project root. */
  readonly project: string;
  readonly checkpoint: CheckpointInfo;
  /** The repository's gitdir and the object dir written. */
  readonly git_dir: string;
  readonly objects_dir: string;
  /** Objects written (blobs, trees) and found present. */
  readonly blobs: number;
  readonly trees: number;
  readonly bytes: number;
  readonly present: number;
  /** `UnsupportedGitExport`: nothing was written, nothing may be committed. */
  readonly unsupported: {
    readonly path: string;
    readonly kind: string;
    readonly message: string;
  } | null;
}

/** The client frames of this module. */
export type CheckpointClientFrame = CheckpointExportRequest | CheckpointShowRequest;
/** The daemon frames of this module. */
export type CheckpointDaemonFrame = CheckpointExportedReply | CheckpointShownReply;

/** The client frame types this module parses. */
export const CHECKPOINT_CLIENT_FRAMES: ReadonlySet<string> = new Set([
  "checkpoint.export",
  "checkpoint.show",
]);
/** The daemon frame types this module checks. */
export const CHECKPOINT_DAEMON_FRAMES: ReadonlySet<string> = new Set([
  "checkpoint.exported",
  "checkpoint.shown",
]);

/** A checkpoint frame that is malformed. */
export class CheckpointFrameError extends Error {
  override name = "CheckpointFrameError";
}

function text(x: Record<string, unknown>, key: string, max: number): string {
  const v = x[key];
  if (typeof v !== "string" || v.length === 0 || v.length > max) {
    throw new CheckpointFrameError(`malformed ${String(x.t)} frame: ${key}`);
  }
  return v;
}

function nullable(x: Record<string, unknown>, key: string): string | null {
  return x[key] === null ? null : text(x, key, MAX_NAME);
}

/** Validates a checkpoint client frame (`v` is checked by the caller). */
export function parseCheckpointClientFrame(x: Record<string, unknown>): CheckpointClientFrame {
  if (x.t === "checkpoint.export") {
    return {
      v: 1,
      t: "checkpoint.export",
      cwd: text(x, "cwd", 4096),
      session: nullable(x, "session"),
      checkpoint: nullable(x, "checkpoint"),
    };
  }
  if (x.t === "checkpoint.show") {
    if (typeof x.patch !== "boolean") {
      throw new CheckpointFrameError("malformed checkpoint.show frame: patch");
    }
    return {
      v: 1,
      t: "checkpoint.show",
      cwd: text(x, "cwd", 4096),
      checkpoint: text(x, "checkpoint", MAX_NAME),
      patch: x.patch,
    };
  }
  throw new CheckpointFrameError(`unknown frame type: ${JSON.stringify(x.t)}`);
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function infoOk(x: unknown): boolean {
  return isObject(x) && typeof x.id === "string" && typeof x.root === "string" &&
    isObject(x.session) && Array.isArray(x.layers);
}

/** Whether a checkpoint daemon frame has its shape. */
export function checkpointReplyOk(x: Record<string, unknown>): boolean {
  if (x.t === "checkpoint.exported") {
    return typeof x.project === "string" && infoOk(x.checkpoint) &&
      typeof x.git_dir === "string" && typeof x.blobs === "number" &&
      typeof x.trees === "number" && (x.unsupported === null || isObject(x.unsupported));
  }
  if (x.t === "checkpoint.shown") {
    return infoOk(x.checkpoint) && typeof x.changed === "number" && Array.isArray(x.paths);
  }
  return false;
}
