/**
 * The agent context (docs/rules.md, "The job capability"): one text, at most
 * {@linkcode CONTEXT_MAX_LINES} lines, that tells an agent in a Kit job what it may start and how.
 * The daemon fills it in per job into `/run/marsh/context.md`; `marsh context` prints that file
 * inside a job and the generic text (no job) anywhere else. Pure: needs no permission.
 *
 * @module
 */

import {
  JOB_DEPTH,
  JOB_FAN_OUT,
  JOB_SAME_KIT,
  JOB_TREE_TOTAL,
  MAX_BRANCHES,
  MAX_DEPTH,
  POOL_SIZE,
} from "./limits.ts";

/** The longest the text may be, in lines. */
export const CONTEXT_MAX_LINES = 60;

/** The job tree's limits as `job.json` carries them (docs/rules.md "Admission"). */
export interface JobLimits {
  readonly pool: number;
  readonly depth: number;
  readonly same_kit: number;
  readonly fan_out: number;
  readonly total: number;
}

/** The job a context is for. */
export interface ContextJob {
  readonly job: string;
  /** The job's own command name (its Kit). */
  readonly name: string;
  /** The names it may start. */
  readonly spawn: readonly string[];
  readonly limits: JobLimits;
}

const DEFAULT_LIMITS: ContextJob["limits"] = {
  pool: POOL_SIZE,
  depth: JOB_DEPTH,
  same_kit: JOB_SAME_KIT,
  fan_out: JOB_FAN_OUT,
  total: JOB_TREE_TOTAL,
};

/**
 * The context for `job`, or the generic text (`null`: outside a job, where
 * `NAME` stands for a registered command).
 */
export function contextText(job: ContextJob | null): string {
  const l = job?.limits ?? DEFAULT_LIMITS;
  const name = job?.name ?? "NAME";
  const may = job === null
    ? "every registered command (`marsh kits` lists them), unless MARSH_SPAWN narrows it"
    : job.spawn.length === 0
    ? "nothing (this job's spawn set is empty: every child is refused)"
    : job.spawn.join(", ");
  // Another Kit when there is one: starting a different agent is the common case.
  const example = job?.spawn.find((n) => n !== name) ?? job?.spawn[0] ?? name;
  const title = job === null
    ? "# marsh: what a Kit job may start\n\nOutside a job; inside one, `marsh context` prints its own `/run/marsh/context.md`."
    : `# marsh job ${job.job} (${job.name})\n\nYou run inside a marsh Kit job: a container that sees the files whoever started\nyou gave it, at their own paths. \`marsh context\` prints this again.`;
  return `${title}

You may start: ${may}.

## One child
Run a registered command as usual: \`${example} ARGS...\` (through its link
/run/marsh/bin/${example}) starts a child job in its own container, with your view of
the files; its output and exit status come back to you. \`marsh run ${example} ARGS...\`
does the same where the image has its own \`${example}\`. No terminal: give it
neither (\`${example} ... </dev/null | cat\`).

## Parallel private attempts
    marsh split -n ::: a ${example} "one way" ::: b ${example} "another way" | marsh join
Each branch gets its own fork of your current tree; join prints each branch's
status and patch. Apply one: \`marsh join -- sh -c 'cd "$SPLIT_ROOT" && git apply
"$SPLIT_DIR/a/diff.patch"'\`, or \`marsh merge ID a\`. From a job, argv branches
only (no -b); at most ${MAX_BRANCHES} branches, nesting ${MAX_DEPTH} deep.

## Shared-workspace parallel work
    marsh fanout ::: test make test ::: lint make lint | marsh collect
Branches run at once right here, on the same files (no fork): for commands
that only read, or write different files. collect prints each branch's
stdout (a failed one's stderr too) in order; it exits with the first failure.

## See and narrow
- \`marsh jobs --tree\`: the jobs you started, and theirs.
- Narrow what a child may start: \`MARSH_SPAWN=a,b ${example} ...\` (\`none\`: nothing),
  \`marsh run --spawn a,b ${example} ...\`, \`marsh run --no-spawn ${example} ...\`.
  Nothing widens it; a name outside the set is refused (exit 126 from a link).

## Limits (a refusal exits 125 and names the limit)
- depth ${l.depth} (a root job is 1); ${l.fan_out} live children per job, its splits' branches included;
- the same Kit at most ${l.same_kit} in a row (claude -> claude, never a third);
- ${l.total} launches per job tree; ${l.pool} jobs at once on this machine (the pool);
- wall time: a child ends when its parent's time is up, and needs 1 s left to start.

## Confinement
A child sees what its parent sees, never more; a split branch's child sees
only its fork. Network and credentials are its own Kit's. Everything a job
installs in its container is gone when the container is.

## When not to spawn
A child is a container start (seconds) and spends the tree's budget. Run a
quick command here; spawn for independent work another agent does better, or
for attempts that must not see each other.
`;
}
