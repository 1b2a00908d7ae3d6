/**
 * `marsh merge ID LABEL [--git | --filesystem | --paths P...] [--dry-run]`
 * (docs/guide.md, "marsh merge"): the branch's durable changes into the
 * project, which keeps running.
 *
 * - `--git`: the service gathers the merge's inputs (`merge-inputs`), the
 *   planner merges them with Git's own machinery, on tree ids;
 * - `--filesystem`, `--paths`: the service plans by the conservative
 *   three-way rule (`plan-fs`);
 * - a dry run returns the plan and changes nothing; a plan with a conflict
 *   changes nothing and lists every conflicting path (exit 1); a clean one
 *   is applied all or nothing (`resolve_apply.ts`).
 *
 * @module
 */

import { oneSidedGitPlan } from "../model/resolution_one_sided.ts";
import type { ResolutionRecord, SplitRecord } from "../journal/records.ts";
import { countOps, isClean, type MergePlan } from "../model/resolution_plan.ts";
import type { MergeScope, ResolveMergeRequest } from "../protocol/daemon_resolve.ts";
import type {
  AppliedReply,
  ApplyRefusedReply,
  MergeInputsReply,
  PlannedReply,
} from "../protocol/splitfs_resolve.ts";
import type { Authority } from "./conn.ts";
import { creatorOf } from "./creator.ts";
import { applyResolution } from "./resolve_apply.ts";
import {
  type Outcome,
  outcome,
  plural,
  resolvable,
  type ResolveDeps,
  serviceRefusal,
} from "./resolve_context.ts";
import { projectPaths } from "./resolve_paths.ts";
import { branchCwd } from "./shell_view.ts";

function parentOf(s: SplitRecord) {
  return s.parent ? { parent: s.parent } : {};
}

/**
 * The merge plan of branch `label` of split `s` in `scope` (`paths`, for
 * the `paths` scope, already relative to the project).
 *
 * @throws {RequestError} when the service or the planner cannot plan (nothing changed)
 */
export async function mergePlan(
  d: ResolveDeps,
  s: SplitRecord,
  label: string,
  scope: MergeScope,
  paths: readonly string[] | null,
): Promise<MergePlan> {
  if (scope === "git") {
    let inputs: MergeInputsReply;
    try {
      inputs = await d.splitfs.request<MergeInputsReply>({
        v: 1,
        t: "merge-inputs",
        id: s.id,
        label,
        ...parentOf(s),
      });
    } catch (error) {
      throw serviceRefusal(error, `the --git merge's inputs could not be read`);
    }
    // Git merges text only where both sides changed a path; without one, no process is started.
    const oneSided = oneSidedGitPlan(inputs.paths);
    if (oneSided !== null) return oneSided;
    try {
      return await d.planner(inputs);
    } catch (error) {
      throw serviceRefusal(error, `the --git merge could not be planned`);
    }
  }
  try {
    const reply = await d.splitfs.request<PlannedReply>({
      v: 1,
      t: "plan-fs",
      id: s.id,
      label,
      scope,
      ...(scope === "paths" ? { paths: paths ?? [] } : {}),
      ...parentOf(s),
    });
    return reply.plan;
  } catch (error) {
    throw serviceRefusal(error, `the --${scope} merge could not be planned`);
  }
}

/** The `conflict` outcome: every conflicting path is in the plan; nothing was changed. */
export function conflictOutcome(plan: MergePlan, verb: string): Outcome {
  const n = countOps(plan).conflict;
  return outcome({
    outcome: "conflict",
    code: 1,
    message: `${plural(n, "conflicting path")}; nothing was changed: ` +
      `resolve ${
        n === 1 ? "it" : "them"
      } in the project (or ${verb} with another scope), then ${verb} again`,
    plan,
  });
}

/** Whether a clean plan changes anything (every path may have converged already). */
export function changesSomething(plan: MergePlan): boolean {
  const n = countOps(plan);
  return n.take + n.delete > 0;
}

/**
 * Where the caller is, as the service sees it: a shell branch with the
 * project view reports its cwd under the project's path, which is its fork
 * (a job's fork is at the same path inside its container and outside).
 */
function callerCwd(d: ResolveDeps, auth: Authority, cwd: string): string {
  if (auth.kind !== "branch") return cwd;
  const branch = d.journal.getBranch(auth.split, auth.label);
  const parent = d.journal.getSplit(auth.split);
  return branch && parent ? branchCwd(cwd, branch, parent.root) : cwd;
}

/**
 * Plans and, unless it is a dry run, applies a merge. Returns how it
 * ended; refusals of the request itself are thrown.
 *
 * @throws {RequestError} for a split or branch that cannot be merged, a bad
 *   `--paths`, or a caller that is not the split's creator
 */
export async function merge(
  d: ResolveDeps,
  auth: Authority,
  req: Pick<ResolveMergeRequest, "id" | "label" | "scope" | "paths" | "dryRun" | "cwd">,
): Promise<Outcome> {
  const { split: s } = await resolvable(d, auth, req.id, req.label, "merge");
  const paths = req.scope === "paths"
    ? projectPaths(s.root, callerCwd(d, auth, req.cwd), req.paths ?? [])
    : null;
  const plan = await mergePlan(d, s, req.label, req.scope, paths);
  const what = `branch ${req.label} of split ${s.id}`;
  if (req.dryRun) {
    const clean = isClean(plan);
    return outcome({
      outcome: "planned",
      code: clean ? 0 : 1,
      message: clean
        ? `dry run: the --${req.scope} merge of ${what} applies cleanly; nothing was changed`
        : `dry run: the --${req.scope} merge of ${what} has ${
          plural(countOps(plan).conflict, "conflicting path")
        }; nothing was changed`,
      plan,
    });
  }
  return await applyBranchPlan(d, auth, s, req.label, {
    kind: "merge",
    scope: req.scope,
    plan,
    nothing: `nothing to merge: the project already has every change of ${what}`,
    done: `merged ${what} into ${s.root}`,
  });
}

/**
 * Ends a merge or a promote: a conflicted plan is refused (nothing changed),
 * one that changes nothing is answered as applied, and any other is applied
 * to split `s`'s source as a journaled resolution (`resolve_apply.ts`), the
 * taken files' bytes read by the service from the split's store or branch
 * `label`'s fork.
 */
export async function applyBranchPlan(
  d: ResolveDeps,
  auth: Authority,
  s: SplitRecord,
  label: string,
  a: {
    readonly kind: "merge" | "promote";
    readonly scope: ResolutionRecord["scope"];
    readonly plan: MergePlan;
    /** The message when the project already has the plan's result. */
    readonly nothing: string;
    /** What was done, for the message of an applied plan. */
    readonly done: string;
  },
): Promise<Outcome> {
  const plan = a.plan;
  if (!isClean(plan)) return conflictOutcome(plan, a.kind);
  if (!changesSomething(plan)) {
    return outcome({ outcome: "applied", code: 0, message: a.nothing, plan });
  }
  return await applyResolution(d, {
    split: s.id,
    label,
    kind: a.kind,
    scope: a.scope,
    root: s.root,
    who: creatorOf(auth),
    plan,
    undoes: null,
    refusedHint: "they changed since the plan: run it again to plan anew",
    done: a.done,
    request: (resolution) =>
      d.splitfs.request<AppliedReply | ApplyRefusedReply>({
        v: 1,
        t: "apply-plan",
        id: s.id,
        label,
        root: s.root,
        resolution,
        plan,
        ...parentOf(s),
      }),
  });
}
