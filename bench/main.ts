/**
 * `deno task bench`: times marsh's snapshot, re-snapshot, fork and capture
 * against the tools a user would otherwise use (`cp -a`, `git worktree add`,
 * `git status --porcelain`, `git diff --binary`) on generated trees of 1k,
 * 10k and 100k files, for the overlay strategy (`auto`: a layered snapshot
 * store and overlay forks) and the copy strategy side by side, and prints
 * one table per size with marsh/baseline ratios (0.42× means marsh takes
 * 0.42 of the baseline's time) and issue 4's targets, met or missed. Copy
 * runs at 1k and 10k files only unless `--strategies` names it (a 100k copy
 * fork takes about a minute here).
 *
 * Then, on each requested size of at least 10k files (100k and up only when
 * `--sizes` names them), `marsh split` end to end with 4 `true` branches
 * through the real CLI and the daemon (its default fork policy), against
 * `git worktree add` ×4 (bench/split_e2e.ts); `--split` prints only that.
 * Then Kit branches (issue 5 §6, bench/kit_e2e.ts): a `true` argv branch
 * (`marsh split -n ::: a fixture true | marsh join`) against `docker run
 * --rm IMAGE true` on the tests' engine and fixture Kit image: the
 * container's start-to-exit and the overhead marsh adds per argv branch,
 * medians of `--kit-runs` runs (10), reported without a limit; `--kit`
 * prints only that (with `--split`, both). Without `--kit`, an engine that
 * cannot be had skips the table with a note instead of failing the run.
 * Last, every target in one table.
 *
 * ```sh
 * deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] [--split]
 *                 [--strategies=auto,copy] [--branches=4] [--kit] [--kit-runs=10]
 *                 [--kit-branches=1,4]
 * ```
 *
 * Permissions (the task's): read/write (trees in bench/.trees/, temp dirs),
 * run (cp, rm, chmod, git, sync, bash, ./marsh, /usr/bin/time, docker,
 * umount), env (git's PATH), ffi (the engine).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { join } from "node:path";
import { runText } from "./_command.ts";
import { fmtMs, fmtRatio, table } from "./_format.ts";
import { HardenedGit } from "./_git.ts";
import { type BaselineResults, measureBaselines } from "./baselines.ts";
import { marshOps } from "./marsh_ops.ts";
import {
  type ForkPolicy,
  isNotWired,
  type LayersReport,
  type MarshOps,
  NOT_WIRED_MESSAGE,
} from "./marsh_ops_types.ts";
import {
  ChildMemoryProbe,
  InProcessPeak,
  median,
  settle,
  summarize,
  type Summary,
} from "./measure.ts";
import {
  measureSplitE2e,
  renderSplitE2e,
  SPLIT_BRANCHES,
  type SplitE2eResult,
} from "./split_e2e.ts";
import {
  KIT_BRANCHES,
  KIT_RUNS,
  type KitE2eResult,
  measureKitE2e,
  renderKitE2e,
} from "./kit_e2e.ts";
import { ratioText, renderTargets, report, target, type TargetResult, verdict } from "./targets.ts";
import {
  applySmallChange,
  backupSmallChange,
  cachedTree,
  dirtyReason,
  type PlannedEdit,
  planSmallChange,
  restoreSmallChange,
  TREE_CACHE,
  type TreeStats,
} from "./tree_gen.ts";

const USAGE = "Usage: deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] " +
  "[--split] [--strategies=auto,copy] [--branches=4] [--kit] [--kit-runs=10] [--kit-branches=1,4]";
const DEFAULT_SIZES = [1_000, 10_000, 100_000];
const POLICIES: readonly ForkPolicy[] = ["auto", "copy"];
/** Without --strategies, copy runs below this many files only. */
const COPY_DEFAULT_BELOW = 100_000;
/** The end-to-end table runs on requested sizes of at least this many files. */
const SPLIT_MIN_FILES = 10_000;
/** Sizes from here up get an end-to-end table only when --sizes names them. */
const SPLIT_ASKED_FROM = 100_000;
/** Its timed runs per branch count, unless --runs says otherwise. */
const SPLIT_RUNS = 3;
/** Forks timed per run: every one is a sample of "fork per branch". */
const FORKS_PER_RUN: Readonly<Record<ForkPolicy, number>> = { auto: 4, copy: 1 };
/** The sizes issue 4's 100k-only targets apply from. */
const BIG = 100_000;

/** A bad command line; the top level prints it with the usage and exits 2. */
class UsageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

interface Options {
  readonly sizes: readonly number[];
  /** Whether --sizes was given (the end-to-end table runs on 100k only then). */
  readonly sizesGiven: boolean;
  /** Null: 5 runs, 3 from 100k files up. */
  readonly runs: number | null;
  readonly seed: number;
  readonly json: boolean;
  readonly help: boolean;
  /** Only the end-to-end split table. */
  readonly split: boolean;
  /** Null: auto everywhere, copy below {@linkcode COPY_DEFAULT_BELOW} files. */
  readonly strategies: readonly ForkPolicy[] | null;
  /** Branch counts of the end-to-end table. */
  readonly branches: readonly number[];
  /** Only the Kit table (with --split, the end-to-end table too). */
  readonly kit: boolean;
  /** Timed runs of the Kit table. */
  readonly kitRuns: number;
  /** Branch counts of the Kit table. */
  readonly kitBranches: readonly number[];
}

function positiveInt(flag: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`Invalid value for --${flag}: "${text}" is not a positive integer`);
  }
  return Number(text);
}

function intList(flag: string, text: string): number[] {
  return [...new Set(text.split(",").map((s) => positiveInt(flag, s.trim())))];
}

function policyList(text: string): ForkPolicy[] {
  const out: ForkPolicy[] = [];
  for (const s of text.split(",").map((p) => p.trim())) {
    const p = POLICIES.find((q) => q === s);
    if (p === undefined) {
      throw new UsageError(`Invalid value for --strategies: "${s}" is not one of auto, copy`);
    }
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

function parseOptions(args: readonly string[]): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...args],
      strict: true,
      allowPositionals: false,
      options: {
        sizes: { type: "string" },
        runs: { type: "string" },
        seed: { type: "string" },
        json: { type: "boolean" },
        help: { type: "boolean", short: "h" },
        split: { type: "boolean" },
        strategies: { type: "string" },
        branches: { type: "string" },
        kit: { type: "boolean" },
        "kit-runs": { type: "string" },
        "kit-branches": { type: "string" },
      },
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err), { cause: err });
  }
  return {
    sizes: values.sizes === undefined ? DEFAULT_SIZES : intList("sizes", values.sizes),
    sizesGiven: values.sizes !== undefined,
    runs: values.runs === undefined ? null : positiveInt("runs", values.runs),
    seed: values.seed === undefined ? 1 : positiveInt("seed", values.seed),
    json: values.json ?? false,
    help: values.help ?? false,
    split: values.split ?? false,
    strategies: values.strategies === undefined ? null : policyList(values.strategies),
    branches: values.branches === undefined ? SPLIT_BRANCHES : intList("branches", values.branches),
    kit: values.kit ?? false,
    kitRuns: values["kit-runs"] === undefined
      ? KIT_RUNS
      : positiveInt("kit-runs", values["kit-runs"]),
    kitBranches: values["kit-branches"] === undefined
      ? KIT_BRANCHES
      : intList("kit-branches", values["kit-branches"]),
  };
}

/** The fork policies measured at `files` files. */
function policiesAt(options: Options, files: number): ForkPolicy[] {
  return options.strategies === null
    ? POLICIES.filter((p) => p === "auto" || files < COPY_DEFAULT_BELOW)
    : [...options.strategies];
}

/** Whether only some tables were asked for (--split, --kit): the per-size tables are not. */
function onlySome(options: Options): boolean {
  return options.split || options.kit;
}

/** Whether the end-to-end split table runs: unless only the Kit table was asked for. */
function splitWanted(options: Options): boolean {
  return options.split || !options.kit;
}

/** Whether the Kit table runs: unless only the end-to-end split table was asked for. */
function kitWanted(options: Options): boolean {
  return options.kit || !options.split;
}

/** The sizes of the end-to-end table. */
function splitSizes(options: Options): number[] {
  if (!splitWanted(options)) return [];
  const sizes = options.sizes.filter((f) =>
    f >= SPLIT_MIN_FILES && (f < SPLIT_ASKED_FROM || options.sizesGiven)
  );
  return sizes.length === 0 && options.split ? [SPLIT_MIN_FILES] : sizes;
}

// ---------------------------------------------------------------------------
// The engine side

interface MarshSummary extends Summary {
  /** The largest child-process peak the ops reported, KiB. */
  readonly childPeakRssKiB: number | null;
}

/** One fork policy's measurements on one tree. */
interface StrategyResult {
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
async function measureMarsh(
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

// ---------------------------------------------------------------------------
// Targets

/** Issue 4's targets at one size, for the strategy `auto` ran. */
function sizeTargets(files: number, b: BaselineResults, m: StrategyResult | null): TargetResult[] {
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
function kitTargets(kit: KitE2eResult): TargetResult[] {
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

function splitTargets(split: SplitE2eResult): TargetResult[] {
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

// ---------------------------------------------------------------------------
// Reporting

interface SizeResult {
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

function ratiosOf(m: StrategyResult, b: BaselineResults): Record<string, number> {
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

function renderSize(r: SizeResult): string {
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

async function duBytes(path: string): Promise<number> {
  const out = await runText({ cmd: "du", args: ["-sb", "--", path] });
  return Number(out.split("\t")[0]);
}

async function loadavg(): Promise<string> {
  // Deno.loadavg needs --allow-sys, which the task does not grant.
  return (await runText({ cmd: "cat", args: ["/proc/loadavg"] })).trim().split(" ").slice(0, 3)
    .join(" ");
}

const DAMON_SCRIPT = `
for s in /sys/kernel/mm/damon/admin/kdamonds/*/contexts/*/schemes/*; do
  [ -e "$s/action" ] || continue
  k=\${s%%/contexts/*}
  [ "$(cat "$k/state")" = on ] || continue
  c=\${s%%/schemes/*}
  echo "$(cat "$s/action") $(cat "$s/access_pattern/age/min") $(cat "$c/monitoring_attrs/intervals/aggr_us")"
done
`;

/**
 * Says so when DAMON reclaims idle page cache on this machine (these VMs page
 * out memory idle for about a minute), which limits what "warm cache" means
 * for the big trees. Deno refuses to read /sys without --allow-all, so a
 * shell reads it.
 */
async function damonNote(): Promise<string | null> {
  let out: string;
  try {
    out = await runText({ cmd: "bash", args: ["-c", DAMON_SCRIPT] });
  } catch (err) {
    return `DAMON state unknown (${err instanceof Error ? err.message : String(err)})`;
  }
  for (const line of out.split("\n")) {
    const [action, minAge, aggrUs] = line.split(" ");
    if (action !== "pageout") continue;
    const seconds = (Number(minAge) * Number(aggrUs)) / 1e6;
    return `DAMON pages out memory idle for ≥ ${seconds} s, page cache included: only data ` +
      "touched within that window is warm, so big trees are read partly from disk";
  }
  return null;
}

// ---------------------------------------------------------------------------
// Main

/** Throws when the engine left a mount under `tree`, removes its state, and checks the tree is pristine. */
async function closeTree(
  ops: MarshOps,
  tree: { dir: string; head: string },
  key: string,
  git: HardenedGit,
  warnings: string[],
): Promise<void> {
  const mounted = ops.mountsUnder(tree.dir);
  if (mounted.length > 0) {
    throw new Error(`The engine left mounts under "${tree.dir}": ${mounted.join(", ")}`);
  }
  await ops.removeState(tree.dir);
  const dirty = await dirtyReason(tree.dir, tree.head, git);
  if (dirty !== null) {
    warnings.push(`the marsh runs changed the source tree (${dirty}); it is regenerated next time`);
    await Deno.remove(join(TREE_CACHE, key, "complete.json"));
  }
}

async function run(options: Options): Promise<void> {
  const log = (line: string) => console.error(`bench: ${line}`);
  const loadStart = await loadavg();
  const cores = navigator.hardwareConcurrency;
  if (Number(loadStart.split(" ")[0]) > cores) {
    log(`load average ${loadStart} exceeds ${cores} cores: timings will be noisy`);
  }
  await using git = await HardenedGit.create();
  const probe = await ChildMemoryProbe.detect();
  await using sampler = await InProcessPeak.create();
  const idleRssKiB = InProcessPeak.currentKiB();
  await Deno.mkdir(TREE_CACHE, { recursive: true });
  const scratchRoot = await Deno.makeTempDir({ dir: TREE_CACHE, prefix: ".scratch-" });

  let marshStatus: "ok" | "not wired" = "ok";
  const results: SizeResult[] = [];
  const splits: SplitE2eResult[] = [];
  let kit: KitE2eResult | null = null;
  let kitSkipped: string | null = null;
  const allTargets: TargetResult[] = [];
  try {
    for (const files of onlySome(options) ? [] : options.sizes) {
      const runs = options.runs ?? (files >= 100_000 ? 3 : 5);
      const loadBefore = await loadavg();
      const tree = await cachedTree(files, options.seed, git, log);
      const change = await planSmallChange(tree.dir, options.seed, git);
      const scratch = join(scratchRoot, String(files));
      await Deno.mkdir(scratch);
      log(`${files} files: baselines, ${runs} runs`);
      const baselines = await measureBaselines({
        tree: tree.dir,
        scratch,
        change,
        runs,
        git,
        probe,
        log,
      });

      const strategies: Partial<Record<ForkPolicy, StrategyResult>> = {};
      const warnings: string[] = [];
      if (marshStatus === "ok") {
        try {
          for (const policy of policiesAt(options, files)) {
            log(`${files} files: marsh, ${policy}, ${runs} runs`);
            strategies[policy] = await measureMarsh(
              marshOps,
              policy,
              tree.dir,
              change,
              runs,
              sampler,
            );
          }
        } catch (err) {
          if (!isNotWired(err)) throw err;
          marshStatus = "not wired";
          log(`${NOT_WIRED_MESSAGE}: printing the baselines alone`);
        } finally {
          await closeTree(marshOps, tree, `${files}-${options.seed}`, git, warnings);
        }
      }
      for (const m of Object.values(strategies)) {
        if (m.capturedFiles !== change.length) {
          warnings.push(
            `${m.policy}: capture found ${m.capturedFiles} changed paths, not ${change.length}`,
          );
        }
      }

      const targets = marshStatus === "ok"
        ? sizeTargets(files, baselines, strategies.auto ?? null)
        : [];
      allTargets.push(...targets);
      const ratios: Partial<Record<ForkPolicy, Record<string, number>>> = {};
      for (const [p, m] of Object.entries(strategies)) {
        ratios[p as ForkPolicy] = ratiosOf(m, baselines);
      }
      const result: SizeResult = {
        files,
        seed: options.seed,
        tree: tree.dir,
        stats: tree.stats,
        gitDirBytes: await duBytes(join(tree.dir, ".git")),
        gitIndexBytes: (await Deno.stat(join(tree.dir, ".git", "index"))).size,
        loadAverage: { start: loadBefore, end: await loadavg() },
        reused: tree.reused,
        generationSeconds: tree.generationSeconds,
        runs,
        baselines,
        strategies,
        ratios,
        targets,
        warnings,
      };
      results.push(result);
      if (!options.json) console.log(renderSize(result) + "\n");
    }
    const sizes = splitSizes(options);
    if (sizes.length === 0 && splitWanted(options) && !options.json) {
      console.log(
        `(No end-to-end table: it runs on requested sizes of ${SPLIT_MIN_FILES} files and up.)\n`,
      );
    }
    for (const files of sizes) {
      const split = await splitTable(options, files, git, scratchRoot, log);
      splits.push(split);
      allTargets.push(...splitTargets(split));
    }
    if (kitWanted(options)) {
      try {
        kit = await measureKitE2e({
          runs: options.kitRuns,
          branches: options.kitBranches,
          git,
          log,
        });
      } catch (err) {
        // Asked for by name, it must run; as part of everything, it must not sink the rest.
        if (options.kit) throw err;
        kitSkipped = err instanceof Error ? err.message : String(err);
        log(`kit e2e: not measured: ${kitSkipped}`);
      }
      if (kit !== null) {
        allTargets.push(...kitTargets(kit));
        if (!options.json) console.log(renderKitE2e(kit) + "\n");
        for (const w of kit.warnings) log(`WARNING: kit e2e: ${w}`);
      } else if (!options.json) {
        console.log(`(No Kit table: ${kitSkipped}; \`--kit\` makes this an error.)\n`);
      }
    }
  } finally {
    await Deno.remove(scratchRoot, { recursive: true });
  }

  const loadEnd = await loadavg();
  const damon = await damonNote();
  // With --split or --kit the per-size tables did not run: their notes do not apply.
  const sizeNotes = onlySome(options) ? {} : {
    marsh: marshStatus === "ok"
      ? "measured in the harness's process (splitfs/workspace.ts, the service's code)"
      : `n/a: ${NOT_WIRED_MESSAGE}`,
    cpA: "cp -a copies the whole project dir, .git (one pack) and ignored files included, " +
      "as a user copying a checkout would",
    firstSnapshot: "the layer store syncfs()es each new layer before sealing it; cp -a does not " +
      "sync (see `cp -a; sync`)",
    forks: `fork per branch: ${FORKS_PER_RUN.auto} forks timed per run for auto, ` +
      `${FORKS_PER_RUN.copy} for copy; copy runs below ${COPY_DEFAULT_BELOW} files unless ` +
      "--strategies names it",
  };
  const memoryNotes = onlySome(options) ? {} : {
    memoryCommands: probe.describe(),
    memoryInProcess: `${sampler.describe()}; harness idle RSS ${
      (idleRssKiB / 1024).toFixed(1)
    } MiB`,
  };
  const notes = {
    ...sizeNotes,
    timing: "wall clock, warm cache (one untimed warm-up), `sync` untimed before each timed run",
    ...memoryNotes,
    machine: `${cores} cores, load average ${loadStart} at start, ${loadEnd} at end; ` +
      `Deno ${Deno.version.deno}` + (damon === null ? "" : `; ${damon}`),
  };
  if (options.json) {
    console.log(
      JSON.stringify(
        {
          schema: "marsh-bench/2",
          notes,
          sizes: results,
          split: splits,
          kit,
          ...(kitSkipped === null ? {} : { kitSkipped }),
          targets: allTargets,
        },
        null,
        2,
      ),
    );
    return;
  }
  if (allTargets.length > 0) {
    const missed = allTargets.filter((t) => t.met === false);
    const limited = allTargets.filter((t) => !t.report).length;
    console.log(
      [
        "## TARGETS (issue 4; issue 5's Kit numbers, reported), every size",
        "",
        renderTargets(allTargets),
        "",
        limited === 0
          ? "No limits here: every row is a reported number."
          : missed.length === 0
          ? "Every measured target is met."
          : `Missed: ${missed.length} of ${limited}: ` +
            missed.map((t) => `${t.what} ${t.limitText} at ${t.files} (${verdict(t)})`).join(
              "; ",
            ) + ".",
      ].join("\n") + "\n",
    );
  }
  console.log(Object.entries(notes).map(([k, v]) => `- ${k}: ${v}`).join("\n"));
}

/** The end-to-end split table on the cached tree of `files` files. */
async function splitTable(
  options: Options,
  files: number,
  git: HardenedGit,
  scratchRoot: string,
  log: (line: string) => void,
): Promise<SplitE2eResult> {
  const tree = await cachedTree(files, options.seed, git, log);
  const scratch = join(scratchRoot, `split-${files}`);
  await Deno.mkdir(scratch);
  const warnings: string[] = [];
  let result: SplitE2eResult;
  try {
    result = await measureSplitE2e({
      tree: tree.dir,
      files,
      scratch,
      branches: options.branches,
      runs: options.runs ?? SPLIT_RUNS,
      git,
      log,
    });
  } finally {
    // The daemon is stopped by now; its layers stay in the tree until this.
    await closeTree(marshOps, tree, `${files}-${options.seed}`, git, warnings);
  }
  if (!options.json) console.log(renderSplitE2e(result) + "\n");
  for (const w of warnings) console.error(`bench: WARNING: split e2e at ${files} files: ${w}`);
  return result;
}

if (import.meta.main) {
  let options: Options;
  try {
    options = parseOptions(Deno.args);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    console.error(`bench: ${err.message}\n${USAGE}`);
    Deno.exit(2);
  }
  if (options.help) {
    console.log(USAGE);
  } else {
    await run(options);
  }
}
