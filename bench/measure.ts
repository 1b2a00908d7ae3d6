/**
 * Timing and peak-memory helpers for the benchmarks.
 *
 * Times are wall-clock (`performance.now()`) around the awaited work: for a
 * command, from spawn to exit with its output collected. Every measurement
 * reports the median and the minimum of its timed runs.
 *
 * Peak memory:
 * - a command's peak RSS comes from one extra, untimed run under GNU
 *   `/usr/bin/time -f %M` (the kernel's `ru_maxrss` from `wait4`: the largest
 *   RSS of the command or any of its waited-for descendants, exact). Without
 *   GNU time it falls back to a bash wrapper that polls the child's `VmHWM` in
 *   `/proc/<pid>/status` every 5 ms, a lower bound (marked `exact: false`). Deno
 *   refuses to read `/proc/<pid>/` without `--allow-all`, so neither
 *   probe reads `/proc` from Deno itself.
 * - in-process work (the engine) is sampled by {@linkcode InProcessPeak}: a
 *   worker reads `Deno.memoryUsage().rss` (process-wide) every 2 ms, also while
 *   the main thread is blocked. It is the whole harness process's RSS,
 *   Deno runtime included; child processes the work spawns are not in it.
 *
 * @module
 */

import { type CommandSpec, describeCommand, runChecked } from "./_command.ts";

/** The result of timing one piece of work several times. */
export interface Summary {
  readonly label: string;
  readonly runs: number;
  readonly medianMs: number;
  readonly minMs: number;
  readonly samplesMs: readonly number[];
  /** Peak RSS in KiB, null when it was not measured. */
  readonly peakRssKiB: number | null;
  /** False when `peakRssKiB` is only a lower bound. */
  readonly peakExact: boolean;
}

/** The median of a non-empty list (mean of the middle two for even lengths). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError("Cannot take the median of no values");
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  const hi = sorted[mid] as number;
  return sorted.length % 2 === 1 ? hi : ((sorted[mid - 1] as number) + hi) / 2;
}

/** Builds a {@linkcode Summary} from timed samples. */
export function summarize(
  label: string,
  samplesMs: readonly number[],
  peakRssKiB: number | null,
  peakExact = true,
): Summary {
  return {
    label,
    runs: samplesMs.length,
    medianMs: median(samplesMs),
    minMs: Math.min(...samplesMs),
    samplesMs: [...samplesMs],
    peakRssKiB,
    peakExact,
  };
}

/** Runs `fn` once and returns its wall time in milliseconds with its value. */
export async function timeOnce<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

/**
 * Flushes dirty pages (`sync`) so that one run's writeback does not land in
 * the next run's time. Called untimed before every timed run, for the
 * baselines and the engine alike.
 *
 * Needs `--allow-run=sync`.
 */
export async function settle(): Promise<void> {
  await runChecked({ cmd: "sync", args: [] });
}

// ---------------------------------------------------------------------------
// Child processes

const POLL_SCRIPT = `
out="$1"; shift
"$@" &
p=$!
hwm=0
while kill -0 "$p" 2>/dev/null; do
  { while read -r k v _; do
      if [ "$k" = "VmHWM:" ] && [ "$v" -gt "$hwm" ]; then hwm=$v; fi
    done < "/proc/$p/status"; } 2>/dev/null
  sleep 0.005
done
wait "$p"; rc=$?
printf '%s\\n' "$hwm" > "$out"
exit "$rc"
`;

/** How a {@linkcode ChildMemoryProbe} measures. */
export type ChildMemoryMethod = "gnu-time" | "proc-poll";

/**
 * Measures a command's peak RSS by running it once more, untimed, under GNU
 * time (exact) or a `/proc` polling wrapper (lower bound).
 *
 * Needs `--allow-run` for `/usr/bin/time` or `bash`, and read/write on the
 * temp dir.
 */
export class ChildMemoryProbe {
  readonly method: ChildMemoryMethod;

  private constructor(method: ChildMemoryMethod) {
    this.method = method;
  }

  /** Uses GNU `/usr/bin/time` when it is there and works, else the polling wrapper. */
  static async detect(): Promise<ChildMemoryProbe> {
    try {
      const out = await new Deno.Command("/usr/bin/time", {
        args: ["-f", "%M", "true"],
        stdout: "null",
        stderr: "piped",
      }).output();
      const kib = Number(new TextDecoder().decode(out.stderr).trim());
      if (out.success && Number.isInteger(kib) && kib > 0) return new ChildMemoryProbe("gnu-time");
    } catch (err) {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    }
    return new ChildMemoryProbe("proc-poll");
  }

  /** A sentence for reports saying how the numbers were taken. */
  describe(): string {
    return this.method === "gnu-time"
      ? "commands: GNU /usr/bin/time -f %M (ru_maxrss, exact) on an untimed run"
      : "commands: VmHWM polled every 5 ms from /proc/<pid>/status by a bash wrapper " +
        "(lower bound; /usr/bin/time is missing) on an untimed run";
  }

  /**
   * Runs `spec` once and returns its peak RSS in KiB.
   *
   * @throws {Error} when the command fails or no number comes back.
   */
  async peakKiB(spec: CommandSpec): Promise<{ kib: number; exact: boolean }> {
    const outFile = await Deno.makeTempFile({ prefix: "marsh-bench-rss-" });
    try {
      const wrapped: CommandSpec = this.method === "gnu-time"
        ? {
          ...spec,
          cmd: "/usr/bin/time",
          args: ["-f", "%M", "-o", outFile, spec.cmd, ...spec.args],
        }
        : {
          ...spec,
          cmd: "bash",
          args: ["-c", POLL_SCRIPT, "bash", outFile, spec.cmd, ...spec.args],
        };
      await runChecked(wrapped);
      const text = (await Deno.readTextFile(outFile)).trim();
      const kib = Number(text.split("\n").at(-1));
      if (!Number.isFinite(kib)) {
        throw new Error(`No peak RSS for "${describeCommand(spec)}": got ${JSON.stringify(text)}`);
      }
      return { kib, exact: this.method === "gnu-time" };
    } finally {
      await Deno.remove(outFile);
    }
  }
}

/** Options of {@linkcode measureCommand}. */
export interface CommandRunOptions {
  /** Timed runs. */
  readonly runs: number;
  /** Untimed runs first, to warm caches. Default 1. */
  readonly warmup?: number;
  /** Untimed setup before each run (warm-up and memory runs included). */
  readonly before?: (run: number) => Promise<void>;
  /** Untimed teardown after each run (warm-up and memory runs included). */
  readonly after?: (run: number) => Promise<void>;
  /** Skip the memory run when null. */
  readonly probe: ChildMemoryProbe | null;
  /** Flush dirty pages before each timed run ({@linkcode settle}). Default true. */
  readonly settle?: boolean;
  /**
   * Take the memory reading on the first warm-up run instead of an extra run
   * after the timed ones. For commands whose memory does not depend on a
   * warm cache or on state a first run leaves behind (`cp -a`, `git worktree
   * add` into a new path); saves a whole run on big trees. Default false.
   */
  readonly probeOnWarmup?: boolean;
}

/**
 * Times a command: `warmup` untimed runs, `runs` timed runs, then one
 * untimed run under the memory probe (or the probe on the first warm-up, see
 * {@linkcode CommandRunOptions.probeOnWarmup}). `spec` may depend on the
 * run number (warm-ups are negative, the memory run is `runs`).
 *
 * Needs `--allow-run` for the command (and for `sync`, `/usr/bin/time`).
 *
 * @throws {Error} when any run fails.
 */
export async function measureCommand(
  label: string,
  spec: CommandSpec | ((run: number) => CommandSpec),
  options: CommandRunOptions,
): Promise<Summary> {
  const specFor = (run: number) => typeof spec === "function" ? spec(run) : spec;
  const warmup = options.warmup ?? 1;
  const probeFirst = options.probe !== null && (options.probeOnWarmup ?? false) && warmup > 0;
  let peak: { kib: number; exact: boolean } | null = null;
  for (let w = -warmup; w < 0; w++) {
    await options.before?.(w);
    if (probeFirst && w === -warmup) peak = await options.probe?.peakKiB(specFor(w)) ?? null;
    else await runChecked(specFor(w));
    await options.after?.(w);
  }
  const samples: number[] = [];
  for (let run = 0; run < options.runs; run++) {
    await options.before?.(run);
    if (options.settle ?? true) await settle();
    const { ms } = await timeOnce(() => runChecked(specFor(run)));
    samples.push(ms);
    await options.after?.(run);
  }
  if (options.probe && !probeFirst) {
    await options.before?.(options.runs);
    peak = await options.probe.peakKiB(specFor(options.runs));
    await options.after?.(options.runs);
  }
  return summarize(label, samples, peak?.kib ?? null, peak?.exact ?? true);
}

// ---------------------------------------------------------------------------
// In-process work

/**
 * Samples this process's peak RSS while in-process work runs, from a worker
 * thread (see the module doc). Hold it with `await using`.
 *
 * Needs no permissions beyond those of loading the worker module.
 */
export class InProcessPeak implements AsyncDisposable {
  #worker: Worker | null;
  #intervalMs: number;

  private constructor(worker: Worker, intervalMs: number) {
    this.#worker = worker;
    this.#intervalMs = intervalMs;
  }

  /** Starts the sampler worker and waits until it listens; `intervalMs` is the sampling period. */
  static async create(intervalMs = 2): Promise<InProcessPeak> {
    const worker = new Worker(new URL("./_rss_sampler.ts", import.meta.url), { type: "module" });
    try {
      await new Promise<void>((resolve, reject) => {
        worker.onmessage = (e: MessageEvent<{ type: string }>) => {
          if (e.data.type === "ready") resolve();
        };
        worker.onerror = (e) => reject(new Error(`RSS sampler failed to start: ${e.message}`));
      });
    } catch (err) {
      worker.terminate();
      throw err;
    }
    return new InProcessPeak(worker, intervalMs);
  }

  /** A sentence for reports saying how the numbers were taken. */
  describe(): string {
    return `in-process: Deno.memoryUsage().rss of the harness process sampled every ${this.#intervalMs} ms ` +
      "from a worker thread (Deno runtime included, child processes not)";
  }

  /** This process's RSS right now, in KiB. */
  static currentKiB(): number {
    return Math.round(Deno.memoryUsage().rss / 1024);
  }

  /**
   * Runs `fn` with sampling on; returns its wall time, its value and the
   * peak RSS (KiB) seen while it ran.
   */
  async measure<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T; peakKiB: number }> {
    const worker = this.#worker;
    if (!worker) throw new Error("InProcessPeak is closed");
    const peak = new Promise<number>((resolve, reject) => {
      worker.onmessage = (e: MessageEvent<{ type: string; rssBytes: number }>) => {
        if (e.data.type === "peak") resolve(e.data.rssBytes);
      };
      worker.onerror = (e) => reject(new Error(`RSS sampler failed: ${e.message}`));
    });
    worker.postMessage({ type: "start", intervalMs: this.#intervalMs });
    let result: { ms: number; value: T };
    try {
      result = await timeOnce(fn);
    } finally {
      worker.postMessage({ type: "stop" });
    }
    const bytes = Math.max(await peak, Deno.memoryUsage().rss);
    return { ...result, peakKiB: Math.round(bytes / 1024) };
  }

  /** Stops the worker. Idempotent. */
  close(): void {
    this.#worker?.terminate();
    this.#worker = null;
  }

  [Symbol.asyncDispose](): Promise<void> {
    this.close();
    return Promise.resolve();
  }
}
