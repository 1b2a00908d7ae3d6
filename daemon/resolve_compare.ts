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

import { countOps, isClean } from "../model/resolution_plan.ts";
import {
  COMPARE_SCHEMA,
  type CompareReply,
  type CompareRow,
  type CompareTestRequest,
} from "../protocol/daemon_compare.ts";
import type { BranchStatsReply } from "../protocol/splitfs_compare.ts";
import type { Authority } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import { authorize, type ResolveDeps, serviceRefusal } from "./resolve_context.ts";
import { mergePlan } from "./resolve_merge.ts";
import type { SplitConn } from "./split_context.ts";

/**
 * Compares every branch of split `id` for `auth`.
 *
 * @throws {RequestError} 2 for an unknown split or one whose results are gone,
 *   1 for a caller that is not its creator; 125 when its results cannot be read
 */
export async function compareSplit(
  d: ResolveDeps,
  auth: Authority,
  id: string,
  test?: CompareTestRun,
): Promise<CompareReply> {
  const s = d.journal.getSplit(id);
  if (s === null) throw new RequestError(2, `no split ${id}; marsh splits lists them`);
  authorize(auth, s.creator, "compare", `split ${id}`);
  if (test && auth.kind === "job") {
    throw new RequestError(
      2,
      "marsh compare --test cannot run inside a Kit job: run it from the host, or run the test in a branch",
    );
  }
  if (s.state !== "run" && s.state !== "await" && s.state !== "kept") {
    throw new RequestError(
      2,
      `split ${id} is ${s.state}: its results are gone, so there is nothing to compare`,
    );
  }
  const branches = d.journal.branches(id);
  await d.open(s);
  let stats: BranchStatsReply;
  try {
    stats = await d.splitfs.request<BranchStatsReply>({
      v: 1,
      t: "branch-stats",
      id,
      labels: branches.map((b) => b.label),
    });
  } catch (error) {
    throw serviceRefusal(error, `split ${id}: its results could not be read`);
  }
  const rows: CompareRow[] = [];
  for (const [i, b] of branches.entries()) {
    const st = stats.branches[i]!;
    const captured = b.state === "captured" && st.present;
    let clean: boolean | null = null, conflicts: number | null = null;
    let note: string | undefined;
    if (captured && st.files > 0) {
      try {
        const plan = await mergePlan(d, s, b.label, "git", null);
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
    d.runTests(s, tested, {
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
