/**
 * The checkpoint session commands on the host's command line (docs/guide.md
 * "Checkpoint sessions"): `marsh session start`, `session rm`, `sessions`,
 * `op`, `log`, `rollback` and `fork`, with their help. The daemon keeps the
 * sessions (`daemon/sessions.ts`); these print its replies.
 *
 * @module
 */

import type { Command } from "commander";
import type { OnCancel } from "../protocol/daemon_session.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, request } from "./daemon_connect.ts";
import type { CliIo, Signals } from "./io.ts";
import { OP_HELP, opCommand } from "./op_command.ts";
import { renderLog, renderSessions } from "./session_output.ts";

const enc = new TextEncoder();

const STATUSES = `
Exit status: 0 done; 1 refused, nothing changed (a name in use, a session
busy with an operation, a head that moved meanwhile); 2 usage (unknown
session or checkpoint, an ambiguous or too short checkpoint prefix, a bad
name: nothing changed); 125 a failure (the message says what).`;

const CHECKPOINT_IDS = `
A CHECKPOINT is its id (64 hex digits, see marsh log) or a unique prefix of
at least 8 of them.`;

const SESSION_CHOICE = `
The session: --session NAME, else $MARSH_SESSION, else the session whose
view you are in, else the project's one open session.`;

const START_HELP = `
Takes a snapshot of the project you are in (as marsh split does: not .git or
.marsh; ignored files only with --with-ignored) as the session's first
checkpoint, without copying any file, and mounts its view, a read-only
directory showing the session's head:
  <project>/.marsh/session/NAME/view
With --from CHECKPOINT the session starts at that checkpoint instead (as
marsh fork). Your project's own files are never written by a session.

NAME: 1-63 letters, digits, "_", "." or "-", starting with a letter or
digit; without it, s1, s2, ...: the first not open in the project.
${CHECKPOINT_IDS}
${STATUSES}

Examples:
  marsh session start fix
  marsh session start --with-ignored
  marsh session start try2 --from 3f9a1c2e
`;

const RM_HELP = `
Removes session NAME: its view is unmounted and its directory removed. Its
checkpoints stay (marsh fork --from still reaches them) until marsh gc.
A session with a running operation is refused.
${STATUSES}

Example:
  marsh session rm try2
`;

const SESSIONS_HELP = `
Lists the project's open sessions: name, head checkpoint, the head's root
id (the Git tree id of its files), and the view: its path and the root it
shows now (it follows the head after each operation or rollback). An
unprivileged daemon's views are mounted in its own namespace: empty from
your shell, seen through marsh op (view_visible "service-namespace").
--json: {"root","sessions":[{"name","id","head","root","base","base_root",
"view","view_root","view_class","view_visible","with_ignored",
"created_unix_ms","rollback_protection"}]}.

Example:
  marsh sessions --json | jq -r '.sessions[].name'
`;

const LOG_HELP = `
Lists the session's checkpoints from its head back to its start (across the
session it was forked from): id, time, the operation's command, how it
ended (exit N, signal, cancelled), what happened to its files (sealed,
no-change) and the paths it changed. --all adds the checkpoints the session
made that are no longer on that line (abandoned by a rollback), marked
"abandoned".
${SESSION_CHOICE}

Examples:
  marsh log
  marsh log --all --json | jq -r '.entries[] | .checkpoint'
`;

const ROLLBACK_HELP = `
Moves the session's head back (or forward) to CHECKPOINT, one of its
history's (marsh log --all): no file is copied or written; the view then
shows it. The checkpoints after it stay, listed by marsh log --all, and the
head can move to them again.
${CHECKPOINT_IDS}
${SESSION_CHOICE}
${STATUSES}

Example:
  marsh rollback 3f9a1c2e
`;

const FORK_HELP = `
Starts session NEW at an existing checkpoint: --from CHECKPOINT (any
checkpoint of the project's sessions), else the head of the session
(chosen as for marsh log). Nothing is copied; each session then moves on its
own.
${CHECKPOINT_IDS}
${STATUSES}

Examples:
  marsh fork try2
  marsh fork --from 3f9a1c2e try3
`;

/** What the registration needs of `cli_program.ts`'s `CliContext` (which it must not import: a cycle). */
export interface SessionCliContext {
  readonly io: CliIo;
  readonly signals: Signals;
  readonly setStatus: (code: number) => void;
  readonly userErrors: (cmd: Command, path: string) => Command;
  /** The words after `marsh op`'s `--`, or undefined when there is no `--`. */
  readonly opArgv?: readonly string[];
}

async function print(io: CliIo, text: string): Promise<void> {
  await io.write(enc.encode(text.endsWith("\n") ? text : `${text}\n`));
}

function jsonBody(reply: { v: 1; t: string }): string {
  const { v: _v, t: _t, ...body } = reply;
  return JSON.stringify(body);
}

const ON_CANCEL = ["seal", "discard"];

/** Adds `session`, `sessions`, `op`, `log`, `rollback` and `fork` to `program`. */
export function registerSessionCommands(program: Command, ctx: SessionCliContext): void {
  const { io, setStatus, userErrors } = ctx;
  const session = userErrors(program.command("session"), "marsh session")
    .description("Start or remove a checkpoint session (see marsh sessions, op, log).")
    .usage("start [NAME] [--from CHECKPOINT] [--with-ignored] | rm NAME");
  userErrors(session.command("start"), "marsh session start")
    .description("Start a checkpoint session: a snapshot of the project, with a view.")
    .argument("[NAME]", "its name (default: s1, s2, ...)")
    .option("--from <CHECKPOINT>", "start at this checkpoint instead of a snapshot")
    .option("--with-ignored", "snapshot ignored files too (node_modules, .env, build caches)")
    .option("--json", "print the session as marsh sessions --json does, with from/files/bytes")
    .addHelpText("after", START_HELP)
    .action(async (
      name: string | undefined,
      opts: { from?: string; withIgnored?: boolean; json?: boolean },
    ) => {
      if (opts.from !== undefined && opts.withIgnored) {
        throw new CliError(
          "marsh session start: --with-ignored takes a snapshot; --from starts at a checkpoint " +
            "(which has what its session took): give one of them",
        );
      }
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        {
          v: 1,
          t: "session.start",
          cwd: io.cwd(),
          name: name ?? null,
          from: opts.from ?? null,
          withIgnored: opts.withIgnored === true,
        },
        ["session.started"],
        "marsh session start",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : reply.message);
      setStatus(0);
    });
  userErrors(session.command("rm"), "marsh session rm")
    .description("Remove a session: its view and directory; its checkpoints stay until marsh gc.")
    .argument("<NAME>", "the session")
    .option("--json", 'print {"name","id","message"}')
    .addHelpText("after", RM_HELP)
    .action(async (name: string, opts: { json?: boolean }) => {
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        { v: 1, t: "session.rm", cwd: io.cwd(), name },
        ["session.removed"],
        "marsh session rm",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : reply.message);
      setStatus(0);
    });

  userErrors(program.command("sessions"), "marsh sessions")
    .description("List the project's checkpoint sessions: head, root, view.")
    .option("--json", 'print {"root","sessions":[...]}')
    .addHelpText("after", SESSIONS_HELP)
    .action(async (opts: { json?: boolean }) => {
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        { v: 1, t: "sessions.list", cwd: io.cwd() },
        ["sessions"],
        "marsh sessions",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : renderSessions(reply));
      setStatus(0);
    });

  userErrors(program.command("op"), "marsh op")
    .description("Run one command in a session's overlay; what it changed becomes a checkpoint.")
    .usage("[--session NAME] [--on-cancel seal|discard] -- CMD ARGS...")
    .option("--session <NAME>", "the session (default: $MARSH_SESSION, the view, the only one)")
    .option("--on-cancel <WHAT>", "on Ctrl-C: seal (default) or discard what it changed", "seal")
    .allowExcessArguments()
    .addHelpText("after", OP_HELP)
    .action(async (opts: { session?: string; onCancel: string }, cmd: Command) => {
      if (cmd.args.length > 0 || ctx.opArgv === undefined) {
        throw new CliError(
          "marsh op: put `--` before the command: marsh op -- CMD ARGS... (see marsh op --help)",
        );
      }
      if (ctx.opArgv.length === 0) {
        throw new CliError("marsh op: `--` needs a command after it: marsh op -- CMD ARGS...");
      }
      if (!ON_CANCEL.includes(opts.onCancel)) {
        throw new CliError(
          `marsh op: --on-cancel is seal or discard, not ${JSON.stringify(opts.onCancel)}`,
        );
      }
      setStatus(
        await opCommand(
          {
            argv: ctx.opArgv,
            onCancel: opts.onCancel as OnCancel,
            ...(opts.session === undefined ? {} : { session: opts.session }),
          },
          io,
          ctx.signals,
        ),
      );
    });

  userErrors(program.command("log"), "marsh log")
    .description("List a session's checkpoints: command, exit, disposition, changed paths.")
    .option("--session <NAME>", "the session (default: $MARSH_SESSION, the view, the only one)")
    .option("--all", "also the checkpoints a rollback left off the head's line")
    .option("--json", 'print {"session","head","entries":[...]}')
    .addHelpText("after", LOG_HELP)
    .action(async (opts: { session?: string; all?: boolean; json?: boolean }) => {
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        {
          v: 1,
          t: "session.log",
          cwd: io.cwd(),
          session: opts.session ?? (io.env().MARSH_SESSION || null),
          all: opts.all === true,
        },
        ["checkpoints"],
        "marsh log",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : renderLog(reply));
      setStatus(0);
    });

  userErrors(program.command("rollback"), "marsh rollback")
    .description("Move a session's head to an earlier checkpoint; nothing is copied or deleted.")
    .argument("<CHECKPOINT>", "a checkpoint of the session's history (id or 8+ hex prefix)")
    .option("--session <NAME>", "the session (default: $MARSH_SESSION, the view, the only one)")
    .option("--json", 'print {"session","from","to","root","head_ms","view_ms",...}')
    .addHelpText("after", ROLLBACK_HELP)
    .action(async (checkpoint: string, opts: { session?: string; json?: boolean }) => {
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        {
          v: 1,
          t: "session.rollback",
          cwd: io.cwd(),
          session: opts.session ?? (io.env().MARSH_SESSION || null),
          checkpoint,
        },
        ["session.rolledback"],
        "marsh rollback",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : reply.message);
      setStatus(reply.view_error === null ? 0 : 125);
    });

  userErrors(program.command("fork"), "marsh fork")
    .description("Start a new session at an existing checkpoint (one record; nothing copied).")
    .argument("<NEW>", "the new session's name")
    .option("--from <CHECKPOINT>", "the checkpoint (default: the session's head)")
    .option("--session <NAME>", "without --from: whose head (default: as marsh log)")
    .option("--json", "print the new session as marsh session start --json does")
    .addHelpText("after", FORK_HELP)
    .action(async (name: string, opts: { from?: string; session?: string; json?: boolean }) => {
      await using conn = await connectDaemon();
      const reply = await request(
        conn,
        {
          v: 1,
          t: "session.fork",
          cwd: io.cwd(),
          session: opts.session ?? (io.env().MARSH_SESSION || null),
          from: opts.from ?? null,
          name,
        },
        ["session.started"],
        "marsh fork",
        io.error,
      );
      await print(io, opts.json ? jsonBody(reply) : reply.message);
      setStatus(0);
    });
}
