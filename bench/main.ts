/**
 * `deno task bench`: times marsh's snapshot, fork and capture against the
 * tools a user would otherwise use (`cp -a`, `git worktree add`,
 * `git status --porcelain`, `git diff --binary`) on generated trees of 1k, 10k
 * and 100k files, and prints one table per size with marsh/baseline ratios
 * (0.42× means marsh takes 0.42 of the baseline's time). When the sizes
 * include 10k files, one more table follows: `marsh split` end to end with
 * 1, 4 and 8 shell branches through the real CLI and daemon, against
 * `git worktree add` ×N (bench/split_e2e.ts); `--split` prints only that one.
 *
 * ```sh
 * deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] [--split]
 * ```
 *
 * Permissions (the task's): read/write (trees in bench/.trees/, temp dirs),
 * run (cp, rm, git, sync, /usr/bin/time), env (git's PATH), ffi (the engine).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { join } from "node:path";
import { runText } from "./_command.ts";
import { HardenedGit } from "./_git.ts";
import { type BaselineResults, measureBaselines } from "./baselines.ts";
import { marshOps } from "./marsh_ops.ts";
import { isNotWired, type MarshOps, NOT_WIRED_MESSAGE } from "./marsh_ops_types.ts";
import { ChildMemoryProbe, InProcessPeak, settle, summarize, type Summary } from "./measure.ts";
import {
  measureSplitE2e,
  renderSplitE2e,
  SPLIT_BRANCHES,
  type SplitE2eResult,
} from "./split_e2e.ts";
import {
  applySmallChange,
  cachedTree,
  dirtyReason,
  type PlannedEdit,
  planSmallChange,
  TREE_CACHE,
  type TreeStats,
} from "./tree_gen.ts";

const USAGE =
  "Usage: deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] [--split]";
const DEFAULT_SIZES = [1_000, 10_000, 100_000];
/** The tree size of the end-to-end split table. */
const SPLIT_FILES = 10_000;
/** Its timed runs per branch count, unless --runs says otherwise. */
const SPLIT_RUNS = 3;

/** A bad command line; the top level prints it with the usage and exits 2. */
class UsageError extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "UsageError";
  }
}

interface Options {
  readonly sizes: readonly number[];
  /** Null: 5 runs, 3 from 100k files up. */
  readonly runs: number | null;
  readonly seed: number;
  readonly json: boolean;
  readonly help: boolean;
  /** Only the end-to-end split table. */
  readonly split: boolean;
}

function positiveInt(flag: string, text: string): number {
  if (!/^[0-9]+$/.test(text) || Number(text) < 1 || !Number.isSafeInteger(Number(text))) {
    throw new UsageError(`Invalid value for --${flag}: "${text}" is not a positive integer`);
  }
  return Number(text);
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
      },
    }));
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err), { cause: err });
  }
  return {
    sizes: values.sizes === undefined
      ? DEFAULT_SIZES
      : values.sizes.split(",").map((s) => positiveInt("sizes", s.trim())),
    runs: values.runs === undefined ? null : positiveInt("runs", values.runs),
    seed: values.seed === undefined ? 1 : positiveInt("seed", values.seed),
    json: values.json ?? false,
    help: values.help ?? false,
    split: values.split ?? false,
  };
}

// ---------------------------------------------------------------------------
// The engine side

interface MarshSummary extends Summary {
  /** The largest child-process peak the ops reported, KiB. */
  readonly childPeakRssKiB: number | null;
}

interface MarshResults {
  readonly snapshot: MarshSummary;
  readonly fork: MarshSummary;
  readonly capture: MarshSummary;
}

class Samples {
  readonly ms: number[] = [];
  peakKiB = 0;
  childPeakKiB: number | null = null;

  add(ms: number, peakKiB: number, report: { childPeakRssKiB?: number }): void {
    this.ms.push(ms);
    this.peakKiB = Math.max(this.peakKiB, peakKiB);
    if (report.childPeakRssKiB !== undefined) {
      this.childPeakKiB = Math.max(this.childPeakKiB ?? 0, report.childPeakRssKiB);
    }
  }

  summary(label: string): MarshSummary {
    return { ...summarize(label, this.ms, this.peakKiB), childPeakRssKiB: this.childPeakKiB };
  }
}

/**
 * One untimed warm-up, then per run: snapshot, fork one branch, apply the
 * small change inside the fork (untimed), capture, clean up (untimed).
 */
async function measureMarsh(
  ops: MarshOps,
  tree: string,
  change: readonly PlannedEdit[],
  runs: number,
  sampler: InProcessPeak,
): Promise<MarshResults> {
  const snapshot = new Samples();
  const fork = new Samples();
  const capture = new Samples();
  for (let run = -1; run < runs; run++) {
    const timed = run >= 0;
    const label = timed ? `b${run + 1}` : "warm";
    let splitDir: string | null = null;
    try {
      if (timed) await settle();
      const snap = await sampler.measure(() => ops.snapshot(tree));
      splitDir = snap.value.splitDir;
      const dir = splitDir;
      if (timed) await settle();
      const forked = await sampler.measure(() => ops.fork(dir, label));
      await applySmallChange(forked.value.forkDir, change);
      if (timed) await settle();
      const captured = await sampler.measure(() => ops.capture(dir, label));
      if (timed) {
        snapshot.add(snap.ms, snap.peakKiB, snap.value);
        fork.add(forked.ms, forked.peakKiB, forked.value);
        capture.add(captured.ms, captured.peakKiB, captured.value);
      }
    } finally {
      if (splitDir !== null) await ops.cleanup(splitDir);
    }
  }
  return {
    snapshot: snapshot.summary("marsh snapshot"),
    fork: fork.summary("marsh fork"),
    capture: capture.summary("marsh capture"),
  };
}

// ---------------------------------------------------------------------------
// Reporting

interface SizeResult {
  readonly files: number;
  readonly seed: number;
  readonly tree: string;
  readonly stats: TreeStats;
  readonly gitDirBytes: number;
  readonly reused: boolean;
  readonly generationSeconds: number;
  readonly runs: number;
  readonly baselines: BaselineResults;
  readonly marsh: MarshResults | null;
  readonly ratios: Readonly<Record<string, number | null>>;
  /** Null when marsh did not run. */
  readonly captureSlowerThanTwiceStatus: boolean | null;
  readonly warnings: readonly string[];
}

function fmtMs(ms: number): string {
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

function fmtTime(s: Summary | null): string {
  return s === null ? "n/a" : `${fmtMs(s.medianMs)} (min ${fmtMs(s.minMs)})`;
}

function fmtMiB(kib: number | null, exact = true): string {
  return kib === null ? "n/a" : `${exact ? "" : "≥"}${(kib / 1024).toFixed(1)}`;
}

function fmtMarshMiB(s: MarshSummary | null): string {
  if (s === null) return "n/a";
  const own = fmtMiB(s.peakRssKiB);
  return s.childPeakRssKiB === null ? own : `${own} (+child ${fmtMiB(s.childPeakRssKiB)})`;
}

function fmtRatio(r: number | null): string {
  if (r === null) return "n/a";
  return `${r < 10 ? r.toFixed(2) : r.toFixed(1)}×`;
}

function fmtBytes(n: number): string {
  return n >= 1e9 ? `${(n / 1e9).toFixed(2)} GB` : `${(n / 1e6).toFixed(1)} MB`;
}

function ratio(marsh: Summary | null, base: Summary): number | null {
  return marsh === null ? null : marsh.medianMs / base.medianMs;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  const line = (r: readonly string[]) =>
    "| " + r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ") + " |";
  const rule = "|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|";
  return [line(rows[0] ?? []), rule, ...rows.slice(1).map(line)].join("\n");
}

function renderSize(r: SizeResult): string {
  const b = r.baselines;
  const m = r.marsh;
  const rows: string[][] = [
    [
      "step",
      "marsh",
      "marsh peak MiB",
      "baseline",
      "baseline time",
      "baseline peak MiB",
      "marsh/baseline",
    ],
    [
      "snapshot",
      fmtTime(m?.snapshot ?? null),
      fmtMarshMiB(m?.snapshot ?? null),
      "cp -a",
      fmtTime(b.cpA),
      fmtMiB(b.cpA.peakRssKiB, b.cpA.peakExact),
      fmtRatio(r.ratios.snapshotVsCp ?? null),
    ],
    [
      "fork (one branch)",
      fmtTime(m?.fork ?? null),
      fmtMarshMiB(m?.fork ?? null),
      "cp -a",
      fmtTime(b.cpA),
      fmtMiB(b.cpA.peakRssKiB, b.cpA.peakExact),
      fmtRatio(r.ratios.forkVsCp ?? null),
    ],
    [
      "",
      "",
      "",
      "git worktree add",
      fmtTime(b.worktreeAdd),
      fmtMiB(b.worktreeAdd.peakRssKiB, b.worktreeAdd.peakExact),
      fmtRatio(r.ratios.forkVsWorktree ?? null),
    ],
    [
      "capture (10 M, 5 A, 5 D)",
      fmtTime(m?.capture ?? null),
      fmtMarshMiB(m?.capture ?? null),
      "git diff --binary",
      fmtTime(b.gitDiff),
      fmtMiB(b.gitDiff.peakRssKiB, b.gitDiff.peakExact),
      fmtRatio(r.ratios.captureVsDiff ?? null),
    ],
    [
      "",
      "",
      "",
      "git status --porcelain",
      fmtTime(b.gitStatus),
      fmtMiB(b.gitStatus.peakRssKiB, b.gitStatus.peakExact),
      fmtRatio(r.ratios.captureVsStatus ?? null),
    ],
  ];
  const origin = r.reused ? "cached" : `generated in ${r.generationSeconds.toFixed(1)} s`;
  const out = [
    `## ${r.files} files, ${fmtBytes(r.stats.bytes)} (+ .git ${fmtBytes(r.gitDirBytes)}); ` +
    `seed ${r.seed}, ${r.runs} runs, tree ${origin}`,
    "",
    table(rows),
  ];
  if (r.files >= 100_000) {
    const status = b.gitStatus.medianMs;
    if (m === null) {
      out.push(
        "",
        `Capture vs 2× git status at ${r.files} files: not measured (${NOT_WIRED_MESSAGE}).`,
      );
    } else if (r.captureSlowerThanTwiceStatus) {
      out.push(
        "",
        `CAPTURE IS SLOWER THAN 2× GIT STATUS at ${r.files} files: ${fmtMs(m.capture.medianMs)} ` +
          `vs 2 × ${fmtMs(status)} = ${fmtMs(2 * status)}.`,
      );
    } else {
      out.push(
        "",
        `Capture is within 2× git status at ${r.files} files: ${fmtMs(m.capture.medianMs)} ` +
          `vs 2 × ${fmtMs(status)} = ${fmtMs(2 * status)}.`,
      );
    }
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
  let split: SplitE2eResult | null = null;
  try {
    for (const files of options.split ? [] : options.sizes) {
      const runs = options.runs ?? (files >= 100_000 ? 3 : 5);
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

      let marsh: MarshResults | null = null;
      const warnings: string[] = [];
      if (marshStatus === "ok") {
        log(`${files} files: marsh, ${runs} runs`);
        try {
          marsh = await measureMarsh(marshOps, tree.dir, change, runs, sampler);
        } catch (err) {
          if (!isNotWired(err)) throw err;
          marshStatus = "not wired";
          log(`${NOT_WIRED_MESSAGE}: printing the baselines alone`);
        }
        const dirty = await dirtyReason(tree.dir, tree.head, git);
        if (dirty !== null) {
          warnings.push(
            `the marsh run changed the source tree (${dirty}); it is regenerated next time`,
          );
          await Deno.remove(join(TREE_CACHE, `${files}-${options.seed}`, "complete.json"));
        }
      }

      const status = baselines.gitStatus.medianMs;
      const result: SizeResult = {
        files,
        seed: options.seed,
        tree: tree.dir,
        stats: tree.stats,
        gitDirBytes: await duBytes(join(tree.dir, ".git")),
        reused: tree.reused,
        generationSeconds: tree.generationSeconds,
        runs,
        baselines,
        marsh,
        ratios: {
          snapshotVsCp: ratio(marsh?.snapshot ?? null, baselines.cpA),
          forkVsCp: ratio(marsh?.fork ?? null, baselines.cpA),
          forkVsWorktree: ratio(marsh?.fork ?? null, baselines.worktreeAdd),
          captureVsDiff: ratio(marsh?.capture ?? null, baselines.gitDiff),
          captureVsStatus: ratio(marsh?.capture ?? null, baselines.gitStatus),
        },
        captureSlowerThanTwiceStatus: marsh === null ? null : marsh.capture.medianMs > 2 * status,
        warnings,
      };
      results.push(result);
      if (!options.json) console.log(renderSize(result) + "\n");
    }
    if (options.split || options.sizes.includes(SPLIT_FILES)) {
      split = await splitTable(options, git, scratchRoot, log);
    }
  } finally {
    await Deno.remove(scratchRoot, { recursive: true });
  }

  const loadEnd = await loadavg();
  const damon = await damonNote();
  // With --split only the end-to-end table ran: the per-size tables' notes do not apply.
  const sizeNotes = options.split ? {} : {
    marsh: marshStatus === "ok" ? "measured" : `n/a: ${NOT_WIRED_MESSAGE}`,
    cpA: "cp -a copies the whole project dir, .git (one pack) and ignored files included, " +
      "as a user copying a checkout would",
  };
  const memoryNotes = options.split ? {} : {
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
      JSON.stringify({ schema: "marsh-bench/1", notes, sizes: results, split }, null, 2),
    );
  } else {
    console.log(Object.entries(notes).map(([k, v]) => `- ${k}: ${v}`).join("\n"));
  }
}

/** The end-to-end split table on the cached 10k-file tree. */
async function splitTable(
  options: Options,
  git: HardenedGit,
  scratchRoot: string,
  log: (line: string) => void,
): Promise<SplitE2eResult> {
  const tree = await cachedTree(SPLIT_FILES, options.seed, git, log);
  const scratch = join(scratchRoot, "split");
  await Deno.mkdir(scratch);
  const result = await measureSplitE2e({
    tree: tree.dir,
    scratch,
    branches: SPLIT_BRANCHES,
    runs: options.runs ?? SPLIT_RUNS,
    git,
    log,
  });
  const dirty = await dirtyReason(tree.dir, tree.head, git);
  if (!options.json) console.log(renderSplitE2e(result, SPLIT_FILES) + "\n");
  if (dirty !== null) {
    console.error(`bench: WARNING: the split runs changed the source tree (${dirty})`);
    await Deno.remove(join(TREE_CACHE, `${SPLIT_FILES}-${options.seed}`, "complete.json"));
  }
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
