/**
 * The caller's side of the split-filesystem service: starts `splitfs/main.ts`
 * as a child process with its own narrow permissions and exchanges frames
 * with it. Importing this module loads no FFI; the caller holds none.
 *
 * Needs `--allow-run=<deno>`.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import { splitfsFlags } from "../protocol/permissions.ts";
import {
  type ErrorReply,
  parseSplitfsReply,
  type ProgressReply,
  type SplitfsReply,
  type SplitfsRequest,
} from "../protocol/splitfs.ts";

/** An error reply from the service. */
export class SplitfsError extends Error {
  override name = "SplitfsError";
  constructor(readonly kind: ErrorReply["kind"], message: string) {
    super(message);
  }
}

/** The Deno executable to start services with: the launcher's pinned one. */
export function denoPath(): string {
  return Deno.env.get("MARSH_DENO") ?? Deno.execPath();
}

const repo = new URL("../", import.meta.url);

/** Final replies: everything but streamed output, progress and errors. */
export type FinalReply = Exclude<SplitfsReply, { t: "chunk" } | { t: "progress" } | { t: "error" }>;

/** Receives a piece of streamed output (`diff`, `render`). */
export type ChunkHandler = (bytes: Uint8Array) => Promise<void> | void;

/** Receives copy progress (`create`, `fork`): at most one call per interval. */
export type ProgressHandler = (progress: Omit<ProgressReply, "v" | "t">) => Promise<void> | void;

/** How to start the service. */
export interface StartOptions {
  /** Least interval between progress replies, in ms (default 250; tests shorten it). */
  readonly progressIntervalMs?: number;
}

/** A running service. Requests are answered in order, one at a time. */
export class SplitfsService implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #frames: AsyncGenerator<unknown>;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#frames = readFrames(child.stdout);
  }

  /** Starts the service. */
  static start(options: StartOptions = {}): SplitfsService {
    const interval = options.progressIntervalMs;
    if (interval !== undefined && (!Number.isSafeInteger(interval) || interval < 0)) {
      throw new RangeError(`invalid progress interval: ${interval}`);
    }
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        ...splitfsFlags(),
        `--config=${new URL("deno.json", repo).pathname}`,
        new URL("splitfs/main.ts", repo).pathname,
        ...(interval === undefined ? [] : [`--progress-ms=${interval}`]),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return new SplitfsService(child);
  }

  /** The service's process id (for logs and the memory tests). */
  get pid(): number {
    return this.#child.pid;
  }

  /**
   * Sends one request and resolves with its final reply; `onChunk` receives
   * streamed output and `onProgress` copy progress first, in order.
   *
   * @throws {SplitfsError} when the service answers with an error or dies
   */
  request<R extends FinalReply = FinalReply>(
    req: SplitfsRequest,
    onChunk?: ChunkHandler,
    onProgress?: ProgressHandler,
  ): Promise<R> {
    const run = async (): Promise<R> => {
      await this.#writer.write(encodeFrame(req));
      for (;;) {
        const next = await this.#frames.next();
        if (next.done) {
          const status = await this.#child.status;
          throw new SplitfsError(
            "internal",
            `split-filesystem service exited with status ${status.code}`,
          );
        }
        const reply = parseSplitfsReply(next.value);
        if (reply.t === "chunk") await onChunk?.(Buffer.from(reply.data, "base64"));
        else if (reply.t === "progress") {
          await onProgress?.({ files: reply.files, bytes: reply.bytes });
        } else if (reply.t === "error") throw new SplitfsError(reply.kind, reply.message);
        else return reply as R;
      }
    };
    const result = this.#queue.then(run, run);
    this.#queue = result.catch(() => {/* the caller sees this error; the queue goes on */});
    return result;
  }

  /** Closes stdin and waits for the service to exit; a second call does nothing. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#queue;
    await this.#writer.close().catch(() => {/* already gone */});
    await this.#child.status;
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
