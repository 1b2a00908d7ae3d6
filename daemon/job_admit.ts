/**
 * The daemon's one entry to job admission (docs/rules.md, "Admission"):
 * every Kit job it starts (a `marsh run` or a link's child, a top-level
 * `marsh run` from the host or a shell branch, a split argv branch's job)
 * is admitted here, and nowhere else.
 *
 * {@linkcode JobAdmitter.admit} builds the `LaunchRequest` the pure rules
 * of `model/job_admission.ts` decide (the parent, the Kit's identity = its
 * image id, its own wall limit, how the launch was asked for, the spawn
 * narrowing, every registered name, the terminal flag, the clock) and hands
 * it to `Journal.jobTree.admit`, which re-reads the parent's capability,
 * decides and inserts the job's record in one `BEGIN IMMEDIATE`
 * transaction: a cancel of the parent's tree is ordered against it, so no
 * child is ever left live under a cancelling parent. A refusal records no
 * job (only the counters) and is thrown as an {@linkcode AdmissionRefused}
 * carrying the message and its exit status.
 *
 * The settings (`MARSH_TREE_KIT_VMS`, `MARSH_JOB_WALL_SECONDS`) are read
 * once, at the daemon's start ({@linkcode readAdmissionConfig}).
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { JobRecord } from "../journal/records.ts";
import {
  type AdmissionConfig,
  type AdmissionLimit,
  type AdmittedLineage,
  type JobParent,
  type LaunchRequest,
  type LaunchVia,
} from "../model/job_admission.ts";
import { admissionConfig, JOB_WALL_ENV, TREE_KIT_VMS_ENV } from "../model/job_admission_config.ts";
import type { SpawnNarrowing } from "../model/job_spawn.ts";
import { isLinkName } from "../model/kit_name.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { RequestError } from "./request_error.ts";

/**
 * A launch admission refused. `code` (the request's exit status) is 125,
 * 126 for a link's name outside its job's spawn set, or 2 for a spawn
 * narrowing that cannot be read; `message` is the rule's text without a
 * `marsh: ` prefix (the caller adds its own, docs/messages.md). Nothing was
 * recorded but the refusal's count.
 */
export class AdmissionRefused extends RequestError {
  override name = "AdmissionRefused";
  constructor(
    /** The limit the launch broke (`model/job_admission.ts`'s table). */
    readonly limit: AdmissionLimit,
    message: string,
    code: 2 | 125 | 126,
  ) {
    super(code, message);
  }
}

/** A daemon setting that cannot be read: the daemon does not start. */
export class AdmissionConfigError extends Error {
  override name = "AdmissionConfigError";
}

/**
 * The daemon's admission settings from `get` (its environment):
 * `MARSH_TREE_KIT_VMS` (1–64) and `MARSH_JOB_WALL_SECONDS` (1–86400).
 * Call once at the daemon's start.
 *
 * @throws {AdmissionConfigError} naming the variable, what it must be and how to unset it
 */
export function readAdmissionConfig(get: (name: string) => string | undefined): AdmissionConfig {
  const read = admissionConfig({ treeKitVms: get(TREE_KIT_VMS_ENV), wallS: get(JOB_WALL_ENV) });
  if (!read.ok) throw new AdmissionConfigError(read.message);
  return read.config;
}

/** One Kit job to admit. */
export interface JobLaunch {
  /** The new job's record, inserted `queued` when admitted; its `id` is the job's. */
  readonly record: JobRecord;
  /** The registered Kit it runs: its name, image id (its identity) and wall limit count. */
  readonly kit: Pick<KitRecord, "name" | "imageId" | "wallS">;
  /** Who starts it: `session`, a shell branch (`split`) or a job. */
  readonly parent: JobParent;
  /** For a split argv branch's job: its split and label (the same-Kit walk stops there). */
  readonly branch: { readonly split: string; readonly label: string } | null;
  /** How it was asked for: a refusal by the spawn set exits 126 from a `link` only. */
  readonly via: LaunchVia;
  /** `MARSH_SPAWN`, `--spawn`, `--no-spawn` as the caller gave them. */
  readonly narrow: SpawnNarrowing;
  /** The asking link's or `marsh run`'s stdin or stdout is a terminal (refused for a child). */
  readonly tty: boolean;
}

/** An admitted job: its record is in the journal, `queued`, with this lineage and a live capability. */
export interface Admitted {
  readonly lineage: AdmittedLineage;
  /** For the caller's stderr: a `--spawn`/`MARSH_SPAWN` name that was left out (nothing widens). */
  readonly warnings: readonly string[];
  /** The top-level tree (its root job's id). */
  readonly tree: string;
}

/** The part of the journal admission uses. */
export type AdmitJournal = Pick<Journal, "jobTree" | "listKits">;

/** Admits Kit jobs against the journal with the daemon's settings. */
export class JobAdmitter {
  readonly #journal: AdmitJournal;
  readonly #now: () => number;
  /** The settings read at the daemon's start. */
  readonly config: AdmissionConfig;

  constructor(journal: AdmitJournal, config: AdmissionConfig, now: () => number = Date.now) {
    this.#journal = journal;
    this.config = config;
    this.#now = now;
  }

  /** Every registered name that can have a link: a root job's widest spawn set. */
  registered(): string[] {
    return [...new Set(this.#journal.listKits().map((k) => k.name))]
      .filter((n) => isLinkName(n) && n !== "marsh")
      .sort();
  }

  /**
   * Admits `launch` or refuses it. Admitted: its record is in the journal
   * (`queued`, lineage set, capability live) and the caller must carry the
   * job to its end (the worker's verified deletion frees its slot; its end
   * revokes its capability: `Journal.jobTree.revoke`). Refused: nothing is
   * recorded but the counters.
   *
   * @throws {AdmissionRefused} with the rule's message and exit status
   * @throws {Deno.errors.AlreadyExists} for a job id already recorded
   */
  admit(launch: JobLaunch): Admitted {
    const req: LaunchRequest = {
      id: launch.record.id,
      name: launch.kit.name,
      // The id checked at registration: a re-tagged image is not another Kit.
      kit: launch.kit.imageId,
      kitWallS: launch.kit.wallS,
      parent: launch.parent,
      branch: launch.branch,
      via: launch.via,
      narrow: launch.narrow,
      registered: this.registered(),
      tty: launch.tty,
      nowMs: this.#now(),
    };
    const d = this.#journal.jobTree.admit(req, this.config, launch.record);
    if (!d.ok) throw new AdmissionRefused(d.limit, d.message, d.exit);
    return { lineage: d.lineage, warnings: d.warnings, tree: d.tree };
  }
}
