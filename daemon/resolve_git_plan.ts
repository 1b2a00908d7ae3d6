/**
 * The `--git` plan of one branch (docs/resolution.md, "The --git scope"):
 * the service reads the paths the branch's patch touches and the source's
 * state of each (`merge-inputs`), then the Git planner merges the small
 * trees. A dry run: only the split's object store is written.
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import type { MergePlan } from "../model/resolution_plan.ts";
import type { GitPlanner, MergeInputsReply } from "../protocol/splitfs_resolve.ts";
import { ensureOpen } from "./split_join.ts";
import type { SplitContext } from "./split_context.ts";

/**
 * Plans the `--git` merge of branch `label` of split `s` onto its source as
 * it is now.
 *
 * @throws {SplitfsError} when the service refuses (no patch, not open)
 */
export async function gitPlanOf(
  cx: SplitContext,
  planner: GitPlanner,
  s: SplitRecord,
  label: string,
): Promise<MergePlan> {
  await ensureOpen(cx, cx.liveOf(s.id, s.session), s);
  const inputs = await cx.d.splitfs.request<MergeInputsReply>({
    v: 1,
    t: "merge-inputs",
    id: s.id,
    label,
    ...(s.parent ? { parent: s.parent } : {}),
  });
  return await planner(inputs);
}
