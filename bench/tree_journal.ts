/**
 * `deno task bench --tree`'s second table: a 64-job tree's admission and
 * cancellation in the journal alone (docs/rules.md "Admission"), on a
 * fresh journal in a temp dir: 64 launches into one tree (a root, 4
 * children under it, 4 under each of those, and so on, breadth first: the
 * fan-out and depth limits' shape), each one `BEGIN IMMEDIATE`
 * transaction that re-reads the parent's capability, decides and inserts
 * (`Journal.jobTree.admit`, one fsync each); then the cancel of the whole
 * tree, one transaction marking every capability `cancelling`. The pool is
 * taken as wide enough: only the decision and the record are timed, not
 * the containers.
 *
 * Needs read and write on the temp dir.
 *
 * @module
 */

import { Journal } from "../journal/journal.ts";
import { type JobRecord, queuedJob } from "../journal/records.ts";
import { JOB_DEPTH, JOB_FAN_OUT, JOB_TREE_TOTAL } from "../model/limits.ts";
import type { LaunchRequest } from "../model/job_admission.ts";

/** What the journal side measured. */
export interface TreeJournalResult {
  readonly jobs: number;
  /** Median and slowest admission of one launch, ms. */
  readonly admitMedianMs: number;
  readonly admitMaxMs: number;
  /** All 64 admissions, ms. */
  readonly admitTotalMs: number;
  /** The cancel of the whole tree (one transaction), ms. */
  readonly cancelMs: number;
}

function record(id: string, now: number): JobRecord {
  return queuedJob({
    id,
    kit: "fixture",
    args: ["fixture", "true"],
    split: "",
    label: "",
    session: "bench",
    createdMs: now,
  });
}

/** Admits a 64-job tree into a fresh journal, then cancels it; times both. */
export function measureTreeJournal(): TreeJournalResult {
  const dir = Deno.makeTempDirSync({ prefix: "marsh-bench-tree-journal-" });
  try {
    using journal = Journal.open(`${dir}/journal.db`);
    const kits = ["a", "b"];
    const times: number[] = [];
    // Breadth first: each job takes children until the fan-out, the tree until the depth.
    const queue: { id: string | null; depth: number }[] = [{ id: null, depth: 0 }];
    let n = 0;
    while (n < JOB_TREE_TOTAL && queue.length > 0) {
      const parent = queue.shift()!;
      const width = parent.id === null ? 1 : JOB_FAN_OUT;
      for (let i = 0; i < width && n < JOB_TREE_TOTAL; i++) {
        const id = `j${String(n).padStart(3, "0")}`;
        // Alternating Kits by depth: no same-Kit chain refuses the shape.
        const kit = kits[parent.depth % 2]!;
        const now = Date.now();
        const req: LaunchRequest = {
          id,
          name: kit,
          kit: `kit-${kit}`,
          kitWallS: 3600,
          parent: parent.id === null
            ? { kind: "session", id: "bench" }
            : { kind: "job", id: parent.id },
          branch: null,
          via: "run",
          narrow: {},
          registered: kits,
          tty: false,
          nowMs: now,
        };
        const t0 = performance.now();
        const d = journal.jobTree.admit(
          req,
          { pool: 1_000, treeKitVms: 4, wallS: null },
          record(id, now),
        );
        times.push(performance.now() - t0);
        if (!d.ok) throw new Error(`launch ${id} refused: ${d.message}`);
        n++;
        if (parent.depth + 1 < JOB_DEPTH) queue.push({ id, depth: parent.depth + 1 });
      }
    }
    const t0 = performance.now();
    const cancelled = journal.jobTree.cancelTree("j000");
    const cancelMs = performance.now() - t0;
    if (cancelled.length !== n) throw new Error(`the cancel found ${cancelled.length} of ${n}`);
    const sorted = [...times].sort((a, b) => a - b);
    return {
      jobs: n,
      admitMedianMs: sorted[Math.floor(sorted.length / 2)]!,
      admitMaxMs: sorted[sorted.length - 1]!,
      admitTotalMs: times.reduce((a, b) => a + b, 0),
      cancelMs,
    };
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Its lines. */
export function renderTreeJournal(r: TreeJournalResult): string {
  return [
    `a ${r.jobs}-job tree in the journal (admission: one BEGIN IMMEDIATE transaction and fsync each)`,
    `  admission per launch: median ${r.admitMedianMs.toFixed(2)} ms, slowest ${
      r.admitMaxMs.toFixed(2)
    } ms, all ${r.jobs} ${r.admitTotalMs.toFixed(0)} ms`,
    `  cancel of the whole tree (one transaction): ${r.cancelMs.toFixed(2)} ms`,
  ].join("\n");
}
