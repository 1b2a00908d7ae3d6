/**
 * `marsh run [--spawn a,b | --no-spawn] NAME ARGS...` (docs/guide.md
 * "marsh run"): a registered command as its own confined Kit job, its
 * stdin, stdout, stderr and exit status the caller's. The same request is a
 * job's link in its child case (`job/main.ts`).
 *
 * The CLI sends `process.run`, then relays its stdin as frames while it
 * writes the command's output as it comes. Ctrl-C sends `process.signal`:
 * the daemon cancels the job's whole subtree and the CLI exits 130. A
 * connection lost after the job started is `job uncertain` (125).
 *
 * Needs what `connectDaemon` needs.
 *
 * @module
 */

import type { Command } from "commander";
import type { CliContext } from "./cli_program.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";
import { SPAWN_ENV } from "../model/job_spawn.ts";
import { FANOUT_BRANCH_ENV, parseFanoutBranch } from "../model/fanout.ts";
import { splitIdProblem } from "../model/layout.ts";
import { RUN_CHUNK, type RunSpawn, type RunVia } from "../protocol/process_run.ts";
import type { DaemonFrame } from "../protocol/daemon.ts";
import { TOO_MANY_CONNECTIONS } from "../protocol/job_capability.ts";

/** How long a job's capped connection is tried again, and the pause between tries. */
const CAP_RETRY_MS = 2_000;
const CAP_RETRY_PAUSE_MS = 100;

/** `marsh run --help`'s text after the options. */
export const RUN_HELP = `
NAME is a registered command (marsh kits ls). It runs as its own job in a
fresh container of its Kit, with ARGS exactly as given, and this command's
stdin, stdout, stderr and exit status are its own (no terminal: it gets
pipes, so an interactive program sees no TTY).

What it sees: from the host, this project (the Git top level of the current
directory, or the directory itself outside a repository) read-write at its own
path, with .git and .marsh read-only; from a shell branch, the branch's fork
(its writes land in the branch's patch); from a job, exactly its parent's
mounts. Its cwd is yours, which must lie inside that view.

The spawn set (the names the job, and everything it starts, may run) is every
registered name, narrowed by $MARSH_SPAWN=a,b (read now), --spawn a,b and
--no-spawn (or MARSH_SPAWN=none). Nothing widens it: a name beyond the parent
job's set is left out with a warning.

Admission fails fast, never queues: 8 jobs per daemon, depth 4, 4 live
children per job, 4 Kit VMs and 64 launches per tree, the same Kit at most
twice in a row (docs/rules.md "Admission"); a refusal exits 125 and starts
nothing. Ctrl-C stops the job and everything it started (INT, 10 s, KILL),
and waits until their containers are verified gone.

Exit status: the command's (128+N for signal N); 130 cancelled (Ctrl-C);
124 its wall time ran out; 125 refused, or marsh could not run it, or the
daemon went away (job uncertain); 127 NAME is not registered; 2 usage.

Examples:
  marsh run fixture echo hi
  git diff | marsh run codex exec "review this patch"
  MARSH_SPAWN=codex marsh run claude -p "ask codex for a second opinion"
  marsh run --no-spawn tools make test
`;

/**
 * The lineage marks this caller offers (docs/rules.md "Lineage"): its
 * `FANOUT_BRANCH` (set by `marsh fanout`) and `SPLIT_ID` (set by `marsh join
 * -- CMD`). A malformed value is not sent and is no error: the marks are
 * display only, and an odd variable must not stop a run.
 */
export function runMarks(env: Readonly<Record<string, string>>): {
  fanout?: string;
  consumes?: string;
} {
  const fanout = env[FANOUT_BRANCH_ENV], split = env.SPLIT_ID;
  return {
    ...(fanout !== undefined && parseFanoutBranch(fanout) !== null ? { fanout } : {}),
    ...(split !== undefined && splitIdProblem(split) === null ? { consumes: split } : {}),
  };
}

/** What one `marsh run` asks for. */
export interface RunOptions {
  readonly name: string;
  readonly args: readonly string[];
  /** `--spawn`'s value, when given. */
  readonly spawn?: string;
  readonly noSpawn: boolean;
  readonly via: RunVia;
}

async function writeAllTo(w: { write(p: Uint8Array): Promise<number> }, b: Uint8Array) {
  for (let off = 0; off < b.length;) off += await w.write(b.subarray(off));
}

/** Sends the caller's stdin as frames, then its end; stops quietly once the connection is gone. */
async function relayStdin(conn: DaemonConnection, stdin: ReadableStream<Uint8Array>) {
  try {
    for await (const chunk of stdin) {
      for (let off = 0; off < chunk.length; off += RUN_CHUNK) {
        const data = chunk.subarray(off, off + RUN_CHUNK).toBase64();
        await conn.send({ v: 1, t: "process.stdin", data });
      }
    }
    await conn.send({ v: 1, t: "process.stdin.end" });
  } catch (error) {
    // The job ended (the daemon closed) before our stdin did: the rest is dropped, as a pipe does.
    if (!(error instanceof DaemonConnectionError)) throw error;
  }
}

/**
 * Runs `opts.name` as a job and returns the exit status.
 *
 * @throws {CliError} for a refusal before it started (the daemon's status and message)
 */
export async function runCommand(
  opts: RunOptions,
  io: CliIo,
  signals: Signals,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const env = io.env();
  const spawn: RunSpawn = {
    ...(env[SPAWN_ENV] === undefined ? {} : { env: env[SPAWN_ENV] }),
    ...(opts.spawn === undefined ? {} : { flag: opts.spawn }),
    ...(opts.noSpawn ? { none: true } : {}),
  };
  const request = {
    v: 1,
    t: "process.run",
    name: opts.name,
    args: [...opts.args],
    cwd: io.cwd(),
    env,
    // A job's offer carries its starting digests (docs/rules.md, "Environment forwarding").
    ...(io.envDigests === undefined ? {} : { envDigests: io.envDigests() }),
    spawn,
    tty: io.stdinIsTerminal || io.stdoutIsTerminal,
    via: opts.via,
    ...runMarks(env),
  } as const;
  // A job's socket refuses a connection past its cap before reading it: nothing
  // started, so the request is tried again for a moment before the refusal stands.
  const deadline = Date.now() + CAP_RETRY_MS;
  let conn: DaemonConnection;
  let first: DaemonFrame | undefined;
  for (;;) {
    conn = await connect();
    // A refused connection may be closed before the request is written: its refusal still waits.
    await conn.send(request).catch((error) => {
      if (!(error instanceof DaemonConnectionError)) throw error;
    });
    try {
      first = await conn.next();
    } catch (error) {
      if (!(error instanceof DaemonConnectionError)) throw error;
      first = undefined;
    }
    const capped = first?.t === "error" && first.message === TOO_MANY_CONNECTIONS;
    if (!capped || Date.now() >= deadline) break;
    conn.close();
    await new Promise((r) => setTimeout(r, CAP_RETRY_PAUSE_MS));
  }
  await using _conn = conn;
  let job: string | null = null;
  let interrupted = false;
  /** Handles one reply; a number is the exit status. */
  const handle = async (reply: DaemonFrame): Promise<number | undefined> => {
    switch (reply.t) {
      case "process.started":
        job = reply.job;
        for (const w of reply.warnings) io.error(`marsh: ${w}`);
        void relayStdin(conn, io.stdin);
        return undefined;
      case "process.out": {
        const bytes = Uint8Array.fromBase64(reply.data);
        if (reply.stream === "stdout") await io.write(bytes);
        else {
          await writeAllTo(Deno.stderr, bytes).catch((error) => {
            if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
          });
        }
        return undefined;
      }
      case "process.exit":
        return reply.status;
      case "error":
        throw new CliError(`marsh: ${reply.message}`, reply.code);
      default:
        throw new CliError(`marsh: unexpected ${reply.t} reply to marsh run`, 125);
    }
  };
  return await signals.trapInterrupts(
    () => {
      interrupted = true;
      void conn.send({ v: 1, t: "process.signal", signal: "INT" }).catch(() => {});
    },
    async () => {
      try {
        if (first !== undefined) {
          const status = await handle(first);
          if (status !== undefined) return status;
          for await (const reply of conn) {
            const status = await handle(reply);
            if (status !== undefined) return status;
          }
        }
      } catch (error) {
        if (!(error instanceof DaemonConnectionError)) throw error;
      }
      if (job === null) {
        throw new CliError("marsh: the daemon closed the connection before the job started", 125);
      }
      if (interrupted) return 130;
      throw new CliError(
        `marsh: job uncertain: the daemon went away while job ${job} ran (marsh jobs shows it)`,
        125,
      );
    },
  );
}

/** Adds `marsh run` to `program` (the host's and a shell branch's CLI, and the in-job one). */
export function registerRunCommand(program: Command, ctx: CliContext): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("run"), "marsh run")
    .description(
      "Run a registered command as its own confined job; its output and status are yours.",
    )
    .usage("[--spawn a,b | --no-spawn] NAME [ARGS...]")
    .argument("<NAME>", "the registered command")
    .argument("[ARGS...]", "its arguments, passed exactly")
    .option("--spawn <NAMES>", "narrow the job's spawn set to these names (comma-separated)")
    .option("--no-spawn", "the job may start no registered command")
    // Everything after NAME is the command's: `marsh run tool --help` is tool's --help.
    .passThroughOptions()
    .addHelpText("after", RUN_HELP)
    .action(async (name: string, args: string[], opts: { spawn?: string | false }) => {
      // commander gives --no-spawn as `spawn: false`.
      const noSpawn = opts.spawn === false;
      setStatus(
        await runCommand(
          {
            name,
            args,
            ...(typeof opts.spawn === "string" ? { spawn: opts.spawn } : {}),
            noSpawn,
            via: "run",
          },
          io,
          ctx.signals,
        ),
      );
    });
}
