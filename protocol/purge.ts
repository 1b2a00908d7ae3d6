/**
 * The split-filesystem service's purge frames (part of
 * `protocol/splitfs.ts`): `marsh gc --all` deletes what marsh stored in a
 * project once the daemon has removed its splits (`splitfs/layers/purge.ts`).
 *
 * @module
 */

import { splitIdProblem } from "../model/layout.ts";
import { ProtocolError } from "./protocol_error.ts";

/** Most split ids a purge may be told about. */
export const MAX_PURGE_KNOWN = 100_000;

/**
 * Delete everything in `<root>/.marsh`. `known`: split dirs that may still
 * be there (a dry run's splits); any other refuses. Answered with `purged`.
 */
export interface PurgeRequest {
  readonly v: 1;
  readonly t: "purge";
  /** The project root, absolute and canonical (as `located` gave it). */
  readonly root: string;
  readonly known: readonly string[];
  readonly dryRun: boolean;
}

/** What a purge removed (or would). */
export interface PurgedReply {
  readonly v: 1;
  readonly t: "purged";
  readonly layers: readonly string[];
  readonly bytes: number;
  readonly gone: boolean;
  readonly left: readonly string[];
  readonly problem: string | null;
}

function strings(v: unknown, what: string, max: number): string[] {
  if (!Array.isArray(v) || v.length > max || !v.every((s) => typeof s === "string")) {
    throw new ProtocolError(`malformed ${what}: must be a list of at most ${max} strings`);
  }
  return v;
}

/** Validates a purge request (its `v` and `t` are checked by the caller). */
export function parsePurgeRequest(x: Record<string, unknown>): PurgeRequest {
  const root = x.root;
  if (typeof root !== "string" || !root.startsWith("/") || root.includes("\0")) {
    throw new ProtocolError("malformed purge frame: root must be an absolute path");
  }
  const known = strings(x.known, "purge known", MAX_PURGE_KNOWN);
  const bad = known.find((id) => splitIdProblem(id) !== null);
  if (bad !== undefined) throw new ProtocolError(`malformed purge frame: ${splitIdProblem(bad)}`);
  if (typeof x.dryRun !== "boolean") throw new ProtocolError("malformed purge frame: dryRun");
  return { v: 1, t: "purge", root, known, dryRun: x.dryRun };
}

/** Validates a `purged` reply (its `v` and `t` are checked by the caller). */
export function parsePurgedReply(x: Record<string, unknown>): PurgedReply {
  const { bytes, gone, problem } = x;
  if (typeof bytes !== "number" || !Number.isFinite(bytes) || typeof gone !== "boolean") {
    throw new ProtocolError("malformed purged reply");
  }
  if (problem !== null && typeof problem !== "string") {
    throw new ProtocolError("malformed purged reply: problem");
  }
  return {
    v: 1,
    t: "purged",
    layers: strings(x.layers, "purged layers", Number.MAX_SAFE_INTEGER),
    bytes,
    gone,
    left: strings(x.left, "purged left", Number.MAX_SAFE_INTEGER),
    problem,
  };
}
