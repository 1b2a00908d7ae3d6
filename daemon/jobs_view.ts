/**
 * `marsh jobs [--tree] [--all] [--json]` and `marsh jobs show JOB [--json]`
 * as the daemon answers them (docs/rules.md "Lineage"): the journal's jobs
 * and splits made into the forest (`model/job_forest.ts`), cut to what the
 * caller may see, and rendered (`model/job_listing.ts`).
 *
 * Who sees what: the host terminal the host scope (`--all` every tree); a
 * shell branch its session's trees (`--all` every tree); `--json` is not
 * scoped by session or age. A Kit job sees only its own subtree, in every
 * form: the capability filters here, not the CLI.
 *
 * Needs nothing beyond the journal it is given.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BranchRecord, SplitRecord } from "../journal/records.ts";
import {
  buildForest,
  findJob,
  type ForestNode,
  type JobsScope,
  type ListedBranch,
  type ListedSplit,
} from "../model/job_forest.ts";
import { commandLine } from "../model/job_lineage.ts";
import {
  formatJobShow,
  formatJobsText,
  jobsDocument,
  jobShowJson,
  jobsOf,
  jobsTreeDocument,
} from "../model/job_listing.ts";
import type { JobsListRequest } from "../protocol/daemon.ts";
import type { Authority } from "./conn.ts";
import { RequestError } from "./request_error.ts";

/** The fewest leading characters of a job id `marsh jobs show` takes. */
export const MIN_JOB_PREFIX = 8;
const JOB_PREFIX = /^[0-9a-z]+$/;

function listedBranch(s: SplitRecord, b: BranchRecord): ListedBranch {
  return {
    label: b.label,
    kind: b.kind,
    command: typeof b.run === "string" ? b.run : commandLine(b.run[0] ?? "", b.run.slice(1)),
    state: b.state,
    status: b.status,
    exitCode: b.code,
    jobId: b.jobId,
    files: b.files,
    createdMs: s.createdMs,
    startedMs: b.startedMs,
    finishedMs: b.finishedMs,
  };
}

/** Every split the journal holds, with its branches, as the forest draws them. */
export function listedSplits(journal: Pick<Journal, "listSplits" | "branches">): ListedSplit[] {
  return journal.listSplits().map((s) => ({
    id: s.id,
    sessionId: s.session,
    creatorJob: s.creator.kind === "job" ? s.creator.id : null,
    parent: s.parent,
    state: s.state,
    status: s.status,
    createdMs: s.createdMs,
    finishedMs: s.finishedMs,
    timing: s.timing,
    branches: journal.branches(s.id).sort((a, b) => a.index - b.index).map((b) =>
      listedBranch(s, b)
    ),
  }));
}

/**
 * The forest `auth` may see: every tree, or for a Kit job only its own
 * subtree (empty if the job is not recorded).
 */
function visibleForest(journal: Journal, auth: Authority): ForestNode[] {
  const forest = buildForest(journal.jobTree.listed(), listedSplits(journal));
  if (auth.kind !== "job") return forest;
  const own = findJob(forest, auth.job);
  return own === null ? [] : [own];
}

/** The text scope of a caller: a job's subtree is listed whole. */
function scopeOf(auth: Authority, all: boolean): JobsScope {
  if (all || auth.kind === "job") return { kind: "all" };
  if (auth.kind === "branch") return { kind: "session", session: auth.session };
  return { kind: "host" };
}

/**
 * The one job of `forest` that `given` names: its id, or a unique prefix
 * of at least {@linkcode MIN_JOB_PREFIX} characters.
 *
 * @throws {RequestError} 2 for a malformed, unknown or ambiguous id
 */
export function resolveJob(forest: readonly ForestNode[], given: string): string {
  const g = given.toLowerCase();
  if (!JOB_PREFIX.test(g) || g.length < MIN_JOB_PREFIX || g.length > 128) {
    throw new RequestError(
      2,
      `invalid job ${JSON.stringify(given.slice(0, 80))}: give its id, or at least ` +
        `${MIN_JOB_PREFIX} of its leading characters (see marsh jobs)`,
    );
  }
  const hits = [...new Set(jobsOf(forest).map((j) => j.id).filter((id) => id.startsWith(g)))];
  if (hits.length === 1) return hits[0]!;
  if (hits.length === 0) throw new RequestError(2, `unknown job ${g} (see marsh jobs --all)`);
  throw new RequestError(
    2,
    `job prefix ${g} is ambiguous: it names ${hits.sort().join(", ")}; give more characters`,
  );
}

/**
 * What `marsh jobs` prints for `req`, rendered at `nowMs`.
 *
 * @throws {RequestError} 2 for `show` of a malformed, unknown or ambiguous job
 */
export function jobsOutput(
  journal: Journal,
  auth: Authority,
  req: Pick<JobsListRequest, "view" | "all" | "json" | "job">,
  nowMs: number,
): string {
  const forest = visibleForest(journal, auth);
  if (req.view === "show") {
    const id = resolveJob(forest, req.job ?? "");
    const node = findJob(forest, id)!;
    const record = journal.getJob(id);
    const shown = { status: record?.status ?? null, container: record?.container ?? null };
    return req.json
      ? `${JSON.stringify(jobShowJson(node, shown))}\n`
      : formatJobShow(node, shown, nowMs);
  }
  if (req.json) {
    const doc = req.view === "tree" ? jobsTreeDocument(forest) : jobsDocument(forest);
    return `${JSON.stringify(doc)}\n`;
  }
  return formatJobsText(forest, scopeOf(auth, req.all), nowMs, { tree: req.view === "tree" });
}
