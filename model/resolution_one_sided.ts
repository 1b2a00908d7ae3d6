/**
 * The `--git` plan without Git, when Git has nothing to merge
 * (docs/resolution.md, "The --git scope"): if no path of the branch's patch
 * was changed on both sides, Git's three-way merge of each path is the
 * side that changed it, which is exactly the conservative rule's decision.
 * Only a path both sides changed needs Git's text merge (and a process to
 * run it); that case returns `null`. So does a patch that both deletes and
 * adds paths while the source made one of those additions or deletions too:
 * Git may see a rename there and decide for the pair, not path by path
 * (`resolve/one_sided_test.ts` compares both against Git).
 *
 * Pure: needs no permission.
 *
 * @module
 */

import {
  type MergePlan,
  type PlanEntry,
  sameSignature,
  type Signature,
  sortEntries,
  threeWayEntry,
} from "./resolution_plan.ts";

/** One path of a patch with its three states (the service's merge inputs). */
export interface PathStates {
  readonly path: string;
  readonly base: Signature;
  readonly source: Signature;
  readonly branch: Signature;
  /** Why the source cannot take this path whatever the merge says. */
  readonly blocked?: string;
}

/**
 * The `--git` plan of `paths` when no path was changed on both sides and
 * none is blocked, each taken file's bytes in the split's store; `null`
 * when Git must merge (or report the conflict).
 */
export function oneSidedGitPlan(paths: readonly PathStates[]): MergePlan | null {
  if (renameMayDecide(paths)) return null;
  const entries: PlanEntry[] = [];
  for (const p of paths) {
    if (p.blocked !== undefined) return null;
    const bothChanged = !sameSignature(p.source, p.base) && !sameSignature(p.branch, p.base) &&
      !sameSignature(p.source, p.branch);
    if (bothChanged) return null;
    const e = threeWayEntry(p.path, p.base, p.source, p.branch, "store");
    if (e !== null) entries.push(e);
  }
  return {
    scope: "git",
    trees: { base: null, source: null, branch: null, result: null },
    entries: sortEntries(entries),
  };
}

/**
 * Whether Git's rename detection could pair a deletion with an addition of
 * the branch where the source also touched one of them.
 */
function renameMayDecide(paths: readonly PathStates[]): boolean {
  const added = (p: PathStates) => p.base.kind === "absent" && p.branch.kind !== "absent";
  const deleted = (p: PathStates) => p.base.kind !== "absent" && p.branch.kind === "absent";
  if (!paths.some(added) || !paths.some(deleted)) return false;
  return paths.some((p) => (added(p) || deleted(p)) && !sameSignature(p.source, p.base));
}
