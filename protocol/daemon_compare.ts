/**
 * The daemon frames of `marsh compare` (part of `protocol/daemon.ts`;
 * docs/resolution.md, "Comparing branches"): one row per branch, to choose
 * from before a merge.
 *
 * @module
 */

/** `marsh compare ID`. Answered with `compare`. */
export interface CompareRequest {
  readonly v: 1;
  readonly t: "resolve.compare";
  readonly id: string;
}

/** The schema name of `marsh compare --json`. */
export const COMPARE_SCHEMA = "marsh.compare/v1";

/** One branch's row. */
export interface CompareRow {
  readonly label: string;
  /** The branch's state, as `marsh splits` shows it. */
  readonly state: string;
  readonly placement: string;
  /** `exited N`, `failed: …` and so on; `null` while it runs. */
  readonly status: string | null;
  readonly code: number | null;
  /** Whether its result was captured (only a captured branch can be merged). */
  readonly captured: boolean;
  readonly files: number;
  readonly added: number;
  readonly removed: number;
  /** Changed files that are binary, counted apart (they have no lines). */
  readonly binary: number;
  /**
   * Whether `marsh merge ID LABEL` (`--git`) would apply cleanly to the
   * source as it is now; `null` when it was not computed (not captured, or
   * why in `note`).
   */
  readonly clean: boolean | null;
  /** Paths the `--git` merge would leave in conflict; `null` when not computed. */
  readonly conflicts: number | null;
  /** The other branches that change some of the same paths, with how many. */
  readonly overlaps: readonly { readonly label: string; readonly paths: number }[];
  /** Why a figure is missing, when one is. */
  readonly note?: string;
}

/** The answer to `resolve.compare` (and the document `marsh compare --json` prints). */
export interface CompareReply {
  readonly v: 1;
  readonly t: "compare";
  readonly schema: typeof COMPARE_SCHEMA;
  readonly id: string;
  /** In declaration order. */
  readonly branches: readonly CompareRow[];
}

/** Whether `x` has the outer shape of a {@linkcode CompareReply} (the daemon's own output). */
export function compareReplyOk(x: Record<string, unknown>): boolean {
  return x.schema === COMPARE_SCHEMA && typeof x.id === "string" && Array.isArray(x.branches);
}
