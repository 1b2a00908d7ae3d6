/**
 * The per-size table of `deno task bench`: marsh's steps per fork policy
 * against their baselines, times, ratios and peak memory.
 *
 * @module
 */

import { fmtMs, fmtRatio, table } from "./_format.ts";
import type { BaselineResults } from "./baselines.ts";
import type { ForkPolicy } from "./marsh_ops_types.ts";
import type { Summary } from "./measure.ts";
import { COPY_DEFAULT_BELOW, POLICIES } from "./bench_options.ts";
import type { MarshSummary, StrategyResult } from "./strategy_runs.ts";
import { type TargetResult, verdict } from "./targets.ts";
import type { TreeStats } from "./tree_gen.ts";

/** Everything measured at one size. */
export interface SizeResult {
  readonly files: number;
  readonly seed: number;
  readonly tree: string;
  readonly stats: TreeStats;
  readonly gitDirBytes: number;
  /** `.git/index`: what each fork of a Git project gets a copy of in its admin dir. */
  readonly gitIndexBytes: number;
  /** `/proc/loadavg` (1, 5, 15 min) before the baselines and after marsh. */
  readonly loadAverage: { readonly start: string; readonly end: string };
  readonly reused: boolean;
  readonly generationSeconds: number;
  readonly runs: number;
  readonly baselines: BaselineResults;
  /** Per fork policy; a policy not run is absent. */
  readonly strategies: Readonly<Partial<Record<ForkPolicy, StrategyResult>>>;
  /** Per fork policy: marsh/baseline medians. */
  readonly ratios: Readonly<Partial<Record<ForkPolicy, Readonly<Record<string, number>>>>>;
  readonly targets: readonly TargetResult[];
  readonly warnings: readonly string[];
}

function fmtTime(s: Summary | null | undefined): string {
  return s ? `${fmtMs(s.medianMs)} (min ${fmtMs(s.minMs)})` : "n/a";
}

function fmtMiB(kib: number | null, exact = true): string {
  return kib === null ? "n/a" : `${exact ? "" : "≥"}${(kib / 1024).toFixed(1)}`;
}

function fmtMarshMiB(s: MarshSummary | null | undefined): string {
  if (!s) return "n/a";
  const own = fmtMiB(s.peakRssKiB);
  return s.childPeakRssKiB === null ? own : `${own} (+child ${fmtMiB(s.childPeakRssKiB)})`;
}

function fmtBytes(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(1)} MB`;
}

type Step = "firstSnapshot" | "reSnapshot" | "fork" | "capture" | "sealCheck";

/** Each table row: the step, and the baselines it is compared with. */
const ROWS: readonly { step: Step; label: string; bases: readonly (keyof BaselineResults)[] }[] = [
  { step: "firstSnapshot", label: "first snapshot", bases: ["cpA", "cpASync"] },
  {
    step: "reSnapshot",
    label: "re-snapshot after 10 M, 5 A, 5 D in the tree",
    bases: ["gitStatus"],
  },
  { step: "fork", label: "fork (per branch)", bases: ["cpA", "worktreeAdd"] },
  { step: "capture", label: "capture (10 M, 5 A, 5 D) in a fork", bases: ["gitStatus", "gitDiff"] },
  {
    step: "sealCheck",
    label: "layer seal check before reuse (stat of every layer entry)",
    bases: ["gitStatus"],
  },
];

/** marsh/baseline medians of every row, keyed like `forkVsCpA`. */
export function ratiosOf(m: StrategyResult, b: BaselineResults): Record<string, number> {
  const out: Record<string, number> = {};
  for (const row of ROWS) {
    for (const base of row.bases) {
      const step = m[row.step];
      if (step === null) continue;
      out[`${row.step}Vs${base[0]?.toUpperCase()}${base.slice(1)}`] = step.medianMs /
        b[base].medianMs;
    }
  }
  return out;
}

function strategyHeader(r: SizeResult, p: ForkPolicy): string {
  const m = r.strategies[p];
  return m ? `${p} (${m.forkChoice.strategy})` : p;
}

function notRun(r: SizeResult, p: ForkPolicy): string {
  return p === "copy" && r.files >= COPY_DEFAULT_BELOW ? "not run (--strategies=auto,copy)" : "n/a";
}

/** The table, notes, targets and warnings of one size. */
export function renderSize(r: SizeResult): string {
  const b = r.baselines;
  const policies = POLICIES;
  const timeRows: string[][] = [[
    "step",
    ...policies.map((p) => strategyHeader(r, p)),
    "baseline",
    "baseline time",
    ...policies.map((p) => `${p}/baseline`),
  ]];
  const memRows: string[][] = [[
    "step",
    ...policies.map((p) => `${p} peak MiB`),
    "baseline",
    "baseline peak MiB",
  ]];
  for (const row of ROWS) {
    row.bases.forEach((base, i) => {
      const s = b[base];
      const cells = (f: (m: StrategyResult) => string) =>
        policies.map((p) => {
          if (i > 0) return "";
          const m = r.strategies[p];
          return m ? f(m) : notRun(r, p);
        });
      timeRows.push([
        i === 0 ? row.label : "",
        ...cells((m) => fmtTime(m[row.step])),
        s.label,
        fmtTime(s),
        ...policies.map((p) => {
          const m = r.strategies[p];
          const step = m?.[row.step];
          return step ? fmtRatio(step.medianMs / s.medianMs) : "n/a";
        }),
      ]);
      memRows.push([
        i === 0 ? row.label : "",
        ...cells((m) => fmtMarshMiB(m[row.step])),
        s.label,
        fmtMiB(s.peakRssKiB, s.peakExact),
      ]);
    });
  }
  const origin = r.reused ? "cached" : `generated in ${r.generationSeconds.toFixed(1)} s`;
  const out = [
    `## ${r.files} files, ${fmtBytes(r.stats.bytes)} (+ .git ${fmtBytes(r.gitDirBytes)}, ` +
    `its index ${fmtBytes(r.gitIndexBytes)}); ` +
    `seed ${r.seed}, ${r.runs} runs, medians; tree ${origin}`,
    "",
    `Load average ${r.loadAverage.start} before, ${r.loadAverage.end} after ` +
    `(${navigator.hardwareConcurrency} cores)` +
    (Math.max(...[r.loadAverage.start, r.loadAverage.end].map((l) => Number(l.split(" ")[0]))) >
        navigator.hardwareConcurrency
      ? ": the machine was busy, these timings are disturbed."
      : "."),
    "",
  ];
  for (const p of policies) {
    const m = r.strategies[p];
    if (!m) continue;
    let line = `Strategy that ran for ${p}: ${m.forkChoice.strategy} (${m.forkChoice.reason}).`;
    const { first, re } = m.layers;
    if (first !== null && re !== null) {
      line += ` First snapshot: ${first.copied} files copied into ${first.count} layer(s); ` +
        `re-snapshot: ${re.copied} files written, a stack of ${re.count}.`;
    }
    line += ` The engine's own clock for the snapshot proper (walk, copy, seal, mount): ` +
      `${fmtMs(m.engineMs.first)} (first), ${fmtMs(m.engineMs.re)} (re-snapshot).`;
    line +=
      ` Capture found ${m.capturedFiles} changed paths; forks timed: ${m.forksPerRun} per run.`;
    out.push(line);
  }
  out.push(
    "",
    table(timeRows),
    "",
    "Peak memory (in-process RSS of the harness for marsh; GNU time for baselines):",
    "",
    table(memRows),
    "",
    "First snapshot: each run first removes the project's layer store (`.marsh/layers`), so " +
      "`auto` copies the whole tree into a new layer; the layer store `syncfs`es that layer " +
      "before sealing it, so its time includes writing the bytes to disk, which `cp -a`'s does " +
      "not (`cp -a; sync` adds a timed `sync` after each copy). The re-snapshot is of the live " +
      "tree with the small change applied (reverted after, untimed), on top of that layer; " +
      "`copy` copies the whole tree both times. The seal check is the part of a re-snapshot " +
      "that re-stats every entry of the stack's layers (no content read) to find a layer changed " +
      "since its seal; its row is its own time against `git status`. The machine is shared and " +
      "noisy: compare ratios from one run, not times across runs.",
  );
  if (r.targets.length > 0) {
    const auto = r.strategies.auto;
    out.push(
      "",
      `TARGETS (issue 4) at ${r.files} files, strategy auto` +
        (auto ? ` (ran ${auto.forkChoice.strategy})` : " (not run)") + ":",
      "",
      ...r.targets.map((t) => `- ${t.what} ${t.limitText}: ${t.measured} — ${verdict(t)}`),
    );
  }
  for (const w of r.warnings) out.push("", `WARNING: ${w}`);
  return out.join("\n");
}
