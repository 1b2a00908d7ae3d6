/**
 * Pure helpers of `deno task bench --checkpoints` (bench/checkpoints.ts):
 * percentiles, the drift of a series of latencies, a least-squares slope,
 * and the storage equation of one checkpoint (docs/checkpoints.md
 * "Measured") with its measured terms.
 *
 * @module
 */

/**
 * The `p`-th percentile (0-100) of `xs` by the nearest-rank method: the
 * smallest value with at least `p`% of the values at or below it.
 *
 * @throws {RangeError} on no values or `p` outside 0-100
 */
export function percentile(xs: readonly number[], p: number): number {
  if (xs.length === 0) throw new RangeError("percentile of no values");
  if (!(p >= 0 && p <= 100)) throw new RangeError(`percentile ${p} is not within 0-100`);
  const s = [...xs].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * s.length));
  return s[rank - 1]!;
}

/** The median of `xs` (the mean of the middle two for an even count). */
export function median(xs: readonly number[]): number {
  if (xs.length === 0) throw new RangeError("median of no values");
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** How a series' latencies moved from its start to its end. */
export interface Drift {
  /** The median of the first tenth of the series (at least one value). */
  readonly firstMs: number;
  /** The median of the last tenth. */
  readonly lastMs: number;
  /** `lastMs / firstMs`. */
  readonly ratio: number;
}

/**
 * The median of the first decile against the last one's (one value each
 * for a series shorter than 10).
 *
 * @throws {RangeError} on an empty series
 */
export function drift(xs: readonly number[]): Drift {
  if (xs.length === 0) throw new RangeError("drift of no values");
  const n = Math.max(1, Math.floor(xs.length / 10));
  const firstMs = median(xs.slice(0, n));
  const lastMs = median(xs.slice(xs.length - n));
  return { firstMs, lastMs, ratio: lastMs / firstMs };
}

/**
 * The least-squares slope of `ys` over `xs` (e.g. bytes per operation).
 *
 * @throws {RangeError} on fewer than two points, mismatched lengths or all `xs` equal
 */
export function slope(xs: readonly number[], ys: readonly number[]): number {
  if (xs.length !== ys.length || xs.length < 2) {
    throw new RangeError("a slope needs two or more points, as many x as y");
  }
  const mx = xs.reduce((a, b) => a + b, 0) / xs.length;
  const my = ys.reduce((a, b) => a + b, 0) / ys.length;
  let num = 0, den = 0;
  for (let i = 0; i < xs.length; i++) {
    num += (xs[i]! - mx) * (ys[i]! - my);
    den += (xs[i]! - mx) ** 2;
  }
  if (den === 0) throw new RangeError("a slope needs two distinct x values");
  return num / den;
}

/** The measured terms of one checkpoint's storage, in bytes. */
export interface StorageTerms {
  /** The changed files' bytes in the new layer's `data/` (whole files). */
  readonly payload: number;
  /** The new layer's `index` and `stat` (its tree and metadata records). */
  readonly tree: number;
  /** The new layer's `meta.json` and `SEALED` (its transition and root). */
  readonly root: number;
  /** The journal's rows' growth for the checkpoint (its operation, intent, checkpoint and head rows). */
  readonly journal: number;
  /** A native projection's delta: none (the view is an overlay mount, it writes nothing). */
  readonly projection: number;
  /** What a separately safe gc reclaimed meanwhile: none in the bench. */
  readonly reclaimed: number;
}

/** The equation's total: every term added, the reclaimed bytes taken off. */
export function storageTotal(t: StorageTerms): number {
  return t.payload + t.tree + t.root + t.journal + t.projection - t.reclaimed;
}

/** The storage equation with the measured terms, one term a line. */
export function renderStorageEquation(t: StorageTerms, changedBytes: number): string {
  const b = (n: number) => `${n.toLocaleString("en-US")} B`;
  return [
    `DeltaStorage = ${b(storageTotal(t))}`,
    `  =   new unique payload bytes            ${b(t.payload)}` +
    ` (the changed files' bytes: ${b(changedBytes)})`,
    `    + new changed canonical tree bytes    ${b(t.tree)} (the layer's index and stat)`,
    `    + transition/root bytes               ${b(t.root)} (meta.json, SEALED)`,
    `    + intent/operation/checkpoint/ref     ${b(t.journal)} (journal rows' payload)`,
    `    + projection delta                    ${b(t.projection)} (the view is a mount)`,
    `    - reclaimed unreachable bytes         ${b(t.reclaimed)} (no gc ran)`,
  ].join("\n");
}
