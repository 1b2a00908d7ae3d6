/**
 * `marsh fanout [-n] [-b LABEL=STRING]... [::: LABEL CMD ARG...]...` (docs/guide.md, "marsh fanout
 * and marsh collect"): runs the branches at once in the caller's directory on the same files (no
 * fork, no daemon request), each reading the same spooled stdin, and writes one
 * `marsh.fanout/v1` line for `marsh collect`, or the rendering itself when stdout is a terminal.
 * Exits with the first nonzero branch status, or 128+N after signal N (INT, TERM and HUP are
 * forwarded to every branch's process group, then KILL after 10 s).
 *
 * Inside a Kit job only argv branches run (a shell branch would be a session shell); on the host
 * and in a shell branch `-b` runs STRING with `bash -c`.
 *
 * Needs `--allow-run` (the branches) and `--allow-env` (their environment).
 *
 * @module
 */

import {
  FANOUT_INPUT_LIMIT,
  FANOUT_OUTPUT_LIMIT,
  fanoutLine,
  type FanoutRecord,
  type FanoutSpec,
  firstFailure,
  MAX_FANOUT_BRANCHES,
  newFanoutId,
} from "../model/fanout.ts";
import { concatBytes } from "../model/bytes.ts";
import { exitCodeOf } from "../model/exit_code.ts";
import { labelProblem } from "../model/layout.ts";
import { shellBranchRefusal } from "../model/shell_branch.ts";
import type { BranchSpec } from "../protocol/daemon.ts";
import { CliError } from "./cli_error.ts";
import { writeRendering } from "./collect_command.ts";
import { FanoutRun } from "./fanout_run.ts";
import type { CliIo, Signals } from "./io.ts";
import { parseArgvBranches } from "./split_command.ts";

/** Where the fanout runs: a Kit job takes argv branches only. */
export type FanoutPlace = "host" | "job";

/** What `marsh fanout` was asked for. */
export interface FanoutOptions {
  /** `-b` branches, in declaration order (parsed by `parseShellBranch`). */
  readonly shell: readonly BranchSpec[];
  /** Everything from the first `:::` on, verbatim. */
  readonly argvParts: readonly string[];
  /** `-n`: an empty stdin for every branch, whatever stdin is. */
  readonly noStdin: boolean;
}

/** The signals forwarded to every branch. */
export const FORWARDED: readonly Deno.Signal[] = ["SIGINT", "SIGTERM", "SIGHUP"];
/** The fanout could not finish (the output limit) or could not write its line. */
export const FANOUT_FAILED = 125;
/** Stdout closed before the line or the rendering was written, as `marsh join` reports it. */
const STDOUT_GONE = 1;

const USAGE_LINE = "marsh fanout [-n] [-b LABEL=STRING]... [::: LABEL CMD ARGS...]...";

/**
 * The branches in declaration order (`-b` ones first, as given), checked:
 * at least one, at most 16, labels by the split label rule and each once;
 * in a job, no shell branch.
 *
 * @throws {CliError} (status 2) naming the problem
 */
export function fanoutBranches(opts: FanoutOptions, place: FanoutPlace): FanoutSpec[] {
  const declared = [...opts.shell, ...parseArgvBranches(opts.argvParts, "marsh fanout")];
  if (declared.length === 0) throw new CliError(`marsh fanout: no branches; usage: ${USAGE_LINE}`);
  if (declared.length > MAX_FANOUT_BRANCHES) {
    throw new CliError(
      `marsh fanout: too many branches: ${declared.length} (at most ${MAX_FANOUT_BRANCHES} per fanout)`,
    );
  }
  const seen = new Set<string>();
  for (const b of declared) {
    const problem = labelProblem(b.label);
    if (problem !== null) throw new CliError(`marsh fanout: ${problem}`);
    if (seen.has(b.label)) throw new CliError(`marsh fanout: duplicate label "${b.label}"`);
    seen.add(b.label);
  }
  const shell = declared.find((b) => b.kind === "shell");
  if (place === "job" && shell) {
    throw new CliError(`marsh fanout: ${shellBranchRefusal(shell.label)}`);
  }
  return declared.map((b): FanoutSpec =>
    b.kind === "shell"
      ? { kind: "shell", label: b.label, string: b.script }
      : { kind: "argv", label: b.label, argv: b.argv }
  );
}

/**
 * Reads stdin to its end for the branches, refusing more than `limit` bytes
 * before anything runs.
 *
 * @throws {CliError} (status 2) past the limit
 */
export async function readSpool(
  stdin: ReadableStream<Uint8Array>,
  limit: number = FANOUT_INPUT_LIMIT,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let n = 0;
  const reader = stdin.getReader();
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      n += value.length;
      if (n > limit) {
        throw new CliError(
          `marsh fanout: stdin holds more than ${limit} bytes (the fanout input limit); give the branches less, or -n for none`,
        );
      }
      chunks.push(value);
    }
  } finally {
    reader.releaseLock();
  }
  return concatBytes(chunks);
}

/**
 * Runs a fanout and returns its exit status.
 *
 * @throws {CliError} (status 2) for usage errors and too much stdin: then nothing ran
 */
export async function fanoutCommand(
  opts: FanoutOptions,
  place: FanoutPlace,
  io: CliIo,
  signals: Signals,
): Promise<number> {
  const specs = fanoutBranches(opts, place);
  const input = opts.noStdin || io.stdinIsTerminal ? new Uint8Array(0) : await readSpool(io.stdin);
  const id = newFanoutId();
  const createdMs = Date.now();
  // A signal before the run exists cannot be delivered: the body starts it
  // right after the handlers are in place, before any event is handled.
  let run: FanoutRun | undefined;
  const { end, branches } = await signals.trapSignals(FORWARDED, (sig) => run?.signal(sig), () => {
    run = new FanoutRun(id, specs, input);
    return run.wait().finally(() => run?.[Symbol.dispose]());
  });
  if (end.kind === "output-limit") {
    io.error(
      `marsh fanout: the branches wrote more than ${FANOUT_OUTPUT_LIMIT} bytes of output together (the fanout output limit); every branch was stopped and nothing is written for collect`,
    );
    return FANOUT_FAILED;
  }
  const status = firstFailure(branches.map((b) => b.exit));
  const record: FanoutRecord = {
    id,
    status,
    signal: end.kind === "signal" ? end.signal : null,
    createdMs,
    finishedMs: Date.now(),
    branches,
  };
  const written = io.stdoutIsTerminal
    ? await writeRendering(record, { timing: false, stderr: false }, io)
    : await io.write(new TextEncoder().encode(fanoutLine(record)));
  if (end.kind === "signal") return exitCodeOf(null, end.signal);
  if (!written) {
    io.error(`marsh fanout: stdout closed before the fanout's ${id} output was written`);
    return STDOUT_GONE;
  }
  return status;
}
