/**
 * What every resolution verb shares (docs/guide.md, "Resolving a branch"):
 * its links (the journal, the split-filesystem service, the `--git`
 * planner, `marsh discard`), the authority rule (only a split's creator
 * resolves it, and a branch never resolves itself or its siblings), which
 * branches can be resolved, and the outcome every verb ends with.
 *
 * The service and the planner are dependencies: the daemon reads no project
 * file and runs no Git; the service applies, the planner plans.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BranchRecord, Creator, ResolutionRecord, SplitRecord } from "../journal/records.ts";
import type { MergePlan } from "../model/resolution_plan.ts";
import type { ChangedPath, GitPlanner } from "../protocol/splitfs_resolve.ts";
import type { ResolutionInfo, ResolveOutcome } from "../protocol/daemon_resolve.ts";
import { SplitfsError, type SplitfsService } from "../protocol/splitfs_client.ts";
import { noBranch } from "./branch_controls.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";
import type { Log } from "./log.ts";
import { RequestError } from "./request_error.ts";
import type { TestSpec } from "./compare_runs.ts";
import type { CompareTest } from "../protocol/daemon_compare.ts";

export type { GitPlanner } from "../protocol/splitfs_resolve.ts";

/**
 * `marsh discard` of some branches of a split (`choose` discards the losers):
 * cancels the running ones, removes their forks, keeps their lineage with
 * `reason` and who asked. Throws when a branch could not be discarded.
 */
export type DiscardBranches = (
  splitId: string,
  labels: readonly string[],
  reason: string,
  who: Creator,
) => Promise<void>;

/** What the resolution verbs drive. */
export interface ResolveDeps {
  readonly journal: Journal;
  readonly splitfs: Pick<SplitfsService, "request">;
  readonly log: Log;
  /**
   * Has the service hold split `s`'s descriptors again (a kept split, or one
   * from before a restart), as `marsh join` does.
   *
   * @throws {RequestError} when the split cannot be opened (being joined, no workspace)
   */
  readonly open: (s: SplitRecord) => Promise<void>;
  readonly planner: GitPlanner;
  readonly discard: DiscardBranches;
  /**
   * `marsh compare --test`: runs the test in a throwaway fork of each of
   * `labels` (`daemon/compare_runs.ts`), answering in the same order.
   */
  readonly runTests: (
    s: SplitRecord,
    labels: readonly string[],
    spec: TestSpec,
  ) => Promise<CompareTest[]>;
  /**
   * Test-only: stops at `step` until the test kills the daemon
   * (`MARSH_TEST_PAUSE_AT`; `resolve-journaled`, `resolve-answered`).
   */
  readonly pause?: (step: string) => Promise<void>;
  /** Unix ms; tests fix it. */
  readonly now: () => number;
}

/** How a resolving request ended, before it becomes frames (`protocol/daemon_resolve.ts`). */
export interface Outcome {
  readonly outcome: ResolveOutcome;
  readonly code: 0 | 1 | 125;
  readonly message: string;
  readonly plan: MergePlan | null;
  readonly resolution: ResolutionRecord | null;
  readonly changed: readonly ChangedPath[];
  readonly sourceChanges: readonly string[];
  readonly sourceChangesMore: number;
  readonly discarded: readonly string[];
}

/** An outcome with the lists empty. */
export function outcome(
  o: Pick<Outcome, "outcome" | "code" | "message"> & Partial<Outcome>,
): Outcome {
  return {
    plan: null,
    resolution: null,
    changed: [],
    sourceChanges: [],
    sourceChangesMore: 0,
    discarded: [],
    ...o,
  };
}

/** `host`, `session:<split>/<label>` or `job:<id>`: who asked, as listings show it. */
export function whoString(who: Creator): string {
  return who.kind === "host" ? "host" : `${who.kind}:${who.id}`;
}

/** Who may resolve a split made by `creator`, in words. */
function whoMay(creator: Creator): string {
  switch (creator.kind) {
    case "host":
      return "the host user (from a shell outside its branches)";
    case "session":
      return `the branch that created it (${creator.id})`;
    case "job":
      return `the Kit job that created it (${creator.id})`;
  }
}

/**
 * Refuses `auth` unless it is the creator `creator` (of the split, or of the
 * resolution for an undo). A branch or a job never resolves the split it
 * runs in, nor its siblings: the host made that split.
 *
 * @throws {RequestError} (1: a refusal that changed nothing) naming who may
 */
export function authorize(auth: Authority, creator: Creator, verb: string, what: string): void {
  if (sameCreator(creatorOf(auth), creator)) return;
  const caller = auth.kind === "host"
    ? "the host"
    : auth.kind === "job"
    ? `Kit job ${auth.job}`
    : `branch ${auth.label} of split ${auth.split}`;
  throw new RequestError(
    1,
    `${caller} may not ${verb} ${what}: only ${whoMay(creator)} may` +
      (auth.kind === "host" ? "" : "; a branch never resolves itself or its siblings"),
  );
}

/** A split and one of its branches that can be resolved now. */
export interface Resolvable {
  readonly split: SplitRecord;
  readonly branch: BranchRecord;
}

/**
 * The split `id` and its branch `label`, if `auth` may `verb` them and the
 * branch's result is there: the split awaits a join or is kept (its forks
 * are on disk), and the branch was captured.
 *
 * @throws {RequestError} (2) otherwise, saying why and what to do
 */
export async function resolvable(
  d: ResolveDeps,
  auth: Authority,
  id: string,
  label: string,
  verb: string,
): Promise<Resolvable> {
  const s = d.journal.getSplit(id);
  if (s === null) throw new RequestError(2, `no split ${id}; marsh splits lists them`);
  authorize(auth, s.creator, verb, `split ${id}`);
  const branches = d.journal.branches(id);
  const b = branches.find((x) => x.label === label);
  if (b === undefined) throw new RequestError(2, noBranch(id, label, branches));
  if (s.state === "run") {
    throw new RequestError(
      2,
      `split ${id} is still running: ${verb} once it has finished (or stop it: marsh splits cancel ${id})`,
    );
  }
  if (s.state === "uncertain") {
    throw new RequestError(
      2,
      `split ${id} is uncertain (a daemon restart interrupted it): its results cannot be trusted, ` +
        `so nothing of it can be resolved; remove it with: marsh splits rm ${id}`,
    );
  }
  if (s.state !== "await" && s.state !== "kept") {
    throw new RequestError(
      2,
      `split ${id} is ${s.state}: its forks are gone, so nothing of it can be resolved`,
    );
  }
  if (b.state !== "captured") {
    throw new RequestError(
      2,
      `branch ${label} of split ${id} is ${b.state} (${b.status ?? "no status"}): ` +
        `only a captured branch's result can be resolved`,
    );
  }
  await d.open(s);
  return { split: s, branch: b };
}

/** A service failure of a request that changed nothing, as the caller's refusal. */
export function serviceRefusal(error: unknown, what: string): RequestError {
  if (error instanceof SplitfsError) {
    return new RequestError(
      error.kind === "internal" ? 125 : 2,
      `${what}: ${error.message}; nothing was changed`,
    );
  }
  return new RequestError(
    125,
    `${what}: ${error instanceof Error ? error.message : error}; nothing was changed`,
  );
}

/** Where a resolution's restore point is. */
export function restorePoint(r: ResolutionRecord): string {
  return `${r.root}/.marsh/resolve/${r.id}`;
}

/** A resolution as listings and replies show it. */
export function infoOf(r: ResolutionRecord): ResolutionInfo {
  return {
    id: r.id,
    split: r.split,
    label: r.label,
    kind: r.kind,
    scope: r.scope,
    state: r.state,
    who: whoString(r.who),
    root: r.root,
    created_unix_ms: r.createdMs,
    finished_unix_ms: r.finishedMs,
    paths_changed: r.changed,
    summary: r.summary,
    trees: r.trees,
    undoes: r.undoes,
    undone_by: r.undoneBy,
    restore_point: restorePoint(r),
    message: r.message,
    checkout: r.checkout ?? null,
  };
}

/** How many of each, in words (`2 paths`). */
export function plural(n: number, one: string, many = `${one}s`): string {
  return `${n} ${n === 1 ? one : many}`;
}
