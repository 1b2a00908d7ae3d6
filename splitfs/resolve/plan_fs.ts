/**
 * The `plan-fs` frame (protocol/splitfs_resolve.ts; docs/resolution.md,
 * "The filesystem scopes' planner"): the `--filesystem` and `--paths` plans
 * of a branch, by the conservative three-way rule, and the dispatch to
 * promote's plan (plan_promote.ts). Nothing is written: every tree is only
 * read, through no-follow descriptors.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { CandidateDir } from "../capture/compare.ts";
import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import type { Held } from "../workspace/split_held.ts";
import { changedPaths } from "./changed_paths.ts";
import { type SourceState, sourceState, unplannedEntry } from "./source_state.ts";
import { openPlanInputs } from "./plan_inputs.ts";
import { planPromote } from "./plan_promote.ts";
import {
  afterOf,
  checkPlan,
  comparePaths,
  type MergePlan,
  pathProblem,
  type PlanEntry,
  PlanError,
  type Signature,
  threeWayEntry,
} from "../../model/resolution_plan.ts";
import type { PlanFsRequest, PlannedReply } from "../../protocol/splitfs_resolve.ts";

/**
 * Answers a `plan-fs` request on split `held`.
 *
 * @throws {RefusedError} for a request that cannot be planned (see `openPlanInputs`), a bad
 *   path, or a source that changed while it was read
 */
export function planFs(held: Held, req: PlanFsRequest): PlannedReply {
  const wanted = req.scope === "paths" ? checkPaths(req.paths ?? []) : null;
  using inputs = openPlanInputs(held, req.label, req.parent ?? null);
  if (req.scope === "promote") {
    const p = planPromote(inputs);
    return { v: 1, t: "planned", ...p, plan: settled(p.plan) };
  }
  const candidates = wanted === null ? inputs.candidates : narrow(inputs.candidates, wanted);
  const changes = changedPaths({
    base: inputs.base,
    baseIndex: inputs.baseIndex,
    other: inputs.branch,
    candidates,
    ignore: inputs.ignore,
    prunedIgnores: inputs.prunedIgnores,
    readyNs: inputs.readyNs,
  }).filter((c) => wanted === null || within(c.path, wanted));
  const sides = new Map<string, Sides>();
  const entries = new Map<string, PlanEntry>();
  const blocked = new Map<string, SourceState>();
  for (const c of changes) {
    const s = sourceState(inputs.source, c.path);
    sides.set(c.path, { base: c.base, branch: c.other, source: s.sig });
    const e = threeWayEntry(c.path, c.base, s.sig, c.other, "branch");
    if (e === null) continue;
    entries.set(c.path, e);
    if (s.why !== null && e.op !== "converged") blocked.set(c.path, s);
  }
  for (const [path, s] of blocked) {
    // Below a file the plan itself makes a directory, the path is free.
    const up = s.at === null ? undefined : entries.get(s.at);
    if (up?.op === "take" && up.after.kind === "dir") continue;
    entries.set(path, conflict(path, sides.get(path)!, s.why!));
  }
  guardRemovedDirs(inputs.source, entries, sides);
  settle(entries, sides);
  const plan: MergePlan = {
    scope: req.scope,
    trees: { base: inputs.baseTree, source: null, branch: null, result: null },
    entries: [...entries.values()].sort((a, b) => comparePaths(a.path, b.path)),
  };
  return { v: 1, t: "planned", plan: settled(plan), sourceChanges: [], sourceChangesMore: 0 };
}

/** A plan checked, or refused when the source moved while it was read (its states disagree). */
function settled(plan: MergePlan): MergePlan {
  try {
    return checkPlan(plan);
  } catch (error) {
    if (!(error instanceof PlanError)) throw error;
    throw new RefusedError(
      `the project changed while the plan was computed (${error.problems[0]}): plan again ` +
        `once it is idle`,
      { cause: error },
    );
  }
}

/** The three states of one path. */
interface Sides {
  readonly base: Signature;
  readonly branch: Signature;
  readonly source: Signature;
}

function conflict(path: string, s: Sides, reason: string): PlanEntry {
  return { op: "conflict", path, base: s.base, source: s.source, branch: s.branch, reason };
}

/**
 * A directory the plan removes (or replaces by a file) must hold nothing the
 * plan does not remove too: an entry the branch never had there (a file the
 * user made, an ignored file the split did not cover) makes it a conflict,
 * as the applier would refuse it.
 */
function guardRemovedDirs(
  source: Dir,
  entries: Map<string, PlanEntry>,
  sides: ReadonlyMap<string, Sides>,
): void {
  for (const [path, e] of entries) {
    if (e.op === "conflict" || e.op === "converged" || e.before.kind !== "dir") continue;
    if (afterOf(e).kind === "dir") continue;
    const extra = unplannedEntry(source, path, entries);
    if (extra !== null) {
      entries.set(
        path,
        conflict(path, sides.get(path)!, `the source has ${extra} in it, which the branch did not`),
      );
    }
  }
}

/** The strict ancestors of `path`, nearest first. */
function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let i = path.lastIndexOf("/"); i > 0; i = path.lastIndexOf("/", i - 1)) {
    out.push(path.slice(0, i));
  }
  return out;
}

/**
 * Makes the plan's tree well formed after it is applied (`planProblems`): a
 * path that holds something afterwards needs every planned ancestor to be a
 * directory. Only a conflict below a path the branch made a file or removed
 * (or the reverse) can break that; the path above becomes a conflict too,
 * or, when it already is one, the path below does.
 */
function settle(entries: Map<string, PlanEntry>, sides: ReadonlyMap<string, Sides>): void {
  for (let changed = true; changed;) {
    changed = false;
    for (const [path, e] of entries) {
      if (afterOf(e).kind === "absent") continue;
      for (const a of ancestors(path)) {
        const up = entries.get(a);
        if (up === undefined || afterOf(up).kind === "dir") continue;
        if (up.op === "conflict") {
          entries.set(path, conflict(path, sides.get(path)!, `${a} is in conflict`));
        } else {
          entries.set(a, conflict(a, sides.get(a)!, `${path} below it is in conflict`));
        }
        changed = true;
        break;
      }
    }
  }
}

/** Each path checked; a bad one refuses the request, naming it. */
function checkPaths(paths: readonly string[]): Set<string> {
  if (paths.length === 0) throw new RefusedError("no paths given: name at least one path");
  for (const p of paths) {
    const problem = pathProblem(p);
    if (problem !== null) throw new RefusedError(`${problem}: name a path inside the project`);
  }
  return new Set(paths);
}

/** Whether `path` is one of `wanted` or below one. */
function within(path: string, wanted: ReadonlySet<string>): boolean {
  if (wanted.has(path)) return true;
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
    if (wanted.has(path.slice(0, i))) return true;
  }
  return false;
}

/** The candidates narrowed to the paths wanted (each standing for everything below it). */
function narrow(candidates: CandidateDir, wanted: ReadonlySet<string>): CandidateDir {
  const tree = new Map<string, CandidateDir | null>();
  for (const w of wanted) {
    let at = tree;
    const parts = w.split("/");
    for (const [i, part] of parts.entries()) {
      const cur = at.get(part);
      if (cur === "all") break;
      if (i === parts.length - 1) {
        at.set(part, "all");
        break;
      }
      const next = cur ?? new Map<string, CandidateDir | null>();
      at.set(part, next);
      at = next as Map<string, CandidateDir | null>;
    }
  }
  return intersect(tree, candidates);
}

function intersect(want: CandidateDir, have: CandidateDir): CandidateDir {
  if (want === "all") return have;
  if (have === "all") return want;
  const out = new Map<string, CandidateDir | null>();
  for (const [name, sub] of want) {
    if (!have.has(name)) continue;
    const h = have.get(name) ?? null;
    // A name listed without a subtree is compared whole: the wanted subtree narrows it.
    out.set(name, h === null ? sub : intersect(sub ?? "all", h));
  }
  return out;
}
