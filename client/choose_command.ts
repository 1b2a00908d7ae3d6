/**
 * `marsh choose ID LABEL (--merge [SCOPE] | --promote)` (docs/guide.md,
 * "marsh choose"): merges or promotes the winner, then discards the other
 * branches of the split, in one step.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { currentDir } from "./prune_command.ts";
import { printResolved, resolveRequest } from "./resolve_output.ts";

/** What `marsh choose` was asked for: `merge` is true (the default scope) or a scope name. */
export interface ChooseOptions {
  readonly merge?: boolean | string;
  readonly promote?: boolean;
  readonly retireSourceChanges?: boolean;
  readonly reason?: string;
  readonly json?: boolean;
}

/**
 * How the winner is resolved.
 *
 * @throws {CliError} (2) unless exactly one of `--merge [SCOPE]` and `--promote` is given
 */
export function chooseHow(opts: ChooseOptions, who: string): "git" | "filesystem" | "promote" {
  const merge = opts.merge !== undefined && opts.merge !== false;
  if (merge === (opts.promote === true)) {
    throw new CliError(`${who}: give one of --merge [git|filesystem] and --promote`);
  }
  if (opts.promote) return "promote";
  if (opts.merge === true || opts.merge === "git") return "git";
  if (opts.merge === "filesystem") return "filesystem";
  throw new CliError(
    `${who}: unknown merge scope ${
      JSON.stringify(opts.merge)
    }: use git or filesystem (for --paths, run marsh merge --paths, then marsh discard)`,
  );
}

/**
 * Runs `marsh choose` and returns the exit status.
 *
 * @throws {CliError} for a usage error or the daemon's refusal
 */
export async function chooseCommand(
  id: string,
  label: string,
  opts: ChooseOptions,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh choose";
  const how = chooseHow(opts, who);
  if (opts.retireSourceChanges && how !== "promote") {
    throw new CliError(`${who}: --retire-source-changes goes with --promote only`);
  }
  const r = await resolveRequest(
    {
      v: 1,
      t: "resolve.choose",
      id,
      label,
      how,
      retireSourceChanges: opts.retireSourceChanges === true,
      cwd: currentDir(io, who, "cd into the project"),
      reason: opts.reason ?? null,
    },
    who,
    io,
    connect,
  );
  return await printResolved(r, who, { json: opts.json === true, dryRun: false }, io);
}
