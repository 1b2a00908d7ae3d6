/**
 * The `--git` merge on small trees (docs/resolution.md, "The --git scope"):
 * the split-filesystem service gives, for every path the branch's patch
 * touches, the base's, the branch's and the source's state
 * (`MergeInputsReply`); this writes three tree objects holding exactly those
 * paths at those states, runs Git's merge on them ({@linkcode planGitMerge})
 * and turns the service's `blocked` paths into conflicts. The trees never
 * hold a path the patch does not touch, so the merge's cost follows the
 * change, not the project.
 *
 * Needs what {@linkcode ScratchGit} needs.
 *
 * @module
 */

import {
  ancestors,
  beforeOf,
  checkPlan,
  type MergePlan,
  pathProblem,
  type PlanEntry,
  sameSignature,
  type Signature,
  sortEntries,
} from "../model/resolution_plan.ts";
import type { PathInputs } from "../protocol/splitfs_resolve.ts";
import { ResolveGitError, ScratchGit, textBytes } from "./git.ts";
import { type MergeTrees, planGitMerge } from "./git_merge.ts";
import { type Leaf, type TreeWay, writeTrees } from "./small_tree_write.ts";

/** What {@linkcode planSmallMerge} is given: the service's `merge-inputs` answer, less its frame fields. */
export interface SmallMergeInputs {
  /** The split's `store.git/objects`: every blob the signatures name is there, and Git writes there. */
  readonly objects: string;
  /** In any order; each path once. */
  readonly paths: readonly PathInputs[];
}

/** Options of {@linkcode planSmallMerge}. */
export interface SmallMergeOptions {
  /** Where the scratch repository is made (default: the system temp dir). */
  readonly tmpDir?: string;
}

type Side = "base" | "source" | "branch";
const SIDES: readonly Side[] = ["base", "source", "branch"];

/**
 * A signature as a Git tree can hold it: a file's mode is 644 or 755 by its
 * owner's executable bit, as Git records it (the applier compares modes the
 * same way, `gitModes`).
 */
export function gitSignature(s: Signature): Signature {
  if (s.kind !== "file") return s;
  return { kind: "file", mode: s.mode & 0o100 ? 0o755 : 0o644, blob: s.blob };
}

/**
 * One side's leaves (path → Git mode and blob id): an absent path is none,
 * and so is a directory (the leaves under it make it; one with none is not
 * in a Git tree).
 */
function sideLeaves(
  paths: readonly PathInputs[],
  side: Side,
  targets: ReadonlyMap<string, string>,
): Leaf[] {
  const out: Leaf[] = [];
  for (const p of paths) {
    const s = p[side];
    if (s.kind === "file") {
      out.push({ path: p.path, mode: s.mode & 0o100 ? "100755" : "100644", oid: s.blob });
    } else if (s.kind === "symlink") {
      out.push({ path: p.path, mode: "120000", oid: targets.get(s.target)! });
    }
  }
  return out;
}

/**
 * Refuses inputs no tree can hold: a bad or repeated path, or, on one side,
 * a file or symlink that is also the parent of something there.
 *
 * @throws {ResolveGitError} naming the path
 */
function checkInputs(paths: readonly PathInputs[]): void {
  const seen = new Map<string, PathInputs>();
  for (const p of paths) {
    const problem = pathProblem(p.path);
    if (problem !== null) throw new ResolveGitError(`merge inputs: ${problem}`);
    if (seen.has(p.path)) {
      throw new ResolveGitError(`merge inputs: path ${JSON.stringify(p.path)} appears twice`);
    }
    seen.set(p.path, p);
  }
  for (const p of paths) {
    for (const side of SIDES) {
      if (p[side].kind === "absent") continue;
      for (const a of ancestors(p.path)) {
        const up = seen.get(a)?.[side];
        if (up !== undefined && up.kind !== "dir") {
          throw new ResolveGitError(
            `merge inputs: in the ${side}, ${JSON.stringify(a)} is ${
              up.kind === "absent" ? "absent" : `a ${up.kind}`
            } and yet ${JSON.stringify(p.path)} is there`,
          );
        }
      }
    }
  }
}

/**
 * Writes each distinct symlink target as a blob (one `hash-object` run) and
 * returns target → blob id.
 */
async function targetBlobs(
  git: ScratchGit,
  paths: readonly PathInputs[],
): Promise<Map<string, string>> {
  const targets = new Set<string>();
  for (const p of paths) {
    for (const side of SIDES) {
      const s = p[side];
      if (s.kind === "symlink") targets.add(s.target);
    }
  }
  const out = new Map<string, string>();
  if (targets.size === 0) return out;
  const dir = `${git.dir}/targets`;
  await Deno.mkdir(dir);
  const list = [...targets];
  const files = list.map((_, i) => `${dir}/${i}`);
  await Promise.all(list.map((t, i) => Deno.writeFile(files[i]!, textBytes(t))));
  const ids = new TextDecoder().decode(
    await git.ok(["hash-object", "-w", "--no-filters", "--stdin-paths"], {
      stdin: textBytes(files.join("\n") + "\n"),
    }),
  ).trim().split("\n");
  if (ids.length !== list.length) {
    throw new ResolveGitError(`git hash-object gave ${ids.length} ids for ${list.length} targets`);
  }
  list.forEach((t, i) => out.set(t, ids[i]!));
  await Deno.remove(dir, { recursive: true });
  return out;
}

/**
 * Writes the base, source and branch trees holding exactly `paths` at their
 * states (`way`: how, {@linkcode TreeWay}; by default by their size). Git
 * refuses an entry whose blob is not in the object dirs.
 *
 * @throws {ResolveGitError} for inputs no tree can hold, or a missing blob
 */
export async function writeSmallTrees(
  git: ScratchGit,
  paths: readonly PathInputs[],
  way?: TreeWay,
): Promise<MergeTrees> {
  checkInputs(paths);
  const targets = await targetBlobs(git, paths);
  const leaves = SIDES.map((side) => sideLeaves(paths, side, targets));
  const [base, source, branch] = await writeTrees(git, leaves, way);
  return { base: base!, source: source!, branch: branch! };
}

/**
 * The service's blocked paths as conflicts, everything else of `plan` as it
 * is; a plan with a blocked path has no result tree (it is not clean).
 */
function withBlocked(plan: MergePlan, paths: readonly PathInputs[]): MergePlan {
  const blocked = paths.filter((p) => p.blocked !== undefined);
  if (blocked.length === 0) return plan;
  const names = new Set(blocked.map((p) => p.path));
  const entries: PlanEntry[] = plan.entries.filter((e) => !names.has(e.path));
  for (const p of blocked) {
    entries.push({
      op: "conflict",
      path: p.path,
      base: gitSignature(p.base),
      source: gitSignature(p.source),
      branch: gitSignature(p.branch),
      reason: p.blocked!,
    });
  }
  return checkPlan({
    scope: plan.scope,
    trees: { ...plan.trees, result: null },
    entries: sortEntries(entries),
  });
}

/**
 * Every `take`, `delete` and `converged` entry must have been computed
 * against the source the service read: its `before` is the source's state
 * there (modes as Git sees them).
 *
 * @throws {ResolveGitError} naming the first path where it is not
 */
function checkBefore(plan: MergePlan, paths: readonly PathInputs[]): void {
  const byPath = new Map(paths.map((p) => [p.path, p]));
  for (const e of plan.entries) {
    if (e.op === "conflict") continue;
    const input = byPath.get(e.path);
    if (input === undefined) {
      throw new ResolveGitError(
        `the merge planned ${JSON.stringify(e.path)}, which the branch's patch does not touch`,
      );
    }
    const source = gitSignature(input.source);
    if (!sameSignature(beforeOf(e), source)) {
      throw new ResolveGitError(
        `the merge's plan for ${JSON.stringify(e.path)} starts from ${
          JSON.stringify(beforeOf(e))
        }, but the source holds ${JSON.stringify(source)}`,
      );
    }
  }
}

/**
 * The `--git` plan of a branch from the service's merge inputs: three small
 * trees in `objects`, Git's merge of them, and the blocked paths as
 * conflicts. Writes only into `objects` and the scratch repository (made in
 * `tmpDir`, removed after).
 *
 * @throws {ResolveGitError} for inputs no tree can hold, a missing blob, a
 *   Git failure, or a plan that does not start from the source's states
 * @throws {PlanError} when the plan would be malformed
 */
export async function planSmallMerge(
  inputs: SmallMergeInputs,
  opts: SmallMergeOptions = {},
): Promise<MergePlan> {
  await using git = await ScratchGit.create({ write: inputs.objects }, false, opts.tmpDir);
  const trees = await writeSmallTrees(git, inputs.paths);
  const outcome = await planGitMerge(git, trees);
  const plan = withBlocked(outcome.plan, inputs.paths);
  checkBefore(plan, inputs.paths);
  return plan;
}
