/**
 * `marsh jobs [--json]` (the Kit jobs the caller may see: the host sees
 * all) and `marsh workers reset KIT` (remove the Kit's leftover containers,
 * verified, and release the pool slots their uncertain jobs held).
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Command } from "commander";
import type { JobInfo, WorkersResetReply } from "../protocol/daemon.ts";
import { connectDaemon, type DaemonConnection, request } from "./daemon_connect.ts";
import type { EngineCommandsContext } from "./engine_command.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/**
 * Lists Kit jobs and returns the exit status.
 *
 * @throws {CliError} with the daemon's message and status when it refuses
 */
export async function jobsCommand(
  opts: { readonly json: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  await using conn = await connect();
  const reply = await request(conn, { v: 1, t: "jobs.list" }, ["jobs"], "marsh jobs", io.error);
  const text = opts.json ? `${JSON.stringify({ jobs: reply.jobs })}\n` : formatJobs(reply.jobs);
  await io.write(enc.encode(text));
  return 0;
}

/**
 * The text listing, newest first: a header, then per job its id, Kit,
 * split/label, state and status (exit code or why), and a note when its
 * container's removal is unconfirmed.
 */
export function formatJobs(jobs: readonly JobInfo[]): string {
  if (jobs.length === 0) return "no jobs recorded\n";
  const rows = [["JOB", "KIT", "SPLIT/LABEL", "STATE", "STATUS"]];
  const notes: (string | null)[] = [null];
  for (const j of jobs) {
    rows.push([j.id, j.kit, `${j.split}/${j.label}`, j.state, j.status ?? "-"]);
    notes.push(
      j.cleanup === "uncertain"
        ? `cleanup uncertain${
          j.container === null ? "" : ` (container ${j.container.slice(0, 12)})`
        }: run marsh workers reset ${j.kit}`
        : null,
    );
  }
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => r[c]!.length)));
  return rows.map((r, i) => {
    const line = r.map((cell, c) => c === r.length - 1 ? cell : cell.padEnd(widths[c]!)).join(
      "  ",
    );
    const note = notes[i];
    return note ? `${line}  ${note}\n` : `${line}\n`;
  }).join("");
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
One line per Kit job, newest first: job id, Kit, split/label, state
(queued, running, finished, failed, cancelled, uncertain) and status
(exited N, failed: <why>, cancelled). A job whose container may still exist
says so: its pool slot stays held until \`marsh workers reset KIT\`.
The host sees every job; inside a shell branch, the jobs of splits that
branch created.

Examples:
  marsh jobs
  marsh jobs --json | jq '.jobs[] | select(.state == "uncertain")'
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
 * Adds `marsh jobs [--json]` to `program`, described by `description` and
 * `help` (the host's and the in-job CLI's say what each may see).
 */
export function registerJobsList(
  program: Command,
  ctx: Pick<EngineCommandsContext, "io" | "setStatus" | "userErrors">,
  description = "List Kit jobs (argv branches) with their state and exit.",
  help = JOBS_HELP,
): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("jobs"), "marsh jobs")
    .description(description)
    .option(
      "--json",
      'print {"jobs":[{id,kit,split,label,state,status,code,container,cleanup,args,...}]}',
    )
    .addHelpText("after", help)
    .action(async (opts: { json?: boolean }) => {
      setStatus(await jobsCommand({ json: opts.json === true }, io));
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
