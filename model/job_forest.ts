/**
 * The job forest `marsh jobs` draws (docs/rules.md, "Lineage"): jobs,
 * splits, their branches and fanouts as one forest, and which of its trees
 * a listing shows.
 *
 * - A split a session (or the host) made is a root; its children are its
 *   branches in declaration order. A job's own split sits under that job.
 * - An argv branch's child is its job; a shell branch's children are the
 *   jobs its shell started (`lineage.parent = split:<id>/<label>`) and the
 *   splits it made.
 * - A job's children are the jobs it started and the splits it made, in
 *   launch order.
 * - Jobs with `lineage.fanout` and no parent job are grouped under one
 *   fanout node at the first one's place (display only).
 * - A split the journal no longer holds is drawn from its jobs' lineage,
 *   its state unknown (null).
 *
 * Pure, importing only `model/`.
 *
 * @module
 */

import { commandLine, type ListedJob, parentJob } from "./job_lineage.ts";

/** Trees a host listing shows besides the running ones and those of the last hour. */
export const HOST_NEWEST_TREES = 5;
/** How recent a tree a host listing shows, in ms. */
export const HOST_RECENT_MS = 3_600_000;

/** One branch of a listed split. */
export interface ListedBranch {
  readonly label: string;
  readonly kind: "shell" | "argv";
  /** A shell branch's script, or an argv branch's argv as one shell-quoted line. */
  readonly command: string;
  /** `pending`, `running`, `captured`, ...; null for a split the journal forgot. */
  readonly state: string | null;
  readonly status: string | null;
  readonly exitCode: number | null;
  /** An argv branch's job. */
  readonly jobId: string | null;
  readonly files: number;
  readonly createdMs: number;
  readonly startedMs: number | null;
  readonly finishedMs: number | null;
}

/** A split as the forest draws it. */
export interface ListedSplit {
  readonly id: string;
  /** The session that made it (`host` for the host). */
  readonly sessionId: string;
  /** The job that made it, for a job's own split. */
  readonly creatorJob: string | null;
  /** The branch that made it, for a split made in a branch. */
  readonly parent: { readonly split: string; readonly label: string } | null;
  /** `run`, `await`, `joined`, `kept`, `cancelled`, `uncertain`; null when forgotten. */
  readonly state: string | null;
  readonly status: number | null;
  readonly createdMs: number;
  readonly finishedMs: number | null;
  readonly timing: Readonly<Record<string, number>>;
  /** In declaration order. */
  readonly branches: readonly ListedBranch[];
}

/** A job in the forest, with what it started. */
export interface JobNode {
  readonly node: "job";
  readonly job: ListedJob;
  readonly children: ForestNode[];
}

/** A branch of a split; an argv branch's `job` is its job's node. */
export interface BranchNode {
  readonly node: "branch";
  readonly split: ListedSplit;
  readonly branch: ListedBranch;
  readonly job: JobNode | null;
  /** A shell branch's jobs and splits (an argv branch's are its job's). */
  readonly children: ForestNode[];
}

/** A split and its branches. */
export interface SplitNode {
  readonly node: "split";
  readonly split: ListedSplit;
  readonly children: BranchNode[];
}

/** A `marsh fanout`: its branches' jobs, grouped for display. */
export interface FanoutNode {
  readonly node: "fanout";
  readonly id: string;
  readonly branches: { readonly label: string; readonly job: JobNode }[];
}

/** A node of the forest. */
export type ForestNode = JobNode | SplitNode | BranchNode | FanoutNode;

/** The `split:<id>/<label>` of a lineage's parent, or null. */
function parentBranch(parent: string): { split: string; label: string } | null {
  if (!parent.startsWith("split:")) return null;
  const rest = parent.slice("split:".length);
  const slash = rest.indexOf("/");
  return slash < 0 ? null : { split: rest.slice(0, slash), label: rest.slice(slash + 1) };
}

/** When a node began: its order among its siblings. */
export function nodeCreated(n: ForestNode): number {
  switch (n.node) {
    case "job":
      return n.job.createdMs;
    case "split":
      return n.split.createdMs;
    case "branch":
      return n.branch.createdMs;
    case "fanout":
      return Math.min(...n.branches.map((b) => b.job.job.createdMs));
  }
}

/** A stable id for ordering ties. */
function nodeId(n: ForestNode): string {
  switch (n.node) {
    case "job":
      return n.job.id;
    case "split":
      return n.split.id;
    case "branch":
      return `${n.split.id}/${n.branch.label}`;
    case "fanout":
      return n.id;
  }
}

function byLaunch(a: ForestNode, b: ForestNode): number {
  const d = nodeCreated(a) - nodeCreated(b);
  if (d !== 0) return d;
  const x = nodeId(a), y = nodeId(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/** The session a tree belongs to. */
export function nodeSession(n: ForestNode): string {
  switch (n.node) {
    case "job":
      return n.job.sessionId;
    case "split":
    case "branch":
      return n.split.sessionId;
    case "fanout":
      return n.branches[0]!.job.job.sessionId;
  }
}

function jobActive(j: ListedJob): boolean {
  return j.state === "queued" || j.state === "running";
}

/** Whether a fanout still runs: one of its jobs does. */
export function fanoutRunning(n: FanoutNode): boolean {
  return n.branches.some((b) => jobActive(b.job.job));
}

/** Whether anything in a tree is queued or running: such trees are listed first. */
export function treeActive(n: ForestNode): boolean {
  switch (n.node) {
    case "job":
      return jobActive(n.job) || n.children.some(treeActive);
    case "split":
      return n.split.state === "run" || n.children.some(treeActive);
    case "branch":
      return n.branch.state === "pending" || n.branch.state === "running" ||
        (n.job !== null && treeActive(n.job)) || n.children.some(treeActive);
    case "fanout":
      return n.branches.some((b) => treeActive(b.job));
  }
}

/** The splits the journal no longer holds, drawn from their jobs' lineage. */
function forgottenSplits(jobs: readonly ListedJob[], known: ReadonlySet<string>): ListedSplit[] {
  const byId = new Map<string, ListedJob[]>();
  for (const j of jobs) {
    const s = j.lineage.split;
    if (s === undefined || known.has(s)) continue;
    byId.set(s, [...(byId.get(s) ?? []), j]);
  }
  return [...byId].map(([id, js]) => {
    const first = js[0]!;
    return {
      id,
      sessionId: first.sessionId,
      creatorJob: parentJob(first.lineage),
      parent: null,
      state: null,
      status: null,
      createdMs: Math.min(...js.map((j) => j.createdMs)),
      finishedMs: null,
      timing: {},
      branches: js.map((j) => ({
        label: j.lineage.label ?? j.id,
        kind: "argv" as const,
        command: commandLine(j.command, j.args),
        state: null,
        status: null,
        exitCode: j.exitCode,
        jobId: j.id,
        files: 0,
        createdMs: j.createdMs,
        startedMs: j.startedMs,
        finishedMs: j.finishedMs,
      })),
    };
  });
}

/** Groups the fanout jobs among `nodes` under one fanout node each, at the first one's place. */
function groupFanouts(nodes: ForestNode[]): ForestNode[] {
  const out: ForestNode[] = [];
  const groups = new Map<string, FanoutNode>();
  for (const n of nodes) {
    const f = n.node === "job" ? n.job.lineage.fanout : undefined;
    if (n.node !== "job" || f === undefined || parentJob(n.job.lineage) !== null) {
      out.push(n);
      continue;
    }
    const slash = f.indexOf("/");
    const id = slash < 0 ? f : f.slice(0, slash);
    const label = slash < 0 ? n.job.id : f.slice(slash + 1);
    let g = groups.get(id);
    if (g === undefined) {
      g = { node: "fanout", id, branches: [] };
      groups.set(id, g);
      out.push(g);
    }
    g.branches.push({ label, job: n });
  }
  return out;
}

/**
 * The forest of `jobs` and `splits`: its roots in launch order (callers
 * order them), every node's children in launch order, fanouts grouped. A
 * record that would make a cycle is drawn once, as a root.
 */
export function buildForest(
  jobs: readonly ListedJob[],
  splits: readonly ListedSplit[],
): ForestNode[] {
  const all = [...splits, ...forgottenSplits(jobs, new Set(splits.map((s) => s.id)))];
  const jobNodes = new Map<string, JobNode>();
  for (const j of jobs) jobNodes.set(j.id, { node: "job", job: j, children: [] });
  const branchNodes = new Map<string, BranchNode>();
  const splitNodes: SplitNode[] = [];
  const claimed = new Set<string>();
  const branchJobs = new Map<string, ListedJob>();
  for (const j of jobs) {
    const { split, label } = j.lineage;
    const key = `${split}/${label}`;
    if (split !== undefined && label !== undefined && !branchJobs.has(key)) branchJobs.set(key, j);
  }
  for (const s of all) {
    const children = s.branches.map((b): BranchNode => {
      const job = branchJobs.get(`${s.id}/${b.label}`) ??
        (b.jobId === null ? undefined : jobNodes.get(b.jobId)?.job);
      if (job !== undefined) claimed.add(job.id);
      const node: BranchNode = {
        node: "branch",
        split: s,
        branch: b,
        job: job === undefined ? null : jobNodes.get(job.id)!,
        children: [],
      };
      branchNodes.set(`${s.id}/${b.label}`, node);
      return node;
    });
    splitNodes.push({ node: "split", split: s, children });
  }
  // Each node's container: a job, a branch, or the roots.
  const roots: ForestNode[] = [];
  const place = (n: ForestNode, under: JobNode | BranchNode | null) =>
    (under === null ? roots : under.children).push(n);
  for (const n of jobNodes.values()) {
    if (claimed.has(n.job.id)) continue;
    const p = parentJob(n.job.lineage);
    const pb = parentBranch(n.job.lineage.parent);
    if (p !== null && p !== n.job.id && jobNodes.has(p)) place(n, jobNodes.get(p)!);
    else if (pb !== null && branchNodes.has(`${pb.split}/${pb.label}`)) {
      place(n, branchNodes.get(`${pb.split}/${pb.label}`)!);
    } else place(n, null);
  }
  for (const n of splitNodes) {
    const s = n.split;
    if (s.creatorJob !== null && jobNodes.has(s.creatorJob)) place(n, jobNodes.get(s.creatorJob)!);
    else if (s.parent !== null && branchNodes.has(`${s.parent.split}/${s.parent.label}`)) {
      place(n, branchNodes.get(`${s.parent.split}/${s.parent.label}`)!);
    } else place(n, null);
  }
  const containers: (JobNode | BranchNode)[] = [...jobNodes.values(), ...branchNodes.values()];
  for (const c of containers) {
    c.children.sort(byLaunch);
    const grouped = groupFanouts(c.children);
    c.children.splice(0, c.children.length, ...grouped);
  }
  return breakCycles(
    groupFanouts(roots.sort(byLaunch)),
    [...jobNodes.values(), ...splitNodes],
    containers,
  );
}

/** The children a walk descends into: an argv branch's job stands for its branch. */
export function childrenOf(n: ForestNode): readonly ForestNode[] {
  switch (n.node) {
    case "job":
    case "split":
      return n.children;
    case "branch":
      return n.job === null ? n.children : [n.job, ...n.children];
    case "fanout":
      return n.branches.map((b) => b.job);
  }
}

/**
 * Adds as roots the nodes no root reaches (records that point at each
 * other, which admission never writes), cutting the edges into them, so
 * every job is listed once and every walk ends.
 */
function breakCycles(
  roots: ForestNode[],
  nodes: readonly (JobNode | SplitNode)[],
  containers: readonly (JobNode | BranchNode)[],
): ForestNode[] {
  const seen = new Set<ForestNode>();
  const walk = (n: ForestNode) => {
    if (seen.has(n)) return;
    seen.add(n);
    for (const c of childrenOf(n)) walk(c);
  };
  roots.forEach(walk);
  const out = [...roots];
  for (const n of nodes) {
    if (seen.has(n)) continue;
    for (const c of containers) {
      const i = c.children.indexOf(n);
      if (i >= 0) c.children.splice(i, 1);
    }
    out.push(n);
    walk(n);
  }
  return out.sort(byLaunch);
}

/** Who lists: a session (its own trees), the host terminal, or `--all` (and a job's subtree). */
export type JobsScope =
  | { readonly kind: "session"; readonly session: string }
  | { readonly kind: "host" }
  | { readonly kind: "all" };

/** Trees with something queued or running first, then the newest first. */
export function listingOrder(roots: readonly ForestNode[]): ForestNode[] {
  return [...roots].sort((a, b) =>
    Number(treeActive(b)) - Number(treeActive(a)) || nodeCreated(b) - nodeCreated(a) ||
    (nodeId(a) < nodeId(b) ? -1 : 1)
  );
}

/**
 * The trees a text listing shows, in order, and how many the scope left
 * out: a session's own (its topmost nodes, wherever they hang); for the host the running trees, those started in
 * the last hour and the {@linkcode HOST_NEWEST_TREES} newest; `all` every
 * one.
 */
export function scopeTrees(
  roots: readonly ForestNode[],
  scope: JobsScope,
  nowMs: number,
): { readonly trees: readonly ForestNode[]; readonly hidden: number } {
  const ordered = listingOrder(roots);
  if (scope.kind === "all") return { trees: ordered, hidden: 0 };
  if (scope.kind === "session") {
    // A session's split may sit under another's branch: its trees are its topmost nodes.
    const own: ForestNode[] = [];
    const seen = new Set<ForestNode>();
    const walk = (n: ForestNode) => {
      if (seen.has(n)) return;
      seen.add(n);
      if (nodeSession(n) === scope.session) own.push(n);
      else childrenOf(n).forEach(walk);
    };
    roots.forEach(walk);
    return { trees: listingOrder(own), hidden: 0 };
  }
  const newest = new Set(
    [...ordered].sort((a, b) => nodeCreated(b) - nodeCreated(a)).slice(0, HOST_NEWEST_TREES),
  );
  const trees = ordered.filter((t) =>
    newest.has(t) || treeActive(t) || nowMs - nodeCreated(t) < HOST_RECENT_MS
  );
  return { trees, hidden: ordered.length - trees.length };
}

/** The node of job `id` in the forest, or null: a job's listing is its own subtree. */
export function findJob(roots: readonly ForestNode[], id: string): JobNode | null {
  const seen = new Set<ForestNode>();
  const stack = [...roots];
  while (stack.length > 0) {
    const n = stack.pop()!;
    if (seen.has(n)) continue;
    seen.add(n);
    if (n.node === "job" && n.job.id === id) return n;
    stack.push(...childrenOf(n));
  }
  return null;
}
