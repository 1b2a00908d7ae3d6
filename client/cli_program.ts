/**
 * The `marsh` command line both clients share: the host CLI (`main.ts`) and
 * the in-job client (`job/main.ts`, bundled into `/run/marsh/marsh.js`).
 * It owns the process's streams, Ctrl-C, commander's configuration and the
 * exit status; the commands themselves are in `client/*_command.ts`.
 *
 * Shared here: `split`, `join` and `splits` (with `cancel` and `rm`; the
 * daemon decides what each caller may do), and the resolution commands
 * (`resolve_commands.ts`). Each entry adds its own commands
 * through {@linkcode runCli}'s `register`: the host its daemon, engine, Kit
 * and `diff` commands, the job its `jobs`. Nothing imported here may reach
 * `docker/` or `dockerode`: the in-job client is bundled from this module's
 * graph, and `deno bundle` cannot bundle dockerode's ssh2 (native crypto).
 *
 * @module
 */

import { Command, CommanderError } from "commander";
import type { BranchSpec } from "../protocol/daemon.ts";
import { CliError, USAGE } from "./cli_error.ts";
import type { CliIo, Signals } from "./io.ts";
import { DISCARD_HELP, discardCommand } from "./discard_command.ts";
import { joinCommand } from "./join_command.ts";
import { logsCommand } from "./logs_command.ts";
import { registerResolveCommands } from "./resolve_commands.ts";
import {
  parseShellBranch,
  refuseStrayWords,
  splitAtArgvBranches,
  splitCommand,
} from "./split_command.ts";
import { splitsPruneCommand, splitsRmCommand } from "./prune_command.ts";
import { splitsActionCommand, splitsListCommand } from "./splits_command.ts";

const enc = new TextEncoder();

/** marsh's version, `marsh --version` prints it (with Deno's). */
export const MARSH_VERSION = "0.1.0";

function writeAllSync(file: { writeSync(p: Uint8Array): number }, bytes: Uint8Array): void {
  let off = 0;
  while (off < bytes.length) off += file.writeSync(bytes.subarray(off));
}

/** Writes one line to stderr; a reader that left is not an error. */
export function errorLine(line: string): void {
  try {
    writeAllSync(Deno.stderr, enc.encode(`${line}\n`));
  } catch (error) {
    if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
    // No one reads stderr any more; the exit status still tells.
  }
}

/** The process's standard streams, as the commands see them. */
export const io: CliIo = {
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

/** Ctrl-C, delivered to the command that asks for it. */
export const signals: Signals = {
  async trapInterrupts(onInterrupt, body) {
    Deno.addSignalListener("SIGINT", onInterrupt);
    try {
      return await body();
    } finally {
      Deno.removeSignalListener("SIGINT", onInterrupt);
    }
  },
  async trapSignals(names, onSignal, body) {
    const listeners = names.map((name) => [name, () => onSignal(name)] as const);
    for (const [name, listener] of listeners) Deno.addSignalListener(name, listener);
    try {
      return await body();
    } finally {
      for (const [name, listener] of listeners) Deno.removeSignalListener(name, listener);
    }
  },
};

/** Reports commander's parse errors as one line naming the command's help. */
export function userErrors(cmd: Command, path: string): Command {
  return cmd.configureOutput({
    writeOut: (s) => writeAllSync(Deno.stdout, enc.encode(s)),
    writeErr: (s) => writeAllSync(Deno.stderr, enc.encode(s)),
    outputError: (s, write) =>
      write(`${path}: ${s.trim().replace(/^error: /, "")} (see \`${path} --help\`)\n`),
  });
}

/**
 * What a command registration gets (structurally the same as
 * `EngineCommandsContext` of `engine_command.ts`, which this module must not
 * import).
 */
export interface CliContext {
  readonly io: CliIo;
  readonly signals: Signals;
  /** Records the process's exit status. */
  readonly setStatus: (code: number) => void;
  /** Commander's configuration for a command at `path` (e.g. `marsh splits cancel`). */
  readonly userErrors: (cmd: Command, path: string) => Command;
  /** `marsh op`'s command: the words after its first `--` (undefined: no `--`). */
  readonly opArgv?: readonly string[];
  /** `marsh fanout`'s argv branches: everything from its first `:::` on. */
  readonly argvParts?: readonly string[];
}

/** Adds commands to the program, after the shared ones. */
export type RegisterCommands = (program: Command, ctx: CliContext) => void;

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

-t LABEL=SECONDS stops shell branch LABEL that long after it started (1 to
3600): SIGINT, then SIGKILL after 10 s; it is not captured and its status is
\`failed: time limit of N s reached\` (125). Its siblings go on. Watch a
running branch with \`marsh logs ID LABEL -f\`; stop one with
\`marsh splits cancel ID LABEL\`.

Examples:
  git diff | marsh split -b tests='make test' -b lint='make lint' | marsh join
  marsh split -n -b tests='make test' -t tests=600 | marsh join
  git diff | marsh split -b tests='make test' ::: review claude -p 'review this diff' | marsh join
  h=$(marsh split -n -b a='./fix.sh a' -b b='./fix.sh b')
  marsh join <<<"$h" -- ./apply.sh
`;

const JOIN_HELP = `
Reads the handle line that \`marsh split\` printed from stdin. Without CMD the
rendering (each branch's status and patch; a branch's stdout and stderr are
in $SPLIT_DIR/<label>/) goes to stdout and the split is removed if every
branch succeeded and --keep is not given, else kept (the message says why). With \`-- CMD\`, CMD runs even if branches failed,
with the rendering on its stdin and SPLIT_ID, SPLIT_DIR, SPLIT_MANIFEST,
SPLIT_ROOT and SPLIT_OBJECTS set; the split is removed when CMD exits 0, else
kept, and join exits with CMD's status (127 when CMD cannot be started). CMD
runs in the current directory: apply from $SPLIT_ROOT, the project's top, as
git apply in a subdirectory skips (and exits 0) the changes outside it.
A bare --json line says "released" ("removed" or "kept") and "reason".

Examples:
  marsh split -b a='make test' | marsh join
  marsh split -b a='./fix.sh' | marsh join --json | jq .released,.branches
  marsh split -b a='./fix.sh' | marsh join -- sh -c 'cd "\${SPLIT_ROOT:?}" &&
    git apply --3way "$SPLIT_DIR/a/diff.patch"'
`;

const SPLITS_HELP = `
Lists the splits of the project you are in (found as marsh split finds it:
the nearest directory up with a .git, else this one), as a tree: per split
its state, creation time and directory, then per branch its state,
placement, status, changed-file count, job id and trust flag, and why a
split was kept or cancelled. --all lists every project's; an ID shows that
split wherever it is, with the splits made under it (by its branches and
their jobs) indented beneath it.

A running branch whose shell exited while processes it started still run (a
\`setsid\` daemon, a background job) is held until they end: the listing names
them (pid and command) under the branch, with the time its shell exited
(\`lingering\` in --json). End them, or cancel the branch.

Examples:
  marsh splits
  marsh splits --all --json
  marsh splits --json 01J9Z
  marsh splits cancel 01J9Z
  marsh splits cancel 01J9Z tests
  marsh splits rm 01J9Z 7kq2m
  marsh splits prune --older-than 3d
`;

const PRUNE_HELP = `
Removes this project's finished splits: joined, kept and cancelled ones
(never a running, awaiting or uncertain one; remove an uncertain one by its
id). Each is removed as marsh splits rm ID removes it, or refused with its
reason on stderr; the others still go. Exit 0 when every one chosen was
removed, 2 when one was not.

D: a whole number and a unit, s, m, h, d or w (30m, 2h, 3d).

Examples:
  marsh splits prune --dry-run
  marsh splits prune --older-than 2h
  marsh splits prune --all --json
`;

const LOGS_HELP = `
Prints what branch LABEL of split ID wrote: its stdout to stdout and its
stderr to stderr. While the branch runs that is its output so far; once it
ended, what \`out/<LABEL>/stdout\` and \`stderr\` hold. With -f, new output is
printed as the branch writes it, and logs exits 0 when the branch has ended
(a branch not yet started is waited for). The two streams are two files: each
keeps its order, but their order relative to each other is not recorded, so
\`2>&1\` shows them in the order they reached marsh, not exactly as the branch
wrote them. Control bytes are escaped when the output is a terminal (pipe it
to keep colours).

Works for running, finished and kept splits, and for the ones you created
only (the host sees all). Inside a shell branch or a Kit job, only the splits
it made.

Examples:
  marsh logs 5k2m9q0d tests -f
  marsh logs 5k2m9q0d tests --stderr | tail
`;

/** The words the option parser must not see, cut off by {@linkcode preSplit}. */
export interface PreSplit {
  /** What commander parses. */
  readonly head: string[];
  /** `split` and `fanout`: everything from the first `:::` on (argv branches). */
  readonly argvParts: string[];
  /** `join`: everything after the first `--` (the consumer); `op`: its command. */
  readonly consumer: string[] | undefined;
}

/**
 * Cuts the words the option parser must not see: everything from the first
 * `:::` of `split` and `fanout` (argv branches), everything after the first `--` of
 * `join` (the consumer command) and of `op` (the operation's command).
 */
export function preSplit(args: readonly string[]): PreSplit {
  if (args[0] === "split" || args[0] === "fanout") {
    const { head, argvParts } = splitAtArgvBranches(args);
    return { head, argvParts, consumer: undefined };
  }
  if (args[0] === "join" || args[0] === "op") {
    const at = args.indexOf("--");
    if (at >= 0) return { head: args.slice(0, at), argvParts: [], consumer: args.slice(at + 1) };
  }
  return { head: [...args], argvParts: [], consumer: undefined };
}

function addSplit(program: Command, ctx: CliContext, argvParts: readonly string[]): void {
  const { setStatus } = ctx;
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
    .option(
      "-t, --timeout <LABEL=SECONDS>",
      "stop shell branch LABEL after SECONDS (1-3600; repeatable)",
      (value: string, prev: string[]) => [...prev, value],
      [] as string[],
    )
    .allowExcessArguments()
    .addHelpText("after", SPLIT_HELP)
    .action(async (
      opts: { branch: BranchSpec[]; stdin: boolean; withIgnored?: boolean; timeout: string[] },
      cmd: Command,
    ) => {
      refuseStrayWords(cmd.args, argvParts);
      setStatus(
        await splitCommand(
          {
            branches: opts.branch,
            argvParts,
            noStdin: !opts.stdin,
            withIgnored: opts.withIgnored === true,
            timeLimits: opts.timeout,
          },
          ctx.io,
          ctx.signals,
        ),
      );
    });
}

function addJoin(
  program: Command,
  ctx: CliContext,
  consumer: readonly string[] | undefined,
): void {
  const { setStatus } = ctx;
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
          ctx.io,
          ctx.signals,
        ),
      );
    });
}

/**
 * The command tree for `args`: the program with every command (the shared
 * ones, then what `register` adds), or, when `args` asks for `split` or
 * `join`, with that one command only: its parse, help and errors are the
 * same, and the process does not build the other forty.
 */
export function programFor(
  args: readonly string[],
  ctx: CliContext,
  register?: RegisterCommands,
): { program: Command; head: string[] } {
  const { head, argvParts, consumer } = preSplit(args);
  const only = head[0] === "split" || head[0] === "join" ? head[0] : null;
  const program = buildProgram(ctx, argvParts, consumer, only);
  if (only === null) {
    register?.(
      program,
      head[0] === "op"
        ? { ...ctx, opArgv: consumer }
        : head[0] === "fanout"
        ? { ...ctx, argvParts }
        : ctx,
    );
  }
  return { program, head };
}

function buildProgram(
  ctx: CliContext,
  argvParts: readonly string[],
  consumer: readonly string[] | undefined,
  only: "split" | "join" | null,
): Command {
  const { setStatus } = ctx;
  const program = userErrors(new Command("marsh"), "marsh")
    .description(
      "Cheap private forks of a project: snapshot, fork per branch, capture each result as a patch.",
    )
    .version(`marsh ${MARSH_VERSION} (deno ${Deno.version.deno})`, "--version", "print the version")
    // Each command's options are its own: `splits` passes `rm --json` on to `rm`.
    .enablePositionalOptions()
    .exitOverride();

  // `split` and `join` start most pipelines: they build only themselves (docs/guide.md,
  // "How fast marsh starts").
  if (only !== "join") addSplit(program, ctx, argvParts);
  if (only !== "split") addJoin(program, ctx, consumer);
  if (only !== null) return program;

  const splits = userErrors(program.command("splits"), "marsh splits")
    .description("List this project's splits; cancel, remove or prune them.")
    .usage("[--all] [--json] [ID] | cancel ID [LABEL] | rm ID... | prune [--older-than D]")
    // `rm --json` and `prune --all` are the subcommand's options, not the listing's.
    .enablePositionalOptions()
    .option("--all", "every project's splits, not only this one's")
    .option("--json", 'print {"splits":[<manifest>...],"root":"<project>"}')
    .argument("[ID]", "only this split and the splits made under it")
    .addHelpText("after", SPLITS_HELP)
    .action(async (id: string | undefined, opts: { json?: boolean; all?: boolean }) => {
      setStatus(
        await splitsListCommand({ json: opts.json === true, id, all: opts.all === true }, ctx.io),
      );
    });
  userErrors(splits.command("cancel"), "marsh splits cancel")
    .description(
      "Cancel a running split, or one branch of it (SIGINT, then SIGKILL after 10 s).",
    )
    .argument("<ID>", "the split")
    .argument("[LABEL]", "only this branch: its siblings go on, and the split then awaits a join")
    .addHelpText(
      "after",
      "\nA branch cancelled alone ends `cancelled` (130) and is not captured.\n" +
        "\nExamples:\n  marsh splits cancel 01J9Z\n  marsh splits cancel 01J9Z tests\n",
    )
    .action(async (id: string, label: string | undefined) =>
      setStatus(await splitsActionCommand("cancel", id, ctx.io, undefined, label))
    );
  userErrors(splits.command("rm"), "marsh splits rm")
    .description("Remove kept or finished splits: their forks, store, out/ and records.")
    .argument("<ID...>", "the splits")
    .option("--json", 'print {"removed":[{"id","message"}],"failed":[{"id","reason"}]}')
    .addHelpText(
      "after",
      "\nEach ID is removed or refused on its own, in the order given; a refusal (on\n" +
        "stderr) does not stop the others. Exit 0 when every one was removed, else 2.\n\n" +
        "Example:\n  marsh splits rm 01J9Z 7kq2m\n",
    )
    .action(async (ids: string[], opts: { json?: boolean }) =>
      setStatus(await splitsRmCommand(ids, { json: opts.json === true }, ctx.io))
    );
  userErrors(splits.command("prune"), "marsh splits prune")
    .description("Remove this project's finished splits (joined, kept, cancelled).")
    .option("--older-than <D>", "only splits created more than D ago (30m, 2h, 3d)")
    .option("--all", "every project's finished splits")
    .option("--dry-run", "say what would be removed, remove nothing")
    .option("--json", 'print {"root","dry_run","removed":[...],"failed":[...]}')
    .addHelpText("after", PRUNE_HELP)
    .action(async (opts: { olderThan?: string; all?: boolean; dryRun?: boolean; json?: boolean }) =>
      setStatus(
        await splitsPruneCommand({
          all: opts.all === true,
          dryRun: opts.dryRun === true,
          json: opts.json === true,
          ...(opts.olderThan === undefined ? {} : { olderThan: opts.olderThan }),
        }, ctx.io),
      )
    );

  userErrors(program.command("discard"), "marsh discard")
    .description(
      "Discard a split, or some of its branches: stop them, remove their forks, keep the record.",
    )
    .argument("<ID>", "the split")
    .argument("[LABEL...]", "only these branches; the split and its other branches stay")
    .option("--reason <TEXT>", "why, kept with the record in marsh splits")
    .option(
      "--json",
      'print {"id","scope","reason","by","at_unix_ms","branches":[...],"state","message"}',
    )
    .addHelpText("after", DISCARD_HELP)
    .action(async (id: string, labels: string[], opts: { reason?: string; json?: boolean }) =>
      setStatus(
        await discardCommand({
          id,
          labels,
          json: opts.json === true,
          ...(opts.reason === undefined ? {} : { reason: opts.reason }),
        }, ctx.io),
      )
    );

  userErrors(program.command("logs"), "marsh logs")
    .description("Print a branch's stdout and stderr; with -f, follow it until it ends.")
    .usage("[-f] [--stdout | --stderr] ID LABEL")
    .argument("<ID>", "the split")
    .argument("<LABEL>", "the branch")
    .option("-f, --follow", "print new output as it comes, until the branch has ended")
    .option("--stdout", "only the branch's stdout")
    .option("--stderr", "only the branch's stderr")
    .addHelpText("after", LOGS_HELP)
    .action(async (
      id: string,
      label: string,
      opts: { follow?: boolean; stdout?: boolean; stderr?: boolean },
    ) => {
      if (opts.stdout && opts.stderr) {
        throw new CliError(
          "marsh logs: --stdout and --stderr exclude each other; give neither for both streams",
        );
      }
      setStatus(
        await logsCommand(
          {
            id,
            label,
            follow: opts.follow === true,
            streams: opts.stdout ? "stdout" : opts.stderr ? "stderr" : "both",
          },
          ctx.io,
        ),
      );
    });

  registerResolveCommands(program, ctx);
  return program;
}

/**
 * Parses `args` (the words after the program's name), runs the command and
 * returns the exit status: the command's, 0 for `--help`, 2 for a usage
 * error, or a {@linkcode CliError}'s code after printing its message as one
 * line on stderr. The caller exits with it.
 *
 * @param register adds the entry's own commands after `split`, `join` and `splits`
 * @param streams the process's streams ({@linkcode io}; the in-job client's offers its environment)
 * @throws whatever else a command throws (a bug, not a user's error)
 */
export async function runCli(
  args: readonly string[],
  register?: RegisterCommands,
  streams: CliIo = io,
): Promise<number> {
  let status = 0;
  const ctx: CliContext = { io: streams, signals, setStatus: (code) => status = code, userErrors };
  const { program, head } = programFor(args, ctx, register);
  try {
    await program.parseAsync(head, { from: "user" });
  } catch (error) {
    if (error instanceof CommanderError) {
      // --help and --version exit 0; every other parse error is a usage error.
      return error.exitCode === 0 ? 0 : USAGE;
    }
    if (error instanceof CliError) {
      errorLine(error.message);
      return error.code;
    }
    throw error;
  }
  return status;
}
