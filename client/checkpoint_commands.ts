/**
 * Registers `marsh commit` and `marsh show` (docs/guide.md, "Committing a
 * checkpoint") on the host's command line.
 *
 * @module
 */

import type { Command } from "commander";
import type { CliContext } from "./cli_program.ts";
import { COMMIT_HELP, commitCommand } from "./commit_command.ts";
import { SHOW_HELP, showCommand } from "./show_command.ts";

/** Adds `commit` and `show` to `program`. */
export function registerCheckpointCommands(program: Command, ctx: CliContext): void {
  const { io, setStatus, userErrors } = ctx;
  userErrors(program.command("commit"), "marsh commit")
    .description("Commit a checkpoint's root to Git and move a ref to it by compare-and-swap.")
    .requiredOption("--ref <REF>", "the full ref to move, e.g. refs/heads/agent-fix")
    .option("--session <NAME>", "the session whose head to commit (default: $MARSH_SESSION)")
    .option("--checkpoint <C>", "this checkpoint (an id or a unique prefix) instead of a head")
    .option("-m, --message <MSG>", "the commit message (default: the checkpoint and its command)")
    .option("--orphan", "a new REF gets a root commit (default: it starts where HEAD is)")
    .option("--include-ignored", "also commit the paths Git ignores (default: left out)")
    .option("--json", 'print {"ref","commit","parent","root","tree","ignored",...}')
    .addHelpText("after", COMMIT_HELP)
    .action(async (opts: {
      ref: string;
      session?: string;
      checkpoint?: string;
      message?: string;
      orphan?: boolean;
      includeIgnored?: boolean;
      json?: boolean;
    }) =>
      setStatus(
        await commitCommand({
          ref: opts.ref,
          json: opts.json === true,
          orphan: opts.orphan === true,
          includeIgnored: opts.includeIgnored === true,
          ...(opts.session === undefined ? {} : { session: opts.session }),
          ...(opts.checkpoint === undefined ? {} : { checkpoint: opts.checkpoint }),
          ...(opts.message === undefined ? {} : { message: opts.message }),
        }, io),
      )
    );
  userErrors(program.command("show"), "marsh show")
    .description("Show a checkpoint: its operation, exit, root, parent and changed paths.")
    .argument("<CHECKPOINT>", "a checkpoint id, or at least 8 of its first digits")
    .option("--patch", "print its git-apply-ready patch against its parent instead")
    .option("--json", 'print {"checkpoint":{...},"changed","paths":[...]} (with "patch")')
    .addHelpText("after", SHOW_HELP)
    .action(async (checkpoint: string, opts: { patch?: boolean; json?: boolean }) =>
      setStatus(
        await showCommand(checkpoint, { patch: opts.patch === true, json: opts.json === true }, io),
      )
    );
}
