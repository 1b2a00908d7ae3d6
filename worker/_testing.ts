/**
 * Test helpers for the worker's tests: the real `worker/main.ts` started as
 * the daemon will start it (its exact flags, frames over stdio), and a
 * sandbox with a control dir, a fork and a spool. Imported only by tests.
 *
 * @module
 */

import { encodeFrame, readFrames } from "../protocol/frame.ts";
import {
  type LaunchRequest,
  parseWorkerEvent,
  type ShellWorkerEvent,
  type StdioFifos,
} from "../protocol/worker.ts";
import { FORCE_SUBREAPER_ENV, workerFlags } from "../protocol/entrypoints.ts";

const root = new URL("../", import.meta.url).pathname;

/** The Deno to start the worker with: the launcher's pinned one. */
export function denoPath(): string {
  return Deno.env.get("MARSH_DENO") ?? Deno.execPath();
}

/** A temp dir with `control/` (the worker may write only there) and `fork/`. */
export interface Sandbox extends Disposable {
  readonly top: string;
  readonly control: string;
  readonly fork: string;
}

/** Makes a sandbox. Needs read and write access to the temp dir. */
export function sandbox(): Sandbox {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-worker-test-" }));
  Deno.mkdirSync(`${top}/control`, { mode: 0o700 });
  Deno.mkdirSync(`${top}/fork`);
  return {
    top,
    control: `${top}/control`,
    fork: `${top}/fork`,
    [Symbol.dispose]() {
      Deno.removeSync(top, { recursive: true });
    },
  };
}

/** An event and when it arrived (`performance.now()`). */
export interface Timed {
  readonly at: number;
  /** Shell attempts only: these tests never send `kit-launch`. */
  readonly event: ShellWorkerEvent;
}

/** The worker as a child process, spoken to in frames. */
export class WorkerClient implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #seen: Timed[] = [];
  #waiters: (() => void)[] = [];
  readonly #reading: Promise<void>;
  readonly #stderr: Promise<string>;
  #ended = false;

  private constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#stderr = new Response(child.stderr).text();
    this.#reading = (async () => {
      for await (const value of readFrames(child.stdout)) {
        this.#seen.push({
          at: performance.now(),
          event: parseWorkerEvent(value) as ShellWorkerEvent,
        });
        this.#wake();
      }
      this.#ended = true;
      this.#wake();
    })();
  }

  /** Starts `worker/main.ts` with {@linkcode workerFlags} for `controlDir`. */
  static start(controlDir: string, opts: { forceSubreaper?: boolean } = {}): WorkerClient {
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        ...workerFlags(controlDir),
        `--config=${root}deno.json`,
        `${root}worker/main.ts`,
      ],
      env: opts.forceSubreaper ? { [FORCE_SUBREAPER_ENV]: "1" } : {},
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    return new WorkerClient(child);
  }

  /** The worker's pid. */
  get pid(): number {
    return this.#child.pid;
  }

  /** Every event so far. */
  get events(): readonly Timed[] {
    return this.#seen;
  }

  #wake(): void {
    const w = this.#waiters;
    this.#waiters = [];
    for (const f of w) f();
  }

  /** Sends one value as a frame, valid or not. */
  async send(value: unknown): Promise<void> {
    await this.#writer.write(encodeFrame(value));
  }

  /** Sends raw bytes. */
  async sendBytes(bytes: Uint8Array): Promise<void> {
    await this.#writer.write(bytes);
  }

  /** Sends a launch, with defaults for the output files under `attemptDir`. */
  async launch(
    attemptDir: string,
    req: Partial<LaunchRequest> & { attempt: string; script: string; cwd: string },
  ): Promise<void> {
    Deno.mkdirSync(attemptDir, { recursive: true });
    await this.send({
      v: 1,
      t: "launch",
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
      stdin: null,
      stdout: `${attemptDir}/stdout`,
      stderr: `${attemptDir}/stderr`,
      ...req,
    });
  }

  /** Resolves with the first event from index `from` on that matches, or throws after `ms`. */
  async wait(
    match: (e: ShellWorkerEvent) => boolean,
    ms = 20_000,
    from = 0,
  ): Promise<Timed> {
    const deadline = performance.now() + ms;
    for (let i = from;;) {
      for (; i < this.#seen.length; i++) {
        const t = this.#seen[i]!;
        if (match(t.event)) return t;
      }
      if (this.#ended) throw new Error(`worker ended before the event; saw ${this.#dump()}`);
      const left = deadline - performance.now();
      if (left <= 0) throw new Error(`no such event within ${ms} ms; saw ${this.#dump()}`);
      let timer: ReturnType<typeof setTimeout> | undefined;
      await new Promise<void>((resolve) => {
        this.#waiters.push(resolve);
        timer = setTimeout(resolve, left);
      });
      clearTimeout(timer);
    }
  }

  /** Every event of `attempt` up to its last one (`settled` or an `error` naming it). */
  async finish(attempt: string, ms = 20_000): Promise<Timed[]> {
    await this.wait(
      (e) => "attempt" in e && e.attempt === attempt && (e.t === "settled" || e.t === "error"),
      ms,
    );
    return this.#seen.filter((t) => "attempt" in t.event && t.event.attempt === attempt);
  }

  #dump(): string {
    return JSON.stringify(this.#seen.map((t) => t.event));
  }

  /** Closes stdin and waits for the worker to exit; returns its exit code and stderr. */
  async close(): Promise<{ code: number; stderr: string }> {
    await this.#writer.close().catch(() => {});
    const [status, stderr] = await Promise.all([
      this.#child.status,
      this.#stderr,
      this.#reading,
    ]);
    return { code: status.code, stderr };
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** Whether a process is alive: it exists and is not a zombie (needs `--allow-run=ps`). */
export async function alive(pid: number): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", String(pid)] }).output();
  const stat = new TextDecoder().decode(out.stdout).trim();
  return out.success && stat !== "" && !stat.startsWith("Z");
}

/** An operation's FIFOs as the CLI makes them: `<control>/io/<id>/{in,out,err}`, `mkfifo -m 600`. */
export function makeFifos(control: string, id: string): StdioFifos {
  const dir = `${control}/io/${id}`;
  Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const fifos = { stdin: `${dir}/in`, stdout: `${dir}/out`, stderr: `${dir}/err` };
  const r = new Deno.Command("mkfifo", { args: ["-m", "600", ...Object.values(fifos)] })
    .outputSync();
  if (!r.success) throw new Error(`mkfifo: ${new TextDecoder().decode(r.stderr)}`);
  return fifos;
}

/** What the CLI's side of an operation's FIFOs got. */
export interface CliSide {
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  /** Bytes of the input written before the branch stopped reading (EPIPE). */
  readonly written: number;
}

/** How {@linkcode cliSide} behaves. */
export interface CliOptions {
  /** Open one FIFO after another in this order, each awaited (default: all three at once). */
  readonly order?: readonly ("stdin" | "stdout" | "stderr")[];
  /** Wait this long before opening anything. */
  readonly delayMs?: number;
  /** Read at most this many bytes of stdout, then close it. */
  readonly stdoutUpTo?: number;
}

/**
 * The CLI's side of an operation (docs/checkpoints.md "An operation"): opens
 * the three FIFOs, writes `input` to stdin and closes it, and reads stdout
 * and stderr to their end.
 */
export async function cliSide(
  fifos: StdioFifos,
  input: Uint8Array,
  opts: CliOptions = {},
): Promise<CliSide> {
  if (opts.delayMs) await new Promise((r) => setTimeout(r, opts.delayMs));
  const open = (k: "stdin" | "stdout" | "stderr") =>
    Deno.open(fifos[k], k === "stdin" ? { write: true } : { read: true });
  const files: Partial<Record<"stdin" | "stdout" | "stderr", Deno.FsFile>> = {};
  if (opts.order) {
    for (const k of opts.order) files[k] = await open(k);
  } else {
    const [i, o, e] = await Promise.all([open("stdin"), open("stdout"), open("stderr")]);
    Object.assign(files, { stdin: i, stdout: o, stderr: e });
  }
  const write = async () => {
    const f = files.stdin!;
    let off = 0;
    try {
      while (off < input.length) off += await f.write(input.subarray(off));
    } catch (error) {
      if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
    } finally {
      f.close();
    }
    return off;
  };
  const readAll = async (f: Deno.FsFile, upTo = Infinity) => {
    const chunks: Uint8Array[] = [];
    let n = 0;
    const buf = new Uint8Array(65536);
    try {
      while (n < upTo) {
        const got = await f.read(buf.subarray(0, Math.min(buf.length, upTo - n)));
        if (got === null) break;
        chunks.push(buf.slice(0, got));
        n += got;
      }
    } finally {
      f.close();
    }
    const out = new Uint8Array(n);
    let at = 0;
    for (const c of chunks) (out.set(c, at), at += c.length);
    return out;
  };
  const [written, stdout, stderr] = await Promise.all([
    write(),
    readAll(files.stdout!, opts.stdoutUpTo),
    readAll(files.stderr!),
  ]);
  return { stdout, stderr, written };
}

/**
 * Releases a {@linkcode cliSide} whose opens wait on a worker that never
 * opened its ends (the launch failed): opens each FIFO's other end for up to
 * 2 s, so a test fails on what it saw instead of hanging.
 */
export async function releaseFifos(fifos: StdioFifos): Promise<void> {
  const open = (redirect: string) =>
    new Deno.Command("timeout", { args: ["2", "sh", "-c", redirect], stderr: "null" }).output();
  await Promise.all([
    open(`: < '${fifos.stdin}'`),
    open(`: > '${fifos.stdout}'`),
    open(`: > '${fifos.stderr}'`),
  ]);
}

/**
 * Plays the CLI on `fifos` while `attempt` runs: resolves with what the CLI
 * got and the attempt's events; a launch that failed releases the CLI's opens.
 */
export async function withCli(
  w: WorkerClient,
  attempt: string,
  fifos: StdioFifos,
  input: Uint8Array,
  opts: CliOptions = {},
  ms = 60_000,
): Promise<CliSide & { events: ShellWorkerEvent[] }> {
  const cli = cliSide(fifos, input, opts);
  const timed = await w.finish(attempt, ms);
  if (!timed.some((t) => t.event.t === "launched")) await releaseFifos(fifos);
  return { ...await cli, events: timed.map((t) => t.event) };
}
