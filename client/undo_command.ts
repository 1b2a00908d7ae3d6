/**
 * `marsh undo RESOLUTION [--json]` (docs/guide.md, "marsh undo"): puts back
 * exactly what a merge, promote or undo changed, if those paths have not
 * changed since; otherwise it refuses, listing them.
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import { connectDaemon, type DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { printResolved, resolveRequest } from "./resolve_output.ts";

/**
 * Runs `marsh undo` and returns the exit status.
 *
 * @throws {CliError} for the daemon's refusal
 */
export async function undoCommand(
  resolution: string,
  opts: { readonly json?: boolean },
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh undo";
  const r = await resolveRequest({ v: 1, t: "resolve.undo", resolution }, who, io, connect);
  return await printResolved(r, who, { json: opts.json === true, dryRun: false }, io);
}
