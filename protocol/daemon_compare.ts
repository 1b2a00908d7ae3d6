/**
 * The daemon frames of `marsh compare` (part of `protocol/daemon.ts`;
 * docs/resolution.md, "Comparing branches"): one row per branch, to choose
 * from before a merge.
 *
 * @module
 */

import { timeLimitRangeProblem } from "../model/limits.ts";

/**
 * `marsh compare ID [--test CMD]`. Answered with `compare`. With `test`,
 * the connection stays open while the tests run, and a
 * {@linkcode CompareCancelFrame} (Ctrl-C), or the connection dropped,
 * cancels every test.
 */
export interface CompareRequest {
  readonly v: 1;
  readonly t: "resolve.compare";
  readonly id: string;
  readonly test?: CompareTestRequest;
}

/** `--test CMD [--timeout SECONDS]`. */
export interface CompareTestRequest {
  /** Run as `bash -c script` in a throwaway fork of each captured branch. */
  readonly script: string;
  /** Each test's time limit, 1 to 3600 (default {@linkcode DEFAULT_TEST_TIMEOUT_S}). */
  readonly timeoutS: number;
  /** The caller's exported environment; the worker filters it as a branch's. */
  readonly env: Readonly<Record<string, string>>;
}

/** `--timeout` when none is given: ten minutes. */
export const DEFAULT_TEST_TIMEOUT_S = 600;

/** Ctrl-C at `marsh compare --test`: cancel every test of this request. */
export interface CompareCancelFrame {
  readonly v: 1;
  readonly t: "resolve.compare.cancel";
}

/**
 * Checks a `test` field's shape (`script` and `env` are bounded by the
 * caller's `str` and `env`).
 *
 * @returns the reason it is malformed, or `null`
 */
export function compareTestProblem(timeoutS: unknown): string | null {
  if (typeof timeoutS !== "number") return "timeoutS";
  return timeLimitRangeProblem(timeoutS);
}

/** One test's result in a row. */
export interface CompareTest {
  /** The test's exit status (128 + N for signal N); `null` when it did not exit by itself. */
  readonly exit: number | null;
  /** How long it ran, in ms (0 when it never started). */
  readonly ms: number;
  /** `exited N`, `failed: time limit of N s reached`, `cancelled`, `not run: …`, `failed: …`. */
  readonly status: string;
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
  /** With `--test`: the test's result (its output in `out/<label>/compare/`). */
  readonly test?: CompareTest;
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
