/**
 * `marsh join`: reads a split's handle from stdin, takes the daemon's
 * rendering of its results, hands it to stdout or to a consumer command,
 * and releases the split with the consumer's status (docs/rules.md "Running a split").
 *
 * Needs what {@linkcode connectDaemon} needs, and `--allow-run` for the
 * consumer.
 *
 * @module
 */

import type { DaemonFrame, JoinReadyReply, ReleasedReply } from "../protocol/daemon.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";
import { concatBytes } from "../model/bytes.ts";

/** The refusal when stdin holds no handle. */
export const NO_HANDLE = "marsh join: no split handle on stdin; pipe `marsh split ...` into it";

/** The status of a consumer that could not be started, as a shell reports it. */
export const NOT_STARTED = 127;

/** Lines longer than this cannot be a handle; their bytes are not kept. */
const MAX_HANDLE_LINE = 4096;

/** What `marsh join` was asked for. */
export interface JoinOptions {
  /** The manifest instead of the rendering. */
  readonly json: boolean;
  /** Keep the split even when it could be removed. */
  readonly keep: boolean;
  /** `-- CMD ARGS...`; empty for a bare join. */
  readonly consumer: readonly string[];
}

/**
 * The split id of a handle line `{"marsh_split":1,"id":"..."}`, or undefined
 * when the line is not one.
 */
export function parseHandle(line: string): string | undefined {
  const text = line.trim();
  if (!text.startsWith("{")) return undefined;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) return undefined;
  const handle = value as Record<string, unknown>;
  if (handle.marsh_split !== 1) return undefined;
  const id = handle.id;
  return typeof id === "string" && id.length > 0 && id.length <= 128 ? id : undefined;
}

/**
 * Reads a stream to its end and returns the id of the last line that is a
 * handle (output before the handle, or several splits, may precede it).
 */
export async function readHandle(stream: ReadableStream<Uint8Array>): Promise<string | undefined> {
  const decoder = new TextDecoder();
  let found: string | undefined;
  let line = "";
  let overlong = false;
  const take = (piece: string, end: boolean) => {
    if (!overlong) line += piece;
    if (line.length > MAX_HANDLE_LINE) {
      overlong = true;
      line = "";
    }
    if (end) {
      if (!overlong) found = parseHandle(line) ?? found;
      line = "";
      overlong = false;
    }
  };
  for await (const bytes of stream) {
    const text = decoder.decode(bytes, { stream: true });
    let from = 0;
    for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n", from)) {
      take(text.slice(from, nl), true);
      from = nl + 1;
    }
    take(text.slice(from), false);
  }
  take(decoder.decode(), true);
  return found;
}

/**
 * Runs a join and returns the exit status: the consumer's, or 0 for a bare
 * join.
 *
 * @throws {CliError} for a missing handle (status 2, nothing sent) and the daemon's refusals
 */
export async function joinCommand(
  opts: JoinOptions,
  io: CliIo,
  signals: Signals,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  // A terminal would wait for a handle typed by hand; no one means that.
  if (io.stdinIsTerminal) throw new CliError(NO_HANDLE);
  const id = await readHandle(io.stdin);
  if (id === undefined) throw new CliError(NO_HANDLE);

  const hasConsumer = opts.consumer.length > 0;
  await using conn = await connect();
  const talk = new JoinTalk(conn, io, id);
  await talk.send({
    v: 1,
    t: "split.join",
    id,
    keep: opts.keep,
    consumer: hasConsumer,
    // Control bytes are escaped only where the rendering meets the terminal.
    terminal: !hasConsumer && !opts.json && io.stdoutIsTerminal,
  });
  const ready = await talk.expect(["join.ready"]);

  let status: number | null;
  if (hasConsumer) {
    const rendering = await talk.rendering();
    const input = opts.json ? manifestLine(ready) : rendering;
    status = await signals.trapInterrupts(
      // The consumer gets the Ctrl-C (same process group); join waits for its status.
      () => {},
      () => runConsumer(opts.consumer, input, ready.env, io),
    );
  } else {
    let open = true;
    const write = async (bytes: Uint8Array) => {
      if (open) open = await io.write(bytes);
    };
    if (opts.json) {
      // Nothing of the rendering is written here, so the release need not wait
      // for it: the daemon reads it after `join.rendered`.
      await talk.send({ v: 1, t: "join.release", consumerStatus: null });
      await talk.rendering();
      // The line says what the release did, so it is written after it (docs/guide.md, "marsh join").
      const released = await talk.expect(["join.released"]);
      if (released.message) io.error(released.message);
      await write(releasedLine(ready, released));
      if (!open) {
        throw new CliError(
          released.removed
            ? `marsh join: stdout closed before the manifest was written; split ${id} was removed`
            : `marsh join: stdout closed before the manifest was written; split ${id} is kept (marsh splits rm ${id} removes it)`,
          1,
        );
      }
      return 0;
    }
    await talk.rendering(write);
    if (!open) {
      // Not written, not consumed: without a release the daemon keeps the split.
      conn.close();
      throw new CliError(
        `marsh join: stdout closed before the rendering was written; split ${id} is kept (marsh splits rm ${id} removes it)`,
        1,
      );
    }
    status = null;
  }

  await talk.send({ v: 1, t: "join.release", consumerStatus: status });
  const released = await talk.expect(["join.released"], status);
  if (released.message) io.error(released.message);
  return status ?? 0;
}

function manifestLine(ready: JoinReadyReply): Uint8Array {
  return new TextEncoder().encode(`${JSON.stringify(ready.manifest)}\n`);
}

/**
 * A bare `join --json`'s line: the manifest after the release, with
 * `released` (`removed` or `kept`) and `reason` (why). A daemon older than
 * the CLI sends neither manifest nor reason: the one from before the release
 * stands in, without a reason.
 */
export function releasedLine(ready: JoinReadyReply, released: ReleasedReply): Uint8Array {
  const line = {
    ...(released.manifest ?? ready.manifest),
    released: released.removed ? "removed" : "kept",
    ...(released.reason !== undefined ? { reason: released.reason } : {}),
  };
  return new TextEncoder().encode(`${JSON.stringify(line)}\n`);
}

/** The join's frames, with the daemon's errors turned into the CLI's. */
class JoinTalk {
  readonly #conn: DaemonConnection;
  readonly #io: CliIo;
  readonly #id: string;

  constructor(conn: DaemonConnection, io: CliIo, id: string) {
    this.#conn = conn;
    this.#io = io;
    this.#id = id;
  }

  async send(frame: Parameters<DaemonConnection["send"]>[0]): Promise<void> {
    try {
      await this.#conn.send(frame);
    } catch (cause) {
      if (!(cause instanceof DaemonConnectionError)) throw cause;
      throw this.#lost(cause.message, null, cause);
    }
  }

  /**
   * The next frame that is not a notice, which must be one of `types`.
   * `status` is the consumer's, when one ran: a later failure keeps it.
   */
  async expect<T extends DaemonFrame["t"]>(
    types: readonly T[],
    status: number | null = null,
  ): Promise<Extract<DaemonFrame, { t: T }>> {
    for (;;) {
      let frame: DaemonFrame | undefined;
      try {
        frame = await this.#conn.next();
      } catch (cause) {
        if (!(cause instanceof DaemonConnectionError)) throw cause;
        throw this.#lost(cause.message, status, cause);
      }
      if (frame === undefined) throw this.#lost("the daemon closed the connection", status);
      if ((types as readonly string[]).includes(frame.t)) {
        return frame as Extract<DaemonFrame, { t: T }>;
      }
      if (frame.t === "notice") {
        this.#io.error(frame.message);
      } else if (frame.t === "error") {
        throw new CliError(`marsh join: ${frame.message}`, status || frame.code);
      } else {
        throw this.#lost(`an unexpected ${frame.t} frame from the daemon`, status);
      }
    }
  }

  /**
   * The rendering's chunks until `join.rendered`: handed to `sink` as they
   * come, or collected and returned.
   */
  async rendering(sink?: (bytes: Uint8Array) => Promise<void>): Promise<Uint8Array> {
    const parts: Uint8Array[] = [];
    for (;;) {
      const frame = await this.expect(["chunk", "join.rendered"]);
      if (frame.t === "join.rendered") break;
      const bytes = Uint8Array.fromBase64(frame.data);
      if (sink) await sink(bytes);
      else parts.push(bytes);
    }
    return concatBytes(parts);
  }

  #lost(why: string, status: number | null, cause?: unknown): CliError {
    this.#conn.close();
    // Without a release the daemon keeps the split; a consumer's failure still wins.
    return new CliError(
      `marsh join: ${why}; split ${this.#id} is kept (see marsh splits ${this.#id})`,
      status || 2,
      { cause },
    );
  }
}

/**
 * Runs the consumer with `input` on its stdin, stdout and stderr inherited,
 * and the split's variables added to the environment.
 *
 * @returns its exit status (128 + N after signal N); 127 when it cannot start
 */
async function runConsumer(
  argv: readonly string[],
  input: Uint8Array,
  env: Readonly<Record<string, string>>,
  io: CliIo,
): Promise<number> {
  const [cmd, ...args] = argv as [string, ...string[]];
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(cmd, {
      args,
      env: { ...env },
      stdin: "piped",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      io.error(`marsh join: ${cmd}: command not found; check its name or PATH`);
    } else if (error instanceof Error) {
      io.error(`marsh join: cannot run ${cmd}: ${error.message}`);
    } else {
      throw error;
    }
    return NOT_STARTED;
  }
  const writer = child.stdin.getWriter();
  try {
    await writer.write(input);
    await writer.close();
  } catch (error) {
    if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
    // The consumer need not read all of the rendering; its status is what counts.
  }
  return (await child.status).code;
}
