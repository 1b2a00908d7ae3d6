/**
 * Job lineage and its listings (docs/rules.md, "Lineage"): the `lineage`
 * a job record carries (`parent`, `root`, `depth`, `spawn`, and where they
 * apply `split`, `label`, `deadline_unix_ms`, `parent_deadline`,
 * `consumes`, `fanout`; `jobs show` adds `children`), the arguments kept
 * for display (the first 16, each cut to 200 characters), and the two
 * forms of `marsh jobs`: the text listing and the `marsh.jobs/v1`
 * document.
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
/** Trees a host listing shows besides the running ones and those of the last hour. */
export const HOST_NEWEST_TREES = 5;
/** How recent a tree a host listing shows, in ms. */
export const HOST_RECENT_MS = 3_600_000;

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

/** Whether a job is still to run or running: its tree is listed first. */
function active(j: ListedJob): boolean {
  return j.state === "queued" || j.state === "running";
}

/** A display tree: its top job, and every listed job under it in pre-order with its tree glyphs. */
interface DisplayTree {
  readonly top: ListedJob;
  readonly jobs: readonly ListedJob[];
  /** Per job of `jobs`, what `--tree` draws before its command: `""`, `├─ `, `│  └─ `, ... */
  readonly glyphs: readonly string[];
  /** Per job of `jobs`, its listed children in launch order. */
  readonly children: ReadonlyMap<string, readonly ListedJob[]>;
}

function byLaunch(a: ListedJob, b: ListedJob): number {
  return a.createdMs - b.createdMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
}

/**
 * The listed jobs as trees: a job whose parent job is not listed tops its
 * own; each tree's jobs in pre-order, children in launch order. Trees
 * holding a queued or running job first, then the newest top first.
 */
function displayTrees(jobs: readonly ListedJob[]): DisplayTree[] {
  const ids = new Set(jobs.map((j) => j.id));
  const children = new Map<string, ListedJob[]>();
  const tops: ListedJob[] = [];
  for (const j of [...jobs].sort(byLaunch)) {
    const p = parentJob(j.lineage);
    if (p === null || !ids.has(p) || p === j.id) tops.push(j);
    else children.set(p, [...(children.get(p) ?? []), j]);
  }
  const trees = tops.map((top) => {
    const out: ListedJob[] = [];
    const glyphs: string[] = [];
    const walk = (j: ListedJob, glyph: string, under: string) => {
      out.push(j);
      glyphs.push(glyph);
      const kids = children.get(j.id) ?? [];
      kids.forEach((c, i) => {
        const last = i === kids.length - 1;
        walk(c, `${under}${last ? "└─ " : "├─ "}`, `${under}${last ? "   " : "│  "}`);
      });
    };
    walk(top, "", "");
    return { top, jobs: out, glyphs, children };
  });
  return trees.sort((a, b) =>
    Number(b.jobs.some(active)) - Number(a.jobs.some(active)) ||
    b.top.createdMs - a.top.createdMs || (a.top.id < b.top.id ? -1 : 1)
  );
}

/** Who lists: a session (its own trees), the host terminal, or `--all`. */
export type JobsScope =
  | { readonly kind: "session"; readonly session: string }
  | { readonly kind: "host" }
  | { readonly kind: "all" };

/**
 * The jobs a text listing shows, in order, and how many older trees the
 * scope left out. A session sees the trees rooted in it; the host the
 * running trees, those started in the last hour and the five newest;
 * `all` every tree.
 */
export function scopedJobs(
  jobs: readonly ListedJob[],
  scope: JobsScope,
  nowMs: number,
): {
  readonly jobs: readonly ListedJob[];
  readonly glyphs: readonly string[];
  readonly hidden: number;
} {
  const trees = displayTrees(jobs);
  let shown: DisplayTree[];
  if (scope.kind === "all") shown = trees;
  else if (scope.kind === "session") {
    shown = trees.filter((t) => t.top.sessionId === scope.session);
  } else {
    const newest = new Set(
      [...trees].sort((a, b) => b.top.createdMs - a.top.createdMs).slice(0, HOST_NEWEST_TREES),
    );
    shown = trees.filter((t) =>
      newest.has(t) || t.jobs.some(active) || nowMs - t.top.createdMs < HOST_RECENT_MS
    );
  }
  return {
    jobs: shown.flatMap((t) => t.jobs),
    glyphs: shown.flatMap((t) => t.glyphs),
    hidden: scope.kind === "host" ? trees.length - shown.length : 0,
  };
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

/** `command arg...`, each argument shell-quoted, cut to {@linkcode COMMAND_WIDTH} characters with `…`. */
export function commandText(command: string, args: readonly string[]): string {
  const text = [command, ...args.map(shellQuote)].join(" ");
  const chars = [...text];
  return chars.length <= COMMAND_WIDTH ? text : `${chars.slice(0, COMMAND_WIDTH - 1).join("")}…`;
}

/** The `PARENT` column: a branch's job shows its split, a child its parent job, a root `-`. */
function parentColumn(j: ListedJob): string {
  if (j.lineage.split !== undefined) return j.lineage.split.slice(0, 8);
  const p = parentJob(j.lineage);
  return p === null ? "-" : p.slice(0, 8);
}

/**
 * `marsh jobs [--tree] [--all]` as text (docs/rules.md, "Lineage"): a
 * header `ID STARTED STATE EXIT RUN PARENT COMMAND` (`--tree`: without
 * `PARENT`, children drawn under their parent with `├─ `, `└─ ` and `│  `
 * before the command), one line per job in tree order, columns two spaces
 * apart, an uncertain cleanup's reset after the command; then the
 * scoped-out trees' line. Empty: `no jobs in this session` for a session,
 * else `no jobs recorded`.
 */
export function formatJobsText(
  jobs: readonly ListedJob[],
  scope: JobsScope,
  nowMs: number,
  options: { readonly tree?: boolean } = {},
): string {
  const tree = options.tree === true;
  const { jobs: shown, glyphs, hidden } = scopedJobs(jobs, scope, nowMs);
  const tail = hidden === 0
    ? ""
    : `(${hidden} older job trees not shown; marsh jobs${
      tree ? " --tree" : ""
    } --all lists every job)\n`;
  if (shown.length === 0) {
    return (scope.kind === "session" ? "no jobs in this session\n" : "no jobs recorded\n") + tail;
  }
  const header = ["ID", "STARTED", "STATE", "EXIT", "RUN", ...(tree ? [] : ["PARENT"]), "COMMAND"];
  const rows = [header];
  const notes: string[] = [""];
  shown.forEach((j, i) => {
    rows.push([
      j.id.slice(0, 8),
      startedAgo(j.createdMs, nowMs),
      j.state,
      j.exitCode === null ? "-" : String(j.exitCode),
      j.startedMs === null ? "-" : runTime((j.finishedMs ?? nowMs) - j.startedMs),
      ...(tree ? [] : [parentColumn(j)]),
      `${tree ? glyphs[i] : ""}${commandText(j.command, j.args)}`,
    ]);
    notes.push(
      j.cleanup === "uncertain" ? `  cleanup uncertain (run marsh workers reset ${j.command})` : "",
    );
  });
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => [...r[c]!].length)));
  const lines = rows.map((r, i) =>
    r.map((cell, c) => c === r.length - 1 ? cell : cell + " ".repeat(widths[c]! - [...cell].length))
      .join("  ") + notes[i]
  );
  return `${lines.join("\n")}\n${tail}`;
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

/**
 * `marsh jobs --json`: `{"schema": "marsh.jobs/v1", "jobs": [...]}`, every
 * job given (not scoped by session or age) in the text listing's order.
 */
export function jobsDocument(jobs: readonly ListedJob[]): Record<string, unknown> {
  return {
    schema: JOBS_SCHEMA,
    jobs: displayTrees(jobs).flatMap((t) => t.jobs).map(jobJson),
  };
}

/**
 * `marsh jobs --tree --json` for job nodes: `{"schema":
 * "marsh.jobs.tree/v1", "jobs": [NODE]}`, every tree (not scoped), roots
 * newest first, each job `{"node": "job", job_id, session_id, command,
 * args, state, cleanup, exit_code, created_unix_ms, finished_unix_ms,
 * lineage, children}` with its children in launch order.
 */
export function jobsTreeDocument(jobs: readonly ListedJob[]): Record<string, unknown> {
  const trees = displayTrees(jobs).sort((a, b) =>
    b.top.createdMs - a.top.createdMs || (a.top.id < b.top.id ? -1 : 1)
  );
  const node = (t: DisplayTree, j: ListedJob): Record<string, unknown> => {
    // A tree node is the listing's job without its start time.
    const { started_unix_ms: _started, ...job } = jobJson(j);
    return {
      node: "job",
      ...job,
      children: (t.children.get(j.id) ?? []).map((c) => node(t, c)),
    };
  };
  return { schema: JOBS_TREE_SCHEMA, jobs: trees.map((t) => node(t, t.top)) };
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
