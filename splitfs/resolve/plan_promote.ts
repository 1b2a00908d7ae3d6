/**
 * Promote's plan (docs/resolution.md, "The filesystem scopes' planner"):
 * the project's tree becomes the branch's result wholesale, over every path
 * the split covered. Every path where the source differs from the branch is
 * taken or deleted; the paths the source changed since the snapshot are
 * listed apart, since promote retires them. Paths the split did not cover
 * (ignored files when it did not take them) are never touched.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { RefusedError } from "../errors.ts";
import { type ChangedPath, changedPaths } from "./changed_paths.ts";
import type { PlanInputs } from "./plan_inputs.ts";
import {
  comparePaths,
  type MergePlan,
  type PlanEntry,
  sameSignature,
  type Signature,
} from "../../model/resolution_plan.ts";
import { MAX_LISTED_PATHS } from "../../protocol/splitfs_resolve.ts";
import { sourceState, unplannedEntry } from "./source_state.ts";

/** Promote's plan and the source's changes since the snapshot. */
export interface PromotePlan {
  readonly plan: MergePlan;
  /** The first {@linkcode MAX_LISTED_PATHS} paths the source changed since the snapshot, sorted. */
  readonly sourceChanges: string[];
  readonly sourceChangesMore: number;
}

/**
 * Plans promote of the branch `inputs` names. It walks the whole source
 * (the source has no upper dir to list its changes), and the branch where
 * it can differ.
 *
 * @throws {RefusedError} when the plan would remove a directory that holds
 *   something the split did not cover
 */
export function planPromote(inputs: PlanInputs): PromotePlan {
  const branch = byPath(changedPaths({
    base: inputs.base,
    baseIndex: inputs.baseIndex,
    other: inputs.branch,
    candidates: inputs.candidates,
    ignore: inputs.ignore,
    prunedIgnores: inputs.prunedIgnores,
    readyNs: inputs.readyNs,
  }));
  const sourceList = changedPaths({
    base: inputs.base,
    baseIndex: inputs.baseIndex,
    other: inputs.source,
    candidates: "all",
    ignore: inputs.ignore,
    readyNs: null,
  });
  const source = byPath(sourceList);
  const entries = new Map<string, PlanEntry>();
  for (const path of new Set([...branch.keys(), ...source.keys()])) {
    const b = branch.get(path), s = source.get(path);
    const after = b?.other ?? s!.base;
    // A path the source did not change since the snapshot, unless the split did not cover it there.
    const before: Signature = s?.other ??
      (b!.base.kind === "absent" ? sourceState(inputs.source, path).sig : b!.base);
    if (sameSignature(before, after)) continue;
    if (after.kind === "absent") {
      entries.set(path, {
        op: "delete",
        path,
        before: before as Exclude<Signature, { kind: "absent" }>,
      });
    } else if (after.kind === "file") {
      entries.set(path, { op: "take", path, before, after, bytes: "branch" });
    } else entries.set(path, { op: "take", path, before, after });
  }
  for (const [path, e] of entries) {
    if (e.op === "converged" || e.op === "conflict") continue;
    if (e.before.kind !== "dir" || (e.op === "take" && e.after.kind === "dir")) continue;
    const extra = unplannedEntry(inputs.source, path, entries);
    if (extra !== null) {
      throw new RefusedError(
        `promote would remove the directory ${path}, but it holds ${extra}, which the split did ` +
          `not cover: move it out of the project, then promote again`,
      );
    }
  }
  const listed = sourceList.slice(0, MAX_LISTED_PATHS).map((c) => c.path);
  return {
    plan: {
      scope: "promote",
      trees: { base: inputs.baseTree, source: null, branch: null, result: null },
      entries: [...entries.values()].sort((a, b) => comparePaths(a.path, b.path)),
    },
    sourceChanges: listed,
    sourceChangesMore: sourceList.length - listed.length,
  };
}

function byPath(list: readonly ChangedPath[]): Map<string, ChangedPath> {
  return new Map(list.map((c) => [c.path, c]));
}
