/**
 * What one tree cancel reaches, and its first step written in one
 * transaction (docs/rules.md, "Kit jobs" and "Cancel"): from a job, a
 * split or one branch, every node below it — the jobs a job started
 * (`parent_job`), the splits a job or a branch created, every branch of
 * those splits, an argv branch's job, and a job a shell branch started
 * (`parent = split:<id>/<label>`) — at every depth. In the same
 * transaction every live job capability of the scope becomes `cancelling`
 * and every live branch capability is revoked, so nothing in the tree
 * starts anything from then on, whatever order its containers end in.
 *
 * Takes the open {@linkcode Connection}; `Journal.jobTree.cancelScope` is
 * its public face.
 *
 * @module
 */

import type { Connection } from "./_connection.ts";

/** Where a tree cancel starts. */
export type TreeRoot =
  | { readonly kind: "job"; readonly id: string }
  | { readonly kind: "split"; readonly id: string }
  | { readonly kind: "branch"; readonly split: string; readonly label: string };

/** Every node a tree cancel reaches, the root's own included, in the order found (root first). */
export interface TreeScope {
  readonly jobs: readonly string[];
  readonly splits: readonly string[];
  readonly branches: readonly { readonly split: string; readonly label: string }[];
  /** Nodes below the root (a branch and its own job count as one node). */
  readonly below: number;
  /** Whether a job capability in it is live, or a branch capability: what a cancel changes. */
  readonly live: boolean;
}

/** The nodes at and below `root`, read inside the caller's transaction. */
function walk(c: Connection, root: TreeRoot): TreeScope {
  const jobs: string[] = [];
  const splits: string[] = [];
  const branches: { split: string; label: string }[] = [];
  const keyOf = (n: TreeRoot) =>
    n.kind === "branch" ? `b:${n.split}/${n.label}` : `${n.kind[0]}:${n.id}`;
  const seen = new Set<string>([keyOf(root)]);
  const todo: TreeRoot[] = [root];
  let below = 0;
  // The root's twin (a branch job's branch, an argv branch's job) is the root itself.
  const push = (n: TreeRoot, twin = false) => {
    if (seen.has(keyOf(n))) return;
    seen.add(keyOf(n));
    todo.push(n);
    if (!twin) below++;
  };
  for (let n = todo.shift(); n !== undefined; n = todo.shift()) {
    const atRoot = keyOf(n) === keyOf(root);
    if (n.kind === "job") {
      jobs.push(n.id);
      // A split branch's job is its branch: what the branch made is the job's.
      const own = c.get("SELECT split, label FROM jobs WHERE id = :id AND split <> ''", {
        id: n.id,
      });
      if (own !== undefined) {
        push({ kind: "branch", split: String(own.split), label: String(own.label) }, atRoot);
      }
      for (const r of c.all("SELECT id FROM jobs WHERE parent_job = :id", { id: n.id })) {
        push({ kind: "job", id: String(r.id) });
      }
      const made = c.all(
        "SELECT id FROM splits WHERE creator_kind = 'job' AND creator_id = :id",
        { id: n.id },
      );
      for (const r of made) push({ kind: "split", id: String(r.id) });
    } else if (n.kind === "split") {
      splits.push(n.id);
      const labels = c.all("SELECT label FROM branches WHERE split = :id ORDER BY idx", {
        id: n.id,
      });
      for (const r of labels) push({ kind: "branch", split: n.id, label: String(r.label) });
    } else {
      branches.push({ split: n.split, label: n.label });
      const own = c.all("SELECT id FROM jobs WHERE split = :split AND label = :label", {
        split: n.split,
        label: n.label,
      });
      for (const r of own) push({ kind: "job", id: String(r.id) }, atRoot);
      const started = c.all("SELECT id FROM jobs WHERE parent = :parent", {
        parent: `split:${n.split}/${n.label}`,
      });
      for (const r of started) push({ kind: "job", id: String(r.id) });
      const made = c.all(
        "SELECT id FROM splits WHERE parent_split = :split AND parent_label = :label",
        { split: n.split, label: n.label },
      );
      for (const r of made) push({ kind: "split", id: String(r.id) });
    }
  }
  let live = false;
  for (const id of jobs) {
    if (c.get("SELECT 1 AS x FROM jobs WHERE id = :id AND cap = 'live'", { id })) live = true;
  }
  for (const b of branches) {
    const cap = c.get(
      "SELECT 1 AS x FROM capabilities WHERE split = :split AND label = :label AND state = 'live'",
      b,
    );
    if (cap) live = true;
  }
  return { jobs, splits, branches, below, live };
}

/**
 * The scope of a cancel of `root`, with its first step recorded in one
 * write transaction: each live job capability in it `cancelling`, each
 * live branch capability revoked (at `nowMs`).
 */
export function cancelScope(c: Connection, root: TreeRoot, nowMs: number): TreeScope {
  return c.write("cancel a job tree", () => {
    const scope = walk(c, root);
    for (const id of scope.jobs) {
      c.run("UPDATE jobs SET cap = 'cancelling' WHERE id = :id AND cap = 'live'", { id });
    }
    for (const b of scope.branches) {
      c.run(
        `UPDATE capabilities SET state = 'revoked', revoked_ms = :now
         WHERE split = :split AND label = :label AND state = 'live'`,
        { split: b.split, label: b.label, now: nowMs },
      );
    }
    return scope;
  });
}

/** The scope of `root` without changing anything. */
export function treeScope(c: Connection, root: TreeRoot): TreeScope {
  return c.read("read a job tree", () => walk(c, root));
}
