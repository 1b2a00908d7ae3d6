/**
 * `marsh split`: asks the daemon for a split, streams stdin into its spool,
 * relays its notices, and prints the handle line when every branch is
 * settled. Exits with the split's status (docs/rules.md "Running a split").
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { timeLimitRangeProblem } from "../model/limits.ts";
import {
  type BranchSpec,
  type DaemonFrame,
  type SplitCreateRequest,
  SPOOL_CHUNK,
} from "../protocol/daemon.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";

/** The word that starts an argv branch; never an argument of one. */
export const ARGV_SEPARATOR = ":::";

/** The status of a split cancelled by Ctrl-C (docs/rules.md "Running a split"). */
export const CANCELLED = 130;

/** What `marsh split` was asked for. */
export interface SplitOptions {
  /** Shell branches, in declaration order. */
  readonly branches: readonly BranchSpec[];
  /** Everything from the first `:::` on, verbatim (see {@linkcode parseArgvBranches}). */
  readonly argvParts: readonly string[];
  /** `-n`: an empty spool whatever stdin is. */
  readonly noStdin: boolean;
  /** `--with-ignored`: snapshot ignored files too (`node_modules`, `.env`, caches). */
  readonly withIgnored?: boolean;
  /** `-t LABEL=SECONDS` values as typed, checked by {@linkcode withTimeLimits}. */
  readonly timeLimits?: readonly string[];
}

/**
 * Gives each shell branch named by a `-t LABEL=SECONDS` its time limit: a
 * whole number of seconds from 1 to the split's own limit of 1 h
 * (docs/guide.md, "Watching and stopping a branch").
 *
 * @throws {CliError} (status 2) for a malformed value, a bad number, a label
 *   given twice, an unknown label or an argv branch's label
 */
export function withTimeLimits(
  branches: readonly BranchSpec[],
  values: readonly string[],
): BranchSpec[] {
  const limits = new Map<string, number>();
  for (const value of values) {
    const eq = value.indexOf("=");
    if (eq <= 0) {
      throw new CliError(
        `marsh split: -t needs LABEL=SECONDS, got ${JSON.stringify(value)}; e.g. -t tests=600`,
      );
    }
    const label = value.slice(0, eq), text = value.slice(eq + 1);
    const what = `marsh split: -t ${label}=${text}`;
    // Digits only: no sign, fraction, exponent or space (`Number` takes them all).
    const seconds = /^[0-9]{1,10}$/.test(text) ? Number(text) : Number.NaN;
    const problem = timeLimitRangeProblem(seconds);
    if (problem !== null) throw new CliError(`${what}: ${problem}`);
    if (limits.has(label)) throw new CliError(`marsh split: -t ${label} is given twice`);
    const branch = branches.find((b) => b.label === label);
    if (branch === undefined) {
      const shell = branches.filter((b) => b.kind === "shell").map((b) => b.label);
      throw new CliError(
        `${what}: no shell branch ${JSON.stringify(label)}; ${
          shell.length === 0 ? "there are none" : `the shell branches are: ${shell.join(", ")}`
        }`,
      );
    }
    if (branch.kind === "argv") {
      throw new CliError(
        `${what}: ${
          JSON.stringify(label)
        } is an argv branch: its Kit's wall clock limits it (marsh kits add --wall)`,
      );
    }
    limits.set(label, seconds);
  }
  return branches.map((b) => {
    const seconds = limits.get(b.label);
    return seconds === undefined || b.kind !== "shell" ? b : { ...b, timeLimitS: seconds };
  });
}

/**
 * Parses one `-b LABEL=STRING` of `cmd` (`marsh split`, `marsh fanout`): the label is everything
 * before the first `=`. The daemon checks which labels are valid; an empty one is refused here.
 *
 * @throws {CliError} (status 2) with the form to use
 */
export function parseShellBranch(value: string, cmd = "marsh split"): BranchSpec {
  const eq = value.indexOf("=");
  if (eq < 0) {
    throw new CliError(
      `${cmd}: -b needs LABEL=STRING, got ${JSON.stringify(value)}; e.g. -b test='make test'`,
    );
  }
  if (eq === 0) {
    throw new CliError(
      `${cmd}: -b needs a label before "=", got ${JSON.stringify(value)}; e.g. -b test='make test'`,
    );
  }
  return { kind: "shell", label: value.slice(0, eq), script: value.slice(eq + 1) };
}

/**
 * Splits the command line at the first `:::` so that the option parser
 * never sees the argv branches (whose `-x` words belong to their commands).
 */
export function splitAtArgvBranches(args: readonly string[]): {
  head: string[];
  argvParts: string[];
} {
  const at = args.indexOf(ARGV_SEPARATOR);
  if (at < 0) return { head: [...args], argvParts: [] };
  return { head: args.slice(0, at), argvParts: args.slice(at) };
}

/**
 * Refuses words left over after the options when no `:::` branch took them:
 * each branch is `-b LABEL='command'` or `::: LABEL CMD ARGS...`.
 *
 * @throws {CliError} naming the first stray word
 */
export function refuseStrayWords(
  words: readonly string[],
  argvParts: readonly unknown[],
  cmd = "marsh split",
): void {
  if (words.length > 0 && argvParts.length === 0) {
    throw new CliError(
      `${cmd}: unexpected argument ${
        JSON.stringify(words[0])
      }; give each branch as -b LABEL='command' or ::: LABEL CMD ARGS...`,
    );
  }
}

/**
 * Parses the words from the first `:::` on into argv branches of `cmd` (`marsh split`, `marsh
 * fanout`): each `:::`
 * starts one, `::: LABEL CMD [ARG...]`, and its words are taken verbatim
 * (the outer shell has already quoted them). So `:::` can never be an
 * argument: it always starts the next branch. The daemon checks the labels
 * and that CMD is a registered Kit command.
 *
 * @throws {CliError} (status 2) for a `:::` without a label and a command
 */
export function parseArgvBranches(parts: readonly string[], cmd = "marsh split"): BranchSpec[] {
  if (parts.length === 0) return [];
  if (parts[0] !== ARGV_SEPARATOR) {
    throw new TypeError(`argv branches start with ${ARGV_SEPARATOR}`);
  }
  const groups: string[][] = [];
  for (const word of parts) {
    if (word === ARGV_SEPARATOR) groups.push([]);
    else groups[groups.length - 1]!.push(word);
  }
  return groups.map((words, i) => {
    const [label, ...argv] = words;
    if (label === undefined || label === "" || argv.length === 0) {
      const got = words.length === 0 ? "nothing" : JSON.stringify(words.join(" "));
      throw new CliError(
        `${cmd}: argv branch ${
          i + 1
        } needs a label and a command after ${ARGV_SEPARATOR}, got ${got}; e.g. ${ARGV_SEPARATOR} review claude -p 'review this diff'`,
      );
    }
    return { kind: "argv", label, argv };
  });
}

/** The handle line `marsh join` reads (docs/rules.md "States and records"), with its newline. */
export function handleLine(id: string): string {
  return `${JSON.stringify({ marsh_split: 1, id })}\n`;
}

/**
 * Runs a split and returns its exit status.
 *
 * @throws {CliError} for usage errors (status 2, nothing sent) and daemon failures
 */
export async function splitCommand(
  opts: SplitOptions,
  io: CliIo,
  signals: Signals,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const declared = [...opts.branches, ...parseArgvBranches(opts.argvParts)];
  if (declared.length === 0) {
    throw new CliError(
      "marsh split: no branches; usage: marsh split [-n] [-b LABEL='command']... [::: LABEL CMD ARGS...]...",
    );
  }
  const branches = withTimeLimits(declared, opts.timeLimits ?? []);
  const spool = !opts.noStdin && !io.stdinIsTerminal;
  const cwd = currentDir(io);
  await using conn = await connect();
  const run = new SplitRun(conn, io, {
    v: 1,
    t: "split.create",
    cwd,
    branches,
    env: io.env(),
    ...(io.envDigests === undefined ? {} : { envDigests: io.envDigests() }),
    spool,
    withIgnored: opts.withIgnored === true,
  });
  return await signals.trapInterrupts(() => run.interrupt(), () => run.wait());
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function currentDir(io: CliIo): string {
  try {
    return io.cwd();
  } catch (cause) {
    if (!(cause instanceof Deno.errors.NotFound)) throw cause;
    throw new CliError(
      "marsh split: the current directory is gone; cd into the project and run it again",
      2,
      { cause },
    );
  }
}

/** One split's conversation with the daemon. */
class SplitRun {
  readonly #conn: DaemonConnection;
  readonly #io: CliIo;
  readonly #create: SplitCreateRequest;
  readonly #stopSpool = new AbortController();
  /** Settles the wait early: a second Ctrl-C, or stdin that cannot be read. */
  readonly #stopWaiting = Promise.withResolvers<"stop" | CliError>();
  #spoolDone: Promise<void> = Promise.resolve();
  #interrupts = 0;
  #id: string | undefined;

  constructor(
    conn: DaemonConnection,
    io: CliIo,
    create: SplitCreateRequest,
  ) {
    this.#conn = conn;
    this.#io = io;
    this.#create = create;
  }

  /** Ctrl-C: the first cancels the split (once), the second stops waiting. */
  interrupt(): void {
    this.#interrupts++;
    if (this.#interrupts === 1) {
      this.#io.error("marsh split: cancelling; Ctrl-C again to stop waiting");
      this.#stopSpool.abort();
      // The spool ends (early) before the cancel, so the frames stay in protocol order.
      this.#spoolDone.then(() =>
        this.#conn.send({ v: 1, t: "split.cancel" }).catch((error) => {
          if (!(error instanceof DaemonConnectionError)) throw error;
          // The daemon already closed the stream; the wait loop reports what it said.
        })
      );
    } else if (this.#interrupts === 2) {
      this.#stopWaiting.resolve("stop");
    }
  }

  async wait(): Promise<number> {
    // The spool starts in the same turn as the request, so a Ctrl-C's cancel
    // (queued behind spool.end) can never overtake either.
    const created = this.#conn.send(this.#create);
    if (this.#create.spool) {
      this.#spoolDone = streamSpool(this.#conn, this.#io.stdin, this.#stopSpool.signal).then(
        () => undefined,
        (cause) => {
          // Without the whole spool the split must not run: dropping the stream cancels it.
          this.#stopWaiting.resolve(
            new CliError(`marsh split: cannot read stdin: ${errorMessage(cause)}`, 2, { cause }),
          );
        },
      );
    }
    created.catch((error) => {
      if (!(error instanceof DaemonConnectionError)) throw error;
      // The daemon closed the stream; the frames before the close say why.
    });
    for (;;) {
      let frame: DaemonFrame | undefined | "stop" | CliError;
      try {
        frame = await Promise.race([this.#conn.next(), this.#stopWaiting.promise]);
      } catch (cause) {
        if (!(cause instanceof DaemonConnectionError)) throw cause;
        throw this.#lost(cause.message, cause);
      }
      if (frame === "stop") {
        this.#conn.close();
        return CANCELLED;
      }
      if (frame instanceof CliError) {
        this.#conn.close();
        throw frame;
      }
      if (frame === undefined) throw this.#lost("the daemon closed the connection");
      switch (frame.t) {
        case "split.accepted":
          this.#id = frame.id;
          break;
        case "notice":
          if (!frame.progress || this.#io.stderrIsTerminal) this.#io.error(frame.message);
          break;
        case "split.done": {
          this.#stopSpool.abort();
          const written = await this.#io.write(new TextEncoder().encode(handleLine(frame.id)));
          if (!written) {
            this.#io.error(
              `marsh split: stdout is closed, so the handle of split ${frame.id} was not written`,
            );
          }
          if (frame.message) this.#io.error(frame.message);
          return frame.code;
        }
        case "error":
          this.#stopSpool.abort();
          throw new CliError(`marsh split: ${frame.message}`, frame.code);
        default:
          throw this.#lost(`an unexpected ${frame.t} frame from the daemon`);
      }
    }
  }

  #lost(why: string, cause?: unknown): CliError {
    this.#stopSpool.abort();
    if (this.#id === undefined) {
      return new CliError(`marsh split: ${why} before the split was accepted`, 2, { cause });
    }
    // The split exists but its end is unknown here (docs/rules.md "Kit jobs"): its jobs are
    // uncertain after a restart, and nothing of it is rerun.
    return new CliError(
      `marsh split: job uncertain: ${why} before split ${this.#id} finished; see marsh splits ${this.#id}`,
      125,
      { cause },
    );
  }
}

/**
 * Streams stdin to the daemon in `SPOOL_CHUNK` pieces, then `spool.end`.
 * Stops reading early when `signal` aborts (the split is being cancelled).
 * A connection the daemon closed ends it quietly: the daemon's own frame
 * says why.
 */
async function streamSpool(
  conn: DaemonConnection,
  stdin: ReadableStream<Uint8Array>,
  signal: AbortSignal,
): Promise<void> {
  const reader = stdin.getReader();
  const stop = () => {
    reader.cancel().catch((error) => {
      if (!(error instanceof Deno.errors.BadResource)) throw error;
      // stdin was already closed.
    });
  };
  if (signal.aborted) stop();
  else signal.addEventListener("abort", stop, { once: true });
  const buf = new Uint8Array(SPOOL_CHUNK);
  let fill = 0;
  const flush = async () => {
    if (fill === 0) return;
    const data = buf.subarray(0, fill).toBase64();
    fill = 0;
    await conn.send({ v: 1, t: "spool", data });
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      let off = 0;
      while (off < value.length) {
        const n = Math.min(value.length - off, SPOOL_CHUNK - fill);
        buf.set(value.subarray(off, off + n), fill);
        fill += n;
        off += n;
        if (fill === SPOOL_CHUNK) await flush();
      }
    }
    await flush();
    await conn.send({ v: 1, t: "spool.end" });
  } catch (error) {
    if (!(error instanceof DaemonConnectionError)) throw error;
    // The daemon closed the stream (a refusal, or the spool limit): its frame says which.
  } finally {
    signal.removeEventListener("abort", stop);
    reader.releaseLock();
  }
}
