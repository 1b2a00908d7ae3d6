/**
 * `marsh jobs` as it prints (docs/rules.md, "Lineage"): the text listing,
 * flat (`PARENT`) or drawn as a tree (`--tree`), the `marsh.jobs/v1` and
 * `marsh.jobs.tree/v1` documents, and `marsh jobs show`.
 *
 * Pure, importing only `model/`: the daemon renders with these functions,
 * so each format is one rule.
 *
 * @module
 */

import {
  childrenOf,
  type FanoutNode,
  fanoutRunning,
  type ForestNode,
  type JobNode,
  type JobsScope,
  nodeCreated,
  nodeSession,
  scopeTrees,
} from "./job_forest.ts";
import {
  commandLine,
  commandText,
  cutColumn,
  jobJson,
  JOBS_SCHEMA,
  JOBS_TREE_SCHEMA,
  lineageJson,
  type ListedJob,
  parentJob,
  runTime,
  startedAgo,
} from "./job_lineage.ts";

/** One line of the listing before its columns are padded. */
interface Row {
  readonly cells: readonly string[];
  /** Written after the command: an uncertain cleanup's reset. */
  readonly note: string;
}

/** A split's state in the listing's words. */
const SPLIT_WORDS: Readonly<Record<string, string>> = { run: "running", await: "awaiting" };
/** A shell branch's state in job words. */
const BRANCH_WORDS: Readonly<Record<string, string>> = {
  pending: "queued",
  captured: "finished",
  uncertain: "unknown",
};

/** The `PARENT` column: a branch's job shows its split, a child its parent job, a root `-`. */
function parentColumn(j: ListedJob): string {
  if (j.lineage.split !== undefined) return j.lineage.split.slice(0, 8);
  const p = parentJob(j.lineage);
  if (p !== null) return p.slice(0, 8);
  if (j.lineage.parent.startsWith("split:")) return j.lineage.parent.slice(6, 14);
  return "-";
}

function runOf(startMs: number | null, endMs: number | null, nowMs: number): string {
  return startMs === null ? "-" : runTime((endMs ?? nowMs) - startMs);
}

/** A job's run time: to now while it runs; `-` before it started or when its end is unknown. */
function jobRun(j: ListedJob, nowMs: number): string {
  const live = j.state === "queued" || j.state === "running";
  return j.finishedMs === null && !live ? "-" : runOf(j.startedMs, j.finishedMs, nowMs);
}

/** A job's row: `label` for an argv or fanout branch's job (`LABEL: COMMAND`). */
function jobRow(
  j: ListedJob,
  nowMs: number,
  glyph: string,
  opts: { readonly label?: string; readonly parent?: boolean },
): Row {
  const command = commandText(j.command, j.args);
  return {
    cells: [
      j.id.slice(0, 8),
      startedAgo(j.createdMs, nowMs),
      j.state,
      j.exitCode === null ? "-" : String(j.exitCode),
      jobRun(j, nowMs),
      ...(opts.parent === true ? [parentColumn(j)] : []),
      `${glyph}${opts.label === undefined ? command : `${opts.label}: ${command}`}`,
    ],
    note: (j.lineage.consumes === undefined ? "" : `  (consumes split ${j.lineage.consumes})`) +
      (j.cleanup === "uncertain"
        ? `  cleanup uncertain (run marsh workers reset ${j.command})`
        : ""),
  };
}

/** A script on one line: each line break as the `; ` it usually means. */
function oneLine(script: string): string {
  return script.trim().replace(/\s*[\r\n]+\s*/g, "; ");
}

/** What a tree row draws for a node, and the nodes under it (with their labels). */
function treeRow(
  n: ForestNode,
  label: string | undefined,
  nowMs: number,
  glyph: string,
): { row: Row; kids: { n: ForestNode; label?: string }[] } {
  switch (n.node) {
    case "job":
      return {
        row: jobRow(n.job, nowMs, glyph, label === undefined ? {} : { label }),
        kids: n.children.map((c) => ({ n: c })),
      };
    case "split": {
      const s = n.split;
      // All branches captured ends the run; a split that ended otherwise has no run time.
      const run = s.finishedMs !== null || s.state === "run"
        ? runOf(s.createdMs, s.finishedMs, nowMs)
        : "-";
      return {
        row: {
          cells: [
            s.id.slice(0, 8),
            startedAgo(s.createdMs, nowMs),
            s.state === null ? "unknown" : SPLIT_WORDS[s.state] ?? s.state,
            s.status === null ? "-" : String(s.status),
            run,
            `${glyph}${cutColumn(`split (${s.branches.map((b) => b.label).join(", ")})`)}`,
          ],
          note: "",
        },
        kids: n.children.map((c) => ({ n: c })),
      };
    }
    case "branch": {
      const b = n.branch;
      if (n.job !== null) {
        return {
          row: jobRow(n.job.job, nowMs, glyph, { label: b.label }),
          kids: [...n.job.children, ...n.children].map((c) => ({ n: c })),
        };
      }
      const started = b.startedMs ?? n.split.createdMs;
      return {
        row: {
          cells: [
            `${n.split.id.slice(0, 8)}/${b.label}`,
            startedAgo(started, nowMs),
            b.state === null ? "unknown" : BRANCH_WORDS[b.state] ?? b.state,
            b.exitCode === null ? "-" : String(b.exitCode),
            runOf(b.startedMs, b.finishedMs, nowMs),
            `${glyph}${b.label}: ${cutColumn(oneLine(b.command))}`,
          ],
          note: "",
        },
        kids: n.children.map((c) => ({ n: c })),
      };
    }
    case "fanout": {
      const f = fanoutFields(n);
      return {
        row: {
          cells: [
            n.id.slice(0, 8),
            startedAgo(f.createdMs, nowMs),
            f.state,
            f.status === null ? "-" : String(f.status),
            runOf(f.createdMs, f.finishedMs, nowMs),
            `${glyph}${cutColumn(`fanout (${n.branches.map((b) => b.label).join(", ")})`)}`,
          ],
          note: "",
        },
        kids: n.branches.map((b) => ({ n: b.job, label: b.label })),
      };
    }
  }
}

/** A fanout's state, status and times, from its jobs. */
function fanoutFields(n: FanoutNode) {
  const jobs = n.branches.map((b) => b.job.job);
  const running = fanoutRunning(n);
  const ends = jobs.map((j) => j.finishedMs);
  return {
    state: running ? "running" : "finished",
    status: running ? null : jobs.map((j) => j.exitCode ?? 0).find((c) => c !== 0) ?? 0,
    createdMs: Math.min(...jobs.map((j) => j.createdMs)),
    finishedMs: running || ends.some((e) => e === null) ? null : Math.max(...(ends as number[])),
  };
}

/** Every job of the trees, in pre-order (a branch's job where its branch is). */
export function jobsOf(trees: readonly ForestNode[]): ListedJob[] {
  const out: ListedJob[] = [];
  const seen = new Set<string>();
  const walk = (n: ForestNode) => {
    if (n.node === "job") {
      if (seen.has(n.job.id)) return;
      seen.add(n.job.id);
      out.push(n.job);
    }
    childrenOf(n).forEach(walk);
  };
  trees.forEach(walk);
  return out;
}

function hasJob(n: ForestNode): boolean {
  return n.node === "job" || childrenOf(n).some(hasJob);
}

/** The rows padded into columns two spaces apart, the last column unpadded. */
function columns(rows: readonly Row[]): string {
  const widths = rows[0]!.cells.map((_, c) =>
    Math.max(...rows.map((r) => [...(r.cells[c] ?? "")].length))
  );
  return rows.map((r) =>
    r.cells.map((cell, c) =>
      c === r.cells.length - 1 ? cell : cell + " ".repeat(widths[c]! - [...cell].length)
    ).join("  ") + r.note + "\n"
  ).join("");
}

/**
 * `marsh jobs [--tree] [--all]` as text: a header `ID STARTED STATE EXIT
 * RUN PARENT COMMAND` and one row per job (`--tree`: without `PARENT`, a
 * row per split, branch and fanout too, each drawn under its parent with
 * `├─ `, `└─ ` and `│  `), then the scoped-out trees' line. Empty: `no
 * jobs in this session` for a session, else `no jobs recorded`.
 */
export function formatJobsText(
  roots: readonly ForestNode[],
  scope: JobsScope,
  nowMs: number,
  options: { readonly tree?: boolean } = {},
): string {
  const tree = options.tree === true;
  const { trees, hidden } = scopeTrees(tree ? roots : roots.filter(hasJob), scope, nowMs);
  const tail = hidden === 0
    ? ""
    : `(${hidden} older job trees not shown; marsh jobs${
      tree ? " --tree" : ""
    } --all lists every job)\n`;
  const header = ["ID", "STARTED", "STATE", "EXIT", "RUN", ...(tree ? [] : ["PARENT"]), "COMMAND"];
  const rows: Row[] = [{ cells: header, note: "" }];
  if (tree) {
    const seen = new Set<ForestNode>();
    const walk = (n: ForestNode, label: string | undefined, glyph: string, under: string) => {
      if (seen.has(n)) return;
      seen.add(n);
      const { row, kids } = treeRow(n, label, nowMs, glyph);
      rows.push(row);
      kids.forEach((k, i) => {
        const last = i === kids.length - 1;
        walk(k.n, k.label, `${under}${last ? "└─ " : "├─ "}`, `${under}${last ? "   " : "│  "}`);
      });
    };
    for (const t of trees) walk(t, undefined, "", "");
  } else {
    for (const j of jobsOf(trees)) rows.push(jobRow(j, nowMs, "", { parent: true }));
  }
  if (rows.length === 1) {
    return (scope.kind === "session" ? "no jobs in this session\n" : "no jobs recorded\n") + tail;
  }
  return columns(rows) + tail;
}

/**
 * `marsh jobs --json`: `{"schema": "marsh.jobs/v1", "jobs": [...]}`, every
 * job of the trees given (not scoped by session or age) in the text
 * listing's order.
 */
export function jobsDocument(roots: readonly ForestNode[]): Record<string, unknown> {
  return {
    schema: JOBS_SCHEMA,
    jobs: jobsOf(scopeTrees(roots, { kind: "all" }, 0).trees).map((j) => jobJson(j)),
  };
}

/** A job node of `marsh.jobs.tree/v1`: the listing's job without its start time. */
function jobNodeJson(n: JobNode, seen: Set<ForestNode>): Record<string, unknown> {
  const { started_unix_ms: _started, ...job } = jobJson(n.job);
  return { node: "job", ...job, children: nodesJson(n.children, seen) };
}

function nodesJson(nodes: readonly ForestNode[], seen: Set<ForestNode>): Record<string, unknown>[] {
  const out: Record<string, unknown>[] = [];
  for (const n of nodes) {
    if (seen.has(n)) continue;
    seen.add(n);
    out.push(nodeJson(n, seen));
  }
  return out;
}

function nodeJson(n: ForestNode, seen: Set<ForestNode>): Record<string, unknown> {
  switch (n.node) {
    case "job":
      return jobNodeJson(n, seen);
    case "split": {
      const s = n.split;
      return {
        node: "split",
        split_id: s.id,
        session_id: s.sessionId,
        state: s.state,
        status: s.status,
        created_unix_ms: s.createdMs,
        finished_unix_ms: s.finishedMs,
        parent: s.parent === null ? null : { split: s.parent.split, label: s.parent.label },
        timing_ms: { ...s.timing },
        children: nodesJson(n.children, seen),
      };
    }
    case "branch": {
      const b = n.branch;
      return {
        node: "branch",
        split_id: n.split.id,
        label: b.label,
        kind: b.kind,
        command: b.command,
        state: b.state,
        status: b.status,
        exit_code: b.exitCode,
        job_id: n.job?.job.id ?? b.jobId,
        files: b.files,
        created_unix_ms: b.createdMs,
        finished_unix_ms: b.finishedMs,
        children: nodesJson(n.job === null ? n.children : [n.job, ...n.children], seen),
      };
    }
    case "fanout": {
      const f = fanoutFields(n);
      return {
        node: "fanout",
        fanout_id: n.id,
        session_id: nodeSession(n),
        state: f.state,
        status: f.status,
        created_unix_ms: f.createdMs,
        finished_unix_ms: f.finishedMs,
        children: n.branches.map((b) => ({
          node: "branch",
          fanout_id: n.id,
          label: b.label,
          kind: "argv",
          job_id: b.job.job.id,
          state: b.job.job.state,
          children: nodesJson([b.job], seen),
        })),
      };
    }
  }
}

/**
 * `marsh jobs --tree --json`: `{"schema": "marsh.jobs.tree/v1", "jobs":
 * [NODE]}`, every tree given (not scoped), roots newest first; job, split,
 * branch and fanout nodes with their children in launch order.
 */
export function jobsTreeDocument(roots: readonly ForestNode[]): Record<string, unknown> {
  const newest = [...roots].sort((a, b) => nodeCreated(b) - nodeCreated(a));
  return { schema: JOBS_TREE_SCHEMA, jobs: nodesJson(newest, new Set()) };
}

/** The jobs directly under a job: its own children and its splits' branch jobs, in launch order. */
export function childJobs(n: JobNode): ListedJob[] {
  const out: ListedJob[] = [];
  const seen = new Set<ForestNode>();
  const walk = (m: ForestNode) => {
    if (seen.has(m)) return;
    seen.add(m);
    if (m.node === "job") out.push(m.job);
    else childrenOf(m).forEach(walk);
  };
  n.children.forEach(walk);
  return out;
}

/** What `marsh jobs show` adds to the listing's fields: the record's status words and container. */
export interface ShownJob {
  readonly status: string | null;
  readonly container: string | null;
}

/**
 * `marsh jobs show JOB --json`: the `marsh.jobs/v1` job with its status
 * words and container, and `children` (child job ids) in its lineage.
 */
export function jobShowJson(n: JobNode, shown: ShownJob): Record<string, unknown> {
  const j = n.job;
  return {
    ...jobJson(j),
    status: shown.status,
    container: shown.container,
    lineage: lineageJson(j.lineage, childJobs(n).map((c) => c.id)),
  };
}

/**
 * `marsh jobs show JOB` as text: one `key: value` line each for the job,
 * its command, state, status, exit, cleanup, start, run time, then its
 * lineage (`parent`, `root`, `depth`, `spawn`, `split` when a split's
 * branch started it) and `children`.
 */
export function formatJobShow(n: JobNode, shown: ShownJob, nowMs: number): string {
  const j = n.job;
  const l = j.lineage;
  const children = childJobs(n).map((c) => c.id);
  const lines: [string, string][] = [
    ["job", j.id],
    ["command", commandLine(j.command, j.args)],
    ["state", j.state],
    ["status", shown.status ?? "-"],
    ["exit", j.exitCode === null ? "-" : String(j.exitCode)],
    [
      "cleanup",
      j.cleanup === "uncertain" ? `uncertain (run marsh workers reset ${j.command})` : j.cleanup,
    ],
    ["started", startedAgo(j.createdMs, nowMs)],
    ["run", jobRun(j, nowMs)],
    ["parent", l.parent],
    ["root", l.root],
    ["depth", String(l.depth)],
    ["spawn", l.spawn.length === 0 ? "-" : l.spawn.join(" ")],
    ...(l.split === undefined
      ? []
      : [["split", `${l.split}/${l.label ?? "-"}`] as [string, string]]),
    ...(l.fanout === undefined ? [] : [["fanout", l.fanout] as [string, string]]),
    ...(l.consumes === undefined ? [] : [["consumes", l.consumes] as [string, string]]),
    ["children", children.length === 0 ? "-" : children.join(" ")],
  ];
  const width = Math.max(...lines.map(([k]) => k.length)) + 1;
  return lines.map(([k, v]) => `${`${k}:`.padEnd(width)}  ${v}\n`).join("");
}
