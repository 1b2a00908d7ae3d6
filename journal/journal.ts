/**
 * The daemon's journal: one SQLite file (`node:sqlite`) in the control dir,
 * owner-only, in WAL mode with `synchronous=FULL`, so a write that returned
 * survives `kill -9` of the daemon and a power cut. Every operation is one
 * transaction, and the daemon calls each one before the effect it describes
 * (the split before its snapshot, a branch before its launch, a state before
 * a release).
 *
 * Only the daemon opens the journal (docs/architecture.md "Permissions").
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import * as branchRows from "./_branches.ts";
import { CheckpointJournal } from "./checkpoints.ts";
import { JobTreeJournal } from "./job_tree.ts";
import { Connection, wrap } from "./_connection.ts";
import * as kitJobs from "./_kit_jobs.ts";
import * as recovery from "./_recovery.ts";
import * as resolutions from "./_resolutions.ts";
import * as splits from "./_splits.ts";
import { JournalError, JournalVersionError } from "./errors.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { applyMigrations, readSchemaVersion, SCHEMA_VERSION } from "./migrations.ts";
import type {
  BranchPatch,
  BranchRecord,
  BranchState,
  CapabilityRecord,
  JobFilter,
  JobPatch,
  JobRecord,
  RecoveryReport,
  ResolutionEnd,
  ResolutionRecord,
  SplitCounts,
  SplitFilter,
  SplitPatch,
  SplitRecord,
  SplitState,
} from "./records.ts";

export { RESTART_REASON } from "./_recovery.ts";

/** How long a writer waits for another connection's lock before failing. */
export const BUSY_TIMEOUT_MS = 5000;

/** The connection settings, read back from SQLite. */
export interface JournalSettings {
  /** `wal`. */
  readonly journalMode: string;
  /** `FULL`. */
  readonly synchronous: "OFF" | "NORMAL" | "FULL" | "EXTRA";
  readonly foreignKeys: boolean;
  readonly busyTimeoutMs: number;
}

const SYNCHRONOUS = ["OFF", "NORMAL", "FULL", "EXTRA"] as const;

/**
 * An open journal. Use `using journal = Journal.open(path)`.
 *
 * Methods throw `Deno.errors.NotFound` for a split, branch or capability
 * that does not exist, `Deno.errors.AlreadyExists` for a duplicate,
 * `TypeError` for a record the types forbid, {@linkcode JournalCorruptError}
 * for a row holding a value this code does not know, and
 * {@linkcode JournalError} when SQLite fails (for example a lock held past
 * {@linkcode BUSY_TIMEOUT_MS}).
 */
export class Journal implements Disposable {
  readonly #c: Connection;
  readonly #path: string;
  readonly #version: number;
  #checkpoints: CheckpointJournal | null = null;
  #jobTree: JobTreeJournal | null = null;

  private constructor(db: DatabaseSync, path: string, version: number) {
    this.#c = new Connection(db, path);
    this.#path = path;
    this.#version = version;
  }

  /**
   * Opens the journal at `path`, creating it mode 0600 when missing and
   * tightening an existing file to 0600, then applies the missing
   * migrations in one transaction.
   *
   * Needs `--allow-read` and `--allow-write` on the file's directory (SQLite
   * adds `-wal` and `-shm` files beside it).
   *
   * @throws {Deno.errors.NotCapable} without those permissions.
   * @throws {JournalVersionError} when the file's schema is newer than
   *   {@linkcode SCHEMA_VERSION}; the file is left unchanged.
   * @throws {JournalError} when the file is not a journal or SQLite fails.
   */
  static open(path: string): Journal {
    ensureFile(path);
    let db: DatabaseSync;
    try {
      db = new DatabaseSync(path);
    } catch (error) {
      throw wrap(error, `open "${path}"`);
    }
    try {
      // Connection settings only: nothing here writes to the file.
      db.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.exec("PRAGMA foreign_keys = ON");
      db.exec("PRAGMA synchronous = FULL");
      const found = readSchemaVersion(db, path);
      if (found > SCHEMA_VERSION) throw new JournalVersionError(path, found, SCHEMA_VERSION);
      const mode = Deno.statSync(path).mode;
      if (mode !== null && (mode & 0o077) !== 0) Deno.chmodSync(path, 0o600);
      const wal = db.prepare("PRAGMA journal_mode = WAL").get();
      if (wal?.journal_mode !== "wal") {
        throw new JournalError(
          `Journal cannot use WAL: "${path}" stays in mode ${String(wal?.journal_mode)}`,
        );
      }
      applyMigrations(db, path, Date.now());
      return new Journal(db, path, SCHEMA_VERSION);
    } catch (error) {
      db.close();
      throw wrap(error, `open "${path}"`);
    }
  }

  /** The file this journal was opened from. */
  get path(): string {
    return this.#path;
  }

  /** Sessions, checkpoints and operations (docs/checkpoints.md), on this journal's connection. */
  get checkpoints(): CheckpointJournal {
    return this.#checkpoints ??= new CheckpointJournal(this.#c);
  }

  /** The job tree's admission, cancel and lineage (docs/rules.md, "Admission"), on this connection. */
  get jobTree(): JobTreeJournal {
    return this.#jobTree ??= new JobTreeJournal(this.#c);
  }

  /** The schema version of the open file (always {@linkcode SCHEMA_VERSION}). */
  get schemaVersion(): number {
    return this.#version;
  }

  /** Whether `close()` has run. */
  get closed(): boolean {
    return this.#c.closed;
  }

  /** Reads the connection's settings back from SQLite. */
  settings(): JournalSettings {
    return this.#c.read("read settings", () => {
      const mode = this.#c.get("PRAGMA journal_mode")?.journal_mode;
      const sync = this.#c.get("PRAGMA synchronous")?.synchronous;
      const fk = this.#c.get("PRAGMA foreign_keys")?.foreign_keys;
      const timeout = this.#c.get("PRAGMA busy_timeout")?.timeout;
      return {
        journalMode: String(mode),
        synchronous: SYNCHRONOUS[Number(sync)] ?? "OFF",
        foreignKeys: fk === 1,
        busyTimeoutMs: Number(timeout),
      };
    });
  }

  /** Closes the file. Calling it again does nothing. */
  close(): void {
    this.#c.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  /**
   * Runs `fn` in a deferred transaction (`BEGIN`): it commits when `fn`
   * returns and rolls back when it throws. Nested calls become savepoints.
   * `fn` must be synchronous. Use {@linkcode Journal.immediate} when `fn`
   * writes, so the write lock is taken (and waited for) up front.
   */
  transaction<T>(fn: () => T): T {
    return this.#c.tx("DEFERRED", fn);
  }

  /**
   * How many transactions committed since the journal was opened. Each one
   * that wrote waited for its fsync (`synchronous=FULL`), so a hot path
   * counts them: records written with no effect between them share one.
   */
  get commits(): number {
    return this.#c.commits;
  }

  /** Like {@linkcode Journal.transaction}, with `BEGIN IMMEDIATE`: takes the write lock first. */
  immediate<T>(fn: () => T): T {
    return this.#c.tx("IMMEDIATE", fn);
  }

  /** Records a new split. @throws {Deno.errors.AlreadyExists} for a known id. */
  createSplit(rec: SplitRecord): void {
    return splits.createSplit(this.#c, rec);
  }

  /** Reads one split, or null. */
  getSplit(id: string): SplitRecord | null {
    return splits.getSplit(this.#c, id);
  }

  /**
   * Changes a split's mutable fields ({@linkcode SPLIT_MUTABLE}); its state
   * changes only through {@linkcode Journal.transitionSplit}.
   *
   * @throws {Deno.errors.NotFound} for an unknown split.
   * @throws {TypeError} for a field that is not mutable.
   */
  updateSplit(id: string, patch: SplitPatch): void {
    return splits.updateSplit(this.#c, id, patch);
  }

  /**
   * Compare-and-set of a split's state: moves it to `to` (with `patch`) only
   * if its state is one of `from`. Returns false, changing nothing, otherwise.
   *
   * @throws {Deno.errors.NotFound} for an unknown split.
   */
  transitionSplit(
    id: string,
    from: readonly SplitState[],
    to: SplitState,
    patch: SplitPatch = {},
  ): boolean {
    return splits.transitionSplit(this.#c, id, from, to, patch);
  }

  /** Adds or replaces entries of a split's `timing` (for example `capture:<label>`). */
  recordTiming(id: string, entries: Readonly<Record<string, number>>): void {
    return splits.recordTiming(this.#c, id, entries);
  }

  /** The splits matching `filter`, newest first. */
  listSplits(filter: SplitFilter = {}): SplitRecord[] {
    return splits.listSplits(this.#c, filter);
  }

  /**
   * Deletes a split's record with its branches and capabilities
   * (`marsh splits rm`, after its directory is gone). No tombstone is kept:
   * the spec keeps a record "until splits rm", and child splits keep the
   * parent's id in their own `parent`. Returns false for an unknown split.
   *
   * @throws {Deno.errors.Busy} while the split is in `run` (a process of
   *   its branches may live) or any of its capabilities is live.
   */
  deleteSplit(id: string): boolean {
    return splits.deleteSplit(this.#c, id);
  }

  /**
   * Records a resolution about to be applied (`applying`), before the
   * service is asked to apply it.
   *
   * @throws {Deno.errors.AlreadyExists} for a known id
   */
  addResolution(rec: ResolutionRecord): void {
    return resolutions.addResolution(this.#c, rec);
  }

  /** Reads one resolution, or null. */
  getResolution(id: string): ResolutionRecord | null {
    return resolutions.getResolution(this.#c, id);
  }

  /** The resolutions matching `filter`, newest first. */
  listResolutions(filter: resolutions.ResolutionFilter = {}): ResolutionRecord[] {
    return resolutions.listResolutions(this.#c, filter);
  }

  /**
   * Settles a resolution in `applying` (an applied undo also marks the one
   * it undoes `undone`). Returns false, changing nothing, when it is not
   * `applying`.
   *
   * @throws {Deno.errors.NotFound} for an unknown resolution
   */
  endResolution(id: string, end: ResolutionEnd): boolean {
    return resolutions.endResolution(this.#c, id, end);
  }

  /** What `marsh status` counts: splits in `run`, `await` and `kept`. */
  counts(): SplitCounts {
    return splits.counts(this.#c);
  }

  /**
   * Records a split's branches, all or none.
   *
   * @throws {Deno.errors.NotFound} for an unknown split.
   * @throws {Deno.errors.AlreadyExists} for a label or index already used.
   * @throws {TypeError} for a branch of another split.
   */
  addBranches(splitId: string, branches: readonly BranchRecord[]): void {
    return branchRows.addBranches(this.#c, splitId, branches);
  }

  /** Reads one branch, or null. */
  getBranch(splitId: string, label: string): BranchRecord | null {
    return branchRows.getBranch(this.#c, splitId, label);
  }

  /** A split's branches in declaration order. */
  branches(splitId: string): BranchRecord[] {
    return branchRows.branches(this.#c, splitId);
  }

  /**
   * Changes a branch's mutable fields ({@linkcode BRANCH_MUTABLE}); its state
   * changes only through {@linkcode Journal.transitionBranch}.
   *
   * @throws {Deno.errors.NotFound} for an unknown branch.
   * @throws {TypeError} for a field that is not mutable.
   */
  updateBranch(splitId: string, label: string, patch: BranchPatch): void {
    return branchRows.updateBranch(this.#c, splitId, label, patch);
  }

  /**
   * Compare-and-set of a branch's state: moves it to `to` (with `patch`)
   * only if its state is one of `from`. Returns false, changing nothing,
   * otherwise.
   *
   * @throws {Deno.errors.NotFound} for an unknown branch.
   */
  transitionBranch(
    splitId: string,
    label: string,
    from: readonly BranchState[],
    to: BranchState,
    patch: BranchPatch = {},
  ): boolean {
    return branchRows.transitionBranch(this.#c, splitId, label, from, to, patch);
  }

  /**
   * Records a capability of a split (`label` null) or of one of its branches.
   *
   * @throws {Deno.errors.NotFound} for an unknown split or branch.
   * @throws {Deno.errors.AlreadyExists} for a known id.
   */
  createCapability(rec: CapabilityRecord): void {
    return branchRows.createCapability(this.#c, rec);
  }

  /** Reads one capability, or null. */
  getCapability(id: string): CapabilityRecord | null {
    return branchRows.getCapability(this.#c, id);
  }

  /**
   * Revokes one capability. Returns false when it was already revoked.
   *
   * @throws {Deno.errors.NotFound} for an unknown capability.
   */
  revokeCapability(id: string, nowMs: number = Date.now()): boolean {
    return branchRows.revokeCapability(this.#c, id, nowMs);
  }

  /**
   * Revokes every live capability of a split (its own and its branches'),
   * and with `subtree` those of every split below it too, in one
   * transaction (CancelPropagates). Returns the ids revoked.
   */
  revokeCapabilitiesOfSplit(
    splitId: string,
    nowMs: number = Date.now(),
    options: { readonly subtree?: boolean } = {},
  ): string[] {
    return branchRows.revokeCapabilitiesOfSplit(this.#c, splitId, nowMs, options);
  }

  /** Every live capability, oldest first. */
  liveCapabilities(): CapabilityRecord[] {
    return branchRows.liveCapabilities(this.#c);
  }

  /**
   * Registers a Kit command. With `replace`, an existing registration of
   * the same name is replaced in the same transaction and returned.
   *
   * @returns the registration it replaced, or null
   * @throws {Deno.errors.AlreadyExists} for a registered name without `replace`.
   * @throws {KitRuleError} (a `TypeError`) for a field that breaks its rule.
   */
  addKit(rec: KitRecord, options: { readonly replace?: boolean } = {}): KitRecord | null {
    return kitJobs.addKit(this.#c, rec, options);
  }

  /** Reads one Kit registration, or null. */
  getKit(name: string): KitRecord | null {
    return kitJobs.getKit(this.#c, name);
  }

  /** Every registered Kit, by name. */
  listKits(): KitRecord[] {
    return kitJobs.listKits(this.#c);
  }

  /**
   * Forgets a Kit registration (its home directory is not the journal's
   * business and stays where it is).
   *
   * @returns the registration removed, or null for an unknown name
   */
  removeKit(name: string): KitRecord | null {
    return kitJobs.removeKit(this.#c, name);
  }

  /** Records a Kit job. @throws {Deno.errors.AlreadyExists} for a known id. */
  addJob(rec: JobRecord): void {
    return kitJobs.addJob(this.#c, rec);
  }

  /** Reads one job, or null. */
  getJob(id: string): JobRecord | null {
    return kitJobs.getJob(this.#c, id);
  }

  /**
   * Changes a job's mutable fields ({@linkcode JOB_MUTABLE}).
   *
   * @throws {Deno.errors.NotFound} for an unknown job.
   */
  updateJob(id: string, patch: JobPatch): void {
    return kitJobs.updateJob(this.#c, id, patch);
  }

  /** The jobs matching `filter`, newest first (a split's jobs in declaration order). */
  listJobs(filter: JobFilter = {}): JobRecord[] {
    return kitJobs.listJobs(this.#c, filter);
  }

  /**
   * Settles what a daemon restart left unfinished (docs/rules.md "Life cycle and restart"), in one
   * transaction, before the daemon serves anything: splits in `run` become
   * `uncertain` and splits in `await` become `kept`, both with reason
   * `daemon restarted`; launched (`running`) branches become `uncertain`
   * and `untrusted`; unlaunched (`pending`) branches become `cancelled`
   * (status `cancelled`, code 130) and never start; every capability is
   * revoked. Kit jobs: queued ones are cancelled; launched ones (running,
   * or whose container was not confirmed removed) become `uncertain` with
   * cleanup `uncertain`, so their slots stay held until `marsh workers
   * reset KIT`. Nothing is deleted, resumed or replayed. Running it again
   * changes nothing.
   */
  recoverAfterRestart(nowMs: number): RecoveryReport {
    return recovery.recoverAfterRestart(this.#c, nowMs);
  }
}

function ensureFile(path: string): void {
  let info: Deno.FileInfo;
  try {
    info = Deno.lstatSync(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    try {
      Deno.openSync(path, { read: true, write: true, createNew: true, mode: 0o600 }).close();
      return;
    } catch (raced) {
      if (!(raced instanceof Deno.errors.AlreadyExists)) throw raced;
      info = Deno.lstatSync(path);
    }
  }
  if (!info.isFile) {
    throw new JournalError(`Journal is not a regular file: "${path}"`);
  }
}
