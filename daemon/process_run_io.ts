/**
 * A `marsh run` job's live stdio (docs/rules.md "Running a registered
 * command as a job"): three FIFOs in the attempt's directory that the
 * worker opens as the container's stdin, stdout and stderr (`stdio:
 * "fifos"` of `protocol/kit_launch.ts`), relayed to and from the caller's
 * connection as `process.*` frames while the command runs. Nothing is
 * buffered whole: output goes out a chunk at a time as the caller takes it
 * (the worker, and with it the container, waits while the caller is slow),
 * and stdin waits in a bounded queue.
 *
 * Needs `--allow-run=mkfifo` and read and write on the attempt's directory.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { RUN_CHUNK } from "../protocol/process_run.ts";
import type { ProcessOutReply } from "../protocol/process_run.ts";

/** The FIFOs' paths. */
export interface RunFifos {
  readonly stdin: string;
  readonly stdout: string;
  readonly stderr: string;
}

/** Bytes of stdin queued for the command before the caller's next frame is read. */
export const STDIN_QUEUE_BYTES = 4 * 1024 * 1024;
/** How long output may trail the job's end before its FIFOs are closed under it. */
const TRAIL_MS = 5_000;

/**
 * Makes `in`, `out` and `err` (mode 0600) in `dir`.
 *
 * @throws {Error} naming what `mkfifo` said
 */
export async function makeFifos(dir: string): Promise<RunFifos> {
  const fifos = { stdin: `${dir}/in`, stdout: `${dir}/out`, stderr: `${dir}/err` };
  const r = await new Deno.Command("mkfifo", {
    args: ["-m", "600", "--", fifos.stdin, fifos.stdout, fifos.stderr],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  if (!r.success) {
    throw new Error(`mkfifo failed: ${new TextDecoder().decode(r.stderr).trim()}`);
  }
  return fifos;
}

/** Where output frames go: the caller's connection. */
export type OutSink = (frame: ProcessOutReply) => Promise<void>;

/**
 * Relays one job's FIFOs. {@linkcode start} once the worker was asked to
 * launch; {@linkcode finish} once the worker reported the attempt's end.
 */
export class FifoRelay {
  readonly #fifos: RunFifos;
  readonly #sink: OutSink;
  readonly #onError: (what: string, error: unknown) => void;
  /** FIFOs whose open on this side completed. */
  readonly #opened = new Set<string>();
  readonly #files = new Set<Deno.FsFile>();
  #pumps: Promise<void>[] = [];
  #queue: Uint8Array[] = [];
  #queued = 0;
  #stdinEnded = false;
  #stdinGone = false;
  #wake: (() => void) | null = null;
  #room: PromiseWithResolvers<void> | null = null;

  constructor(fifos: RunFifos, sink: OutSink, onError: (what: string, error: unknown) => void) {
    this.#fifos = fifos;
    this.#sink = sink;
    this.#onError = onError;
  }

  /** Opens this side of the three FIFOs and relays them until they end. */
  start(): void {
    this.#pumps = [
      this.#pumpOut(this.#fifos.stdout, "stdout"),
      this.#pumpOut(this.#fifos.stderr, "stderr"),
      this.#pumpIn(),
    ];
  }

  /**
   * Queues stdin bytes for the command; resolves once the queue has room
   * again (the caller's next frame waits till then).
   */
  async stdin(bytes: Uint8Array): Promise<void> {
    if (this.#stdinEnded || this.#stdinGone) return;
    this.#queue.push(bytes);
    this.#queued += bytes.length;
    this.#wake?.();
    if (this.#queued > STDIN_QUEUE_BYTES) {
      this.#room = Promise.withResolvers<void>();
      await this.#room.promise;
    }
  }

  /** The caller's stdin ended: the command reads EOF once the queue is written. */
  endStdin(): void {
    this.#stdinEnded = true;
    this.#wake?.();
  }

  /**
   * The attempt ended: unblocks any FIFO the worker never opened, waits for
   * the output to drain (closing it after a few seconds if the worker keeps
   * it open), and stops the stdin relay.
   */
  async finish(): Promise<void> {
    this.#stdinGone = true;
    this.#release();
    this.#wake?.();
    for (const path of Object.values(this.#fifos)) {
      if (this.#opened.has(path)) continue;
      // Read-write never blocks on a FIFO, and it completes this side's pending open.
      try {
        using _peer = await Deno.open(path, { read: true, write: true });
      } catch (error) {
        this.#onError(`unblocking ${path}`, error);
      }
    }
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), TRAIL_MS));
    const done = await Promise.race([Promise.all(this.#pumps), late]);
    clearTimeout(timer);
    if (done === "late") {
      for (const f of this.#files) this.#close(f);
      await Promise.all(this.#pumps);
    }
  }

  #release(): void {
    this.#room?.resolve();
    this.#room = null;
  }

  #close(f: Deno.FsFile): void {
    if (!this.#files.delete(f)) return;
    try {
      f.close();
    } catch (error) {
      if (!(error instanceof Deno.errors.BadResource)) throw error;
    }
  }

  async #pumpOut(path: string, stream: "stdout" | "stderr"): Promise<void> {
    let f: Deno.FsFile;
    try {
      f = await Deno.open(path, { read: true });
    } catch (error) {
      this.#opened.add(path);
      this.#onError(`opening ${stream}`, error);
      return;
    }
    this.#opened.add(path);
    this.#files.add(f);
    const buf = new Uint8Array(RUN_CHUNK);
    try {
      for (;;) {
        const n = await f.read(buf);
        if (n === null) break;
        await this.#sink({
          v: 1,
          t: "process.out",
          stream,
          data: Buffer.from(buf.subarray(0, n)).toString("base64"),
        });
      }
    } catch (error) {
      // Closed under a read by finish(): what was read was sent.
      if (
        !(error instanceof Deno.errors.BadResource) && !(error instanceof Deno.errors.Interrupted)
      ) {
        this.#onError(`reading ${stream}`, error);
      }
    } finally {
      this.#close(f);
    }
  }

  async #pumpIn(): Promise<void> {
    let f: Deno.FsFile;
    try {
      f = await Deno.open(this.#fifos.stdin, { write: true });
    } catch (error) {
      this.#opened.add(this.#fifos.stdin);
      this.#onError("opening stdin", error);
      return;
    }
    this.#opened.add(this.#fifos.stdin);
    this.#files.add(f);
    try {
      for (;;) {
        if (this.#stdinGone) break;
        const chunk = this.#queue.shift();
        if (chunk === undefined) {
          if (this.#stdinEnded) break;
          await new Promise<void>((r) => this.#wake = r);
          this.#wake = null;
          continue;
        }
        this.#queued -= chunk.length;
        if (this.#queued <= STDIN_QUEUE_BYTES) this.#release();
        for (let off = 0; off < chunk.length && !this.#stdinGone;) {
          off += await f.write(chunk.subarray(off));
        }
      }
    } catch (error) {
      // The command closed its stdin or ended: what it did not read is dropped, as a pipe does.
      if (
        !(error instanceof Deno.errors.BrokenPipe) && !(error instanceof Deno.errors.BadResource)
      ) {
        this.#onError("writing stdin", error);
      }
    } finally {
      this.#stdinGone = true;
      this.#queue = [];
      this.#release();
      this.#close(f);
    }
  }
}
