/**
 * The splitfs frame behind `marsh compare` (part of `protocol/splitfs.ts`;
 * docs/resolution.md, "Comparing branches"): what each captured branch's
 * patch changes, counted, and which other branches touch the same paths.
 * The daemon reads no project file, so the service counts.
 *
 * @module
 */

import { labelProblem } from "../model/layout.ts";
import { MAX_BRANCHES } from "../model/limits.ts";
import { ProtocolError } from "./protocol_error.ts";
import { list, num, str } from "./splitfs_fields.ts";

/**
 * Count the patches of `labels` of split `id` (`out/<label>/diff.patch` and
 * `files`). A label without a patch is answered with `present: false`.
 * Answered with `branch-stats`.
 */
export interface BranchStatsRequest {
  readonly v: 1;
  readonly t: "branch-stats";
  readonly id: string;
  /** At most {@linkcode MAX_BRANCHES}. */
  readonly labels: readonly string[];
}

/** One branch's counts. */
export interface BranchStats {
  readonly label: string;
  /** Whether `out/<label>/files` exists (a captured branch). */
  readonly present: boolean;
  /** Paths changed (lines of the files list). */
  readonly files: number;
  readonly added: number;
  readonly removed: number;
  /** Changed files whose change is binary: counted apart, they have no lines. */
  readonly binary: number;
  /** The other branches that change at least one of the same paths, with how many. */
  readonly overlaps: readonly { readonly label: string; readonly paths: number }[];
}

/** The answer to `branch-stats`, in the order of the request's labels. */
export interface BranchStatsReply {
  readonly v: 1;
  readonly t: "branch-stats";
  readonly branches: readonly BranchStats[];
}

function labels(x: Record<string, unknown>): string[] {
  const v = x.labels;
  if (
    !Array.isArray(v) || v.length > MAX_BRANCHES ||
    !v.every((l) => typeof l === "string" && labelProblem(l) === null)
  ) {
    throw new ProtocolError(
      `malformed branch-stats frame: labels must be a list of at most ${MAX_BRANCHES} labels`,
    );
  }
  return v;
}

/** Validates a `branch-stats` request (its `v` and `t` are checked by the caller). */
export function parseBranchStatsRequest(x: Record<string, unknown>): BranchStatsRequest {
  return { v: 1, t: "branch-stats", id: str(x, "id"), labels: labels(x) };
}

/** Validates a `branch-stats` reply. */
export function parseBranchStatsReply(x: Record<string, unknown>): BranchStatsReply {
  return {
    v: 1,
    t: "branch-stats",
    branches: list(x, "branches").map((b) => {
      if (typeof b.present !== "boolean") {
        throw new ProtocolError("malformed branch-stats reply: present");
      }
      return {
        label: str(b, "label"),
        present: b.present,
        files: num(b, "files"),
        added: num(b, "added"),
        removed: num(b, "removed"),
        binary: num(b, "binary"),
        overlaps: list(b, "overlaps").map((o) => ({
          label: str(o, "label"),
          paths: num(o, "paths"),
        })),
      };
    }),
  };
}
