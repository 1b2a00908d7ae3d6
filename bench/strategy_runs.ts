/**
 * The per-size measurement of marsh's own steps (snapshot, re-snapshot,
 * fork, capture, layer seal check) for one fork policy on one generated
 * tree, in the harness's process.
 *
 * @module
 */

import type { ForkPolicy, LayersReport, MarshOps } from "./marsh_ops_types.ts";
import { type InProcessPeak, median, settle, summarize, type Summary } from "./measure.ts";
import {
  applySmallChange,
  backupSmallChange,
  type PlannedEdit,
  restoreSmallChange,
} from "./small_change.ts";

/** Forks timed per run: every one is a sample of "fork per branch". */
export const FORKS_PER_RUN: Readonly<Record<ForkPolicy, number>> = { auto: 4, copy: 1 };

/** A step's summary with the largest child-process peak. */
export interface MarshSummary extends Summary {
  /** The largest child-process peak the ops reported, KiB. */
  readonly childPeakRssKiB: number | null;
}

/** One fork policy's measurements on one tree. */
export interface StrategyResult {
  readonly policy: ForkPolicy;
  /** The strategy its forks used and why (from the last timed run). */
  readonly forkChoice: { readonly strategy: string; readonly reason: string };
  /** Entries the snapshot admitted. */
  readonly snapshotFiles: number;
  /** The layered base of the first snapshot and of the re-snapshot (last timed run); null for copies. */
  readonly layers: { readonly first: LayersReport | null; readonly re: LayersReport | null };
  /** Medians of the engine's own snapshot clock (`SnapshotReport.engineMs`), ms. */
  readonly engineMs: { readonly first: number; readonly re: number };
  /** Paths the capture found changed (last timed run): 20 for the small change. */
  readonly capturedFiles: number;
  readonly forksPerRun: number;
  /** The project's first snapshot (its layer store removed before it). */
  readonly firstSnapshot: MarshSummary;
  /** A snapshot of the live tree after the small change, on top of the first one. */
  readonly reSnapshot: MarshSummary;
  /** One fork; `forksPerRun` samples per run. */
  readonly fork: MarshSummary;
  readonly capture: MarshSummary;
  /**
   * The layer seal check a snapshot makes before it reuses the stack (the
   * re-snapshot's stack: the full layer and the small change's); null for
   * copies, which have no layers.
   */
  readonly sealCheck: MarshSummary | null;
}

class Samples {
  readonly ms: number[] = [];
  peakKiB = 0;
  childPeakKiB: number | null = null;

  add(m: { ms: number; peakKiB: number; value: { childPeakRssKiB?: number } }): void {
    this.ms.push(m.ms);
    this.peakKiB = Math.max(this.peakKiB, m.peakKiB);
    const child = m.value.childPeakRssKiB;
    if (child !== undefined) this.childPeakKiB = Math.max(this.childPeakKiB ?? 0, child);
  }

  summary(label: string): MarshSummary {
    return { ...summarize(label, this.ms, this.peakKiB), childPeakRssKiB: this.childPeakKiB };
  }
}

/**
 * One untimed warm-up, then per run: forget the layer store (auto), first
 * snapshot, `forksPerRun` forks, the small change inside the first fork
 * (untimed), its capture, removal (untimed); then the small change applied
 * to the live tree (untimed), a re-snapshot, its removal and the change
 * reverted (untimed); for auto, the seal check of the chain's stack alone.
 * Each timed step follows a `sync`.
 */
export async function measureMarsh(
  ops: MarshOps,
  policy: ForkPolicy,
  tree: string,
  change: readonly PlannedEdit[],
  runs: number,
  sampler: InProcessPeak,
): Promise<StrategyResult> {
  const first = new Samples();
  const re = new Samples();
  const fork = new Samples();
  const capture = new Samples();
  const seal = new Samples();
  const engineFirst: number[] = [];
  const engineRe: number[] = [];
  const forksPerRun = FORKS_PER_RUN[policy];
  let forkChoice = { strategy: "n/a", reason: "not run" };
  let snapshotFiles = 0;
  let layers: StrategyResult["layers"] = { first: null, re: null };
  let capturedFiles = 0;
  for (let run = -1; run < runs; run++) {
    const timed = run >= 0;
    const settled = async () => {
      if (timed) await settle();
    };
    if (policy === "auto") await ops.forgetSnapshots(tree);

    let splitDir: string | null = null;
    let firstLayers: LayersReport | null = null;
    try {
      await settled();
      const snap = await sampler.measure(() => ops.snapshot(tree, policy));
      splitDir = snap.value.splitDir;
      const dir = splitDir;
      forkChoice = snap.value.forkChoice;
      snapshotFiles = snap.value.files;
      firstLayers = snap.value.layers;
      let changed: string | null = null;
      for (let i = 1; i <= forksPerRun; i++) {
        await settled();
        const forked = await sampler.measure(() => ops.fork(dir, `b${i}`));
        changed ??= forked.value.forkDir;
        if (timed) fork.add(forked);
      }
      if (changed === null) throw new Error("No fork was made");
      await applySmallChange(changed, change);
      await settled();
      const captured = await sampler.measure(() => ops.capture(dir, "b1"));
      capturedFiles = captured.value.files;
      if (timed) {
        first.add(snap);
        engineFirst.push(snap.value.engineMs);
        capture.add(captured);
      }
    } finally {
      if (splitDir !== null) await ops.cleanup(splitDir);
    }

    // The small change in the live tree, snapshotted on top of the first snapshot.
    const backup = await backupSmallChange(tree, change);
    let reDir: string | null = null;
    try {
      await applySmallChange(tree, change);
      await settled();
      const snap = await sampler.measure(() => ops.snapshot(tree, policy));
      reDir = snap.value.splitDir;
      layers = { first: firstLayers, re: snap.value.layers };
      if (timed) {
        re.add(snap);
        engineRe.push(snap.value.engineMs);
      }
    } finally {
      try {
        if (reDir !== null) await ops.cleanup(reDir);
      } finally {
        await restoreSmallChange(backup);
      }
    }
    if (policy === "auto") {
      await settled();
      const checked = await sampler.measure(() => ops.sealCheck(tree));
      if (timed) seal.add(checked);
    }
  }
  return {
    policy,
    forkChoice,
    snapshotFiles,
    layers,
    engineMs: { first: median(engineFirst), re: median(engineRe) },
    capturedFiles,
    forksPerRun,
    firstSnapshot: first.summary(`marsh first snapshot (${policy})`),
    reSnapshot: re.summary(`marsh re-snapshot (${policy})`),
    fork: fork.summary(`marsh fork (${policy})`),
    capture: capture.summary(`marsh capture (${policy})`),
    sealCheck: policy === "auto" ? seal.summary("marsh layer seal check (auto)") : null,
  };
}
