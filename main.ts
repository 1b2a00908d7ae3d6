/**
 * The `marsh` CLI. It holds nothing durable and reads no project file itself:
 * the daemon does the splits (started on demand), and file-system work
 * happens in the split-filesystem service.
 *
 * Run through `./marsh`, which pins Deno and passes the CLI's permissions.
 * This is the only module of the CLI that parses arguments, handles signals
 * and exits.
 *
 * @module
 */

import { Command, CommanderError } from "commander";
import type { BranchSpec } from "./protocol/daemon.ts";
import { CliError, USAGE } from "./client/cli_error.ts";
import { diffCommand } from "./client/diff_command.ts";
import { registerEngineCommands } from "./client/engine_command.ts";
import { registerKitsCommands } from "./client/kits_command.ts";
import { gcCommand } from "./client/gc_command.ts";
import { registerJobsCommands } from "./client/jobs_command.ts";
import type { CliIo, Signals } from "./client/io.ts";
import { joinCommand } from "./client/join_command.ts";
import { parseShellBranch, splitAtArgvBranches, splitCommand } from "./client/split_command.ts";
import { splitsActionCommand, splitsListCommand } from "./client/splits_command.ts";
import {
  daemonStartCommand,
  daemonStatusCommand,
  daemonStopCommand,
  statusCommand,
} from "./client/status_command.ts";

const enc = new TextEncoder();

function writeAllSync(file: { writeSync(p: Uint8Array): number }, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.length) off += file.writeSync(bytes.subarray(off));
}

function errorLine(line: string): void {
  try {
    writeAllSync(Deno.stderr, enc.encode(`${line}\n`));
  } catch (error) {
    if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
    // No one reads stderr any more; the exit status still tells.
  }
}

const io: CliIo = {
  cwd: () => Deno.cwd(),
  env: () => Deno.env.toObject(),
  get stdin() {
    return Deno.stdin.readable;
  },
  stdinIsTerminal: Deno.stdin.isTerminal(),
  stderrIsTerminal: Deno.stderr.isTerminal(),
  stdoutIsTerminal: Deno.stdout.isTerminal(),
  async write(bytes) {
    try {
      let off = 0;
      while (off < bytes.length) off += await Deno.stdout.write(bytes.subarray(off));
      return true;
    } catch (error) {
      if (error instanceof Deno.errors.BrokenPipe) return false;
      throw error;
    }
  },
  error: errorLine,
};

const signals: Signals = {
  async trapInterrupts(onInterrupt, body) {
    Deno.addSignalListener("SIGINT", onInterrupt);
    try {
      return await body();
    } finally {
      Deno.removeSignalListener("SIGINT", onInterrupt);
    }
  },
};

/** Reports commander's parse errors as one line naming the command's help. */
function userErrors(cmd: Command, path: string): Command {
  return cmd.configureOutput({
    writeOut: (s) => writeAllSync(Deno.stdout, enc.encode(s)),
    writeErr: (s) => writeAllSync(Deno.stderr, enc.encode(s)),
    outputError: (s, write) =>
      write(`${path}: ${s.trim().replace(/^error: /, "")} (see \`${path} --help\`)\n`),
  });
}

const SPLIT_HELP = `
Each -b branch runs \`bash -c STRING\` in its own fork of the project, with
cwd = the fork's copy of the current directory and your exported environment
(minus MARSH_*, SBX_*, DOCKER_* and credential-shaped names).

Each ::: LABEL CMD ARGS... branch runs one registered Kit command (see
\`marsh kits add\`) in a fresh container that sees, of the project, only its
fork (at the same path) and the fork's Git metadata; CMD ARGS are taken
verbatim, no TTY, network per the Kit. Everything after the first ::: belongs
to argv branches, so -b and the options come first.

stdin is read to its end first and every branch reads it; a terminal stdin,
or -n, means empty. split waits for every branch, prints one handle line on
stdout and exits with the first nonzero branch status in declaration order
(125 for a failed or rejected branch, 130 when cancelled, 2 when nothing
could run). Ctrl-C cancels the split; a second Ctrl-C stops waiting.

Examples:
  git diff | marsh split -b tests='make test' -b lint='make lint' | marsh join
  git diff | marsh split -b tests='make test' ::: review claude -p 'review this diff' | marsh join
  h=$(marsh split -n -b a='./fix.sh a' -b b='./fix.sh b')
  marsh join <<<"$h" -- ./apply.sh
`;

const JOIN_HELP = `
Reads the handle line that \`marsh split\` printed from stdin. Without CMD the
rendering (each branch's status and patch; a branch's stdout and stderr are
in $SPLIT_DIR/<label>/) goes to stdout and the split is removed if every
branch succeeded and --keep is not given, else kept (the message says why). With \`-- CMD\`, CMD runs even if branches failed,
with the rendering on its stdin and SPLIT_ID, SPLIT_DIR, SPLIT_MANIFEST and
SPLIT_OBJECTS set; the split is removed when CMD exits 0, else kept, and join
exits with CMD's status (127 when CMD cannot be started).

Examples:
  marsh split -b a='make test' | marsh join
  marsh split -b a='./fix.sh' | marsh join --json | jq .branches
  marsh split -b a='./fix.sh' | marsh join -- sh -c 'git apply --3way "$SPLIT_DIR/a/diff.patch"'
`;

const SPLITS_HELP = `
Lists splits as a tree: per split its state, creation time and directory,
then per branch its state, placement, status, changed-file count, job id and
trust flag, and why a split was kept or cancelled.

Examples:
  marsh splits
  marsh splits --json 01J9Z
  marsh splits cancel 01J9Z
  marsh splits rm 01J9Z
`;

function buildProgram(
  setStatus: (code: number) => void,
  argvParts: readonly string[],
  consumer: readonly string[] | undefined,
): Command {
  const program = userErrors(new Command("marsh"), "marsh")
    .description(
      "Cheap private forks of a project: snapshot, fork per branch, capture each result as a patch.",
    )
    .exitOverride();

  userErrors(program.command("split"), "marsh split")
    .description("Run branches in private forks of the project at once; print a handle for join.")
    .usage("[-n] [-b LABEL=STRING]... [::: LABEL CMD ARGS...]...")
    .option(
      "-b, --branch <LABEL=STRING>",
      "a shell branch: run `bash -c STRING` under LABEL (repeatable)",
      (value: string, prev: BranchSpec[]) => [...prev, parseShellBranch(value)],
      [] as BranchSpec[],
    )
    .option("-n, --no-stdin", "give the branches an empty stdin instead of reading it")
    .option(
      "--with-ignored",
      "snapshot ignored files too (node_modules, .env, build caches); recorded in the manifest",
    )
    .allowExcessArguments()
    .addHelpText("after", SPLIT_HELP)
    .action(async (
      opts: { branch: BranchSpec[]; stdin: boolean; withIgnored?: boolean },
      cmd: Command,
    ) => {
      const words = cmd.args;
      if (words.length > 0 && argvParts.length === 0) {
        throw new CliError(
          `marsh split: unexpected argument ${
            JSON.stringify(words[0])
          }; give each branch as -b LABEL='command' or ::: LABEL CMD ARGS...`,
        );
      }
      setStatus(
        await splitCommand(
          {
            branches: opts.branch,
            argvParts,
            noStdin: !opts.stdin,
            withIgnored: opts.withIgnored === true,
          },
          io,
          signals,
        ),
      );
    });

  userErrors(program.command("join"), "marsh join")
    .description("Take a split's results: print them, or hand them to a command, then release it.")
    .usage("[--json] [--keep] [-- CMD ARGS...]")
    .option("--json", "the manifest (JSON, one line) instead of the rendering")
    .option("--keep", "keep the split even if it could be removed")
    .allowExcessArguments()
    .addHelpText("after", JOIN_HELP)
    .action(async (opts: { json?: boolean; keep?: boolean }, cmd: Command) => {
      const words = cmd.args;
      if (words.length > 0) {
        throw new CliError(
          `marsh join: put \`--\` before the consumer command: marsh join -- ${words.join(" ")}`,
        );
      }
      if (consumer !== undefined && consumer.length === 0) {
        throw new CliError("marsh join: `--` needs a command after it: marsh join -- CMD ARGS...");
      }
      setStatus(
        await joinCommand(
          { json: opts.json === true, keep: opts.keep === true, consumer: consumer ?? [] },
          io,
          signals,
        ),
      );
    });

  const splits = userErrors(program.command("splits"), "marsh splits")
    .description("List splits, or cancel or remove one.")
    .usage("[--json] [ID] | cancel ID | rm ID")
    .option("--json", 'print {"splits":[<manifest>...]}')
    .argument("[ID]", "only this split")
    .addHelpText("after", SPLITS_HELP)
    .action(async (id: string | undefined, opts: { json?: boolean }) => {
      setStatus(await splitsListCommand({ json: opts.json === true, id }, io));
    });
  userErrors(splits.command("cancel"), "marsh splits cancel")
    .description("Cancel a running split (its branches get SIGINT, then SIGKILL after 10 s).")
    .argument("<ID>", "the split")
    .addHelpText("after", "\nExample:\n  marsh splits cancel 01J9Z\n")
    .action(async (id: string) => setStatus(await splitsActionCommand("cancel", id, io)));
  userErrors(splits.command("rm"), "marsh splits rm")
    .description("Remove a kept or finished split: its forks, store and out/.")
    .argument("<ID>", "the split")
    .addHelpText("after", "\nExample:\n  marsh splits rm 01J9Z\n")
    .action(async (id: string) => setStatus(await splitsActionCommand("rm", id, io)));

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
    .option("--dry-run", "say what would be deleted and how many bytes, delete nothing")
    .option("--json", 'print {"root","dry_run","removed":[ids],"bytes","kept"}')
    .addHelpText(
      "after",
      "\nA layer a split (kept ones included), a mounted fork or a later layer uses is never\n" +
        "deleted; `marsh splits rm ID` releases a split's layers.\n\n" +
        "Examples:\n  marsh gc --dry-run\n  marsh gc\n",
    )
    .action(async (opts: { dryRun?: boolean; json?: boolean }) => {
      setStatus(await gcCommand({ dryRun: opts.dryRun === true, json: opts.json === true }, io));
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

  registerEngineCommands(program, { io, setStatus, userErrors });
  registerKitsCommands(program, { io, setStatus, userErrors });
  registerJobsCommands(program, { io, setStatus, userErrors });
  return program;
}

/**
 * Cuts the words the option parser must not see: everything from the first
 * `:::` of `split` (argv branches), everything after the first `--` of
 * `join` (the consumer command).
 */
function preSplit(args: readonly string[]): {
  head: string[];
  argvParts: string[];
  consumer: string[] | undefined;
} {
  if (args[0] === "split") {
    const { head, argvParts } = splitAtArgvBranches(args);
    return { head, argvParts, consumer: undefined };
  }
  if (args[0] === "join") {
    const at = args.indexOf("--");
    if (at >= 0) return { head: args.slice(0, at), argvParts: [], consumer: args.slice(at + 1) };
  }
  return { head: [...args], argvParts: [], consumer: undefined };
}

if (import.meta.main) {
  let status = 0;
  const { head, argvParts, consumer } = preSplit(Deno.args);
  const program = buildProgram((code) => status = code, argvParts, consumer);
  try {
    await program.parseAsync(head, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version exit 0; every other parse error is a usage error.
      Deno.exit(error.exitCode === 0 ? 0 : USAGE);
    }
    if (error instanceof CliError) {
      errorLine(error.message);
      Deno.exit(error.code);
    }
    throw error;
  }
  Deno.exit(status);
}
