/**
 * The resolution frames of the daemon protocol (part of `protocol/daemon.ts`;
 * docs/guide.md, "Resolving a branch"): `marsh merge`, `promote`, `choose`,
 * `undo` and `resolutions`. A resolving request is answered by zero or more
 * `resolve.plan` frames (the plan document `marsh.merge.plan/v1`, as JSON
 * text in pieces) and one `resolved` frame; a refusal of the request itself
 * (usage, authority) is an `error` frame as for every request.
 *
 * @module
 */

import type { ChangedPath } from "./splitfs_resolve.ts";

/** The merge scopes (`--git`, `--filesystem`, `--paths P...`). */
export type MergeScope = "git" | "filesystem" | "paths";

/** At most this many `--paths` in one request. */
export const MAX_REQUEST_PATHS = 10_000;

/** At most this many paths listed in a `resolved` frame's lists; the rest are counted. */
export const MAX_LISTED = 1_000;

/**
 * The largest piece of the plan document in one `resolve.plan` frame, in
 * characters: even escaped six bytes each, a piece stays under the frame limit.
 */
export const PLAN_PIECE = 128 * 1024;

/** `marsh merge ID LABEL [--git | --filesystem | --paths P...] [--dry-run]`. */
export interface ResolveMergeRequest {
  readonly v: 1;
  readonly t: "resolve.merge";
  readonly id: string;
  readonly label: string;
  readonly scope: MergeScope;
  /** For `paths`: as the user gave them, relative to `cwd` (the daemon resolves them). */
  readonly paths?: readonly string[];
  readonly dryRun: boolean;
  /** The caller's working directory, absolute. */
  readonly cwd: string;
}

/** `marsh promote ID LABEL [--retire-source-changes] [--dry-run]`. */
export interface ResolvePromoteRequest {
  readonly v: 1;
  readonly t: "resolve.promote";
  readonly id: string;
  readonly label: string;
  readonly retireSourceChanges: boolean;
  readonly dryRun: boolean;
}

/** `marsh choose ID LABEL (--merge [SCOPE] | --promote)`: resolve the winner, discard the others. */
export interface ResolveChooseRequest {
  readonly v: 1;
  readonly t: "resolve.choose";
  readonly id: string;
  readonly label: string;
  /** `promote`, or the merge scope. */
  readonly how: MergeScope | "promote";
  readonly paths?: readonly string[];
  readonly retireSourceChanges: boolean;
  readonly cwd: string;
  /** Why the others are discarded (`--reason`), or null for the default. */
  readonly reason: string | null;
}

/** `marsh undo RESOLUTION`. */
export interface ResolveUndoRequest {
  readonly v: 1;
  readonly t: "resolve.undo";
  readonly resolution: string;
}

/** `marsh resolutions`: every resolution the caller may see. */
export interface ResolutionsListRequest {
  readonly v: 1;
  readonly t: "resolutions.list";
}

/** The resolution requests. */
export type ResolveClientFrame =
  | ResolveMergeRequest
  | ResolvePromoteRequest
  | ResolveChooseRequest
  | ResolveUndoRequest
  | ResolutionsListRequest;

/** The frame types of {@linkcode ResolveClientFrame}. */
export const RESOLVE_CLIENT_FRAMES: ReadonlySet<string> = new Set([
  "resolve.merge",
  "resolve.promote",
  "resolve.choose",
  "resolve.undo",
  "resolutions.list",
]);

/** One resolution as `marsh resolutions --json` and every `resolved` frame show it. */
export interface ResolutionInfo {
  readonly id: string;
  readonly split: string;
  readonly label: string;
  readonly kind: "merge" | "promote" | "undo" | "checkout";
  readonly scope: "git" | "filesystem" | "paths" | "promote" | "undo" | "checkout";
  readonly state: "applying" | "applied" | "failed" | "undone";
  /** `host`, `session:<split>/<label>` (a branch) or `job:<id>`. */
  readonly who: string;
  readonly root: string;
  readonly created_unix_ms: number;
  readonly finished_unix_ms: number | null;
  /** Paths changed (null until applied). */
  readonly paths_changed: number | null;
  readonly summary: {
    readonly take: number;
    readonly delete: number;
    readonly converged: number;
    readonly conflict: number;
  };
  readonly trees: {
    readonly base: string | null;
    readonly source: string | null;
    readonly branch: string | null;
    readonly result: string | null;
  };
  readonly undoes: string | null;
  readonly undone_by: string | null;
  /** `<root>/.marsh/resolve/<id>`: the prior state of what it changed (while applied). */
  readonly restore_point: string;
  readonly message: string | null;
  /**
   * A `checkout` (and its undo): the session (id and name) and the checkpoint
   * whose root the tree became; `split` and `label` are empty then.
   */
  readonly checkout?: {
    readonly session: string;
    readonly name: string;
    readonly checkpoint: string;
  } | null;
}

/** A piece of the plan document (JSON text); the pieces, in order, are the whole document. */
export interface ResolvePlanReply {
  readonly v: 1;
  readonly t: "resolve.plan";
  readonly data: string;
}

/**
 * How a resolving request ended: `applied` (0), `planned` (a dry run: 0 when
 * clean, 1 with a conflict), `conflict` (1, nothing changed), `refused` (1,
 * nothing changed: the project moved on, promote's source changes, an undo
 * over changed paths), `failed` (125, with what was restored).
 */
export type ResolveOutcome = "applied" | "planned" | "conflict" | "refused" | "failed";

/** The end of a resolving request. */
export interface ResolvedReply {
  readonly v: 1;
  readonly t: "resolved";
  readonly outcome: ResolveOutcome;
  /** The exit status the CLI ends with. */
  readonly code: 0 | 1 | 125;
  /** What happened, and what to do next, in one line. */
  readonly message: string;
  /** Whether `resolve.plan` frames carried the plan. */
  readonly plan: boolean;
  /** The resolution journaled for it (none for a dry run or a conflict). */
  readonly resolution: ResolutionInfo | null;
  /** `refused` by the apply: each path that changed since the plan (the first {@linkcode MAX_LISTED}). */
  readonly changed: readonly ChangedPath[];
  readonly changedMore: number;
  /** `refused` promote: what the source changed since the snapshot (the first {@linkcode MAX_LISTED}). */
  readonly sourceChanges: readonly string[];
  readonly sourceChangesMore: number;
  /** `choose`: the branches discarded. */
  readonly discarded: readonly string[];
}

/** `marsh resolutions`. */
export interface ResolutionsReply {
  readonly v: 1;
  readonly t: "resolutions";
  readonly resolutions: readonly ResolutionInfo[];
  /** How many older ones were left out. */
  readonly more: number;
}

/** The resolution replies. */
export type ResolveDaemonFrame = ResolvePlanReply | ResolvedReply | ResolutionsReply;

/** The frame types of {@linkcode ResolveDaemonFrame}. */
export const RESOLVE_DAEMON_FRAMES: ReadonlySet<string> = new Set([
  "resolve.plan",
  "resolved",
  "resolutions",
]);

/** A resolution frame that is not valid (the caller's parser wraps it). */
export class ResolveFrameError extends Error {
  override name = "ResolveFrameError";
}

function fail(x: Record<string, unknown>, key: string, what = ""): never {
  throw new ResolveFrameError(`malformed ${String(x.t)} frame: ${key}${what}`);
}

function str(x: Record<string, unknown>, key: string, max: number): string {
  const v = x[key];
  if (typeof v !== "string" || v.length === 0 || v.length > max) fail(x, key);
  return v;
}

function bool(x: Record<string, unknown>, key: string): boolean {
  const v = x[key];
  if (typeof v !== "boolean") fail(x, key);
  return v;
}

function cwd(x: Record<string, unknown>): string {
  const v = str(x, "cwd", 4096);
  if (!v.startsWith("/")) fail(x, "cwd", " must be an absolute path");
  return v;
}

function paths(x: Record<string, unknown>, scope: string): { paths?: string[] } {
  if (scope !== "paths") {
    if (x.paths !== undefined) fail(x, "paths", " go with the paths scope only");
    return {};
  }
  const v = x.paths;
  if (
    !Array.isArray(v) || v.length === 0 || v.length > MAX_REQUEST_PATHS ||
    !v.every((p) => typeof p === "string" && p.length > 0 && p.length <= 4096)
  ) {
    fail(x, "paths", ` must be 1 to ${MAX_REQUEST_PATHS} paths`);
  }
  return { paths: v };
}

const SCOPES: readonly string[] = ["git", "filesystem", "paths"];

/** Validates a resolution request (`v` is checked by the caller; `t` is one of {@linkcode RESOLVE_CLIENT_FRAMES}). */
export function parseResolveClientFrame(x: Record<string, unknown>): ResolveClientFrame {
  switch (x.t) {
    case "resolve.merge": {
      const scope = x.scope;
      if (typeof scope !== "string" || !SCOPES.includes(scope)) fail(x, "scope");
      return {
        v: 1,
        t: "resolve.merge",
        id: str(x, "id", 128),
        label: str(x, "label", 4096),
        scope: scope as MergeScope,
        ...paths(x, scope),
        dryRun: bool(x, "dryRun"),
        cwd: cwd(x),
      };
    }
    case "resolve.promote":
      return {
        v: 1,
        t: "resolve.promote",
        id: str(x, "id", 128),
        label: str(x, "label", 4096),
        retireSourceChanges: bool(x, "retireSourceChanges"),
        dryRun: bool(x, "dryRun"),
      };
    case "resolve.choose": {
      const how = x.how;
      if (typeof how !== "string" || !(how === "promote" || SCOPES.includes(how))) fail(x, "how");
      const reason = x.reason === null ? null : str(x, "reason", 4096);
      return {
        v: 1,
        t: "resolve.choose",
        id: str(x, "id", 128),
        label: str(x, "label", 4096),
        how: how as MergeScope | "promote",
        ...paths(x, how),
        retireSourceChanges: bool(x, "retireSourceChanges"),
        cwd: cwd(x),
        reason,
      };
    }
    case "resolve.undo":
      return { v: 1, t: "resolve.undo", resolution: str(x, "resolution", 128) };
    case "resolutions.list":
      return { v: 1, t: "resolutions.list" };
    default:
      throw new ResolveFrameError(`unknown frame type: ${JSON.stringify(x.t)}`);
  }
}

/** Whether a daemon frame of a resolution type has the fields the CLI reads. */
export function resolveReplyOk(x: Record<string, unknown>): boolean {
  switch (x.t) {
    case "resolve.plan":
      return typeof x.data === "string";
    case "resolved":
      return typeof x.outcome === "string" && typeof x.code === "number" &&
        typeof x.message === "string" && typeof x.plan === "boolean" &&
        (x.resolution === null || typeof x.resolution === "object") &&
        Array.isArray(x.changed) && Array.isArray(x.sourceChanges) &&
        Array.isArray(x.discarded);
    case "resolutions":
      return Array.isArray(x.resolutions) && typeof x.more === "number";
    default:
      return false;
  }
}
