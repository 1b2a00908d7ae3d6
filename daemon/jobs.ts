/**
 * Kit jobs as the daemon shows and settles them: `marsh jobs` (the job
 * forest a caller may see, `daemon/jobs_view.ts`), `marsh workers reset KIT` (the Kit's leftover
 * containers removed, verified, and the slots their jobs held released),
 * and what a restart found (uncertain jobs keep their slots: docs/rules.md "Kit jobs").
 *
 * A job holds its branch's pool slot while its cleanup is `live` or
 * `uncertain`; the holder is `<split>/<label>` in the job's session, as for
 * a live branch (`daemon/splits.ts`).
 *
 * Needs nothing beyond the journal, the pool and the worker it is given.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { RecoveryReport } from "../journal/records.ts";
import { kitNameProblem } from "../model/kit_name.ts";
import { type JobsListRequest, SPOOL_CHUNK, type WorkersResetReply } from "../protocol/daemon.ts";
import type { Authority, Conn } from "./conn.ts";
import { jobsOutput } from "./jobs_view.ts";
import type { Log } from "./log.ts";
import type { BranchPool } from "./pool.ts";
import { RequestError } from "./request_error.ts";
import type { KitResetResult } from "./worker_link.ts";

/** The pool holder of a job's slot. */
export function slotHolder(j: { readonly split: string; readonly label: string }): string {
  return `${j.split}/${j.label}`;
}

/**
 * `N held by uncertain jobs on Kit K: run marsh workers reset K` for each
 * Kit whose uncertain jobs hold slots in `session`, joined by `; `, or `""`.
 */
export function heldByUncertainJobs(
  journal: Pick<Journal, "listJobs">,
  session: string,
): string {
  const byKit = new Map<string, number>();
  for (const j of journal.listJobs({ cleanups: ["uncertain"] })) {
    if (j.session === session) byKit.set(j.kit, (byKit.get(j.kit) ?? 0) + 1);
  }
  return [...byKit].map(([kit, n]) =>
    `${n} held by uncertain jobs on Kit ${kit}: run marsh workers reset ${kit}`
  ).join("; ");
}

const enc = new TextEncoder();

/** What {@linkcode KitJobs} drives. */
export interface KitJobsDeps {
  readonly journal: Journal;
  readonly pool: BranchPool;
  readonly log: Log;
  /** Asks the worker to remove the Kit's leftover containers; null when it has no engine. */
  readonly reset: ((kit: string) => Promise<KitResetResult>) | null;
  /** Why the worker has no engine, for the refusal. */
  readonly engineProblem?: string;
}

/** `marsh jobs` and `marsh workers reset`. */
export class KitJobs {
  readonly #d: KitJobsDeps;
  /** One reset at a time per Kit: a second would race the first over the same slots. */
  readonly #resetting = new Set<string>();

  constructor(deps: KitJobsDeps) {
    this.#d = deps;
  }

  /**
   * The jobs held slots at the last daemon's end, held again in this one's
   * pool, and what the restart found reported: the log names each uncertain
   * job's container, and the split's reason and branch's status say to run
   * `marsh workers reset KIT`. Call once at start, after recovery.
   */
  adopt(report: RecoveryReport): void {
    const { journal, pool, log } = this.#d;
    for (const j of report.jobs) {
      if (j.to !== "uncertain") {
        log.info(`restart: job ${j.id} (kit ${j.kit}) of ${j.split}/${j.label} never started`);
        continue;
      }
      const what = j.container === null
        ? `its container (if the engine made one)`
        : `its container ${j.container.slice(0, 12)}`;
      const why = `${what} may still run: run marsh workers reset ${j.kit}`;
      log.info(
        `restart: job ${j.id} (kit ${j.kit}) of ${j.split}/${j.label} uncertain; ${
          j.container === null ? "no container id recorded" : `container ${j.container}`
        }; its slot stays held until: marsh workers reset ${j.kit}`,
      );
      const split = journal.getSplit(j.split);
      if (split !== null) {
        const note = `branch ${j.label} (kit ${j.kit}): ${why}`;
        journal.updateSplit(j.split, {
          reason: split.reason === null ? note : `${split.reason}; ${note}`,
        });
      }
      const branch = journal.getBranch(j.split, j.label);
      if (branch !== null && branch.status === null) {
        journal.updateBranch(j.split, j.label, { status: `failed: ${why}`, code: 125 });
      }
      journal.updateJob(j.id, { status: `failed: ${why}`, code: 125 });
    }
    for (const j of journal.listJobs({ cleanups: ["live", "uncertain"] })) {
      pool.hold(j.session, slotHolder(j));
    }
  }

  /**
   * `marsh jobs` and `marsh jobs show` (`daemon/jobs_view.ts`), sent as
   * `chunk` frames then `jobs`: a Kit job sees only its own subtree.
   *
   * @throws {RequestError} 2 for `show` of a malformed, unknown or ambiguous job
   */
  async list(conn: Conn, req: JobsListRequest): Promise<void> {
    const bytes = enc.encode(jobsOutput(this.#d.journal, conn.authority, req, Date.now()));
    for (let at = 0; at < bytes.length; at += SPOOL_CHUNK) {
      await conn.send({ v: 1, t: "chunk", data: bytes.subarray(at, at + SPOOL_CHUNK).toBase64() });
    }
    await conn.send({ v: 1, t: "jobs" });
  }

  /**
   * `marsh workers reset KIT` (host only): the worker removes every
   * container of the Kit that no live attempt runs, and verifies each is
   * gone; then every job of the Kit whose cleanup was `uncertain` and whose
   * container is not among the failures is marked removed and its slot
   * released.
   *
   * @throws {RequestError} (2) for a branch caller or a malformed name,
   *   (125) when the worker has no engine, cannot list the Kit's containers,
   *   or a reset of the Kit is already running
   */
  async reset(auth: Authority, kit: string): Promise<Omit<WorkersResetReply, "v" | "t">> {
    const { journal, pool, log } = this.#d;
    if (auth.kind !== "host") throw new RequestError(2, "only the host may reset workers");
    const problem = kitNameProblem(kit);
    if (problem !== null) throw new RequestError(2, problem);
    if (this.#d.reset === null) {
      throw new RequestError(
        125,
        `no Docker engine for Kit jobs: ${this.#d.engineProblem ?? "none was chosen"}`,
      );
    }
    if (this.#resetting.has(kit)) {
      throw new RequestError(125, `a reset of Kit ${kit} is already running`);
    }
    this.#resetting.add(kit);
    let found: KitResetResult;
    try {
      found = await this.#d.reset(kit);
    } catch (error) {
      throw new RequestError(
        125,
        `cannot reset Kit ${kit}: ${error instanceof Error ? error.message : error}`,
      );
    } finally {
      this.#resetting.delete(kit);
    }
    if (found.error !== undefined) {
      throw new RequestError(125, `cannot reset Kit ${kit}: ${found.error}; nothing was released`);
    }
    const failedIds = new Set(found.failed.map((c) => c.container));
    const failedJobs = new Set(found.failed.map((c) => c.job).filter((j) => j !== null));
    const released: { job: string; split: string; label: string }[] = [];
    for (const j of journal.listJobs({ kit, cleanups: ["uncertain"] })) {
      if (j.container !== null && failedIds.has(j.container)) continue;
      if (failedJobs.has(j.id)) continue;
      // A job without a recorded container: only a reset that failed on nothing clears it.
      if (j.container === null && found.failed.length > 0) continue;
      journal.updateJob(j.id, { cleanup: "removed" });
      pool.release(j.session, slotHolder(j));
      released.push({ job: j.id, split: j.split, label: j.label });
    }
    const brief = (c: KitResetResult["removed"][number]) => ({
      container: c.container,
      job: c.job,
      split: c.split,
      label: c.label,
    });
    log.info(
      `workers reset ${kit}: removed ${found.removed.length} container(s), released ${released.length} slot(s), ${found.failed.length} not removed`,
    );
    return {
      kit,
      removed: found.removed.map(brief),
      live: found.live.map(brief),
      failed: found.failed.map((c) => ({ ...brief(c), message: c.message })),
      released,
    };
  }
}
