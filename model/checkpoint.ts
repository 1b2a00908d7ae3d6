/**
 * The records of operation checkpoints (docs/checkpoints.md, "The model"):
 * a session, a checkpoint, an operation, as tagged unions, with the rules
 * their fields keep and the head's compare-and-swap. The journal checks a
 * record here before it writes a row. Pure: no I/O.
 *
 * @module
 */

import { MARSH_DIR, MAX_LABEL } from "./layout.ts";
import type { OperationState } from "./operation_state.ts";

/** Under `.marsh`: one directory per checkpoint session. */
export const SESSION_DIR = "session";
/** Under a session's directory: the mount that shows its head's root. */
export const VIEW_DIR = "view";

const NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const NAME_RULE =
  `use 1-${MAX_LABEL} letters, digits, "_", "." or "-", starting with a letter or digit`;
/** How much of an overlong name a message quotes. */
const QUOTED = 32;

/**
 * The reason a session name is unusable, or `null`: the label rule of
 * `model/layout.ts` (a session's directory is named by it), under its own
 * name in messages.
 */
export function sessionNameProblem(name: string): string | null {
  if (name.length > MAX_LABEL) {
    return `invalid session name ${
      JSON.stringify(name.slice(0, QUOTED))
    }... is too long (${name.length} characters): ${NAME_RULE}`;
  }
  return NAME.test(name) ? null : `invalid session name ${JSON.stringify(name)}: ${NAME_RULE}`;
}

/** A session's view under the project's root: `<root>/.marsh/session/<name>/view`. */
export function sessionViewPath(root: string, name: string): string {
  const problem = sessionNameProblem(name);
  if (problem !== null) throw new TypeError(problem);
  if (!root.startsWith("/")) throw new TypeError(`A project root is absolute: "${root}"`);
  return `${root.replace(/\/+$/, "")}/${MARSH_DIR}/${SESSION_DIR}/${name}/${VIEW_DIR}`;
}

const ROOT_ID = /^[0-9a-f]{40}$/;
const CHECKPOINT_ID = /^[0-9a-f]{64}$/;
const RECORD_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;
const DIGEST = /^[0-9a-f]{64}$/;

/** Whether `x` is a root id: the Git tree id (40 hex digits) of a file state. */
export function isRootId(x: unknown): x is string {
  return typeof x === "string" && ROOT_ID.test(x);
}

/** Whether `x` is a checkpoint id: 64 hex digits, the SHA-256 of its {@linkcode checkpointPreimage}. */
export function isCheckpointId(x: unknown): x is string {
  return typeof x === "string" && CHECKPOINT_ID.test(x);
}

/** Whether `x` is a session or operation id: 1-64 of `a-z`, `0-9`, `-`, not starting with `-`. */
export function isRecordId(x: unknown): x is string {
  return typeof x === "string" && RECORD_ID.test(x);
}

/** Whether `x` is a changed-set digest: the SHA-256 of the normalised changed set, 64 hex digits. */
export function isDigest(x: unknown): x is string {
  return typeof x === "string" && DIGEST.test(x);
}

/**
 * The reason `cwd` (a directory relative to the project's root) is
 * unusable, or `null`: `.` or `a/b`, no empty, `.` or `..` segment, not
 * absolute, no NUL.
 */
export function cwdProblem(cwd: string): string | null {
  if (cwd === ".") return null;
  if (cwd.length === 0 || cwd.includes("\0")) return `invalid directory ${JSON.stringify(cwd)}`;
  if (cwd.startsWith("/")) {
    return `invalid directory ${JSON.stringify(cwd)}: it must be relative to the project's root`;
  }
  for (const seg of cwd.split("/")) {
    if (seg === "" || seg === "." || seg === "..") {
      return `invalid directory ${JSON.stringify(cwd)}: no empty, "." or ".." segment`;
    }
  }
  return null;
}

/** The most bytes an operation's argv may take, counted as its JSON text. */
export const MAX_ARGV_BYTES = 256 * 1024;

/**
 * The reason an argv is unusable, or `null`: at least one element, no NUL
 * (it could not reach `execve`), at most {@linkcode MAX_ARGV_BYTES} as JSON,
 * so an oversize command fails before anything is launched.
 */
export function argvProblem(argv: readonly string[]): string | null {
  if (argv.length === 0) return "an operation needs a command";
  if (argv.some((a) => typeof a !== "string" || a.includes("\0"))) {
    return "a command's arguments cannot contain NUL";
  }
  const bytes = new TextEncoder().encode(JSON.stringify(argv)).length;
  if (bytes > MAX_ARGV_BYTES) {
    return `the command is too long (${bytes} bytes; at most ${MAX_ARGV_BYTES})`;
  }
  return null;
}

/** A session: open, or removed (its history stays until `marsh gc`). */
export type SessionRecord =
  & SessionCommon
  & (
    | { readonly state: "open"; readonly removedMs: null }
    | { readonly state: "removed"; readonly removedMs: number }
  );

/** What every session has. */
export interface SessionCommon {
  /** Its id (`isRecordId`), never reused. */
  readonly id: string;
  /** The project's root, absolute. */
  readonly project: string;
  /** Its name: unique among the project's open sessions ({@linkcode sessionNameProblem}). */
  readonly name: string;
  /** The checkpoint it started from: its own `start` checkpoint, or the one it was forked at. */
  readonly baseCheckpoint: string;
  /** The root id of {@linkcode SessionCommon.baseCheckpoint}. */
  readonly baseRoot: string;
  /** The head checkpoint: the only selection of what the session shows. */
  readonly head: string;
  /** The view's path ({@linkcode sessionViewPath}). */
  readonly view: string;
  /** Whether ignored files are in its snapshot (`--with-ignored`). */
  readonly withIgnored: boolean;
  readonly createdMs: number;
}

/** What a checkpoint adds to its parent's stack: one sealed layer, or nothing. */
export type CheckpointDelta =
  | { readonly kind: "layer"; readonly layer: string }
  | { readonly kind: "no-change" };

/** A checkpoint: a session's start, or an operation's result. */
export type CheckpointRecord =
  & CheckpointCommon
  & (
    | {
      /** A session's snapshot: no parent, no operation. */
      readonly kind: "start";
    }
    | {
      readonly kind: "operation";
      readonly parent: string;
      readonly parentRoot: string;
      readonly operation: string;
      readonly delta: CheckpointDelta;
      /** The digest of the operation's normalised changed set. */
      readonly changes: string;
    }
  );

/** What every checkpoint has. */
export interface CheckpointCommon {
  readonly id: string;
  /** The session that made it. */
  readonly session: string;
  readonly project: string;
  /** Its root id: the Git tree id of the file state it binds. */
  readonly root: string;
  /** The layer ids whose stack shows {@linkcode CheckpointCommon.root}, bottom first. */
  readonly layers: readonly string[];
  readonly createdMs: number;
}

/** How an operation's command ended, apart from what happened to its files. */
export type ExecutionOutcome =
  | { readonly kind: "exited"; readonly code: number }
  | { readonly kind: "signaled"; readonly signal: string }
  | { readonly kind: "timed-out" }
  | { readonly kind: "cancelled" }
  | { readonly kind: "failed-to-start"; readonly reason: string };

/** The kinds of {@linkcode ExecutionOutcome}. */
export const EXECUTION_KINDS = [
  "exited",
  "signaled",
  "timed-out",
  "cancelled",
  "failed-to-start",
] as const;

/** What happened to an operation's files, apart from how its command ended. */
export type FilesystemDisposition =
  | { readonly kind: "sealed"; readonly root: string; readonly layer: string }
  | { readonly kind: "no-change"; readonly root: string }
  | { readonly kind: "discarded" };

/** The kinds of {@linkcode FilesystemDisposition}. */
export const DISPOSITION_KINDS = ["sealed", "no-change", "discarded"] as const;

/**
 * The write-ahead intent of a state-changing checkpoint, journaled before
 * the layer is sealed: the exact root and layer recovery reads back.
 */
export interface CheckpointIntent {
  readonly root: string;
  readonly layer: string;
  readonly changes: string;
  readonly recordedMs: number;
}

/** One command run as one checkpoint. */
export interface OperationRecord {
  readonly id: string;
  readonly session: string;
  /** The head it expects to replace: the compare-and-swap guard. */
  readonly expectedHead: string;
  /** The root of {@linkcode OperationRecord.expectedHead}, which its overlay shows. */
  readonly baseRoot: string;
  /** The command, as data: launched from this array, never re-quoted. */
  readonly argv: readonly string[];
  /** Where it runs, relative to the project's root ({@linkcode cwdProblem}). */
  readonly cwd: string;
  readonly state: OperationState;
  /** Known once its process tree is drained (or it failed to start). */
  readonly execution: ExecutionOutcome | null;
  /** Known once it is bound or discarded. */
  readonly disposition: FilesystemDisposition | null;
  /** The checkpoint it bound, once bound. */
  readonly checkpoint: string | null;
  readonly intent: CheckpointIntent | null;
  /** Why it failed, went stale or needs recovery. */
  readonly reason: string | null;
  /** The head a stale bind found instead of {@linkcode OperationRecord.expectedHead}. */
  readonly seenHead: string | null;
  readonly createdMs: number;
  readonly launchedMs: number | null;
  readonly drainedMs: number | null;
  readonly endedMs: number | null;
}

/** The outcome of a head compare-and-swap. */
export type HeadCas =
  | { readonly kind: "ok" }
  | { readonly kind: "stale"; readonly expected: string; readonly current: string };

/**
 * The head's compare-and-swap rule: the head moves only from the head the
 * caller read. Anything else is stale, with both ids, and is never rebased.
 */
export function headCas(expected: string, current: string): HeadCas {
  return expected === current ? { kind: "ok" } : { kind: "stale", expected, current };
}

/** The message of a stale head, naming both checkpoints. */
export function staleHeadMessage(session: string, cas: HeadCas & { kind: "stale" }): string {
  return `session "${session}" moved: its head is ${cas.current}, not ${cas.expected}; ` +
    `nothing was published (run "marsh log" and try again from the new head)`;
}

/** The version tag of {@linkcode checkpointPreimage}'s text. */
export const CHECKPOINT_PREIMAGE_VERSION = "marsh-checkpoint 1";

/**
 * The text whose SHA-256 is a checkpoint's id: the operation, the parent
 * checkpoint, the root and the changed set (a `start` checkpoint: the
 * session and the root). Nothing of it enters a root id.
 */
export function checkpointPreimage(
  c:
    | { readonly kind: "start"; readonly session: string; readonly root: string }
    | {
      readonly kind: "operation";
      readonly operation: string;
      readonly parent: string;
      readonly root: string;
      readonly changes: string;
    },
): string {
  if (!isRootId(c.root)) throw new TypeError(`Not a root id: ${JSON.stringify(c.root)}`);
  if (c.kind === "start") {
    if (!isRecordId(c.session)) throw new TypeError(`Not a session id: "${c.session}"`);
    return `${CHECKPOINT_PREIMAGE_VERSION}\nstart\nsession ${c.session}\nroot ${c.root}\n`;
  }
  if (!isRecordId(c.operation)) throw new TypeError(`Not an operation id: "${c.operation}"`);
  if (!isCheckpointId(c.parent)) throw new TypeError(`Not a checkpoint id: "${c.parent}"`);
  if (!isDigest(c.changes)) throw new TypeError(`Not a changed-set digest: "${c.changes}"`);
  return `${CHECKPOINT_PREIMAGE_VERSION}\noperation ${c.operation}\nparent ${c.parent}\n` +
    `root ${c.root}\nchanges ${c.changes}\n`;
}

/**
 * The reason a checkpoint's delta does not fit its roots, or `null`: a
 * layer changes the root, no change keeps it.
 */
export function deltaProblem(
  parentRoot: string,
  root: string,
  delta: CheckpointDelta,
): string | null {
  if (delta.kind === "no-change") {
    return root === parentRoot
      ? null
      : `a no-change checkpoint keeps its parent's root ${parentRoot}`;
  }
  return root !== parentRoot
    ? null
    : `a checkpoint that adds layer ${delta.layer} must change the root ${parentRoot}`;
}
