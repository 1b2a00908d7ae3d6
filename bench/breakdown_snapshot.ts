/**
 * Where a first snapshot's and a fork's time goes (issue 12 §3), printed
 * after each size's table so the next regression shows which phase grew.
 *
 * The snapshot is timed against `cp -a; sync` in interleaved pairs (a copy,
 * then a snapshot, back to back, `runs` times): on a shared machine the
 * disk's speed changes from minute to minute, so a baseline timed minutes
 * earlier says little, while the median of per-pair ratios compares like
 * with like. The phases come from the engine itself
 * (`splitfs/phase_times.ts`): the layer store's (walk, seal check, stat
 * records, index, syncfs, seal), the walk's reading and writing, and the
 * overlay mount; what the engine's clock (`engineMs`) and the whole call
 * hold besides is shown as the workspace's share. Forks are timed one by
 * one, `FORKS` per run, with the overlay's and the Git admin dir's phases.
 *
 * Needs what bench/main.ts has: read/write on the tree, `--allow-run` for
 * `cp`, `rm`, `sync`, `chmod`, and `--allow-ffi`.
 *
 * @module
 */

import { join } from "node:path";
import { runChecked } from "./_command.ts";
import { fmtMs, fmtRatio, table } from "./_format.ts";
import type { MarshOps } from "./marsh_ops_types.ts";
import { median, settle } from "./measure.ts";
import { PHASE, PHASE_READ, PHASE_WRITE } from "../splitfs/layers/layers.ts";
import { PHASE_FORK_DIRS, PHASE_MOUNT, PHASE_MOUNTINFO } from "../splitfs/fork/overlay.ts";
import { PHASE_ADMIN, PHASE_GITFILE, PHASE_INDEX } from "../splitfs/fork/admin.ts";
import { recordPhases, stopPhases } from "../splitfs/phase_times.ts";

/** Forks timed per run. */
const FORKS = 4;

/** One size's breakdown. */
export interface Breakdown {
  readonly files: number;
  readonly runs: number;
  /** `cp -a <tree>` plus `sync`, and the first snapshot right after it, per pair, ms. */
  readonly pairs: readonly { readonly cpSyncMs: number; readonly snapshotMs: number }[];
  /** The first snapshot's phases, medians over the runs, ms, in print order. */
  readonly snapshot: readonly { readonly phase: string; readonly ms: number }[];
  /** Every fork's time, ms. */
  readonly forkMs: readonly number[];
  /** A fork's phases, medians over every fork, ms, in print order. */
  readonly fork: readonly { readonly phase: string; readonly ms: number }[];
}

async function removeTree(path: string): Promise<void> {
  await runChecked({ cmd: "rm", args: ["-rf", "--", path] });
}

/** The snapshot's rows from one run's recorded phases and clocks. */
function snapshotRows(p: ReadonlyMap<string, number>, engineMs: number, totalMs: number) {
  const get = (k: string) => p.get(k) ?? 0;
  const store = Object.values(PHASE).reduce((sum, k) => sum + get(k), 0);
  const mount = get(PHASE_MOUNTINFO) + get(PHASE_MOUNT);
  return [
    ["workspace: Git metadata, ignore inputs, split dirs, object store", totalMs - engineMs],
    [
      "workspace: ignore rules, opening the layers (engine clock, not the store)",
      engineMs - store - mount,
    ],
    [PHASE.head, get(PHASE.head)],
    [PHASE_READ, get(PHASE_READ)],
    [PHASE_WRITE, get(PHASE_WRITE)],
    [
      "layer walk: the rest (stat, listing, ignore tests, tree ids)",
      get(PHASE.walk) - get(PHASE_READ) - get(PHASE_WRITE),
    ],
    [PHASE.check, get(PHASE.check)],
    [PHASE.records, get(PHASE.records)],
    [PHASE.index, get(PHASE.index)],
    [PHASE.sync, get(PHASE.sync)],
    [PHASE.seal, get(PHASE.seal)],
    ["base mount: mountinfo and mount(2)", mount],
  ] as const;
}

function forkRows(p: ReadonlyMap<string, number>, totalMs: number) {
  const get = (k: string) => p.get(k) ?? 0;
  const named = [
    PHASE_FORK_DIRS,
    PHASE_MOUNTINFO,
    PHASE_MOUNT,
    PHASE_ADMIN,
    PHASE_INDEX,
    PHASE_GITFILE,
  ];
  const known = named.reduce((sum, k) => sum + get(k), 0);
  return [
    ...named.map((k) => [k, get(k)] as const),
    [
      "the rest (workspace checks, out/ marker, the mounted root's checks)",
      totalMs - known,
    ] as const,
  ];
}

/** Medians per row over runs of rows in the same order. */
function medians(runs: readonly (readonly (readonly [string, number])[])[]) {
  const first = runs[0] ?? [];
  return first.map(([phase], i) => ({ phase, ms: median(runs.map((r) => r[i]?.[1] ?? 0)) }));
}

/**
 * Measures `runs` interleaved pairs (`cp -a; sync`, then a first snapshot
 * with `FORKS` forks) on `tree`, each step after a `sync`.
 */
export async function measureBreakdown(
  ops: MarshOps,
  tree: string,
  scratch: string,
  files: number,
  runs: number,
): Promise<Breakdown> {
  const pairs: { cpSyncMs: number; snapshotMs: number }[] = [];
  const snapRuns: (readonly (readonly [string, number])[])[] = [];
  const forkRuns: (readonly (readonly [string, number])[])[] = [];
  const forkMs: number[] = [];
  const copy = join(scratch, "breakdown-cp");
  for (let run = 0; run < runs; run++) {
    await settle();
    let t0 = performance.now();
    await runChecked({ cmd: "cp", args: ["-a", "--", tree, copy] });
    await settle();
    const cpSyncMs = performance.now() - t0;
    await removeTree(copy);

    await ops.forgetSnapshots(tree);
    await settle();
    let phases = recordPhases();
    let splitDir: string | null = null;
    try {
      t0 = performance.now();
      const snap = await ops.snapshot(tree, "auto");
      const snapshotMs = performance.now() - t0;
      splitDir = snap.splitDir;
      stopPhases();
      pairs.push({ cpSyncMs, snapshotMs });
      snapRuns.push(snapshotRows(phases, snap.engineMs, snapshotMs));
      for (let i = 1; i <= FORKS; i++) {
        await settle();
        phases = recordPhases();
        t0 = performance.now();
        await ops.fork(splitDir, `b${i}`);
        const ms = performance.now() - t0;
        stopPhases();
        forkMs.push(ms);
        forkRuns.push(forkRows(phases, ms));
      }
    } finally {
      stopPhases();
      if (splitDir !== null) await ops.cleanup(splitDir);
    }
  }
  return {
    files,
    runs,
    pairs,
    snapshot: medians(snapRuns),
    forkMs,
    fork: medians(forkRuns),
  };
}

/** The breakdown as text: the pair ratios, then one table per operation. */
export function renderBreakdown(b: Breakdown): string {
  const ratios = b.pairs.map((p) => p.snapshotMs / p.cpSyncMs);
  const snapMs = median(b.pairs.map((p) => p.snapshotMs));
  const cpMs = median(b.pairs.map((p) => p.cpSyncMs));
  const forkMedian = median(b.forkMs);
  const share = (ms: number, of: number) => `${((100 * ms) / of).toFixed(0)}%`;
  return [
    `### Breakdown at ${b.files} files (${b.runs} interleaved runs, medians)`,
    "",
    `First snapshot ${fmtMs(snapMs)} against \`cp -a; sync\` ${
      fmtMs(cpMs)
    } timed just before it: ` +
    `${fmtRatio(median(ratios))} (median of the pairs' ratios: ${
      ratios.map((r) => fmtRatio(r)).join(", ")
    }; target ≤ 1.2×).`,
    "",
    table([
      ["first snapshot phase", "time", "share"],
      ...b.snapshot.map((r) => [r.phase, fmtMs(r.ms), share(r.ms, snapMs)]),
    ]),
    "",
    `Fork ${fmtMs(forkMedian)} (median of ${b.forkMs.length}, min ${
      fmtMs(Math.min(...b.forkMs))
    }; target ≤ 3 ms). Each phase is its own median, so on a noisy machine the rows need not add ` +
    "up to the total.",
    "",
    table([
      ["fork phase", "time", "share"],
      ...b.fork.map((r) => [r.phase, fmtMs(r.ms), share(r.ms, forkMedian)]),
    ]),
  ].join("\n");
}
