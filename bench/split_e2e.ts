/**
 * End-to-end `marsh split` through the real CLI and daemon (issue 3 §8,
 * issue 4): `marsh split -n -b b1=true ... -b bN=true` on a cached tree (N =
 * 4 by default), against what a user would do instead: `git worktree add` N
 * times, one after the other, then the same command (`bash -c true`) in
 * every worktree at once. Reported as a ratio (marsh/baseline), medians,
 * against the target ratio {@linkcode SPLIT_TARGET_RATIO}.
 *
 * The daemon runs with its default fork policy (`auto`: a layered snapshot
 * and overlay forks where the host allows them; no `MARSH_FORKS` reaches
 * it), and the strategy each fork used is read from the manifest
 * (`branches[].fork_strategy`). The untimed warm-up split takes the
 * project's first snapshot (a full copy into a layer); the timed splits
 * re-snapshot an unchanged tree, as a user's next split would.
 *
 * The daemon's own overhead is reported apart, from the manifest that
 * `marsh join --json` prints: request to first branch start
 * (`min(branches[].started_unix_ms) - created_unix_ms`), with its parts
 * `timing_ms.snapshot` and `timing_ms.forks`, and `timing_ms.run` (first
 * launch until every branch is captured). "CLI to request" is the time
 * from spawning `marsh split` until the daemon journaled the split (the
 * CLI's start-up and connect; same clock, same machine).
 *
 * The daemon runs with a private `MARSH_HOME` (a temp dir), started once
 * before anything is timed and stopped at the end. After every run the split
 * is joined with a bare `marsh join --json` (every branch exits 0, so join
 * removes it; `marsh splits rm` if it was kept) and every worktree is
 * removed. The project's `.marsh/` (its layers) is left for the caller to
 * remove once the daemon is stopped.
 *
 * Needs `--allow-run` (./marsh, git, bash, sync), `--allow-env`, and
 * read/write on the tree, the scratch dir and the temp dir.
 *
 * @module
 */

import { join } from "node:path";
import { fmtMs, fmtRatio, table } from "./_format.ts";
import { type CommandSpec, describeCommand, runChecked } from "./_command.ts";
import type { HardenedGit } from "./_git.ts";
import { median, settle, summarize, type Summary } from "./measure.ts";

/** Branch counts measured by default. */
export const SPLIT_BRANCHES: readonly number[] = [4];

/** Issue 4's target: `marsh split` of 4 branches in at most this fraction of the worktree baseline. */
export const SPLIT_TARGET_RATIO = 0.1;

const MARSH = new URL("../marsh", import.meta.url).pathname;

/** No marsh command here should take this long; one that does fails the run. */
const MARSH_TIMEOUT_MS = 10 * 60_000;

/** The longest Unix socket path Linux takes is 107 bytes; branch sockets are `<home>/b/NN.sock`. */
const MAX_HOME_PATH = 107 - "/b/00.sock".length;

/** Inputs of {@linkcode measureSplitE2e}. */
export interface SplitE2eOptions {
  /** The cached tree (a pristine Git worktree). */
  readonly tree: string;
  /** Its file count, for the report. */
  readonly files: number;
  /** An empty directory on the same filesystem as `tree`, for worktrees. */
  readonly scratch: string;
  readonly branches: readonly number[];
  /** Timed runs per branch count (after one untimed warm-up of each side). */
  readonly runs: number;
  readonly git: HardenedGit;
  readonly log?: (line: string) => void;
}

/** The daemon's overhead for one branch count, medians over the runs, ms. */
export interface SplitOverhead {
  /** Spawning `marsh split` until the daemon journaled the split. */
  readonly cliToRequestMs: number;
  /** The split journaled until its first branch started. */
  readonly requestToFirstStartMs: number;
  /** `timing_ms.snapshot`. */
  readonly snapshotMs: number;
  /** `timing_ms.forks`: every fork, one after the other. */
  readonly forksMs: number;
  /** `timing_ms.run`: first launch until every branch is captured. */
  readonly runMs: number;
}

/** One row: N branches. */
export interface SplitE2eRow {
  readonly branches: number;
  /** Wall time of `marsh split` (spawn to exit). */
  readonly marsh: Summary;
  /** `git worktree add` ×N, then `bash -c true` in each. */
  readonly worktrees: Summary;
  readonly ratio: number;
  /** {@linkcode SPLIT_TARGET_RATIO}. */
  readonly targetRatio: number;
  readonly targetMet: boolean;
  readonly overhead: SplitOverhead;
}

/** The whole measurement on one tree. */
export interface SplitE2eResult {
  readonly tree: string;
  readonly files: number;
  readonly runs: number;
  /** What `marsh status --json` said new splits would use (`forks`), or null when it said nothing. */
  readonly daemonForks: Readonly<Record<string, string>> | null;
  /** Every `fork_strategy` the timed splits' manifests showed, sorted. */
  readonly forkStrategies: readonly string[];
  /** The warm-up split's `timing_ms.snapshot`: the project's first snapshot, ms. */
  readonly firstSnapshotMs: number;
  readonly rows: readonly SplitE2eRow[];
}

/** What the benches read of `marsh join --json`'s manifest. */
export interface ManifestView {
  readonly id: string;
  readonly state: string;
  readonly dir: string;
  readonly created_unix_ms: number;
  readonly timing_ms: Readonly<Record<string, number>>;
  readonly branches: readonly {
    readonly label: string;
    readonly state?: string;
    readonly status?: string;
    readonly started_unix_ms?: number;
    readonly finished_unix_ms?: number;
    readonly fork_strategy?: string;
  }[];
}

/** `marsh join --json`'s output as a manifest, or an error quoting it. */
export function parseManifest(text: string): ManifestView {
  const m = JSON.parse(text) as ManifestView;
  if (typeof m.id !== "string" || !Array.isArray(m.branches)) {
    throw new Error(`marsh join --json printed no manifest: ${text.slice(0, 200)}`);
  }
  return m;
}

/** Whether `path` exists (without following a final symlink). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/** The `marsh` CLI against a private daemon. */
class PrivateMarsh implements AsyncDisposable {
  readonly #home: string;
  readonly #env: Record<string, string>;
  readonly #cwd: string;

  private constructor(home: string, cwd: string) {
    this.#home = home;
    this.#cwd = cwd;
    const env = Deno.env.toObject();
    // A MARSH_SOCK (inside a shell branch) would send the CLI to another daemon.
    for (const name of Object.keys(env)) {
      if (name.startsWith("MARSH_") && name !== "MARSH_DENO") delete env[name];
    }
    this.#env = { ...env, MARSH_HOME: `${home}/home` };
  }

  /** Makes the control dir's parent and starts the daemon there. */
  static async start(cwd: string): Promise<PrivateMarsh> {
    let parent = await Deno.makeTempDir({ prefix: "marsh-bench-split-" });
    if (`${parent}/home`.length > MAX_HOME_PATH) {
      await Deno.remove(parent);
      parent = await Deno.makeTempDir({ dir: "/tmp", prefix: "marsh-bench-split-" });
    }
    const m = new PrivateMarsh(parent, cwd);
    await m.run(["daemon", "start"]);
    return m;
  }

  spec(args: readonly string[]): CommandSpec {
    return { cmd: MARSH, args, cwd: this.#cwd, env: this.#env, clearEnv: true };
  }

  async run(args: readonly string[]): Promise<string> {
    return new TextDecoder().decode(await runMarsh(this.spec(args)));
  }

  /** Stops the daemon and removes the control dir. Idempotent. */
  async close(): Promise<void> {
    if (!(await exists(this.#home))) return;
    try {
      await this.run(["daemon", "stop"]);
    } finally {
      await Deno.remove(this.#home, { recursive: true });
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}

/**
 * Like `runChecked`, with `input` (if any) on the child's stdin and a time
 * limit: a split that never settles fails the benchmark instead of hanging it.
 */
async function runMarsh(spec: CommandSpec, input: Uint8Array | null = null): Promise<Uint8Array> {
  const signal = AbortSignal.timeout(MARSH_TIMEOUT_MS);
  const child = new Deno.Command(spec.cmd, {
    args: [...spec.args],
    cwd: spec.cwd,
    env: spec.env ? { ...spec.env } : undefined,
    clearEnv: spec.clearEnv ?? false,
    stdin: input === null ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
    signal,
  }).spawn();
  if (input !== null) {
    const writer = child.stdin.getWriter();
    await writer.write(input);
    await writer.close();
  }
  const out = await child.output();
  const stderr = new TextDecoder().decode(out.stderr).trim() || "(no stderr)";
  if (signal.aborted) {
    throw new Error(
      `Command "${describeCommand(spec)}" did not finish within ${
        MARSH_TIMEOUT_MS / 1000
      } s: ${stderr}`,
    );
  }
  if (!out.success) {
    throw new Error(`Command "${describeCommand(spec)}" exited with ${out.code}: ${stderr}`);
  }
  return out.stdout;
}

function splitArgs(n: number): string[] {
  const args = ["split", "-n"];
  for (let i = 1; i <= n; i++) args.push("-b", `b${i}=true`);
  return args;
}

/** One split's wall time and what its manifest says. */
interface MarshRun {
  readonly ms: number;
  readonly overhead: SplitOverhead;
  readonly forkStrategies: readonly string[];
}

/**
 * One timed `marsh split` of `n` branches, then (untimed) its join and
 * removal. Returns the wall time and the overhead read from the manifest.
 */
async function marshRun(marsh: PrivateMarsh, n: number): Promise<MarshRun> {
  const spawned = Date.now();
  const t0 = performance.now();
  const handle = await runMarsh(marsh.spec(splitArgs(n)));
  const ms = performance.now() - t0;
  const joined = await runMarsh(marsh.spec(["join", "--json"]), handle);
  const manifest = parseManifest(new TextDecoder().decode(joined).trim());
  if (await exists(manifest.dir)) {
    // Kept (a branch failed, or the removal did): remove it so the tree stays pristine.
    await marsh.run(["splits", "rm", manifest.id]);
  }
  const starts = manifest.branches.map((b) => b.started_unix_ms ?? NaN);
  const first = Math.min(...starts);
  if (!Number.isFinite(first)) throw new Error(`split ${manifest.id}: a branch never started`);
  return {
    ms,
    overhead: {
      cliToRequestMs: manifest.created_unix_ms - spawned,
      requestToFirstStartMs: first - manifest.created_unix_ms,
      snapshotMs: manifest.timing_ms.snapshot ?? NaN,
      forksMs: manifest.timing_ms.forks ?? NaN,
      runMs: manifest.timing_ms.run ?? NaN,
    },
    forkStrategies: manifest.branches.map((b) => b.fork_strategy ?? "unknown"),
  };
}

/**
 * One timed baseline of `n` worktrees: `git worktree add` one after the
 * other, then `bash -c true` in each at once; then (untimed) their removal.
 */
async function worktreeRun(
  git: HardenedGit,
  tree: string,
  scratch: string,
  n: number,
): Promise<number> {
  const paths = Array.from({ length: n }, (_, i) => join(scratch, `split-wt-${i + 1}`));
  const t0 = performance.now();
  for (const path of paths) {
    await runChecked(git.spec(tree, ["worktree", "add", "--quiet", "--detach", path, "HEAD"]));
  }
  await Promise.all(paths.map((cwd) => runChecked({ cmd: "bash", args: ["-c", "true"], cwd })));
  const ms = performance.now() - t0;
  for (const path of paths) await git.run(tree, ["worktree", "remove", "--force", path]);
  await git.run(tree, ["worktree", "prune"]);
  return ms;
}

/** The `forks` field of `marsh status --json`, as strings, or null. */
function statusForks(text: string): Record<string, string> | null {
  const forks = (JSON.parse(text) as { forks?: unknown }).forks;
  if (typeof forks !== "object" || forks === null) return null;
  return Object.fromEntries(Object.entries(forks).map(([k, v]) => [k, String(v)]));
}

/**
 * Measures end-to-end splits against worktrees on `options.tree`.
 *
 * @throws {Error} when a command fails or a split does not exit 0
 */
export async function measureSplitE2e(options: SplitE2eOptions): Promise<SplitE2eResult> {
  const { tree, scratch, git, runs } = options;
  const log = options.log ?? (() => {});
  await using marsh = await PrivateMarsh.start(tree);
  const daemonForks = statusForks(await marsh.run(["status", "--json"]));
  const warmBranches = options.branches[0] ?? 1;
  log(`split e2e, ${options.files} files: warm-up (the project's first snapshot)`);
  const warm = await marshRun(marsh, warmBranches);
  await worktreeRun(git, tree, scratch, warmBranches);
  const rows: SplitE2eRow[] = [];
  const strategies = new Set<string>();
  for (const n of options.branches) {
    log(`split e2e, ${options.files} files: ${n} branches, ${runs} runs`);
    const wt: number[] = [];
    const ms: number[] = [];
    const overheads: SplitOverhead[] = [];
    for (let run = 0; run < runs; run++) {
      await settle();
      wt.push(await worktreeRun(git, tree, scratch, n));
      await settle();
      const r = await marshRun(marsh, n);
      ms.push(r.ms);
      overheads.push(r.overhead);
      for (const s of r.forkStrategies) strategies.add(s);
    }
    const med = (pick: (o: SplitOverhead) => number) => median(overheads.map(pick));
    const marshSummary = summarize(`marsh split ×${n}`, ms, null);
    const worktrees = summarize(`git worktree add ×${n} + true`, wt, null);
    const ratio = marshSummary.medianMs / worktrees.medianMs;
    rows.push({
      branches: n,
      marsh: marshSummary,
      worktrees,
      ratio,
      targetRatio: SPLIT_TARGET_RATIO,
      targetMet: ratio <= SPLIT_TARGET_RATIO,
      overhead: {
        cliToRequestMs: med((o) => o.cliToRequestMs),
        requestToFirstStartMs: med((o) => o.requestToFirstStartMs),
        snapshotMs: med((o) => o.snapshotMs),
        forksMs: med((o) => o.forksMs),
        runMs: med((o) => o.runMs),
      },
    });
  }
  return {
    tree,
    files: options.files,
    runs,
    daemonForks,
    forkStrategies: [...strategies].sort(),
    firstSnapshotMs: warm.overhead.snapshotMs,
    rows,
  };
}

/** The two tables: end to end with ratios, then the daemon's overhead. */
export function renderSplitE2e(result: SplitE2eResult): string {
  const verdict = (r: SplitE2eRow) =>
    r.targetMet ? "met" : `MISSED by ${fmtRatio(r.ratio / r.targetRatio)}`;
  const e2e: string[][] = [
    ["branches", "marsh split", "git worktree add ×N + run", "marsh/baseline", "target", "verdict"],
    ...result.rows.map((r) => [
      String(r.branches),
      `${fmtMs(r.marsh.medianMs)} (min ${fmtMs(r.marsh.minMs)})`,
      `${fmtMs(r.worktrees.medianMs)} (min ${fmtMs(r.worktrees.minMs)})`,
      fmtRatio(r.ratio),
      `≤ ${fmtRatio(r.targetRatio)}`,
      verdict(r),
    ]),
  ];
  const overhead: string[][] = [
    [
      "branches",
      "CLI → request",
      "request → first branch start",
      "of which snapshot",
      "of which forks",
      "run + capture",
    ],
    ...result.rows.map((r) => [
      String(r.branches),
      fmtMs(r.overhead.cliToRequestMs),
      fmtMs(r.overhead.requestToFirstStartMs),
      fmtMs(r.overhead.snapshotMs),
      fmtMs(r.overhead.forksMs),
      fmtMs(r.overhead.runMs),
    ]),
  ];
  const d = result.daemonForks;
  const daemon = d === null
    ? "marsh status did not say"
    : `${d.strategy ?? "?"} (policy ${d.policy ?? "?"}: ${d.reason ?? "no reason given"})`;
  return [
    `## marsh split end to end, ${result.files} files; branches run \`true\`; ` +
    `${result.runs} runs, medians`,
    "",
    `Forks: ${result.forkStrategies.join(", ") || "none seen"} (from the manifests); ` +
    `the daemon's default: ${daemon}. The untimed warm-up split took the project's first ` +
    `snapshot (${fmtMs(result.firstSnapshotMs)} in the daemon); the timed splits re-snapshot ` +
    "the unchanged tree.",
    "",
    table(e2e),
    "",
    "Daemon overhead per split (from the manifest: created_unix_ms, branches' started_unix_ms, " +
    "timing_ms):",
    "",
    table(overhead),
  ].join("\n");
}
