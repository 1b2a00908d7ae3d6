/**
 * Registers `marsh fanout`, `marsh collect` and `marsh context` for the host CLI (`main.ts`) and
 * the in-job client (`job/main.ts`): the same commands, one difference each: a job's fanout takes
 * argv branches only, and a job's `context` prints its own `context.md`.
 *
 * @module
 */

import type { Command } from "commander";
import type { BranchSpec } from "../protocol/daemon.ts";
import type { CliContext } from "./cli_program.ts";
import { collectCommand } from "./collect_command.ts";
import { contextCommand } from "./context_command.ts";
import { fanoutCommand, type FanoutPlace } from "./fanout_command.ts";
import { parseShellBranch, refuseStrayWords } from "./split_command.ts";

/** Where the commands run: the host (or a shell branch), or a Kit job with its `context.md`. */
export type FanoutWhere =
  | { readonly place: "host" }
  | { readonly place: "job"; readonly contextFile: string };

const FANOUT_HELP = `
Every branch runs now, at once, in the current directory on the same files:
no fork, no container of its own, no daemon. Each reads the same stdin (read
to its end first, at most 64 MiB; a terminal, or -n, means empty) and gets
FANOUT_BRANCH=<fanout id>/<label> in its environment.

-b LABEL=STRING runs \`bash -c STRING\` (not inside a Kit job: there only argv
branches run). ::: LABEL CMD ARGS... runs CMD directly, with ARGS verbatim;
a registered command there runs as a child job through its link.

At most 16 branches and 16 MiB of output from all of them together (past it
every branch is stopped and fanout exits 125). Ctrl-C, SIGTERM and SIGHUP
go to every branch's process group, SIGKILL after 10 s; fanout then exits
128+N. Output: one marsh.fanout/v1 JSON line for \`marsh collect\`, or the
rendering itself when stdout is a terminal. Exit: the first nonzero branch
status in declaration order.

Examples:
  marsh fanout -b test='make test' -b lint='make lint' | marsh collect
  git diff | marsh fanout ::: review codex exec 'review this diff' ::: sec claude -p 'security?' | marsh collect
`;

const COLLECT_HELP = `
Reads the one line \`marsh fanout\` wrote and prints, per branch in declaration
order, a header (\`== LABEL: exited N\`), its stdout, a failed branch's stderr
under \`== LABEL stderr ==\`, and a blank line, all on stdout: the rendering
\`marsh join\` prints. Exit: the first nonzero branch status; 2 for input
that is not a fanout line.

--json prints {"schema":"marsh.collect/v1","fanout_id","status","signal",
"created_unix_ms","finished_unix_ms","branches":[{"label","kind","argv" or
"string","exit","status","ms","stdout","stderr"}]} with stdout and stderr as
text.

Examples:
  marsh fanout ::: a make test ::: b make lint | marsh collect --timing
  marsh fanout -b a='./check.sh' | marsh collect --json | jq .branches[0].stdout
`;

const CONTEXT_HELP = `
Inside a Kit job: the job's own /run/marsh/context.md (its name, what it may
start, how, and the limits). Anywhere else: the generic text. It only prints.
`;

/** Adds `fanout`, `collect` and `context` to the program. */
export function registerFanoutCommands(
  program: Command,
  ctx: CliContext,
  where: FanoutWhere,
): void {
  const { setStatus, userErrors } = ctx;
  const place: FanoutPlace = where.place;
  const argvParts = ctx.argvParts ?? [];
  userErrors(program.command("fanout"), "marsh fanout")
    .description("Run branches at once here, on the same files; print one line for collect.")
    .usage("[-n] [-b LABEL=STRING]... [::: LABEL CMD ARGS...]...")
    .option(
      "-b, --branch <LABEL=STRING>",
      "a shell branch: run `bash -c STRING` under LABEL (repeatable; not in a Kit job)",
      (value: string, prev: BranchSpec[]) => [...prev, parseShellBranch(value, "marsh fanout")],
      [] as BranchSpec[],
    )
    .option("-n, --no-stdin", "give the branches an empty stdin instead of reading it")
    .allowExcessArguments()
    .addHelpText("after", FANOUT_HELP)
    .action(async (opts: { branch: BranchSpec[]; stdin: boolean }, cmd: Command) => {
      refuseStrayWords(cmd.args, argvParts, "marsh fanout");
      setStatus(
        await fanoutCommand(
          { shell: opts.branch, argvParts, noStdin: !opts.stdin },
          place,
          ctx.io,
          ctx.signals,
        ),
      );
    });

  userErrors(program.command("collect"), "marsh collect")
    .description("Print a fanout's branches in order, as join does; exit with the first failure.")
    .option("--json", "a marsh.collect/v1 document (one JSON line) instead of the rendering")
    .option("--timing", "end each header with the branch's run time")
    .option("--stderr", "show successful branches' stderr too")
    .addHelpText("after", COLLECT_HELP)
    .action(async (opts: { json?: boolean; timing?: boolean; stderr?: boolean }) => {
      setStatus(
        await collectCommand({
          json: opts.json === true,
          timing: opts.timing === true,
          stderr: opts.stderr === true,
        }, ctx.io),
      );
    });

  userErrors(program.command("context"), "marsh context")
    .description("Print what a Kit job may start and how (its /run/marsh/context.md).")
    .addHelpText("after", CONTEXT_HELP)
    .action(async () => {
      setStatus(
        await contextCommand(where.place === "job" ? where.contextFile : undefined, ctx.io),
      );
    });
}
