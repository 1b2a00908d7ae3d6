/**
 * `marsh compare ID` (docs/resolution.md, "Comparing branches"): one row
 * per branch, from the journal (state, placement, exit), the service's
 * counts of its patch and overlaps (`branch-stats`), and a dry run of its
 * `--git` merge onto the source as it is now. Nothing outside the split's
 * own object store is written. With `--test`, the test runs in a throwaway
 * fork of each captured branch (`daemon/compare_runs.ts`) and each row gets
 * its result.
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import { countOps, isClean, type MergePlan } from "../model/resolution_plan.ts";
import {
  COMPARE_SCHEMA,
  type CompareReply,
  type CompareRow,
  type CompareTestRequest,
} from "../protocol/daemon_compare.ts";
import { runTests } from "./compare_runs.ts";
import type { BranchStatsReply } from "../protocol/splitfs_compare.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import type { Authority } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import { authorizeResolution } from "./resolve_authority.ts";
import type { SplitConn, SplitContext } from "./split_context.ts";
import { ensureOpen } from "./split_join.ts";

/** Plans the `--git` merge of one branch of an open split, changing nothing (a dry run). */
export type GitPlanOf = (s: SplitRecord, label: string) => Promise<MergePlan>;

/**
 * Compares every branch of split `id` for `auth`.
 *
 * @throws {RequestError} 2 for an unknown split or a caller that is not its creator;
 *   125 when the split's workspace cannot be read
 */
export async function compareSplit(
  cx: SplitContext,
  gitPlan: GitPlanOf,
  auth: Authority,
  id: string,
  test?: CompareTestRun,
): Promise<CompareReply> {
  const s = cx.d.journal.getSplit(id);
  if (!s) throw new RequestError(2, `no split ${id}; see marsh splits`);
  authorizeResolution(auth, s, "compare");
  if (test && auth.kind === "job") {
    throw new RequestError(
      2,
      "marsh compare --test cannot run inside a Kit job: run it from the host, or run the test in a branch",
    );
  }
  const branches = cx.d.journal.branches(id);
  let stats: BranchStatsReply;
  try {
    await ensureOpen(cx, cx.liveOf(id, s.session), s);
    stats = await cx.d.splitfs.request<BranchStatsReply>({
      v: 1,
      t: "branch-stats",
      id,
      labels: branches.map((b) => b.label),
    });
  } catch (error) {
    if (error instanceof SplitfsError) {
      throw new RequestError(125, `split ${id}: its results cannot be read: ${error.message}`);
    }
    throw error;
  }
  const rows: CompareRow[] = [];
  for (const [i, b] of branches.entries()) {
    const st = stats.branches[i]!;
    const captured = b.state === "captured" && st.present;
    let clean: boolean | null = null, conflicts: number | null = null;
    let note: string | undefined;
    if (captured && st.files > 0) {
      try {
        const plan = await gitPlan(s, b.label);
        clean = isClean(plan);
        conflicts = countOps(plan).conflict;
      } catch (error) {
        note = `no merge check: ${error instanceof Error ? error.message : String(error)}`;
      }
    } else if (captured) {
      clean = true;
      conflicts = 0;
    } else {
      note = `not captured (${b.status ?? b.state}): it cannot be merged`;
    }
    rows.push({
      label: b.label,
      state: b.state,
      placement: b.placement,
      status: b.status,
      code: b.code,
      captured,
      files: st.files,
      added: st.added,
      removed: st.removed,
      binary: st.binary,
      clean,
      conflicts,
      overlaps: st.overlaps,
      ...(note !== undefined ? { note } : {}),
    });
  }
  if (test === undefined) return { v: 1, t: "compare", schema: COMPARE_SCHEMA, id, branches: rows };
  const tested = rows.filter((r) => r.captured).map((r) => r.label);
  const results = await withCancel(test.conn, (signal) =>
    runTests(cx, s, tested, {
      script: test.request.script,
      timeoutS: test.request.timeoutS,
      env: test.request.env,
      signal,
      notice: (message) => void test.conn.send({ v: 1, t: "notice", message }),
    }));
  const byLabel = new Map(tested.map((label, i) => [label, results[i]!]));
  const withTests = rows.map((r) => ({
    ...r,
    test: byLabel.get(r.label) ??
      { exit: null, ms: 0, status: `not run: not captured (${r.status ?? r.state})` },
  }));
  return { v: 1, t: "compare", schema: COMPARE_SCHEMA, id, branches: withTests };
}

/** `--test` as asked, and the connection whose Ctrl-C (or drop) cancels it. */
export interface CompareTestRun {
  readonly request: CompareTestRequest;
  readonly conn: Pick<SplitConn, "next" | "send">;
}

/**
 * Runs `body` with a signal that aborts when the caller sends
 * `resolve.compare.cancel` or drops the connection.
 */
async function withCancel<T>(
  conn: Pick<SplitConn, "next">,
  body: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController();
  let done = false;
  void (async () => {
    while (!done) {
      const frame = await conn.next();
      if (frame === null || frame.t === "resolve.compare.cancel") {
        abort.abort();
        return;
      }
    }
  })();
  try {
    return await body(abort.signal);
  } finally {
    done = true;
  }
}
