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
 * Last, every target in one table. `--cli` prints only how fast the CLI
 * starts (bench/cli.ts). `--resolve` prints only `marsh merge` through the
 * CLI against `git apply --3way` (bench/resolve_cli.ts), then the `--git`
 * planner alone against `git apply --3way --check` (bench/resolve.ts).
 *
 * ```sh
 * deno task bench [--sizes=1000,10000,100000] [--runs=N] [--seed=N] [--json] [--split]
 *                 [--strategies=auto,copy] [--branches=4] [--kit] [--kit-runs=10]
 *                 [--kit-branches=1,4]
 * deno task bench --cli [--cli-runs=21] [--json]
 * deno task bench --resolve [--sizes=10000,100000] [--runs=11] [--seed=N] [--json]
 * deno task bench --checkpoints [--sizes=10000,100000] [--runs=30] [--serial=1,10,100] [--json]
 * deno task bench --tree [--runs=10] [--json]
 * ```
 *
 * `--checkpoints` prints only the checkpoint sessions' figures (issue 14 §5,
 * bench/checkpoints.ts) against their targets.
 *
 * Permissions (the task's): read/write (trees in bench/.trees/, temp dirs),
 * run (cp, rm, chmod, git, sync, bash, ./marsh, /usr/bin/time, docker,
 * umount), env (git's PATH), ffi (the engine).
 *
 * @module
 */

import { join } from "node:path";
import { HardenedGit } from "./_git.ts";
import { renderCliBench, runCliBench } from "./cli.ts";
import { measureResolve, renderResolve, RESOLVE_RUNS, RESOLVE_SIZES } from "./resolve.ts";
import { type CliTree, measureResolveCli, renderResolveCli } from "./resolve_cli.ts";
import { measureBaselines } from "./baselines.ts";
import { type Breakdown, measureBreakdown, renderBreakdown } from "./breakdown_snapshot.ts";
import { runCheckpoints } from "./checkpoints_main.ts";
import { measureTree, renderTree, TREE_RUNS } from "./tree.ts";
import { measureTreeJournal, renderTreeJournal } from "./tree_journal.ts";
import {
  CHECKPOINT_RUNS,
  CHECKPOINT_SIZES,
  COPY_DEFAULT_BELOW,
  kitWanted,
  onlySome,
  type Options,
  parseOptions,
  policiesAt,
  SPLIT_MIN_FILES,
  SPLIT_RUNS,
  splitSizes,
  splitWanted,
  USAGE,
  UsageError,
} from "./bench_options.ts";
import { damonNote, duBytes, loadavg } from "./machine.ts";
import { marshOps } from "./marsh_ops.ts";
import {
  type ForkPolicy,
  isNotWired,
  type MarshOps,
  NOT_WIRED_MESSAGE,
} from "./marsh_ops_types.ts";
import { ChildMemoryProbe, InProcessPeak } from "./measure.ts";
import { measureSplitE2e, renderSplitE2e, type SplitE2eResult } from "./split_e2e.ts";
import { measureKitE2e } from "./kit_e2e.ts";
import { renderKitE2e } from "./kit_report.ts";
import type { KitE2eResult } from "./kit_types.ts";
import { ratiosOf, renderSize, type SizeResult } from "./size_report.ts";
import { FORKS_PER_RUN, measureMarsh, type StrategyResult } from "./strategy_runs.ts";
import { kitTargets, sizeTargets, splitTargets } from "./target_sets.ts";
import { renderTargets, type TargetResult, verdict } from "./targets.ts";
import { planSmallChange } from "./small_change.ts";
import { measureCaptureBreakdown, renderCaptureBreakdown } from "./breakdown_capture.ts";
import { cachedTree, dirtyReason, TREE_CACHE } from "./tree_cache.ts";

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
      let breakdown: Breakdown | null = null;
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
          if (strategies.auto && !options.json) {
            log(`${files} files: snapshot and fork breakdown, ${runs} runs`);
            breakdown = await measureBreakdown(marshOps, tree.dir, scratch, files, runs);
          }
          const gitStatusMs = baselines.gitStatus.medianMs;
          const capture = await measureCaptureBreakdown({
            tree: tree.dir,
            files,
            change,
            runs,
            gitStatusMs,
          });
          if (!options.json) console.log(renderCaptureBreakdown(capture) + "\n");
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
      if (breakdown !== null) console.log(renderBreakdown(breakdown) + "\n");
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
      ? "measured in the harness's process (splitfs/workspace/workspace.ts, the service's code)"
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
  } else if (options.cliRuns !== null) {
    const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();
    const result = await runCliBench(deno, options.cliRuns, (l) => console.error(l));
    console.log(options.json ? JSON.stringify(result, null, 2) : renderCliBench(result));
  } else if (options.tree) {
    const result = await measureTree({
      runs: options.runs ?? TREE_RUNS,
      log: (l) => console.error(`bench: ${l}`),
    });
    const journal = measureTreeJournal();
    console.log(
      options.json
        ? JSON.stringify({ ...result, journal }, null, 2)
        : `${renderTree(result)}\n\n${renderTreeJournal(journal)}`,
    );
  } else if (options.checkpoints) {
    await runCheckpoints({
      sizes: options.sizesGiven ? options.sizes : CHECKPOINT_SIZES,
      runs: options.runs ?? CHECKPOINT_RUNS,
      serial: options.serial,
      seed: options.seed,
      json: options.json,
      args: Deno.args,
    });
  } else if (options.resolve) {
    await using git = await HardenedGit.create();
    const log = (l: string) => console.error(`bench: ${l}`);
    const runs = options.runs ?? RESOLVE_RUNS;
    const sizes = options.sizesGiven ? options.sizes : RESOLVE_SIZES;
    const trees: CliTree[] = [];
    for (const files of [...sizes].sort((a, b) => a - b)) {
      const tree = await cachedTree(files, options.seed, git, log);
      trees.push({
        files,
        dir: tree.dir,
        head: tree.head,
        workDir: join(tree.dir, "..", "work"),
        edits: await planSmallChange(tree.dir, options.seed, git),
      });
    }
    const cli = await measureResolveCli({ git, runs, trees, log });
    const planner = await measureResolve({ git, runs, seed: options.seed, sizes, log });
    console.log(
      options.json
        ? JSON.stringify({ cli, planner }, null, 2)
        : `${renderResolveCli(cli)}\n\n${renderResolve(planner)}`,
    );
  } else {
    await run(options);
  }
}
