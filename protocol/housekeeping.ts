/**
 * The housekeeping frames of the daemon protocol (part of
 * `protocol/daemon.ts`): `marsh splits prune` and `marsh gc --all`, which
 * remove finished splits, and for `gc --all` the rest of what marsh stored
 * in a project (docs/guide.md "Housekeeping").
 *
 * @module
 */

/** The longest `--older-than` (100 years), so a cutoff is a safe integer. */
export const MAX_AGE_MS = 100 * 365 * 24 * 3600 * 1000;

/** `marsh splits prune [--all] [--older-than D] [--dry-run]`. */
export interface SplitsPruneRequest {
  readonly v: 1;
  readonly t: "splits.prune";
  /** The caller's cwd: only that project's splits; null (`--all`): every project's. */
  readonly cwd: string | null;
  /** Only splits created at least this long ago; null: any age. */
  readonly olderThanMs: number | null;
  readonly dryRun: boolean;
}

/** `marsh gc --all [--dry-run]`: everything marsh stored for the project at `cwd`. */
export interface GcAllRequest {
  readonly v: 1;
  readonly t: "gc.all";
  readonly cwd: string;
  readonly dryRun: boolean;
}

/** The housekeeping requests. */
export type HousekeepingRequest = SplitsPruneRequest | GcAllRequest;

/** A split that was removed (or would be, in a dry run). */
export interface RemovedSplit {
  readonly id: string;
  /** Its state before the removal. */
  readonly state: string;
  readonly created_unix_ms: number;
  /** What `marsh splits rm` would have said (`split <id> removed`, ...). */
  readonly message: string;
}

/** A split that was not removed, and why. */
export interface KeptSplit {
  readonly id: string;
  readonly state: string;
  readonly reason: string;
}

/** What `marsh splits prune` removed and could not remove. */
export interface PrunedReply {
  readonly v: 1;
  readonly t: "splits.pruned";
  /** The project pruned, or null for every project (`--all`). */
  readonly root: string | null;
  readonly dry_run: boolean;
  readonly removed: readonly RemovedSplit[];
  readonly failed: readonly KeptSplit[];
}

/** What `marsh gc --all` removed, and what it could not. */
export interface GcAllReply {
  readonly v: 1;
  readonly t: "gc.all";
  readonly root: string;
  readonly dry_run: boolean;
  /** The project's splits, removed (kept, joined, cancelled and uncertain ones). */
  readonly splits: readonly RemovedSplit[];
  /** Splits not removed: the snapshot store was then left alone. */
  readonly failed: readonly KeptSplit[];
  /** Snapshot layers removed, chain heads' included. */
  readonly layers: readonly string[];
  readonly bytes: number;
  /** Whether `<root>/.marsh` is gone (or was never there). */
  readonly gone: boolean;
  /** Entries of `.marsh` left because marsh did not make them. */
  readonly left: readonly string[];
  /** Why the store was not removed (or not all of it), or null. */
  readonly problem: string | null;
}

/** A housekeeping frame that is not valid (the caller's parser wraps it). */
export class HousekeepingFrameError extends Error {
  override name = "HousekeepingFrameError";
}

function bool(x: Record<string, unknown>, key: string): boolean {
  const v = x[key];
  if (typeof v !== "boolean") throw new HousekeepingFrameError(`malformed ${x.t} frame: ${key}`);
  return v;
}

function cwd(x: Record<string, unknown>): string {
  const v = x.cwd;
  if (typeof v !== "string" || !v.startsWith("/") || v.length > 4096) {
    throw new HousekeepingFrameError(`malformed ${x.t} frame: cwd must be an absolute path`);
  }
  return v;
}

/** Validates a housekeeping request (`v` and `t` are checked by the caller). */
export function parseHousekeepingRequest(x: Record<string, unknown>): HousekeepingRequest {
  if (x.t === "gc.all") return { v: 1, t: "gc.all", cwd: cwd(x), dryRun: bool(x, "dryRun") };
  const age = x.olderThanMs;
  if (
    age !== null &&
    (typeof age !== "number" || !Number.isSafeInteger(age) || age < 0 || age > MAX_AGE_MS)
  ) {
    throw new HousekeepingFrameError(
      `malformed splits.prune frame: olderThanMs must be null or 0 to ${MAX_AGE_MS}`,
    );
  }
  return {
    v: 1,
    t: "splits.prune",
    cwd: x.cwd === null ? null : cwd(x),
    olderThanMs: age,
    dryRun: bool(x, "dryRun"),
  };
}

function splitList(v: unknown): boolean {
  return Array.isArray(v) &&
    v.every((s) =>
      typeof s === "object" && s !== null && typeof s.id === "string" &&
      typeof s.state === "string"
    );
}

/** Whether a daemon frame of a housekeeping type has its lists (the CLI reads them). */
export function housekeepingReplyOk(x: Record<string, unknown>): boolean {
  if (x.t === "splits.pruned") return splitList(x.removed) && splitList(x.failed);
  return splitList(x.splits) && splitList(x.failed) && Array.isArray(x.layers) &&
    typeof x.bytes === "number" && Array.isArray(x.left) && typeof x.gone === "boolean";
}
