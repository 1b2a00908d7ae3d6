/**
 * `marsh logs ID LABEL [-f] [--stdout | --stderr]`: a branch's output, from
 * the daemon (docs/guide.md, "Watching and stopping a branch"). The
 * branch's stdout goes to stdout and its stderr to stderr: each stream
 * keeps its own order, but the order between them is not recorded (they are
 * two files), so nothing here interleaves them; `2>&1` merges them as they
 * arrive. Control bytes are escaped on a terminal, as in join's rendering.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { LogStreams } from "../protocol/daemon.ts";
import { TerminalEscaper } from "../patch/terminal_escape.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

/** What `marsh logs` was asked for. */
export interface LogsOptions {
  readonly id: string;
  readonly label: string;
  /** `-f`: go on until the branch has ended. */
  readonly follow: boolean;
  readonly streams: LogStreams;
}

/** Where the branch's stderr goes: all of `bytes`, false when its reader has gone. */
export type WriteBytes = (bytes: Uint8Array) => Promise<boolean>;

/** The process's stderr as a byte sink; a reader that left is not an error. */
export async function writeStderr(bytes: Uint8Array): Promise<boolean> {
  try {
    for (let off = 0; off < bytes.length;) off += await Deno.stderr.write(bytes.subarray(off));
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.BrokenPipe) return false;
    throw error;
  }
}

/** A sink that escapes control bytes when it is a terminal. */
function sink(write: WriteBytes, terminal: boolean): { push(b: Uint8Array): Promise<boolean> } {
  if (!terminal) return { push: (b) => write(b) };
  return {
    async push(b) {
      const pieces: Uint8Array[] = [];
      const escaper = new TerminalEscaper((x) => pieces.push(x.slice()));
      escaper.push(b);
      escaper.end();
      const bytes = new Uint8Array(pieces.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of pieces) {
        bytes.set(p, at);
        at += p.length;
      }
      return await write(bytes);
    },
  };
}

/**
 * Prints a branch's output and returns the exit status: 0 once it is all
 * printed (with `follow`, once the branch has ended).
 *
 * @throws {CliError} with the daemon's message and status when it refuses (an unknown id or label, a split of another caller)
 */
export async function logsCommand(
  opts: LogsOptions,
  io: CliIo,
  writeErr: WriteBytes = writeStderr,
  stderrIsTerminal = io.stderrIsTerminal,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const out = {
    stdout: sink((b) => io.write(b), io.stdoutIsTerminal),
    stderr: sink(writeErr, stderrIsTerminal),
  };
  try {
    await conn.send({
      v: 1,
      t: "splits.logs",
      id: opts.id,
      label: opts.label,
      follow: opts.follow,
      streams: opts.streams,
    });
    for await (const frame of conn) {
      switch (frame.t) {
        case "logs.chunk":
          // A reader that left (`| head`) ends the command, quietly.
          if (!await out[frame.stream].push(Uint8Array.fromBase64(frame.data))) return 0;
          break;
        case "logs.end":
          return 0;
        case "notice":
          io.error(frame.message);
          break;
        case "error":
          throw new CliError(`marsh logs: ${frame.message}`, frame.code);
        default:
          throw new DaemonConnectionError(`an unexpected ${frame.t} frame from the daemon`);
      }
    }
    throw new DaemonConnectionError("the daemon closed the connection before the output ended");
  } catch (cause) {
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    throw new CliError(`marsh logs: ${cause.message}`, 2, { cause });
  }
}
