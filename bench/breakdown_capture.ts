/**
 * Where a capture's time goes (issue 12): the capture of an overlay fork
 * taken apart phase by phase (`splitfs/capture/capture_phases.ts`), for a fork the
 * branch left unchanged (the fixed part, which must not grow with the tree)
 * and for one holding the small change (10 M, 5 A, 5 D), medians of the
 * timed runs after one untimed warm-up, in the harness's process as the
 * per-size table measures capture. Printed after each size's table so the
 * next regression shows which phase it is in.
 *
 * Needs `--allow-ffi`, read/write on the tree, and `--allow-run=sync`.
 *
 * @module
 */

import {
  CAPTURE_PHASES,
  type CapturePhase,
  PhaseClock,
} from "../splitfs/capture/capture_phases.ts";
import { SplitWorkspace } from "../splitfs/workspace/workspace.ts";
import { fmtMs, fmtRatio, table } from "./_format.ts";
import { median, settle } from "./measure.ts";
import { applySmallChange, type PlannedEdit } from "./small_change.ts";

/** One kind of capture, phase by phase. */
export interface CaptureBreakdownRow {
  /** Median milliseconds per phase. */
  readonly phases: Readonly<Record<CapturePhase, number>>;
  /** Median of the whole capture, as the caller's clock saw it. */
  readonly totalMs: number;
  /** Median of what no phase took (the whole capture less its phases: the calls between them, GC). */
  readonly otherMs: number;
  /** Paths the capture found changed. */
  readonly files: number;
}

/** The breakdown at one tree size. */
export interface CaptureBreakdown {
  readonly files: number;
  readonly runs: number;
  /** The fork strategy the splits used (the breakdown is of overlay forks). */
  readonly strategy: string;
  readonly unchanged: CaptureBreakdownRow;
  readonly smallChange: CaptureBreakdownRow;
  /** `git status --porcelain` on the same tree with the same change, ms (the per-size baseline). */
  readonly gitStatusMs: number | null;
}

interface Sample {
  readonly clock: PhaseClock;
  readonly ms: number;
  readonly files: number;
}

function captureTimed(ws: SplitWorkspace, label: string): Sample {
  const clock = new PhaseClock();
  const t0 = performance.now();
  const r = ws.capture(label, { clock });
  return { clock, ms: performance.now() - t0, files: r.files };
}

function rowOf(samples: readonly Sample[]): CaptureBreakdownRow {
  const phases = Object.fromEntries(
    CAPTURE_PHASES.map((p) => [p, median(samples.map((s) => s.clock.ms[p]))]),
  ) as Record<CapturePhase, number>;
  return {
    phases,
    totalMs: median(samples.map((s) => s.ms)),
    otherMs: median(
      samples.map((s) => s.ms - CAPTURE_PHASES.reduce((sum, p) => sum + s.clock.ms[p], 0)),
    ),
    files: samples[samples.length - 1]?.files ?? 0,
  };
}

/**
 * Per run: a split of `tree` (`auto` forks), two forks, the small change
 * applied in one (untimed), then each fork captured with a phase clock
 * after a `sync`, and the split removed.
 */
export async function measureCaptureBreakdown(opts: {
  readonly tree: string;
  readonly files: number;
  readonly change: readonly PlannedEdit[];
  readonly runs: number;
  readonly gitStatusMs: number | null;
}): Promise<CaptureBreakdown> {
  const unchanged: Sample[] = [];
  const changed: Sample[] = [];
  let strategy = "n/a";
  for (let run = -1; run < opts.runs; run++) {
    const ws = SplitWorkspace.create({
      root: opts.tree,
      id: `bench-breakdown-${Deno.pid}-${run + 1}`,
      env: {},
      forks: "auto",
    });
    try {
      strategy = ws.forkChoice.strategy;
      ws.fork("same");
      const fork = ws.fork("changed");
      await applySmallChange(fork.path, opts.change);
      await settle();
      const a = captureTimed(ws, "same");
      await settle();
      const b = captureTimed(ws, "changed");
      if (run >= 0) {
        unchanged.push(a);
        changed.push(b);
      }
    } finally {
      ws.remove();
    }
  }
  return {
    files: opts.files,
    runs: opts.runs,
    strategy,
    unchanged: rowOf(unchanged),
    smallChange: rowOf(changed),
    gitStatusMs: opts.gitStatusMs,
  };
}

/** The breakdown as a Markdown table with a line of context. */
export function renderCaptureBreakdown(b: CaptureBreakdown): string {
  const vsStatus = (ms: number) =>
    b.gitStatusMs === null ? "" : ` (${fmtRatio(ms / b.gitStatusMs)} git status)`;
  const rows = [
    ["capture phase", "unchanged fork", `small change (${b.smallChange.files} paths)`],
    ...CAPTURE_PHASES.map((p) => [p, fmtMs(b.unchanged.phases[p]), fmtMs(b.smallChange.phases[p])]),
    ["(between phases)", fmtMs(b.unchanged.otherMs), fmtMs(b.smallChange.otherMs)],
    [
      "whole capture",
      fmtMs(b.unchanged.totalMs) + vsStatus(b.unchanged.totalMs),
      fmtMs(b.smallChange.totalMs) + vsStatus(b.smallChange.totalMs),
    ],
  ];
  return [
    `### Capture breakdown, ${b.files} files (${b.strategy} forks, ${b.runs} runs, medians)`,
    "",
    table(rows),
    "",
    "The unchanged fork's capture is the fixed part (it must not grow with the tree); " +
    "`compare` is the walk of the fork's upper-dir candidates, reading both sides of each; " +
    "`store blobs` hashes, deflates and writes the pre- and post-images; `out files` is " +
    "`out/<label>/` and its `diff.patch` and `files`.",
  ].join("\n");
}
