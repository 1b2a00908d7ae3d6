/**
 * End-to-end `marsh split` through the real CLI and daemon (issue 3 §8):
 * `marsh split -n -b b1=true ... -b bN=true` on a cached tree, for N = 1, 4
 * and 8 shell branches, against what a user would do instead: `git worktree
 * add` N times, one after the other, then the same command (`bash -c true`)
 * in every worktree at once. Reported as a ratio (marsh/baseline), medians.
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
 * removed, so the tree stays pristine.
 *
 * Needs `--allow-run` (./marsh, git, bash, sync), `--allow-env`, and
 * read/write on the tree, the scratch dir and the temp dir.
 *
 * @module
 */

import { join } from "node:path";
import { type CommandSpec, describeCommand, runChecked } from "./_command.ts";
import type { HardenedGit } from "./_git.ts";
import { median, settle, summarize, type Summary } from "./measure.ts";

/** Branch counts measured by default. */
export const SPLIT_BRANCHES = [1, 4, 8] as const;

const MARSH = new URL("../marsh", import.meta.url).pathname;

/** No marsh command here should take this long; one that does fails the run. */
const MARSH_TIMEOUT_MS = 10 * 60_000;

/** The longest Unix socket path Linux takes is 107 bytes; branch sockets are `<home>/b/NN.sock`. */
const MAX_HOME_PATH = 107 - "/b/00.sock".length;

/** Inputs of {@linkcode measureSplitE2e}. */
export interface SplitE2eOptions {
  /** The cached tree (a pristine Git worktree). */
  readonly tree: string;
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
  readonly overhead: SplitOverhead;
}

/** The whole measurement. */
export interface SplitE2eResult {
  readonly tree: string;
  readonly runs: number;
  readonly rows: readonly SplitE2eRow[];
}

interface ManifestView {
  readonly id: string;
  readonly state: string;
  readonly dir: string;
  readonly created_unix_ms: number;
  readonly timing_ms: Readonly<Record<string, number>>;
  readonly branches: readonly { readonly label: string; readonly started_unix_ms?: number }[];
}

function parseManifest(text: string): ManifestView {
  const m = JSON.parse(text) as ManifestView;
  if (typeof m.id !== "string" || !Array.isArray(m.branches)) {
    throw new Error(`marsh join --json printed no manifest: ${text.slice(0, 200)}`);
  }
  return m;
}

async function exists(path: string): Promise<boolean> {
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

/**
 * One timed `marsh split` of `n` branches, then (untimed) its join and
 * removal. Returns the wall time and the overhead read from the manifest.
 */
async function marshRun(
  marsh: PrivateMarsh,
  n: number,
): Promise<{ ms: number; overhead: SplitOverhead }> {
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

/**
 * Measures end-to-end splits against worktrees on `options.tree`.
 *
 * @throws {Error} when a command fails or a split does not exit 0
 */
export async function measureSplitE2e(options: SplitE2eOptions): Promise<SplitE2eResult> {
  const { tree, scratch, git, runs } = options;
  const log = options.log ?? (() => {});
  await using marsh = await PrivateMarsh.start(tree);
  log("split e2e: warm-up");
  await marshRun(marsh, 1);
  await worktreeRun(git, tree, scratch, 1);
  const rows: SplitE2eRow[] = [];
  for (const n of options.branches) {
    log(`split e2e: ${n} branches, ${runs} runs`);
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
    }
    const med = (pick: (o: SplitOverhead) => number) => median(overheads.map(pick));
    const marshSummary = summarize(`marsh split ×${n}`, ms, null);
    const worktrees = summarize(`git worktree add ×${n} + true`, wt, null);
    rows.push({
      branches: n,
      marsh: marshSummary,
      worktrees,
      ratio: marshSummary.medianMs / worktrees.medianMs,
      overhead: {
        cliToRequestMs: med((o) => o.cliToRequestMs),
        requestToFirstStartMs: med((o) => o.requestToFirstStartMs),
        snapshotMs: med((o) => o.snapshotMs),
        forksMs: med((o) => o.forksMs),
        runMs: med((o) => o.runMs),
      },
    });
  }
  // Splits leave .marsh/.gitignore, an empty .marsh/split and .marsh/.trash behind.
  await Deno.remove(join(tree, ".marsh"), { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  return { tree, runs, rows };
}

function fmtMs(ms: number): string {
  if (!Number.isFinite(ms)) return "n/a";
  if (ms < 10) return `${ms.toFixed(2)} ms`;
  if (ms < 1000) return `${ms.toFixed(1)} ms`;
  return `${(ms / 1000).toFixed(2)} s`;
}

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? "").length))) ?? [];
  const line = (r: readonly string[]) =>
    "| " + r.map((cell, i) => cell.padEnd(widths[i] ?? 0)).join(" | ") + " |";
  const rule = "|" + widths.map((w) => "-".repeat(w + 2)).join("|") + "|";
  return [line(rows[0] ?? []), rule, ...rows.slice(1).map(line)].join("\n");
}

/** The two tables: end to end with ratios, then the daemon's overhead. */
export function renderSplitE2e(result: SplitE2eResult, files: number): string {
  const ratioText = (r: number) => `${r < 10 ? r.toFixed(2) : r.toFixed(1)}×`;
  const e2e: string[][] = [
    ["branches", "marsh split", "git worktree add ×N + run", "marsh/baseline"],
    ...result.rows.map((r) => [
      String(r.branches),
      `${fmtMs(r.marsh.medianMs)} (min ${fmtMs(r.marsh.minMs)})`,
      `${fmtMs(r.worktrees.medianMs)} (min ${fmtMs(r.worktrees.minMs)})`,
      ratioText(r.ratio),
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
  return [
    `## marsh split end to end, ${files} files; branches run \`true\`; ${result.runs} runs, medians`,
    "",
    table(e2e),
    "",
    "Daemon overhead per split (from the manifest: created_unix_ms, branches' started_unix_ms, " +
    "timing_ms):",
    "",
    table(overhead),
  ].join("\n");
}
