/**
 * Job lineage and its listings (docs/rules.md, "Lineage"): the `lineage`
 * a job record carries (`parent`, `root`, `depth`, `spawn`, and where they
 * apply `split`, `label`, `deadline_unix_ms`, `parent_deadline`,
 * `consumes`, `fanout`; `jobs show` adds `children`), the arguments kept
 * for display (the first 16, each cut to 200 characters), and how one
 * job's fields are written (`model/job_listing.ts` draws the listings).
 *
 * Pure, importing only `model/`: the daemon and the CLI render with these
 * functions, so the text is one rule.
 *
 * @module
 */

/** Arguments a record keeps for display. */
export const MAX_LISTED_ARGS = 16;
/** Characters each kept argument is cut to. */
export const MAX_ARG_CHARS = 200;
/** Characters of the `COMMAND` column before it is cut with `…`. */
export const COMMAND_WIDTH = 64;
/** The schema of `marsh jobs --tree --json`. */
export const JOBS_TREE_SCHEMA = "marsh.jobs.tree/v1";
/** The schema of `marsh jobs --json`. */
export const JOBS_SCHEMA = "marsh.jobs/v1";

/** A job's lineage, as its record keeps it. */
export interface Lineage {
  /** `session:<id>`, `job:<id>` or `split:<id>/<label>`. */
  readonly parent: string;
  /** The root job's id. */
  readonly root: string;
  /** 1 for a root. */
  readonly depth: number;
  readonly spawn: readonly string[];
  /** For a split argv branch's job: its split and label. */
  readonly split?: string;
  readonly label?: string;
  readonly deadlineMs?: number;
  readonly parentDeadline?: boolean;
  /** A root job started by a stage after `join`: the split it consumes. */
  readonly consumes?: string;
  /** A job a `marsh fanout` branch started with no parent job: `<fanout id>/<label>`. */
  readonly fanout?: string;
}

/** `lineage` as JSON: optional fields only when they apply; `children` for `jobs show`. */
export function lineageJson(l: Lineage, children?: readonly string[]): Record<string, unknown> {
  return {
    parent: l.parent,
    root: l.root,
    depth: l.depth,
    spawn: [...l.spawn],
    ...(l.split === undefined ? {} : { split: l.split }),
    ...(l.label === undefined ? {} : { label: l.label }),
    ...(l.deadlineMs === undefined ? {} : { deadline_unix_ms: l.deadlineMs }),
    ...(l.parentDeadline === true ? { parent_deadline: true } : {}),
    ...(l.consumes === undefined ? {} : { consumes: l.consumes }),
    ...(l.fanout === undefined ? {} : { fanout: l.fanout }),
    ...(children === undefined ? {} : { children: [...children] }),
  };
}

/** The parent job's id of a lineage, or null when a session or a split started the job. */
export function parentJob(l: Pick<Lineage, "parent">): string | null {
  return l.parent.startsWith("job:") ? l.parent.slice("job:".length) : null;
}

/**
 * The arguments a record keeps: the first {@linkcode MAX_LISTED_ARGS},
 * each cut to {@linkcode MAX_ARG_CHARS} characters (code points, never
 * half of one), a lone surrogate (an argument that was not UTF-8) made
 * U+FFFD.
 */
export function cutArgs(args: readonly string[]): string[] {
  return args.slice(0, MAX_LISTED_ARGS).map((a) =>
    [...a.toWellFormed()].slice(0, MAX_ARG_CHARS).join("")
  );
}

/** One job as the listings show it. */
export interface ListedJob {
  readonly id: string;
  readonly sessionId: string;
  /** The registered name it ran as (also the Kit `workers reset` takes). */
  readonly command: string;
  readonly args: readonly string[];
  readonly state: string;
  readonly cleanup: string;
  readonly exitCode: number | null;
  readonly createdMs: number;
  /** When its Kit VM was ready and it started; null before. */
  readonly startedMs: number | null;
  readonly finishedMs: number | null;
  readonly lineage: Lineage;
}

/** `Ns ago`, `Nm ago`, `Nh ago` or `Nd ago`, whole units, rounded down. */
export function startedAgo(createdMs: number, nowMs: number): string {
  const s = Math.max(0, Math.floor((nowMs - createdMs) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ago`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ago`;
  return `${Math.floor(s / 86_400)}d ago`;
}

/** A run time: `12.3s` under a minute, `2m13s` under an hour, else `1h05m` (rounded down). */
export function runTime(ms: number): string {
  const tenths = Math.max(0, Math.floor(ms / 100));
  if (tenths < 600) return `${Math.floor(tenths / 10)}.${tenths % 10}s`;
  const s = Math.floor(tenths / 10);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, "0")}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor(s / 60) % 60).padStart(2, "0")}m`;
}

/** An argument as a POSIX shell reads it back: bare when safe, else single-quoted. */
export function shellQuote(arg: string): string {
  if (/^[A-Za-z0-9_@%+=:,./-]+$/.test(arg)) return arg;
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/** `text` cut to {@linkcode COMMAND_WIDTH} characters, the last one `…` when cut. */
export function cutColumn(text: string): string {
  const chars = [...text];
  return chars.length <= COMMAND_WIDTH ? text : `${chars.slice(0, COMMAND_WIDTH - 1).join("")}…`;
}

/** `command arg...`, each argument shell-quoted, cut to {@linkcode COMMAND_WIDTH} characters with `…`. */
export function commandText(command: string, args: readonly string[]): string {
  return cutColumn(commandLine(command, args));
}

/** `command arg...`, each argument shell-quoted, whole. */
export function commandLine(command: string, args: readonly string[]): string {
  return [command, ...args.map(shellQuote)].join(" ");
}

/** One job of `marsh.jobs/v1`. */
export function jobJson(j: ListedJob): Record<string, unknown> {
  return {
    job_id: j.id,
    session_id: j.sessionId,
    command: j.command,
    args: [...j.args],
    state: j.state,
    cleanup: j.cleanup,
    exit_code: j.exitCode,
    created_unix_ms: j.createdMs,
    started_unix_ms: j.startedMs,
    finished_unix_ms: j.finishedMs,
    lineage: lineageJson(j.lineage),
  };
}

/** `marsh status`'s `processes` (docs/rules.md, "Lineage"). */
export interface ProcessCounts {
  /** Jobs queued or running now. */
  readonly running: number;
  /** Launches refused since the journal was made. */
  readonly refused: number;
  /** Slots held by jobs whose end is unknown, until `marsh workers reset KIT`. */
  readonly held: number;
}

/** `processes: N running, N refused, N held`, `marsh status`'s text line. */
export function processesText(p: ProcessCounts): string {
  return `processes: ${p.running} running, ${p.refused} refused, ${p.held} held`;
}
