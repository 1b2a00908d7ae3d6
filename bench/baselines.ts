/**
 * The tools a user would use instead of marsh, timed on a cached tree:
 *
 * - `cp -a` of the whole project directory (`.git` included, as a user
 *   copying a checkout would): the baseline for a snapshot and for a
 *   copy-per-branch fork; and `cp -a` followed by `sync` (each timed run's
 *   copy, then a timed `sync` right after it): what a copy costs once its
 *   bytes are on disk, as a sealed snapshot layer's are (the layer store
 *   `syncfs`es before sealing);
 * - `git worktree add --detach` (removed after each run with
 *   `git worktree remove --force`): the other per-branch baseline;
 * - `git status --porcelain` and `git diff --binary` (after `git add -N` of
 *   the new files, untimed) on a throwaway `cp -a` copy holding the small
 *   change: the baselines for capture.
 *
 * Each gets one untimed warm-up run, then the timed runs; memory is read on
 * the warm-up for `cp -a` and `worktree add` (a fresh destination each time,
 * so nothing carries over) and on one extra untimed run for the git commands. The cached tree is never written except for
 * the worktree admin entries Git adds and removes in its `.git`.
 *
 * @module
 */

import { join } from "node:path";
import { runChecked } from "./_command.ts";
import type { HardenedGit } from "./_git.ts";
import {
  type ChildMemoryProbe,
  measureCommand,
  settle,
  summarize,
  type Summary,
  timeOnce,
} from "./measure.ts";
import { applySmallChange, type PlannedEdit } from "./small_change.ts";

/** Baseline measurements for one tree. */
export interface BaselineResults {
  /** `cp -a <tree> <copy>`. */
  readonly cpA: Summary;
  /** `cp -a <tree> <copy>`, then `sync`: each timed copy plus a timed `sync` after it. */
  readonly cpASync: Summary;
  /** `git worktree add --detach <path> HEAD`. */
  readonly worktreeAdd: Summary;
  /** `git status --porcelain` with the small change applied. */
  readonly gitStatus: Summary;
  /** `git diff --binary` with the small change applied and new files `add -N`ed. */
  readonly gitDiff: Summary;
}

/** Inputs of {@linkcode measureBaselines}. */
export interface BaselineOptions {
  /** The cached tree (a pristine Git worktree). */
  readonly tree: string;
  /** An empty directory on the same filesystem as `tree`, for copies and worktrees. */
  readonly scratch: string;
  /** The small change, planned against `tree`. */
  readonly change: readonly PlannedEdit[];
  readonly runs: number;
  readonly git: HardenedGit;
  readonly probe: ChildMemoryProbe | null;
  readonly log?: (line: string) => void;
}

async function removeTree(path: string): Promise<void> {
  // rm -rf, not Deno.remove: about twice as fast on 100k files, and untimed anyway.
  await runChecked({ cmd: "rm", args: ["-rf", "--", path] });
}

/**
 * Measures the baselines on `options.tree`.
 *
 * Needs read/write on the tree and the scratch dir, `--allow-run` for `cp`,
 * `rm`, `git`, `sync` and `/usr/bin/time`, and `--allow-env`.
 *
 * @throws {Error} when a command fails, or when `git status` on the changed
 * copy does not show exactly the planned 20 paths.
 */
export async function measureBaselines(options: BaselineOptions): Promise<BaselineResults> {
  const { tree, scratch, git, runs, probe } = options;
  const log = options.log ?? (() => {});
  const runName = (run: number) => run < 0 ? `warm${-run}` : `r${run}`;

  log("baseline: cp -a");
  const copyPath = (run: number) => join(scratch, `cp-${runName(run)}`);
  let keep: string | null = null;
  const syncMs: number[] = [];
  const cpA = await measureCommand(
    "cp -a",
    (run) => ({ cmd: "cp", args: ["-a", "--", tree, copyPath(run)] }),
    {
      runs,
      probe,
      probeOnWarmup: true,
      // The last timed copy is kept as the throwaway tree for the capture baselines.
      after: async (run) => {
        if (run >= 0) syncMs.push((await timeOnce(settle)).ms);
        if (run === runs - 1) keep = copyPath(run);
        else await removeTree(copyPath(run));
      },
    },
  );

  const cpASync = summarize(
    "cp -a; sync",
    cpA.samplesMs.map((ms, i) => ms + (syncMs[i] ?? NaN)),
    cpA.peakRssKiB,
    cpA.peakExact,
  );

  log("baseline: git worktree add");
  const wtPath = (run: number) => join(scratch, `wt-${runName(run)}`);
  const worktreeAdd = await measureCommand(
    "git worktree add",
    (run) => git.spec(tree, ["worktree", "add", "--quiet", "--detach", wtPath(run), "HEAD"]),
    {
      runs,
      probe,
      probeOnWarmup: true,
      after: async (run) => {
        await git.run(tree, ["worktree", "remove", "--force", wtPath(run)]);
      },
    },
  );
  await git.run(tree, ["worktree", "prune"]);

  const copy: string | null = keep;
  if (copy === null) throw new Error("No copy was kept for the capture baselines");
  try {
    // The copy has new inodes and ctimes: refresh the index once, untimed, so
    // git status measures the steady state, not a full re-hash.
    await git.run(copy, ["update-index", "-q", "--refresh"]);
    await applySmallChange(copy, options.change);
    const status = await git.run(copy, ["status", "--porcelain", "--untracked-files=all"]);
    const lines = status.split("\n").filter((l) => l !== "");
    if (lines.length !== options.change.length) {
      throw new Error(
        `The changed copy shows ${lines.length} paths, not ${options.change.length}: ${
          lines.slice(0, 5).join("; ")
        }`,
      );
    }

    log("baseline: git status --porcelain");
    const gitStatus = await measureCommand(
      "git status --porcelain",
      git.spec(copy, ["status", "--porcelain"]),
      { runs, probe },
    );

    const added = options.change.filter((e) => e.status === "A").map((e) => e.path);
    await git.run(copy, ["add", "-N", "--", ...added]);
    log("baseline: git diff --binary");
    const gitDiff = await measureCommand(
      "git diff --binary",
      git.spec(copy, ["diff", "--binary"]),
      { runs, probe },
    );
    return { cpA, cpASync, worktreeAdd, gitStatus, gitDiff };
  } finally {
    await removeTree(copy);
  }
}
