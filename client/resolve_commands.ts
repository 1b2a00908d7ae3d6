/**
 * The resolution commands on the command line (docs/guide.md, "Resolving
 * a branch"): `marsh merge`, `promote`, `choose`, `undo` and `resolutions`,
 * with their help. Shared by the host CLI and the in-job client; the daemon
 * decides who may resolve what (only a split's creator).
 *
 * @module
 */

import type { Command } from "commander";
import { chooseCommand, type ChooseOptions } from "./choose_command.ts";
import { registerCompareCommand } from "./compare_command.ts";
import type { CliIo, Signals } from "./io.ts";
import { mergeCommand, type MergeOptions } from "./merge_command.ts";
import { promoteCommand, type PromoteOptions } from "./promote_command.ts";
import { resolutionsCommand } from "./resolutions_command.ts";
import { undoCommand } from "./undo_command.ts";

const STATUSES = `
Exit status: 0 done; 1 a conflict or a refusal, nothing was changed (each
path is named on stderr); 2 a usage error or a refused request (no such
split or branch, not its creator); 125 a failure (the message says what
was restored).`;

const MERGE_HELP = `
Brings branch LABEL's changes into the project (its source), which keeps
running; all or nothing, and undoable (marsh undo).

--git (the default) merges the branch's patch with Git's own merge, on
tree ids: a dirty working tree is simply the source side. --filesystem
takes every persistent path the branch changed (ignored files too when the
split snapshotted them) by the conservative three-way rule: a path the
project changed too, differently, is a conflict (never a byte merge of a
database or an image). --paths P... narrows --filesystem to those paths,
relative to the current directory, inside the project; put them after ID
and LABEL.

Any conflict: nothing is changed, every conflicting path is listed, exit 1.
No conflict marker is ever left in your files. --dry-run prints the plan
per path (take, delete, converged, conflict) and changes nothing; with
--json the plan document (schema marsh.merge.plan/v1).
${STATUSES}

Examples:
  marsh merge 5k2m9q0d a --dry-run
  marsh merge 5k2m9q0d a
  marsh merge 5k2m9q0d a --filesystem --dry-run --json | jq .summary
  marsh merge 5k2m9q0d a --paths test.db reports/
`;

const PROMOTE_HELP = `
Makes the project's tree branch LABEL's result wholesale: every path the
snapshot covered (ignored ones when it covered them). If the project
changed since the snapshot, promote refuses and lists those paths (exit 1)
unless --retire-source-changes is given; either way the prior state of
every path it touches is saved first, and marsh undo puts it back.
${STATUSES}

Examples:
  marsh promote 5k2m9q0d b --dry-run
  marsh promote 5k2m9q0d b --retire-source-changes
`;

const CHOOSE_HELP = `
Resolves the split's group in one step: merges (--merge, scope git or
filesystem, git by default) or promotes (--promote) branch LABEL, then
discards every other branch of the split, recording LABEL as the reason
(or --reason TEXT). A conflict or a refusal changes nothing and discards
nothing. If the winner was applied but a discard failed, exit 125 and the
message says which to discard (marsh discard).
${STATUSES}

Examples:
  marsh choose 5k2m9q0d b --merge
  marsh choose 5k2m9q0d b --merge filesystem
  marsh choose 5k2m9q0d c --promote --reason 'c passed the tests'
`;

const UNDO_HELP = `
Puts back exactly what RESOLUTION (a merge, a promote or an undo; see
marsh resolutions) changed, from its restore point, if those paths have not
changed since; otherwise it refuses, listing them (exit 1), and changes
nothing. The undo is a resolution of its own, and can be undone too.
${STATUSES}

Example:
  marsh undo lq2k7x1c-9f3a0b12
`;

const RESOLUTIONS_HELP = `
Lists every merge, promote and undo, newest first: its id, kind, scope,
state (applying, applied, failed, undone), the branch (SPLIT:LABEL), who
asked (host, session:SPLIT/LABEL for a branch, job:ID), when, how many
paths it changed, and its restore point (<root>/.marsh/resolve/<id>) while
it can be undone. The host sees every one; a branch or a job the ones it
made.

Examples:
  marsh resolutions
  marsh resolutions --json | jq '.resolutions[] | select(.state == "applied") | .id'
`;

/** What the registration needs of `cli_program.ts`'s `CliContext` (which it must not import: a cycle). */
export interface ResolveCliContext {
  readonly io: CliIo;
  readonly signals: Signals;
  readonly setStatus: (code: number) => void;
  readonly userErrors: (cmd: Command, path: string) => Command;
}

/** Adds `compare`, `merge`, `promote`, `choose`, `undo` and `resolutions` to `program`. */
export function registerResolveCommands(program: Command, ctx: ResolveCliContext): void {
  const { io, setStatus, userErrors } = ctx;
  registerCompareCommand(program, ctx);
  userErrors(program.command("merge"), "marsh merge")
    .description("Merge a branch's changes into the project, all or nothing.")
    .usage("ID LABEL [--git | --filesystem | --paths P...] [--dry-run] [--json]")
    .argument("<ID>", "the split")
    .argument("<LABEL>", "the branch")
    .option("--git", "merge the branch's patch with Git's merge (the default)")
    .option("--filesystem", "every persistent path the branch changed, by the three-way rule")
    .option("--paths <P...>", "only these paths (relative to the current directory)")
    .option("--dry-run", "print the plan, change nothing")
    .option("--json", "JSON: the plan document with --dry-run, else the result")
    .addHelpText("after", MERGE_HELP)
    .action(async (id: string, label: string, opts: MergeOptions) =>
      setStatus(await mergeCommand(id, label, opts, io))
    );
  userErrors(program.command("promote"), "marsh promote")
    .description("Make the project's tree a branch's result wholesale.")
    .usage("ID LABEL [--retire-source-changes] [--dry-run] [--json]")
    .argument("<ID>", "the split")
    .argument("<LABEL>", "the branch")
    .option("--retire-source-changes", "promote even over what the project changed since")
    .option("--dry-run", "print the plan, change nothing")
    .option("--json", "JSON: the plan document with --dry-run, else the result")
    .addHelpText("after", PROMOTE_HELP)
    .action(async (id: string, label: string, opts: PromoteOptions) =>
      setStatus(await promoteCommand(id, label, opts, io))
    );
  userErrors(program.command("choose"), "marsh choose")
    .description("Merge or promote one branch, then discard the others.")
    .usage("ID LABEL (--merge [SCOPE] | --promote) [--reason TEXT] [--json]")
    .argument("<ID>", "the split")
    .argument("<LABEL>", "the winner")
    .option("--merge [SCOPE]", "merge the winner: git (the default) or filesystem")
    .option("--promote", "promote the winner")
    .option("--retire-source-changes", "with --promote: over what the project changed since")
    .option("--reason <TEXT>", "why the others are discarded")
    .option("--json", "the result as JSON")
    .addHelpText("after", CHOOSE_HELP)
    .action(async (id: string, label: string, opts: ChooseOptions) =>
      setStatus(await chooseCommand(id, label, opts, io))
    );
  userErrors(program.command("undo"), "marsh undo")
    .description("Put back what a merge, promote or undo changed.")
    .argument("<RESOLUTION>", "the resolution's id (marsh resolutions)")
    .option("--json", "the result as JSON")
    .addHelpText("after", UNDO_HELP)
    .action(async (resolution: string, opts: { json?: boolean }) =>
      setStatus(await undoCommand(resolution, opts, io))
    );
  userErrors(program.command("resolutions"), "marsh resolutions")
    .description("List every merge, promote and undo, with its restore point.")
    .option("--json", 'print {"resolutions":[...],"more":N}')
    .addHelpText("after", RESOLUTIONS_HELP)
    .action(async (opts: { json?: boolean }) => setStatus(await resolutionsCommand(opts, io)));
}
