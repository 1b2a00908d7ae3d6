/**
 * `marsh compare ID [--test CMD [--timeout SECONDS]] [--json]`
 * (docs/resolution.md, "Comparing branches"): one row per branch, to choose
 * from before `marsh merge` or `marsh choose`; with `--test`, each captured
 * branch's result is tested in a throwaway fork.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Command } from "commander";
import {
  type CompareReply,
  type CompareRow,
  type CompareTest,
  DEFAULT_TEST_TIMEOUT_S,
} from "../protocol/daemon_compare.ts";
import { timeLimitRangeProblem } from "../model/limits.ts";
import { CliError } from "./cli_error.ts";
import {
  connectDaemon,
  type DaemonConnection,
  DaemonConnectionError,
  request,
} from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";

const enc = new TextEncoder();

const HELP = `
One row per branch: its state and exit, the files its patch changes, the
lines added and removed (binary files counted apart), whether its --git
merge would apply cleanly to your tree as it is now (a dry run: nothing of
yours is written), and which other branches change the same paths.

--test CMD runs \`bash -c CMD\` in a throwaway fork of each captured
branch's result, all at once (each takes a slot of your 8, waiting for one
when they are taken), contained as a shell branch is; the branch's own fork
and patch are not changed. The rows get the test's exit and time (TEST,
TIME), and its output is kept in out/LABEL/compare/stdout and stderr. A
test still running after --timeout seconds (1-3600, default 600) is
stopped: SIGINT, then SIGKILL after 10 s. Ctrl-C cancels every test (a
second Ctrl-C stops waiting for them).

Only the split's creator may compare it. Exit status: 0 shown (whatever the
tests' exits), 2 usage or refused, 125 failure, 130 tests cancelled by
Ctrl-C (the rows are still shown).

Examples:
  marsh compare 5k2m9q0d
  marsh compare 5k2m9q0d --json | jq '.branches[] | select(.clean)'
  marsh compare 5k2m9q0d --test 'npm test' --timeout 300
`;

/** What `marsh compare` was asked. */
export interface CompareOptions {
  readonly json: boolean;
  /** `--test CMD`. */
  readonly test?: string;
  /** `--timeout SECONDS`, as typed. */
  readonly timeout?: string;
}

/** Registers `marsh compare`. */
export function registerCompareCommand(
  program: Command,
  ctx: {
    readonly io: CliIo;
    readonly signals: Signals;
    readonly setStatus: (code: number) => void;
    readonly userErrors: (cmd: Command, path: string) => Command;
  },
): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("compare"), "marsh compare")
    .description("Compare a split's branches before choosing one: counts, overlaps, clean merge.")
    .argument("<ID>", "the split's id (marsh splits)")
    .option("--json", `print the rows as one JSON document (schema marsh.compare/v1)`)
    .option("--test <CMD>", "run bash -c CMD in a throwaway fork of each captured branch")
    .option(
      "--timeout <SECONDS>",
      `stop each test after SECONDS (1-3600; default ${DEFAULT_TEST_TIMEOUT_S})`,
    )
    .addHelpText("after", HELP)
    .action(async (id: string, opts: { json?: boolean; test?: string; timeout?: string }) => {
      setStatus(
        await compareCommand(
          id,
          { json: opts.json === true, test: opts.test, timeout: opts.timeout },
          io,
          ctx.signals,
        ),
      );
    });
}

/**
 * The `--timeout` value in seconds.
 *
 * @throws {CliError} (status 2) for anything but a whole number from 1 to 3600
 */
export function parseTestTimeout(text: string | undefined): number {
  if (text === undefined) return DEFAULT_TEST_TIMEOUT_S;
  // Digits only: no sign, fraction, exponent or space (`Number` takes them all).
  const seconds = /^[0-9]{1,10}$/.test(text) ? Number(text) : Number.NaN;
  const problem = timeLimitRangeProblem(seconds);
  if (problem !== null) throw new CliError(`marsh compare: --timeout ${text}: ${problem}`);
  return seconds;
}

/**
 * Compares split `id`'s branches and returns the exit status.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function compareCommand(
  id: string,
  opts: CompareOptions,
  io: CliIo,
  signals: Signals,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  if (opts.test === undefined && opts.timeout !== undefined) {
    throw new CliError("marsh compare: --timeout needs --test CMD");
  }
  if (opts.test !== undefined && opts.test.trim() === "") {
    throw new CliError("marsh compare: --test needs a command, e.g. --test 'npm test'");
  }
  const timeoutS = parseTestTimeout(opts.timeout);
  await using conn = await connect();
  const ask = request(
    conn,
    {
      v: 1,
      t: "resolve.compare",
      id,
      ...(opts.test === undefined ? {} : { test: { script: opts.test, timeoutS, env: io.env() } }),
    },
    ["compare"],
    "marsh compare",
    io.error,
  );
  let interrupts = 0;
  const stopWaiting = Promise.withResolvers<null>();
  const reply = opts.test === undefined ? await ask : await signals.trapInterrupts(() => {
    interrupts++;
    if (interrupts === 2) {
      // The dropped connection cancels what the first Ctrl-C has not yet stopped.
      io.error("marsh compare: stopped waiting; the tests are cancelled without their rows");
      stopWaiting.resolve(null);
      return;
    }
    if (interrupts > 1) return;
    io.error("marsh compare: cancelling the tests; Ctrl-C again to stop waiting");
    conn.send({ v: 1, t: "resolve.compare.cancel" }).catch((error) => {
      if (!(error instanceof DaemonConnectionError)) throw error;
      // The daemon already closed the stream; the request reports what it said.
    });
  }, () => Promise.race([ask, stopWaiting.promise]));
  if (reply === null) {
    // Closing the connection ends the request with an error nobody waits for.
    ask.catch(() => {});
    return 130;
  }
  const { v: _v, t: _t, ...doc } = reply;
  await io.write(enc.encode(opts.json ? `${JSON.stringify(doc)}\n` : formatCompare(reply)));
  return interrupts > 0 ? 130 : 0;
}

function testCells(t: CompareTest | undefined): [string, string] {
  if (t === undefined) return ["-", "-"];
  const status = t.exit !== null && t.status === `exited ${t.exit}` ? String(t.exit) : t.status;
  if (t.ms === 0 && t.exit === null) return [status, "-"];
  return [status, t.ms < 1000 ? `${t.ms}ms` : `${(t.ms / 1000).toFixed(1)}s`];
}

function mergeCell(r: CompareRow): string {
  if (r.clean === null) return "-";
  return r.clean ? "clean" : `conflict (${r.conflicts})`;
}

/** The text table: a header, one line per branch, then the notes. */
export function formatCompare(reply: CompareReply): string {
  if (reply.branches.length === 0) return `split ${reply.id} has no branches\n`;
  const tested = reply.branches.some((r) => r.test !== undefined);
  const header = ["LABEL", "STATE", "STATUS", "FILES", "+", "-", "BINARY", "MERGE"];
  const rows = [[...header, ...(tested ? ["TEST", "TIME"] : []), "OVERLAPS"]];
  for (const r of reply.branches) {
    rows.push([
      r.label,
      r.state,
      r.status ?? "-",
      String(r.files),
      String(r.added),
      String(r.removed),
      String(r.binary),
      mergeCell(r),
      ...(tested ? testCells(r.test) : []),
      r.overlaps.length === 0 ? "-" : r.overlaps.map((o) => `${o.label} (${o.paths})`).join(", "),
    ]);
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((row) => row[c]!.length)));
  const lines = rows.map((row) =>
    row.map((cell, c) => c === row.length - 1 ? cell : cell.padEnd(widths[c]!)).join("  ")
  );
  for (const r of reply.branches) if (r.note) lines.push(`${r.label}: ${r.note}`);
  return lines.join("\n") + "\n";
}
