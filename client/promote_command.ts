/**
 * `marsh promote ID LABEL [--retire-source-changes] [--dry-run] [--json]`
 * (docs/guide.md, "marsh promote"): the project's tree becomes the
 * branch's result wholesale; what the project changed since the snapshot is
 * refused, listed, unless `--retire-source-changes` is given.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { connectDaemon, type DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { printResolved, resolveRequest } from "./resolve_output.ts";

/** What `marsh promote` was asked for. */
export interface PromoteOptions {
  readonly retireSourceChanges?: boolean;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/**
 * Runs `marsh promote` and returns the exit status.
 *
 * @throws {CliError} for the daemon's refusal
 */
export async function promoteCommand(
  id: string,
  label: string,
  opts: PromoteOptions,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh promote";
  const r = await resolveRequest(
    {
      v: 1,
      t: "resolve.promote",
      id,
      label,
      retireSourceChanges: opts.retireSourceChanges === true,
      dryRun: opts.dryRun === true,
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
