/**
 * Number and table formatting shared by the benchmark reports. Private to
 * `bench/`.
 *
 * @module
 */

/** Milliseconds as `1.23 ms`, `45.6 ms` or `7.89 s`; `n/a` for a non-finite value. */
export function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "n/a";
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

/** A ratio as `0.42×` or `12.3×`; `n/a` for null. */
export function fmtRatio(r: number | null): string {
  if (r === null || !Number.isFinite(r)) return "n/a";
  if (r >= 1000) return `${Math.round(r)}×`;
  if (r >= 10) return `${r.toFixed(1)}×`;
  if (r >= 0.01) return `${r.toFixed(2)}×`;
  return `${r.toPrecision(2)}×`;
}

/** A Markdown table; the first row is the header. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  const line = (r: readonly string[]) =>
    "| " + r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ") + " |";
  const rule = "|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|";
  return [line(rows[0] ?? []), rule, ...rows.slice(1).map(line)].join("\n");
}
