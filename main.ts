/**
 * The `marsh` CLI. It holds nothing durable and reads no project file itself:
 * file-system work happens in the split-filesystem service it starts.
 *
 * Run through `./marsh`, which pins Deno and passes the CLI's permissions.
 *
 * @module
 */

import { Command, CommanderError } from "commander";
import { diffCommand } from "./client/diff_command.ts";

/** Usage errors and refusals exit 2, as the specs' setup failures do. */
const USAGE = 2;

function buildProgram(setStatus: (code: number) => void): Command {
  const program = new Command("marsh")
    .description(
      "Cheap private forks of a project: snapshot, fork per branch, capture each result as a patch.",
    )
    .exitOverride()
    .showHelpAfterError("(run `marsh --help` for usage)")
    .configureOutput({
      writeOut: (s) => Deno.stdout.writeSync(new TextEncoder().encode(s)),
      writeErr: (s) => Deno.stderr.writeSync(new TextEncoder().encode(s)),
    });

  program
    .command("diff")
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

  return program;
}

if (import.meta.main) {
  let status = 0;
  const program = buildProgram((code) => status = code);
  try {
    await program.parseAsync(Deno.args, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version exit 0; every other parse error is a usage error.
      Deno.exit(error.exitCode === 0 ? 0 : USAGE);
    }
    throw error;
  }
  Deno.exit(status);
}
