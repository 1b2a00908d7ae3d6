/**
 * `marsh promote ID LABEL [--retire-source-changes] [--dry-run]`
 * (docs/guide.md, "marsh promote"): the project's tree becomes the
 * branch's result wholesale. What the source changed since the snapshot
 * would be retired: promote refuses, listing those paths, unless
 * `--retire-source-changes` is given. Either way the prior state of every
 * path it touches is saved first (the restore point), so `marsh undo`
 * puts it back.
 *
 * @module
 */

import { countOps, isClean } from "../model/resolution_plan.ts";
import type { ResolvePromoteRequest } from "../protocol/daemon_resolve.ts";
import type { PlannedReply } from "../protocol/splitfs_resolve.ts";
import type { Authority } from "./conn.ts";
import {
  type Outcome,
  outcome,
  plural,
  resolvable,
  type ResolveDeps,
  serviceRefusal,
} from "./resolve_context.ts";
import { applyBranchPlan } from "./resolve_merge.ts";

/**
 * Plans and, unless it is a dry run or refused, applies a promote.
 *
 * @throws {RequestError} for a split or branch that cannot be promoted, or
 *   a caller that is not the split's creator
 */
export async function promote(
  d: ResolveDeps,
  auth: Authority,
  req: Pick<ResolvePromoteRequest, "id" | "label" | "retireSourceChanges" | "dryRun">,
): Promise<Outcome> {
  const { split: s } = await resolvable(d, auth, req.id, req.label, "promote");
  const parent = s.parent ? { parent: s.parent } : {};
  let planned: PlannedReply;
  try {
    planned = await d.splitfs.request<PlannedReply>({
      v: 1,
      t: "plan-fs",
      id: s.id,
      label: req.label,
      scope: "promote",
      ...parent,
    });
  } catch (error) {
    throw serviceRefusal(error, `the promote could not be planned`);
  }
  const { plan, sourceChanges, sourceChangesMore } = planned;
  const what = `branch ${req.label} of split ${s.id}`;
  const retired = sourceChanges.length + sourceChangesMore;
  const blocked = retired > 0 && !req.retireSourceChanges;
  if (req.dryRun) {
    return outcome({
      outcome: "planned",
      code: blocked || !isClean(plan) ? 1 : 0,
      message:
        `dry run: promoting ${what} changes ${
          plural(countOps(plan).take + countOps(plan).delete, "path")
        }` + (retired > 0
          ? ` and retires ${plural(retired, "change")} the project made since the snapshot${
            blocked ? " (promote refuses them without --retire-source-changes)" : ""
          }`
          : "") +
        "; nothing was changed",
      plan,
      sourceChanges,
      sourceChangesMore,
    });
  }
  if (blocked) {
    return outcome({
      outcome: "refused",
      code: 1,
      message:
        `the project changed ${
          plural(retired, "path")
        } since split ${s.id}'s snapshot; promoting ${what} would retire them, so nothing was changed: ` +
        `merge them into the branch first, or give --retire-source-changes ` +
        `(their prior state is saved; marsh undo puts it back)`,
      plan,
      sourceChanges,
      sourceChangesMore,
    });
  }
  return await applyBranchPlan(d, auth, s, req.label, {
    kind: "promote",
    scope: "promote",
    plan,
    nothing: `nothing to promote: the project already is the result of ${what}`,
    done: `promoted ${what} over ${s.root}${
      retired > 0 ? ` (retiring ${plural(retired, "source change")})` : ""
    }`,
  });
}
