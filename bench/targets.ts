/**
 * Issue 4's performance targets, checked against measured numbers: each
 * target is a limit on a time (`≤ 3 ms`) or a ratio (`≤ 0.1× git status`,
 * `≥ 2,000× faster than cp -a`), and a result is "met" or "MISSED by X×",
 * X being how far the measurement is from the limit. Issue 5's numbers have
 * no limit: {@linkcode report} makes their rows, whose verdict is `report`.
 *
 * @module
 */

import { fmtMs, fmtRatio, table } from "./_format.ts";

/** Whether the limit is an upper (`≤`) or a lower (`≥`) bound. */
export type Bound = "max" | "min";

/** One target at one tree size. */
export interface TargetResult {
  /** What is measured against what, e.g. `fork per branch`. */
  readonly what: string;
  /** The limit as written in the issue, e.g. `≤ 3 ms`. */
  readonly limitText: string;
  readonly files: number;
  /** The strategy that ran (`overlay`, `copy`, ...). */
  readonly strategy: string;
  /** The measured number, in the limit's unit; null when it was not measured. */
  readonly value: number | null;
  readonly limit: number;
  readonly bound: Bound;
  /** The measurement as printed, e.g. `2.31 ms` or `0.42× (12.3 ms vs 29.1 ms)`. */
  readonly measured: string;
  /** Null when not measured. */
  readonly met: boolean | null;
  /** How many times over (or under, for a lower bound) the limit; null when met or not measured. */
  readonly missedBy: number | null;
  /** A number reported without a limit ({@linkcode report}): never met nor missed. */
  readonly report?: true;
}

/** Inputs of {@linkcode target}. */
export interface TargetSpec {
  readonly what: string;
  readonly limitText: string;
  readonly files: number;
  readonly strategy: string;
  readonly value: number | null;
  readonly limit: number;
  readonly bound: Bound;
  readonly measured: string;
}

/**
 * Checks one measurement against its limit. A lower-bound miss is reported
 * as `limit / value`, an upper-bound one as `value / limit`.
 *
 * @throws {RangeError} when the limit is not a positive number
 */
export function target(spec: TargetSpec): TargetResult {
  if (!(spec.limit > 0)) throw new RangeError(`Target limit must be positive: ${spec.limit}`);
  const { value, limit, bound } = spec;
  if (value === null || !Number.isFinite(value)) {
    return { ...spec, value: null, met: null, missedBy: null };
  }
  const met = bound === "max" ? value <= limit : value >= limit;
  const missedBy = met ? null : bound === "max" ? value / limit : limit / Math.max(value, 1e-12);
  return { ...spec, met, missedBy };
}

/** Inputs of {@linkcode report}. */
export interface ReportSpec {
  readonly what: string;
  readonly files: number;
  readonly strategy: string;
  /** The number reported (a time or a ratio); null when it was not measured. */
  readonly value: number | null;
  readonly measured: string;
}

/**
 * A row for a number the issue asks to report, with no limit to meet: its
 * `limitText` is `(report)`, `met` and `missedBy` are null, and its verdict
 * is `report` (`not measured` when the value is null).
 */
export function report(spec: ReportSpec): TargetResult {
  const value = spec.value !== null && Number.isFinite(spec.value) ? spec.value : null;
  return {
    ...spec,
    value,
    limitText: "(report)",
    limit: Number.NaN,
    bound: "max",
    met: null,
    missedBy: null,
    report: true,
  };
}

/** `met`, `MISSED by 2.40×`, `report`, or `not measured`. */
export function verdict(t: TargetResult): string {
  if (t.report && t.value !== null) return "report";
  if (t.met === null) return "not measured";
  return t.met ? "met" : `MISSED by ${fmtRatio(t.missedBy)}`;
}

/** A ratio with both sides, e.g. `0.42× (12.3 ms vs 29.1 ms)`. */
export function ratioText(num: number, den: number): string {
  return `${fmtRatio(num / den)} (${fmtMs(num)} vs ${fmtMs(den)})`;
}

/** A table of targets: target, files, strategy, measured, verdict. */
export function renderTargets(targets: readonly TargetResult[]): string {
  return table([
    ["target", "files", "strategy", "measured", "verdict"],
    ...targets.map((t) => [
      `${t.what} ${t.limitText}`,
      String(t.files),
      t.strategy,
      t.measured,
      verdict(t),
    ]),
  ]);
}
