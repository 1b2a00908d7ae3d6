/**
 * `marsh jobs [--tree] [--all] [--json]` and `marsh jobs show JOB [--json]`
 * (the daemon renders what the caller may see: docs/rules.md "Lineage") and
 * `marsh workers reset KIT` (remove the Kit's leftover containers,
 * verified, and release the pool slots their uncertain jobs held).
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Command } from "commander";
import type { WorkersResetReply } from "../protocol/daemon.ts";
import { CliError } from "./cli_error.ts";
import {
  connectDaemon,
  type DaemonConnection,
  DaemonConnectionError,
  request,
} from "./daemon_connect.ts";
import type { EngineCommandsContext } from "./engine_command.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/** What `marsh jobs` asks: the flat or drawn listing, or one job. */
export type JobsView =
  | { readonly view: "list" | "tree"; readonly all: boolean; readonly json: boolean }
  | { readonly view: "show"; readonly job: string; readonly json: boolean };

/**
 * `marsh jobs [--tree] [--all] [--json]` or `marsh jobs show JOB [--json]`:
 * prints what the daemon rendered (docs/rules.md "Lineage") and returns the
 * exit status.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function jobsCommand(
  opts: JobsView,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = opts.view === "show" ? "marsh jobs show" : "marsh jobs";
  await using conn = await connect();
  try {
    await conn.send(
      opts.view === "show"
        ? { v: 1, t: "jobs.list", view: "show", all: false, json: opts.json, job: opts.job }
        : { v: 1, t: "jobs.list", view: opts.view, all: opts.all, json: opts.json },
    );
    for await (const f of conn) {
      if (f.t === "chunk") {
        if (!await io.write(Uint8Array.fromBase64(f.data))) return 0;
      } else if (f.t === "jobs") {
        return 0;
      } else if (f.t === "notice") {
        io.error(f.message);
      } else if (f.t === "error") {
        throw new CliError(`${who}: ${f.message}`, f.code);
      } else {
        throw new DaemonConnectionError(`an unexpected ${f.t} frame from the daemon`);
      }
    }
    throw new DaemonConnectionError("the daemon closed the connection without a reply");
  } catch (cause) {
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    throw new CliError(`${who}: ${cause.message}`, 2, { cause });
  }
}

/**
 * `marsh workers reset KIT`: prints each container removed and each slot
 * released; exits 125 when a container could not be shown gone.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function workersResetCommand(
  kit: string,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(
    conn,
    { v: 1, t: "workers.reset", kit },
    ["workers.reset"],
    "marsh workers reset",
    io.error,
  );
  await io.write(enc.encode(formatReset(reply)));
  for (const c of reply.failed) {
    io.error(
      `marsh workers reset: container ${c.container.slice(0, 12)}${where(c)} not removed: ${
        c.message ?? "unknown"
      }; its slot stays held`,
    );
  }
  return reply.failed.length > 0 ? 125 : 0;
}

function where(c: { split: string | null; label: string | null; job: string | null }): string {
  if (c.split === null || c.label === null) return "";
  return ` (${c.split}/${c.label}${c.job === null ? "" : `, job ${c.job}`})`;
}

/** What `marsh workers reset` prints on stdout. */
export function formatReset(r: Omit<WorkersResetReply, "v" | "t">): string {
  const lines: string[] = [];
  for (const c of r.removed) lines.push(`removed container ${c.container.slice(0, 12)}${where(c)}`);
  for (const c of r.live) {
    lines.push(`left container ${c.container.slice(0, 12)}${where(c)}: its job is running`);
  }
  for (const j of r.released) {
    lines.push(`released the slot of job ${j.job} (${j.split}/${j.label})`);
  }
  if (r.removed.length === 0 && r.released.length === 0 && r.failed.length === 0) {
    lines.push(`kit ${r.kit}: no leftover containers and no held slots`);
  }
  return `${lines.join("\n")}\n`;
}

const JOBS_HELP = `
One line per job: ID (8 characters), STARTED, STATE (queued, running,
finished, failed, cancelled, uncertain), EXIT, RUN (from its Kit VM being
ready to its end), PARENT (the parent job, or a branch's split; - for a
root) and COMMAND. Trees with a queued or running job come first, then the
newest. --tree draws each tree (without PARENT): splits, their branches
(a shell branch as SPLIT/LABEL) and fanouts are rows too.
From a shell branch: the trees its session started. From a host terminal:
the running trees, those of the last hour and the five newest. --all lists
every tree; --json is never scoped. Inside a Kit job: only its own subtree.
A job whose container may still exist says so: its slot stays held until
\`marsh workers reset KIT\`.

Examples:
  marsh jobs
  marsh jobs --tree --all
  marsh jobs --json | jq '.jobs[] | select(.state == "uncertain")'
  marsh jobs show 1a2b3c4d
`;

const SHOW_HELP = `
Prints the job's state, status and run time, then its lineage: parent
(session:ID, job:ID or split:ID/LABEL), root, depth, spawn (the names it may
start), split (a split branch's job) and children (the jobs it started,
its splits' branch jobs included). JOB is a job id or at least its first
8 characters. --json prints the marsh.jobs/v1 job with status, container
and lineage.children.

Example:
  marsh jobs show 1a2b3c4d --json
`;

const RESET_HELP = `
Removes every container of Kit KIT that no running job uses, checks each
is gone, and releases the branch pool slots held by the Kit's uncertain jobs
(after a daemon restart, or a container whose removal was not confirmed).
Exits 125 when a container could not be removed; its job keeps its slot.

Example:
  marsh workers reset fixture
`;

/**
 * Adds `marsh jobs [--tree] [--all] [--json]` and `marsh jobs show JOB
 * [--json]` to `program`, described by `description` and `help` (the
 * host's and the in-job CLI's say what each may see).
 */
export function registerJobsList(
  program: Command,
  ctx: Pick<EngineCommandsContext, "io" | "setStatus" | "userErrors">,
  description = "List jobs and their trees: state, exit, run time, parent.",
  help = JOBS_HELP,
): void {
  const { io, setStatus, userErrors } = ctx;
  const jobs = userErrors(program.command("jobs"), "marsh jobs")
    .description(description)
    .usage("[--tree] [--all] [--json] | show JOB [--json]")
    // `show --json` is the subcommand's option, not the listing's.
    .enablePositionalOptions()
    .option("--tree", "draw each tree: splits, branches and fanouts as rows")
    .option("--all", "every tree, not only this session's or the recent ones")
    .option("--json", 'print {"schema":"marsh.jobs/v1","jobs":[...]} (--tree: marsh.jobs.tree/v1)')
    .addHelpText("after", help)
    .action(async (opts: { tree?: boolean; all?: boolean; json?: boolean }) => {
      setStatus(
        await jobsCommand({
          view: opts.tree === true ? "tree" : "list",
          all: opts.all === true,
          json: opts.json === true,
        }, io),
      );
    });
  userErrors(jobs.command("show"), "marsh jobs show")
    .description("Show one job: its state and its lineage (parent, root, depth, spawn, children).")
    .argument("<JOB>", "a job id, or at least its first 8 characters")
    .option("--json", "print the job as JSON, with lineage.children")
    .addHelpText("after", SHOW_HELP)
    .action(async (job: string, opts: { json?: boolean }) => {
      setStatus(await jobsCommand({ view: "show", job, json: opts.json === true }, io));
    });
}

/** Adds `marsh jobs` and `marsh workers reset` to `program`. */
export function registerJobsCommands(program: Command, ctx: EngineCommandsContext): void {
  const { io, setStatus, userErrors } = ctx;
  registerJobsList(program, ctx);
  const workers = userErrors(program.command("workers"), "marsh workers")
    .description("Manage the containers Kit jobs left behind.");
  userErrors(workers.command("reset"), "marsh workers reset")
    .description("Remove a Kit's leftover containers (verified) and release their held slots.")
    .argument("<KIT>", "the Kit command's name")
    .addHelpText("after", RESET_HELP)
    .action(async (kit: string) => setStatus(await workersResetCommand(kit, io)));
}
