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
import { absPath, list, num, str } from "./splitfs_fields.ts";

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

/**
 * Make a throwaway fork of branch `label`'s result for `marsh compare
 * --test` (`<split>/.compare-<label>`). Answered with `compare-forked`.
 */
export interface CompareForkRequest {
  readonly v: 1;
  readonly t: "compare-fork";
  readonly id: string;
  readonly label: string;
}

/** The throwaway fork made. */
export interface CompareForkedReply {
  readonly v: 1;
  readonly t: "compare-forked";
  readonly label: string;
  /** Absolute: `<root>/.marsh/split/<id>/.compare-<label>`. */
  readonly path: string;
  /** How it was made: `overlay`, `userns-overlay` or a copy strategy. */
  readonly strategy: string;
}

/**
 * Replace `out/<label>/compare/stdout` and `stderr` with the test's output
 * files (absolute paths in the control dir). Answered with `ok`.
 */
export interface CompareOutRequest {
  readonly v: 1;
  readonly t: "compare-out";
  readonly id: string;
  readonly label: string;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * Remove branch `label`'s throwaway fork (unmounted and verified first).
 * Answered with `ok`; nothing there is fine.
 */
export interface CompareDropRequest {
  readonly v: 1;
  readonly t: "compare-drop";
  readonly id: string;
  readonly label: string;
}

function oneLabel(x: Record<string, unknown>): string {
  const label = str(x, "label");
  const problem = labelProblem(label);
  if (problem) throw new ProtocolError(`malformed ${String(x.t)} frame: ${problem}`);
  return label;
}

/** Validates a `compare-fork` request (its `v` and `t` are checked by the caller). */
export function parseCompareForkRequest(x: Record<string, unknown>): CompareForkRequest {
  return { v: 1, t: "compare-fork", id: str(x, "id"), label: oneLabel(x) };
}

/** Validates a `compare-out` request. */
export function parseCompareOutRequest(x: Record<string, unknown>): CompareOutRequest {
  return {
    v: 1,
    t: "compare-out",
    id: str(x, "id"),
    label: oneLabel(x),
    stdout: absPath(x, "stdout"),
    stderr: absPath(x, "stderr"),
  };
}

/** Validates a `compare-drop` request. */
export function parseCompareDropRequest(x: Record<string, unknown>): CompareDropRequest {
  return { v: 1, t: "compare-drop", id: str(x, "id"), label: oneLabel(x) };
}

/** Validates a `compare-forked` reply. */
export function parseCompareForkedReply(x: Record<string, unknown>): CompareForkedReply {
  return {
    v: 1,
    t: "compare-forked",
    label: str(x, "label"),
    path: absPath(x, "path"),
    strategy: str(x, "strategy"),
  };
}
