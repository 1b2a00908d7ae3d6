/**
 * The `--git` scope's planner (docs/resolution.md, "The --git scope"): the
 * merge of a branch into its source, computed in memory by Git's own merge
 * machinery on tree ids, and turned into a resolution plan.
 *
 * Git 2.39 has no `merge-tree --merge-base`, so the base is made the merge
 * base: three commits are written (base; source and branch, each with the
 * base as sole parent), never referenced by any ref, with fixed identity and
 * dates so the same trees give the same commits. `merge-tree --write-tree`
 * then merges source and branch and writes the result tree. Nothing touches
 * a working tree, an index or a ref.
 *
 * Needs what {@linkcode ScratchGit} needs.
 *
 * @module
 */

import {
  afterOf,
  beforeOf,
  checkPlan,
  type MergePlan,
  type PlanEntry,
  type Present,
  sortEntries,
} from "../model/resolution_plan.ts";
import { failed, ResolveGitError, type ScratchGit, textBytes } from "./git.ts";
import {
  type MergeMessage,
  parseCatFileBatch,
  parseLsTree,
  parseMergeTree,
  parseRawDiff,
  type RawChange,
  type RawState,
  signatureOf,
} from "./git_raw.ts";

/** The three trees of a `--git` merge. */
export interface MergeTrees {
  /** The snapshot's root tree (the fork point). */
  readonly base: string;
  /** The source's current tree (its working tree, dirty or not). */
  readonly source: string;
  /** The branch's result tree. */
  readonly branch: string;
}

/** One conflicting path and Git's reasons. */
export interface GitConflict {
  readonly path: string;
  readonly reasons: readonly string[];
}

/** What the planner found: a plan either way; the result tree only when clean. */
export type GitMergeOutcome =
  | { readonly clean: true; readonly result: string; readonly plan: MergePlan }
  | {
    readonly clean: false;
    readonly conflicts: readonly GitConflict[];
    /** Only conflict entries: a conflicted merge changes nothing. */
    readonly plan: MergePlan;
  };

const dec = new TextDecoder("utf-8", { fatal: true });
/** Paths per `ls-tree` call, well under the argument-size limit. */
const LS_TREE_BATCH = 500;

/** The throwaway commits whose merge base is `base`. */
async function commitsFor(
  git: ScratchGit,
  t: MergeTrees,
): Promise<{ source: string; branch: string }> {
  const sides = Object.entries(t);
  for (const [side, id] of sides) {
    // Ids only: a name such as `HEAD` or `--help` would be resolved or parsed by Git.
    if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(id)) {
      throw new ResolveGitError(`the ${side} tree id ${JSON.stringify(id)} is not a hex object id`);
    }
  }
  // One run for the three: `<id> <type> <size>`, or `<id> missing`, a line each.
  const checked = new TextDecoder().decode(
    await git.ok(["cat-file", "--batch-check=%(objectname) %(objecttype)"], {
      stdin: textBytes(sides.map(([, id]) => id).join("\n") + "\n"),
    }),
  ).split("\n");
  sides.forEach(([side, id], i) => {
    const [, type] = (checked[i] ?? "").split(" ");
    if (type !== "tree") {
      throw new ResolveGitError(
        `the ${side} tree ${id} is not in the object store${
          type === undefined || type === "missing" ? "" : ` (it is a ${type})`
        }`,
      );
    }
  });
  const base = await git.line(["commit-tree", t.base, "-m", "marsh: base"]);
  const source = await git.line(["commit-tree", t.source, "-p", base, "-m", "marsh: source"]);
  const branch = await git.line(["commit-tree", t.branch, "-p", base, "-m", "marsh: branch"]);
  return { source, branch };
}

/** `diff-tree -r` between two trees, by path. */
async function diffTrees(
  git: ScratchGit,
  from: string,
  to: string,
): Promise<Map<string, RawChange>> {
  const out = await git.ok([
    "diff-tree",
    "-r",
    "-z",
    "--raw",
    "--no-renames",
    "--full-index",
    from,
    to,
  ]);
  return new Map(parseRawDiff(out).map((c) => [c.path, c]));
}

/** The state at each of `paths` in `tree` (absent where there is none). */
async function statesAt(
  git: ScratchGit,
  tree: string,
  paths: readonly string[],
): Promise<Map<string, RawState>> {
  const out = new Map<string, RawState>();
  for (let i = 0; i < paths.length; i += LS_TREE_BATCH) {
    const batch = paths.slice(i, i + LS_TREE_BATCH);
    const got = parseLsTree(await git.ok(["ls-tree", "-z", "--full-tree", tree, "--", ...batch]));
    for (const [p, s] of got) out.set(p, s);
  }
  return out;
}

/** Reads the targets of the symlinks among `states` (blob id → target). */
async function symlinkTargets(
  git: ScratchGit,
  states: Iterable<RawState>,
): Promise<Map<string, string>> {
  const ids = new Set<string>();
  for (const s of states) if (s.mode === "120000") ids.add(s.oid);
  if (ids.size === 0) return new Map();
  const blobs = parseCatFileBatch(
    await git.ok(["cat-file", "--batch"], { stdin: textBytes([...ids].join("\n") + "\n") }),
  );
  const out = new Map<string, string>();
  for (const id of ids) {
    const bytes = blobs.get(id);
    if (bytes === undefined) throw new ResolveGitError(`symlink blob ${id} is missing`);
    try {
      out.set(id, dec.decode(bytes));
    } catch (error) {
      throw new ResolveGitError(`symlink blob ${id} holds a target that is not UTF-8`, {
        cause: error,
      });
    }
  }
  return out;
}

/** Git's message with the throwaway commit ids named for what they are. */
function reasonOf(m: MergeMessage, commits: { source: string; branch: string }): string {
  return m.text.replaceAll(commits.source, "the source").replaceAll(commits.branch, "the branch");
}

/**
 * Gives the paths that a file↔directory change touches the state "dir"
 * where Git's recursive diff says absent: the plan must say a directory is
 * there for the paths below it to be valid.
 */
function withDirectories(entries: PlanEntry[]): PlanEntry[] {
  const below = (side: "before" | "after") => {
    const parents = new Set<string>();
    for (const e of entries) {
      const s = side === "before" ? beforeOf(e) : afterOf(e);
      if (s.kind === "absent") continue;
      for (let i = e.path.indexOf("/"); i !== -1; i = e.path.indexOf("/", i + 1)) {
        parents.add(e.path.slice(0, i));
      }
    }
    return parents;
  };
  const dirBefore = below("before"), dirAfter = below("after");
  const DIR: Present = { kind: "dir" };
  const out: PlanEntry[] = [];
  for (const e of entries) {
    const b = dirBefore.has(e.path), a = dirAfter.has(e.path);
    if (e.op === "converged") {
      out.push(e.state.kind === "absent" && a ? { ...e, state: DIR } : e);
    } else if (e.op === "take") {
      out.push(e.before.kind === "absent" && b ? { ...e, before: DIR } : e);
    } else if (e.op === "delete") {
      // A file that becomes a directory.
      out.push(a ? { op: "take", path: e.path, before: e.before, after: DIR } : e);
    } else out.push(e);
  }
  return out;
}

/** The plan of a clean merge: what makes the source's tree the result tree, and what already matched. */
async function cleanPlan(git: ScratchGit, t: MergeTrees, result: string): Promise<MergePlan> {
  const toResult = await diffTrees(git, t.source, result);
  const branchChanges = await diffTrees(git, t.base, t.branch);
  const convergedPaths = [...branchChanges.keys()].filter((p) => !toResult.has(p));
  const baseToResult = convergedPaths.length === 0
    ? new Map<string, RawChange>()
    : await diffTrees(git, t.base, result);
  // At a converged path the result (= the source) is the base's state unless the merge changed it.
  const convergedState = (p: string): RawState =>
    baseToResult.get(p)?.dst ?? branchChanges.get(p)!.src;
  const targets = await symlinkTargets(git, [
    ...[...toResult.values()].flatMap((c) => [c.src, c.dst]),
    ...convergedPaths.map(convergedState),
  ]);
  const entries: PlanEntry[] = [];
  for (const c of toResult.values()) {
    const before = signatureOf(c.src, c.path, targets);
    const after = signatureOf(c.dst, c.path, targets);
    if (after.kind === "absent") {
      entries.push({ op: "delete", path: c.path, before: before as Present });
    } else if (after.kind === "file") {
      entries.push({ op: "take", path: c.path, before, after, bytes: "store" });
    } else entries.push({ op: "take", path: c.path, before, after });
  }
  for (const p of convergedPaths) {
    entries.push({ op: "converged", path: p, state: signatureOf(convergedState(p), p, targets) });
  }
  return checkPlan({
    scope: "git",
    trees: { ...t, result },
    entries: sortEntries(withDirectories(entries)),
  });
}

/** The plan of a conflicted merge: one conflict entry per path, with each side's state and Git's reasons. */
async function conflictPlan(
  git: ScratchGit,
  t: MergeTrees,
  paths: readonly string[],
  reasons: ReadonlyMap<string, string[]>,
): Promise<{ plan: MergePlan; conflicts: GitConflict[] }> {
  const [base, source, branch] = await Promise.all(
    [t.base, t.source, t.branch].map((tree) => statesAt(git, tree, paths)),
  );
  const state = (m: Map<string, RawState>, p: string) => m.get(p) ?? { mode: "000000", oid: "" };
  const targets = await symlinkTargets(
    git,
    [base!, source!, branch!].flatMap((m) => [...m.values()]),
  );
  const entries: PlanEntry[] = paths.map((p) => ({
    op: "conflict",
    path: p,
    base: signatureOf(state(base!, p), p, targets),
    source: signatureOf(state(source!, p), p, targets),
    branch: signatureOf(state(branch!, p), p, targets),
    reason: (reasons.get(p) ?? ["conflict"]).join("; "),
  }));
  return {
    plan: checkPlan({
      scope: "git",
      trees: { ...t, result: null },
      entries: sortEntries(entries),
    }),
    conflicts: entries.map((e) => ({ path: e.path, reasons: reasons.get(e.path) ?? ["conflict"] })),
  };
}

/**
 * Merges the branch's changes since `base` into `source`, in memory, and
 * returns the plan: on a clean merge, the result tree and what makes the
 * source's tree equal to it (take, delete) plus the paths the branch
 * changed that the source already has (converged); on a conflict, every
 * conflicting path with the base's, the source's and the branch's state
 * and Git's reason, and nothing to take.
 *
 * The tree objects (and their blobs) must be readable through `git`'s
 * object dirs; the commits and the merged result are written into its write
 * dir.
 *
 * @throws {ResolveGitError} when a tree is missing, Git fails, or the trees
 *   hold something the scope cannot plan (a submodule, a non-UTF-8 path)
 * @throws {PlanError} when the result would touch `.git` or `.marsh`
 */
export async function planGitMerge(git: ScratchGit, t: MergeTrees): Promise<GitMergeOutcome> {
  const commits = await commitsFor(git, t);
  const args = ["merge-tree", "--write-tree", "-z", "--messages", commits.source, commits.branch];
  const out = await git.run(args);
  if (out.code !== 0 && out.code !== 1) throw failed(args, out);
  const merged = parseMergeTree(out.stdout);
  if (out.code === 0) {
    return { clean: true, result: merged.tree, plan: await cleanPlan(git, t, merged.tree) };
  }
  const reasons = new Map<string, string[]>();
  const paths = new Set(merged.stages.map((s) => s.path));
  for (const m of merged.messages) {
    if (!m.type.startsWith("CONFLICT")) continue;
    for (const p of m.paths) {
      paths.add(p);
      const list = reasons.get(p) ?? [];
      list.push(reasonOf(m, commits));
      reasons.set(p, list);
    }
  }
  if (paths.size === 0) {
    throw new ResolveGitError("git merge-tree reported a conflict but named no path");
  }
  const { plan, conflicts } = await conflictPlan(git, t, [...paths], reasons);
  return { clean: false, conflicts, plan };
}
