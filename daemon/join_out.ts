/**
 * What a join makes sure of before a consumer runs: the split's `out/` holds
 * everything it is told about (docs/guide.md, "Results: out/ and the
 * manifest"). On a full disk a branch's publish or the manifest's write can
 * fail; the split then stays, its attempt dirs are kept (they hold the only
 * copy of the branches' output), and each `marsh join` tries again: what a
 * publish left out is published again, and the manifest is written anew.
 * While something is still missing the consumer never runs.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BranchRecord } from "../journal/records.ts";
import { ATTEMPTS_DIR } from "../protocol/control_dir.ts";
import type { OutCheckedReply } from "../protocol/splitfs_out.ts";
import type { SplitfsService } from "../protocol/splitfs_client.ts";
import type { Log } from "./log.ts";
import { removeAttemptDir } from "./attempts.ts";

/** What {@linkcode completeOut} needs of the daemon. */
export interface OutDeps {
  readonly journal: Journal;
  readonly splitfs: Pick<SplitfsService, "request">;
  readonly log: Log;
  /** The control dir. */
  readonly home: string;
}

/** Branches whose processes may still run publish nothing (protocol/worker.ts). */
function ended(b: BranchRecord): boolean {
  return b.state === "captured" || b.state === "rejected" || b.state === "failed" ||
    b.state === "cancelled";
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function isFile(path: string): boolean {
  try {
    return Deno.lstatSync(path).isFile;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

async function missingOf(d: OutDeps, id: string, branches: readonly BranchRecord[]) {
  const reply = await d.splitfs.request<OutCheckedReply>({
    v: 1,
    t: "out-check",
    id,
    branches: branches.filter(ended).map((b) => ({
      label: b.label,
      captured: b.state === "captured",
      changed: b.state === "captured" && b.files > 0,
    })),
  });
  return reply.missing;
}

/**
 * Publishes again every ended branch whose `out/<label>/` has none of its
 * published files (a publish that failed wrote nothing), from its kept
 * attempt dir, then writes `out/manifest.json` from `manifestJson`.
 *
 * @returns `null` when `out/` is complete, else what is missing and why
 *   (`out/manifest.json was not written: write "…": no space left on device`)
 * @throws {SplitfsError} when the service cannot check `out/` at all
 */
export async function completeOut(
  d: OutDeps,
  id: string,
  manifestJson: () => string,
): Promise<string | null> {
  const branches = d.journal.branches(id);
  const why = new Map<string, string>();
  const missing = await missingOf(d, id, branches);
  for (const m of missing) {
    const b = branches.find((x) => x.label === m.label);
    if (!b || !["status", "stdout", "stderr"].every((f) => m.files.includes(f))) continue;
    const dir = b.attempt === null ? null : `${d.home}/${ATTEMPTS_DIR}/${b.attempt}`;
    const kept = dir !== null && isFile(`${dir}/stdout`) && isFile(`${dir}/stderr`);
    if (dir !== null && !kept && b.state !== "failed" && b.state !== "cancelled") {
      why.set(b.label, `its output is gone from ${dir}`);
      continue;
    }
    try {
      await d.splitfs.request({
        v: 1,
        t: "publish",
        id,
        label: b.label,
        status: b.status ?? b.state,
        stdout: kept ? `${dir}/stdout` : null,
        stderr: kept ? `${dir}/stderr` : null,
      });
      d.log.info(`split ${id}/${b.label}: published again before the join`);
      if (dir !== null) removeAttemptDir(dir, d.log, `split ${id}/${b.label}`);
    } catch (error) {
      why.set(b.label, messageOf(error));
    }
  }
  // Nothing was missing: nothing was published again, so nothing to check again.
  const still = missing.length === 0 ? [] : await missingOf(d, id, branches);
  const first = still[0];
  if (first !== undefined) {
    const reason = why.get(first.label);
    return `out/${first.label}/${first.files[0]} was not written` +
      (reason ? `: ${reason}` : "") +
      (still.length > 1 || first.files.length > 1
        ? ` (and ${still.reduce((n, m) => n + m.files.length, 0) - 1} more files)`
        : "");
  }
  try {
    await d.splitfs.request({ v: 1, t: "manifest", id, json: manifestJson() });
  } catch (error) {
    return `out/manifest.json was not written: ${messageOf(error)}`;
  }
  return null;
}
