/**
 * The parts of a worker `launch` (`protocol/worker.ts`, which re-exports
 * them) that say what runs and where its stdio goes, and where a checkpoint
 * operation's fork lies (docs/checkpoints.md, "An operation").
 *
 * @module
 */

import { isRecordId, SESSION_DIR, sessionNameProblem } from "../model/checkpoint.ts";
import { MARSH_DIR } from "../model/layout.ts";

/** What a launch runs: a shell branch's script, or an operation's argv. */
export type LaunchProgram = ScriptProgram | ArgvProgram;

/** A shell branch: `bash -c script`. */
export interface ScriptProgram {
  readonly script: string;
  readonly argv?: undefined;
}

/**
 * A checkpoint operation's command (docs/checkpoints.md, "An operation"):
 * `argv[0]` is looked up in the branch's `PATH` and exec'd with exactly these
 * arguments, no shell, no quoting. At least one element, no NUL, at most
 * `MAX_ARGV_BYTES` of `model/checkpoint.ts` as JSON (its `argvProblem`).
 */
export interface ArgvProgram {
  readonly argv: readonly string[];
  readonly script?: undefined;
}

/** Where a launch's stdin, stdout and stderr are: files, or the caller's FIFOs. */
export type LaunchStdio = FileStdio | FifoStdio;

/**
 * A shell branch's stdio: a spool file in, two files out, output bounded
 * (`output-limit`, `protocol/worker.ts`).
 */
export interface FileStdio {
  /** Absolute path of the spool file, read-only; `null` means empty stdin (`/dev/null`). */
  readonly stdin: string | null;
  /** Absolute paths of files the worker creates (`O_CREAT | O_EXCL`, mode 0600). */
  readonly stdout: string;
  readonly stderr: string;
  /** Bytes of stdout and stderr together the worker keeps; default `OUTPUT_LIMIT` of `model/limits.ts` (a split's). */
  readonly outputLimit?: number;
  readonly stdio?: undefined;
}

/**
 * An operation's stdio: FIFOs the caller made and opens, streamed with no
 * output limit (never an `output-limit` event). See {@linkcode StdioFifos}.
 */
export interface FifoStdio {
  readonly stdio: StdioFifos;
  readonly stdin?: undefined;
  readonly stdout?: undefined;
  readonly stderr?: undefined;
  readonly outputLimit?: undefined;
}

/**
 * Three distinct FIFOs (`mkfifo -m 600`) in one directory
 * `<control dir>/io/<id>/` (with a view, its `control`),
 * made by the caller, who opens all three, in any order, right after it sent
 * the launch. The worker opens `stdin` for reading and `stdout` and `stderr`
 * for writing without waiting on one before another; a stdout or stderr
 * reader that has not come within {@linkcode FIFO_OPEN_MS} fails the launch
 * (an `error` instead of `launched`, nothing run). All three are relayed by
 * the supervisor: a reader that goes away (`EPIPE`) loses the rest of that
 * stream but does not stop the branch; the stdin FIFO's end (its writer
 * closed) is the branch's end of input, and a writer that never opens
 * leaves the branch's stdin open (a `cancel` ends such a branch).
 */
export interface StdioFifos {
  readonly stdin: string;
  readonly stdout: string;
  readonly stderr: string;
}

/** How long the worker waits for the caller to open its end of each {@linkcode StdioFifos} FIFO. */
export const FIFO_OPEN_MS = 10_000;

/** An operation's fork, its read-write overlay: `<root>/.marsh/session/<name>/op/<op>/merged`. */
export function opForkPath(root: string, session: string, op: string): string {
  return `${root}/${MARSH_DIR}/${SESSION_DIR}/${session}/op/${op}/merged`;
}

/** Whether `fork` is {@linkcode opForkPath} of `root` for a valid session name and op id. */
export function isOpFork(root: string, fork: string): boolean {
  const prefix = `${root}/${MARSH_DIR}/${SESSION_DIR}/`;
  if (!fork.startsWith(prefix)) return false;
  const parts = fork.slice(prefix.length).split("/");
  return parts.length === 4 && parts[1] === "op" && parts[3] === "merged" &&
    sessionNameProblem(parts[0]!) === null && isRecordId(parts[2]);
}
