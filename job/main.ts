/**
 * The in-job client: `marsh` inside a Kit container (docs/rules.md "The job capability"). Bundled
 * by `bundleJobClient` (`job/bundle.ts`) into one JS file bound read-only at `/run/marsh/marsh.js`
 * and run by the host's own Deno (`/run/marsh/deno`) with `JOB_CLIENT_FLAGS`, through the link
 * script:
 *
 *     /run/marsh/bin/NAME -> /run/marsh/link --link=NAME ARGS...
 *       -> /run/marsh/deno run JOB_CLIENT_FLAGS /run/marsh/marsh.js --link=NAME ARGS...
 *
 * It starts from `job.json` alone (no `HOME`, `USER`, `PATH` or control
 * dir: `env -i /run/marsh/bin/marsh jobs` works) and speaks only to the
 * job's capability socket, whose connections carry the job's authority: the
 * daemon decides what this job may do, the client is no boundary.
 *
 * - `--link=marsh ARGS`: the job's `marsh` (`split`, `join`, `splits`, `jobs`, `run`).
 * - `--link=NAME ARGS` for a registered Kit name (the link's child case):
 *   checked against `job.json`'s `registered` and `spawn`, then run as a
 *   child job of this one (`process.run`), its stdio and exit status relayed.
 *
 * `MARSH_CAP_DIR` (tests outside a container) replaces `/run/marsh` as the
 * place of `job.json`; the socket is always `job.json`'s.
 *
 * @module
 */

import type { Command } from "commander";
import { type CliContext, errorLine, io, runCli, signals } from "../client/cli_program.ts";
import { CliError } from "../client/cli_error.ts";
import { registerRunCommand, runCommand } from "../client/run_command.ts";
import { spawnRefusal } from "../model/job_spawn.ts";
import { JOB_SOCK_ENV } from "../client/daemon_connect.ts";
import { registerJobsList } from "../client/jobs_command.ts";
import { registerFanoutCommands } from "../client/fanout_commands.ts";
import { isLinkName } from "../model/kit_name.ts";
import { CAP_FILES, CAP_TARGET, type JobJson } from "../protocol/job_capability.ts";
import { offeringIo } from "./env_offer.ts";

/** Where `job.json` is, instead of `/run/marsh`, for tests outside a container. */
export const CAP_DIR_ENV = "MARSH_CAP_DIR";

/** The link name of the job's own `marsh`. */
export const MARSH_LINK = "marsh";

/** Usage and setup failures (no `--link`, no readable `job.json`). */
const USAGE = 2;
/** A name with no link: as a shell reports a command it cannot find. */
export const NOT_REGISTERED = 127;
/** A name this job may not start, or cannot start yet: as a shell reports a command it cannot run. */
export const REFUSED = 126;

/** The part of `job.json` the client uses. */
export type JobView = Pick<JobJson, "job" | "name" | "spawn" | "registered" | "path"> & {
  readonly socket: string;
};

/** A failure of the client itself, reported as one line with `code`. */
class JobClientError extends Error {
  readonly code: number;
  constructor(message: string, code: number) {
    super(message);
    this.code = code;
  }
}

function strings(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === "string");
}

/**
 * Parses `job.json` (version 1): the socket must be an absolute path, the
 * name lists lists of strings; other fields are optional here.
 *
 * @throws {TypeError} naming what is wrong
 */
export function parseJobJson(text: string): JobView {
  const value: unknown = JSON.parse(text);
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new TypeError("not a JSON object");
  }
  const j = value as Record<string, unknown>;
  if (j.version !== 1) throw new TypeError(`unknown version ${JSON.stringify(j.version)}`);
  if (typeof j.socket !== "string" || !j.socket.startsWith("/")) {
    throw new TypeError("socket is not an absolute path");
  }
  if (!strings(j.spawn)) throw new TypeError("spawn is not a list of names");
  if (!strings(j.registered)) throw new TypeError("registered is not a list of names");
  return {
    job: typeof j.job === "string" ? j.job : "",
    name: typeof j.name === "string" ? j.name : "",
    spawn: j.spawn,
    registered: j.registered,
    socket: j.socket,
    path: typeof j.path === "string" ? j.path : "",
  };
}

/** Where `job.json` is: `MARSH_CAP_DIR`'s, else `/run/marsh`'s. */
function jobJsonPath(): string {
  return `${Deno.env.get(CAP_DIR_ENV) || CAP_TARGET}/${CAP_FILES.jobJson}`;
}

function readJobJson(): JobView {
  const path = jobJsonPath();
  let text: string;
  try {
    text = Deno.readTextFileSync(path);
  } catch (error) {
    const why = error instanceof Deno.errors.NotFound
      ? "it does not exist; the in-job client runs only inside a Kit job"
      : error instanceof Error
      ? error.message
      : String(error);
    throw new JobClientError(`marsh: cannot read ${path}: ${why}`, USAGE);
  }
  try {
    return parseJobJson(text);
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new JobClientError(`marsh: ${path} is not a job.json: ${why}`, USAGE);
  }
}

const JOBS_HELP = `
This job's own subtree only (itself, the jobs it started, its splits and
their branch jobs, and theirs), in every form, --all and --json included:
ID, STARTED, STATE, EXIT, RUN, PARENT and COMMAND; --tree draws it.

Examples:
  marsh jobs --tree
  marsh jobs --json
  marsh jobs show "$MARSH_JOB"
`;

const JOB_HELP = `
Inside a Kit job the daemon decides what this job may do. A split from a job
takes argv branches only (::: LABEL CMD ARGS...); -b shell branches run only
from the session shell.
`;

/** The job's own commands after `split`, `join` and `splits`: `jobs`, `fanout`, `collect`, `context`. */
export function registerJobCommands(program: Command, ctx: CliContext): void {
  program.addHelpText("after", JOB_HELP);
  registerJobsList(
    program,
    ctx,
    "List this job's own subtree of jobs: state, exit, run time, parent.",
    JOBS_HELP,
  );
  registerFanoutCommands(program, ctx, {
    place: "job",
    contextFile: `${Deno.env.get(CAP_DIR_ENV) || CAP_TARGET}/${CAP_FILES.context}`,
  });
  registerRunCommand(program, ctx);
}

/**
 * Whether the caller gave a `PATH`. From `env -i` Deno starts with none and
 * sets its own `<DENO_DIR>/node_compat_bin`, which is not the caller's.
 */
function hasPath(path: string | undefined): boolean {
  return (path ?? "").split(":").some((d) => d !== "" && !d.endsWith("/node_compat_bin"));
}

/** The link's name from `--link=NAME`, or undefined. */
function linkName(arg: string | undefined): string | undefined {
  if (arg === undefined || !arg.startsWith("--link=")) return undefined;
  const name = arg.slice("--link=".length);
  return isLinkName(name) ? name : undefined;
}

/**
 * Runs the client for `argv` (`--link=NAME ARGS...`) and returns the exit
 * status; failures are printed as one line on stderr.
 *
 * Sets `MARSH_JOB_SOCK` (and `PATH`, when the caller gave none, to
 * `job.json`'s, so that `join -- CMD` finds CMD after `env -i`) in this
 * process: the socket is `job.json`'s, whatever the environment says.
 */
export async function jobMain(argv: readonly string[]): Promise<number> {
  const name = linkName(argv[0]);
  if (name === undefined) {
    errorLine(
      `marsh: the in-job client runs through a link: ${CAP_TARGET}/bin/NAME, or --link=NAME as its first argument${
        argv[0]?.startsWith("--link=") ? ` (not a command name: ${JSON.stringify(argv[0])})` : ""
      }`,
    );
    return USAGE;
  }
  let job: JobView;
  try {
    job = readJobJson();
  } catch (error) {
    if (!(error instanceof JobClientError)) throw error;
    errorLine(error.message);
    return error.code;
  }
  Deno.env.set(JOB_SOCK_ENV, job.socket);
  if (job.path !== "" && !hasPath(Deno.env.get("PATH"))) Deno.env.set("PATH", job.path);
  const args = argv.slice(1);
  if (name === MARSH_LINK) {
    // What the job's splits offer their children (docs/rules.md, "Environment forwarding").
    return await runCli(args, registerJobCommands, offeringIo(io, jobJsonPath()));
  }
  if (!job.registered.includes(name)) {
    errorLine(`marsh: ${name} is not a registered command`);
    return NOT_REGISTERED;
  }
  if (!job.spawn.includes(name)) {
    // The daemon decides the same from the job's record; refusing here costs no request.
    errorLine(`marsh: ${spawnRefusal(name)}`);
    return REFUSED;
  }
  // The child case (docs/rules.md "Links"): the name runs as a child job of this one.
  return await runLink(name, args);
}

/** A registered name as a child job (`process.run`, via `link`): its stdio and exit are ours. */
async function runLink(name: string, args: readonly string[]): Promise<number> {
  try {
    // It offers the job's environment (docs/rules.md, "Environment forwarding").
    return await runCommand(
      { name, args, noSpawn: false, via: "link" },
      offeringIo(io, jobJsonPath()),
      signals,
    );
  } catch (error) {
    if (!(error instanceof CliError)) throw error;
    errorLine(error.message);
    return error.code;
  }
}

if (import.meta.main) {
  Deno.exit(await jobMain(Deno.args));
}
