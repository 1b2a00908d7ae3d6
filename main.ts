/**
 * The `marsh` CLI. It holds nothing durable and reads no project file itself:
 * the daemon does the splits (started on demand), and file-system work
 * happens in the split-filesystem service.
 *
 * Run through `./marsh`, which pins Deno and passes the CLI's permissions.
 * The command line shared with the in-job client (`split`, `join`,
 * `splits`; streams, Ctrl-C, parse errors and exit codes) is
 * `client/cli_program.ts`; this module adds the host's own commands, the
 * ones that reach the daemon's management, the engine, Kits or the
 * split-filesystem service, and is the only place the host CLI exits.
 *
 * @module
 */

import type { Command } from "commander";
import { type CliContext, runCli } from "./client/cli_program.ts";
import { diffCommand } from "./client/diff_command.ts";
import { registerEngineCommands } from "./client/engine_command.ts";
import { registerKitsCommands } from "./client/kits_command.ts";
import { gcAllCommand } from "./client/gc_all_command.ts";
import { gcCommand } from "./client/gc_command.ts";
import { registerJobsCommands } from "./client/jobs_command.ts";
import { registerRunCommand } from "./client/run_command.ts";
import { registerCheckpointCommands } from "./client/checkpoint_commands.ts";
import { registerSessionCommands } from "./client/session_commands.ts";
import { registerCheckoutCommand } from "./client/checkout_command.ts";
import {
  daemonStartCommand,
  daemonStatusCommand,
  daemonStopCommand,
  statusCommand,
} from "./client/status_command.ts";

/**
 * The host's commands after the shared ones: `status`, `gc`, `daemon`,
 * `diff`, `engine`, `kit`, `kits`, `jobs`, `workers`, `commit` and `show`.
 */
export function registerHostCommands(program: Command, ctx: CliContext): void {
  const { io, setStatus, userErrors } = ctx;

  userErrors(program.command("status"), "marsh status")
    .description("Show the daemon and how many splits are active, awaiting a join, or kept.")
    .option("--json", "print the daemon's status reply as JSON")
    .addHelpText(
      "after",
      "\nNever starts the daemon: prints `daemon: not running` (exit 0) when none answers.\n\n" +
        "Examples:\n  marsh status\n  marsh status --json | jq .splits\n",
    )
    .action(async (opts: { json?: boolean }) => {
      setStatus(await statusCommand({ json: opts.json === true }, io));
    });

  userErrors(program.command("gc"), "marsh gc")
    .description(
      "Delete this project's snapshot layers that no split and no snapshot chain needs.",
    )
    .option(
      "--all",
      "remove everything marsh stored for this project: its splits, all layers, .marsh itself",
    )
    .option("--dry-run", "say what would be deleted and how many bytes, delete nothing")
    .option("--json", 'print {"root","dry_run","removed":[ids],"bytes","kept"}')
    .addHelpText(
      "after",
      "\nA layer a split (kept ones included), a mounted fork or a later layer uses is never\n" +
        "deleted; `marsh splits rm ID` releases a split's layers.\n\n" +
        "--all first removes every split of the project (refused, removing nothing, while\n" +
        "one runs or awaits its join), then every layer, chain heads' included, and the\n" +
        "rest of .marsh. Exit 0 when it is all gone, 2 when something was not removed.\n\n" +
        "Examples:\n  marsh gc --dry-run\n  marsh gc\n  marsh gc --all --dry-run\n",
    )
    .action(async (opts: { all?: boolean; dryRun?: boolean; json?: boolean }) => {
      const o = { dryRun: opts.dryRun === true, json: opts.json === true };
      setStatus(await (opts.all === true ? gcAllCommand(o, io) : gcCommand(o, io)));
    });

  const daemon = userErrors(program.command("daemon"), "marsh daemon")
    .description("Manage marshd, the daemon (other commands start it when none answers).");
  userErrors(daemon.command("start"), "marsh daemon start")
    .description("Start marshd unless it is running; it logs to marshd.log in the control dir.")
    .addHelpText("after", "\nExample:\n  marsh daemon start\n")
    .action(async () => setStatus(await daemonStartCommand(io)));
  userErrors(daemon.command("stop"), "marsh daemon stop")
    .description("Stop marshd and wait (up to 10 s) until it is gone.")
    .addHelpText("after", "\nExample:\n  marsh daemon stop\n")
    .action(async () => setStatus(await daemonStopCommand(io)));
  userErrors(daemon.command("status"), "marsh daemon status")
    .description("Say whether marshd runs; exit 1 when it does not.")
    .addHelpText("after", "\nExample:\n  marsh daemon status || marsh daemon start\n")
    .action(async () => setStatus(await daemonStatusCommand(io)));

  userErrors(program.command("diff"), "marsh diff")
    .description(
      "Print the git-apply-ready patch that turns OLD_DIR into NEW_DIR.\n" +
        "Paths are relative to each directory; .git entries are skipped at every depth.\n" +
        "Exit status: 0 identical, 1 different, 2 error.",
    )
    .argument("<OLD_DIR>", "the directory before")
    .argument("<NEW_DIR>", "the directory after")
    .option("--files", "print the changed paths (`<A|M|D|T>\\t<path>`) instead of the patch")
    .action(async (oldDir: string, newDir: string, opts: { files?: boolean }) => {
      const out = Deno.stdout.writable.getWriter();
      try {
        setStatus(
          await diffCommand(oldDir, newDir, { files: opts.files === true }, {
            cwd: Deno.cwd(),
            write: (b) => out.write(b),
            error: (line) => console.error(line),
          }),
        );
      } finally {
        await out.close().catch(() => {/* stdout already closed by a reader that left */});
      }
    });

  registerEngineCommands(program, ctx);
  registerKitsCommands(program, ctx);
  registerJobsCommands(program, ctx);
  registerRunCommand(program, ctx);
  registerCheckpointCommands(program, ctx);
  registerSessionCommands(program, ctx);
  registerCheckoutCommand(program, ctx);
}

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args, registerHostCommands));
}
