/**
 * Which targets each table is judged by: issue 4's per-size targets, the
 * end-to-end split's, and issue 5's Kit numbers (reported, no limit).
 *
 * @module
 */

import { fmtMs, fmtRatio } from "./_format.ts";
import type { BaselineResults } from "./baselines.ts";
import type { Summary } from "./measure.ts";
import type { SplitE2eResult } from "./split_e2e.ts";
import type { KitE2eResult } from "./kit_types.ts";
import type { StrategyResult } from "./strategy_runs.ts";
import { ratioText, report, target, type TargetResult } from "./targets.ts";

/** The sizes issue 4's 100k-only targets apply from. */
const BIG = 100_000;

/** Issue 4's targets at one size, for the strategy `auto` ran. */
export function sizeTargets(
  files: number,
  b: BaselineResults,
  m: StrategyResult | null,
): TargetResult[] {
  const strategy = m?.forkChoice.strategy ?? "n/a";
  const out: TargetResult[] = [];
  const fork = m?.fork.medianMs ?? null;
  out.push(target({
    what: "fork per branch",
    limitText: "≤ 3 ms",
    files,
    strategy,
    value: fork,
    limit: 3,
    bound: "max",
    measured: fork === null ? "n/a" : fmtMs(fork),
  }));
  if (files >= BIG) {
    out.push(target({
      what: "fork per branch vs cp -a",
      limitText: "≥ 2000× faster",
      files,
      strategy,
      value: fork === null ? null : b.cpA.medianMs / fork,
      limit: 2000,
      bound: "min",
      measured: fork === null
        ? "n/a"
        : `${fmtRatio(b.cpA.medianMs / fork)} faster (${fmtMs(fork)} vs ${fmtMs(b.cpA.medianMs)})`,
    }));
  }
  const vs = (
    what: string,
    limitText: string,
    s: Summary | undefined,
    base: Summary,
    limit: number,
  ) =>
    target({
      what,
      limitText,
      files,
      strategy,
      value: s === undefined ? null : s.medianMs / base.medianMs,
      limit,
      bound: "max",
      measured: s === undefined ? "n/a" : ratioText(s.medianMs, base.medianMs),
    });
  if (files >= BIG) {
    out.push(vs("capture of the small change", "≤ 0.1× git status", m?.capture, b.gitStatus, 0.1));
  }
  out.push(
    vs("re-snapshot after the small change", "≤ 2× git status", m?.reSnapshot, b.gitStatus, 2),
  );
  out.push(vs("first snapshot", "≤ 1.2× cp -a", m?.firstSnapshot, b.cpA, 1.2));
  // Issue 10 §2: what checking the layers' seals adds to a snapshot that reuses them.
  const seal = m?.sealCheck ?? null;
  out.push(report({
    what: "layer seal check before reuse vs git status",
    files,
    strategy,
    value: seal === null ? null : seal.medianMs / b.gitStatus.medianMs,
    measured: seal === null ? "n/a" : ratioText(seal.medianMs, b.gitStatus.medianMs),
  }));
  return out;
}

/** Issue 5 §6's numbers: reported, with no limit. */
export function kitTargets(kit: KitE2eResult): TargetResult[] {
  const strategy = `kit:fixture, ${kit.forkStrategies.join(", ") || "n/a"}`;
  const out: TargetResult[] = [];
  const c = kit.container;
  if (c !== null) {
    const a = c.marsh.startToDieMs;
    const b = c.docker.startToDieMs;
    out.push(report({
      what: "Kit `true` container start → exit (engine events) vs docker run --rm",
      files: kit.files,
      strategy,
      value: a === null || b === null ? null : a / b,
      measured: a === null || b === null ? "n/a" : ratioText(a, b),
    }));
    out.push(report({
      what: "Kit `true` branch launch → container gone (no capture) vs docker run --rm",
      files: kit.files,
      strategy,
      value: c.marshWindowNoCaptureMs / c.docker.totalMs,
      measured: ratioText(c.marshWindowNoCaptureMs, c.docker.totalMs),
    }));
  }
  for (const r of kit.rows) {
    out.push(report({
      what: `marsh split ×${r.branches} \`true\` → join: overhead per argv branch vs ` +
        `docker run --rm ×${r.branches}`,
      files: kit.files,
      strategy,
      value: r.overheadPerBranchMs,
      measured: `${fmtMs(r.overheadPerBranchMs)} per branch; ` +
        ratioText(r.marsh.medianMs, r.docker.medianMs),
    }));
  }
  return out;
}

/** The end-to-end split table's targets, one per branch count. */
export function splitTargets(split: SplitE2eResult): TargetResult[] {
  return split.rows.map((r) =>
    target({
      what: `marsh split ×${r.branches} vs git worktree add ×${r.branches} + true`,
      limitText: `≤ ${fmtRatio(r.targetRatio)}`,
      files: split.files,
      strategy: split.forkStrategies.join(", ") || "n/a",
      value: r.ratio,
      limit: r.targetRatio,
      bound: "max",
      measured: ratioText(r.marsh.medianMs, r.worktrees.medianMs),
    })
  );
}
