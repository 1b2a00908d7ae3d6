/**
 * `marsh merge ID LABEL [--git | --filesystem | --paths P...] [--dry-run]
 * [--json]` (docs/guide.md, "marsh merge"): brings a branch's durable
 * changes into the project, all or nothing; with `--dry-run`, only shows
 * the plan.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { MergeScope } from "../protocol/daemon_resolve.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { currentDir } from "./prune_command.ts";
import { printResolved, resolveRequest } from "./resolve_output.ts";

/** What `marsh merge` was asked for (the flags as commander gives them). */
export interface MergeOptions {
  readonly git?: boolean;
  readonly filesystem?: boolean;
  readonly paths?: readonly string[];
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/**
 * The scope the flags choose (`--git` when none is given).
 *
 * @throws {CliError} (2) when more than one is given
 */
export function mergeScope(opts: MergeOptions, who: string): MergeScope {
  const given = [
    opts.git ? "--git" : null,
    opts.filesystem ? "--filesystem" : null,
    opts.paths !== undefined ? "--paths" : null,
  ].filter((x) => x !== null);
  if (given.length > 1) {
    throw new CliError(`${who}: ${given.join(" and ")} exclude each other; give one scope`);
  }
  return opts.filesystem ? "filesystem" : opts.paths !== undefined ? "paths" : "git";
}

/**
 * Runs `marsh merge` and returns the exit status.
 *
 * @throws {CliError} for a usage error or the daemon's refusal
 */
export async function mergeCommand(
  id: string,
  label: string,
  opts: MergeOptions,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh merge";
  const scope = mergeScope(opts, who);
  const cwd = currentDir(io, who, "cd into the project");
  const r = await resolveRequest(
    {
      v: 1,
      t: "resolve.merge",
      id,
      label,
      scope,
      ...(scope === "paths" ? { paths: opts.paths ?? [] } : {}),
      dryRun: opts.dryRun === true,
      cwd,
    },
    who,
    io,
    connect,
  );
  return await printResolved(
    r,
    who,
    { json: opts.json === true, dryRun: opts.dryRun === true },
    io,
  );
}
