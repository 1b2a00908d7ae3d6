/**
 * The caller's side of the split-filesystem service: starts `splitfs/main.ts`
 * as a child process with its own narrow permissions and exchanges frames
 * with it. Importing this module loads no FFI; the caller holds none.
 *
 * An unprivileged daemon starts it inside a user and mount namespace of its
 * own (`unshare -Urm`, {@linkcode StartOptions.userNamespace}): there it may
 * mount overlay forks (`userns-overlay`), which exist in that namespace only;
 * shell branches on such forks join it (`nsenter`, worker/supervisor.pl).
 *
 * Needs `--allow-run=<deno>` (and `unshare` for a namespace).
 *
 * @module
 */

import { encodeFrame, readFrames } from "./frame.ts";
import { denoPath, entryCommand } from "./entrypoints.ts";
import {
  type ErrorReply,
  parseSplitfsReply,
  type ProgressReply,
  type SplitfsReply,
  type SplitfsRequest,
  splitfsToWire,
} from "./splitfs.ts";

/** An error reply from the service. */
export class SplitfsError extends Error {
  override name = "SplitfsError";
  constructor(readonly kind: ErrorReply["kind"], message: string) {
    super(message);
  }
}

/** The Deno executable to start services with (re-exported for the modules that start the service). */
export { denoPath };

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
  /**
   * Start it in a new user and mount namespace where it is root (mapped to
   * the caller's uid): `unshare --user --map-root-user --mount
   * --propagation private -- <deno> run ...`. `unshare` execs, so the
   * service's pid is a process of that namespace ({@linkcode SplitfsService.namespace}).
   * Check first with {@linkcode probeUserNamespace}.
   */
  readonly userNamespace?: boolean;
  /**
   * The daemon's control dir: written, with this process's pid, into each
   * project lock the service takes, so a second daemon's refusal names this one.
   */
  readonly home?: string;
}

/** The program that makes the service's namespace, found on `PATH`. */
export const UNSHARE = "unshare";
const UNSHARE_ARGS = ["--user", "--map-root-user", "--mount", "--propagation", "private"];

/** Whether a user and mount namespace can be made here, and if not, why. */
export type NamespaceProbe = { readonly ok: true } | {
  readonly ok: false;
  readonly reason: string;
};

/**
 * Tries `unshare --user --map-root-user --mount --propagation private -- true`.
 * Never throws: a missing or refused `unshare` is an answer.
 *
 * Needs `--allow-run=unshare`.
 */
export async function probeUserNamespace(): Promise<NamespaceProbe> {
  const shown = `${UNSHARE} -Urm`;
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command(UNSHARE, {
      args: [...UNSHARE_ARGS, "--", "true"],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      return { ok: false, reason: `${UNSHARE} (util-linux) is not on PATH` };
    }
    if (error instanceof Deno.errors.NotCapable || error instanceof Deno.errors.PermissionDenied) {
      return { ok: false, reason: `the daemon may not run ${UNSHARE}: ${error.message}` };
    }
    return { ok: false, reason: `cannot run ${shown}: ${error}` };
  }
  if (out.success) return { ok: true };
  const said = new TextDecoder().decode(out.stderr).trim().split("\n")[0]?.slice(0, 200);
  return {
    ok: false,
    reason: `${shown} was refused (exit ${out.code}${said ? `: ${said}` : ""})`,
  };
}

/** A running service. Requests are answered in order, one at a time. */
export class SplitfsService implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #frames: AsyncGenerator<unknown>;
  readonly #userNamespace: boolean;
  #queue: Promise<unknown> = Promise.resolve();
  #closed = false;

  private constructor(child: Deno.ChildProcess, userNamespace: boolean) {
    this.#child = child;
    this.#userNamespace = userNamespace;
    this.#writer = child.stdin.getWriter();
    this.#frames = readFrames(child.stdout);
  }

  /**
   * Starts the service.
   *
   * @throws {Deno.errors.NotFound} when `unshare` is asked for and not on `PATH`
   */
  static start(options: StartOptions = {}): SplitfsService {
    const interval = options.progressIntervalMs;
    if (interval !== undefined && (!Number.isSafeInteger(interval) || interval < 0)) {
      throw new RangeError(`invalid progress interval: ${interval}`);
    }
    const child = entryCommand("splitfs", {}, {
      args: [
        ...(interval === undefined ? [] : [`--progress-ms=${interval}`]),
        // It dies with this process (SIGKILL on its parent's exit). `unshare`
        // execs, so its parent is this process either way; the spawn runs on
        // the JS thread, which lives as long as the process does.
        `--parent=${Deno.pid}`,
        ...(options.home === undefined ? [] : [`--home=${options.home}`]),
      ],
      ...(options.userNamespace ? { wrapper: [UNSHARE, ...UNSHARE_ARGS] } : {}),
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return new SplitfsService(child, options.userNamespace ?? false);
  }

  /** The service's process id (for logs and the memory tests). */
  get pid(): number {
    return this.#child.pid;
  }

  /**
   * The service's user and mount namespace, named by its pid (for
   * `nsenter --target`), or `null` when it runs in the caller's.
   */
  get namespace(): { readonly pid: number } | null {
    return this.#userNamespace ? { pid: this.#child.pid } : null;
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
      await this.#writer.write(encodeFrame(splitfsToWire(req)));
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
        if (reply.t === "chunk") await onChunk?.(Uint8Array.fromBase64(reply.data));
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
