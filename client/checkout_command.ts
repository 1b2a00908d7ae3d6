/**
 * `marsh checkout [--session NAME] [--checkpoint C] [--dry-run] [--json]
 * [--retire-project-changes]` (docs/guide.md, "Checking out a checkpoint"):
 * the project's working tree becomes a checkpoint's root, through the
 * transactional applier, undoable with `marsh undo`. Printed as the
 * resolving commands print (`resolve_output.ts`).
 *
 * Needs what {@linkcode connectDaemon} needs.
 *
 * @module
 */

import type { Command } from "commander";
import type { CliContext } from "./cli_program.ts";
import { connectDaemon, type DaemonConnection } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";
import { printResolved, resolveRequest } from "./resolve_output.ts";

/** `marsh checkout --help`'s text after the options. */
export const CHECKOUT_HELP = `
Makes the project's working tree the root of a checkpoint: --checkpoint C
(an id or at least 8 of its first digits), else the head of --session NAME,
else of $MARSH_SESSION, else of the project's one open session. Only the
paths whose content, permission bits or kind differ are written, all or
nothing, with a restore point: marsh undo RESOLUTION puts them back, and
marsh resolutions lists it (kind checkout). The paths a session covers are
those its snapshot took: ignored files (build output, node_modules) are
never touched unless the session was started --with-ignored; .git never is.

If the project changed since the session's line began (its start, or the
checkpoint it last checked out), checkout refuses and lists those paths
(exit 1) unless --retire-project-changes says the checkpoint wins; their
prior state is then in the restore point. --dry-run prints the plan, one
line per path (take, delete), and changes nothing; with --json the plan
document (schema marsh.merge.plan/v1, scope checkout).

Exit status: 0 done (or nothing to do); 1 refused, nothing was changed
(each path is named on stderr); 2 a usage error, an unknown session or
checkpoint, or a tree the checkpoint cannot be written over; 125 a failure
(the message says what was restored).

Examples:
  marsh checkout --dry-run
  marsh checkout --session fix
  marsh checkout --checkpoint 3f9a2c1b --retire-project-changes
`;

/** What `marsh checkout` was asked for. */
export interface CheckoutOptions {
  readonly session?: string;
  readonly checkpoint?: string;
  readonly retireProjectChanges?: boolean;
  readonly dryRun?: boolean;
  readonly json?: boolean;
}

/**
 * Runs `marsh checkout` and returns the exit status.
 *
 * @throws {CliError} for the daemon's refusal
 */
export async function checkoutCommand(
  opts: CheckoutOptions,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<number> {
  const who = "marsh checkout";
  const env = io.env();
  const r = await resolveRequest(
    {
      v: 1,
      t: "checkout",
      cwd: io.cwd(),
      session: opts.session ?? (env.MARSH_SESSION || null),
      checkpoint: opts.checkpoint ?? null,
      dryRun: opts.dryRun === true,
      retireProjectChanges: opts.retireProjectChanges === true,
      env: {
        ...(env.HOME === undefined ? {} : { HOME: env.HOME }),
        ...(env.XDG_CONFIG_HOME === undefined ? {} : { XDG_CONFIG_HOME: env.XDG_CONFIG_HOME }),
      },
    },
    who,
    io,
    connect,
  );
  return await printResolved(
    r,
    who,
    { json: opts.json === true, dryRun: opts.dryRun === true, changeWord: "project change" },
    io,
  );
}

/** Adds `checkout` to the host's `program`. */
export function registerCheckoutCommand(program: Command, ctx: CliContext): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("checkout"), "marsh checkout")
    .description("Make the project's working tree a checkpoint's root (undoable).")
    .option("--session <NAME>", "the session whose head to check out (default: $MARSH_SESSION)")
    .option("--checkpoint <C>", "this checkpoint (an id or a unique prefix) instead of a head")
    .option("--retire-project-changes", "check out even over what the project changed since")
    .option("--dry-run", "print the plan, change nothing")
    .option("--json", "JSON: the plan document with --dry-run, else the result")
    .addHelpText("after", CHECKOUT_HELP)
    .action(async (opts: CheckoutOptions) => setStatus(await checkoutCommand(opts, io)));
}
