/**
 * An argv branch's job admitted as a member of its job tree
 * (docs/rules.md, "Admission"): through the daemon's one entry
 * (`daemon/job_admit.ts`), with its parent — `job:<creator>` for a split a
 * job created, else `split:<id>/<label>` — so it counts against the
 * parent's fan-out (4 live children, its splits' branches included), its
 * tree's Kit VMs (`MARSH_TREE_KIT_VMS`), depth and total, and the daemon's
 * pool of 8 jobs shared with shell branches. The job's record (with its
 * lineage and a live capability) is written by the admission itself; a
 * refused branch has none: it ends `failed: <the rule's message>`, said on
 * the creator's stderr, in the manifest and by join, and counted in
 * `marsh status`'s `processes.refused`.
 *
 * @module
 */

import { type JobRecord, queuedJob, type SplitRecord } from "../journal/records.ts";
import { FANOUT_BRANCH_ENV } from "../model/fanout.ts";
import type { JobParent } from "../model/job_admission.ts";
import { AdmissionRefused } from "./job_admit.ts";
import type { LiveBranch, LiveSplit, SplitContext } from "./split_context.ts";
import { endUnlaunched } from "./split_settle.ts";

/** Who an argv branch's job is the child of: the job that made the split, else the branch. */
export function branchJobParent(split: SplitRecord, label: string): JobParent {
  return split.creator.kind === "job"
    ? { kind: "job", id: split.creator.id }
    : { kind: "split", split: split.id, label };
}

/**
 * Admits `b`'s job, or ends the branch `failed` with the refusal. True
 * when admitted: its record is in the journal, `queued`.
 */
export async function admitBranchJob(
  cx: SplitContext,
  live: LiveSplit,
  split: SplitRecord,
  b: LiveBranch,
  callerEnv: Readonly<Record<string, string>>,
): Promise<boolean> {
  const kit = b.kit!;
  const argv = (b.spec as { argv: readonly string[] }).argv;
  const record: JobRecord = queuedJob({
    id: b.jobId!,
    kit: kit.name,
    args: argv,
    split: live.id,
    label: b.label,
    session: live.session,
    createdMs: Date.now(),
  });
  const spawn = callerEnv.MARSH_SPAWN;
  // The creator's FANOUT_BRANCH (a split made in a `marsh fanout` branch): display only.
  const fanout = callerEnv[FANOUT_BRANCH_ENV];
  const conn = live.creatorConn;
  try {
    const admitted = cx.admitter.admit({
      record,
      kit,
      parent: branchJobParent(split, b.label),
      branch: { split: live.id, label: b.label },
      via: "branch",
      narrow: spawn === undefined ? {} : { env: spawn },
      tty: false,
      ...(fanout === undefined ? {} : { marks: { fanout } }),
    });
    for (const warning of admitted.warnings) {
      if (conn && !conn.isClosed) {
        await conn.send({ v: 1, t: "notice", message: `marsh split: ${b.label}: ${warning}` });
      }
    }
    return true;
  } catch (error) {
    if (!(error instanceof AdmissionRefused)) throw error;
    const status = `failed: ${error.message}`;
    cx.d.log.info(`split ${live.id}/${b.label}: job ${b.jobId} refused: ${error.message}`);
    if (conn && !conn.isClosed) {
      await conn.send({ v: 1, t: "notice", message: `marsh split: branch ${b.label}: ${status}` });
    }
    await endUnlaunched(cx, live, b, "failed", status);
    return false;
  }
}
