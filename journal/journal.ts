/**
 * The daemon's journal: one SQLite file (`node:sqlite`) in the control dir,
 * owner-only, in WAL mode with `synchronous=FULL`, so a write that returned
 * survives `kill -9` of the daemon and a power cut. Every operation is one
 * transaction, and the daemon calls each one before the effect it describes
 * (the split before its snapshot, a branch before its launch, a state before
 * a release).
 *
 * Only the daemon opens the journal (DESIGN.md §4).
 *
 * @module
 */

import {
  DatabaseSync,
  type SQLInputValue,
  type SQLOutputValue,
  type StatementSync,
} from "node:sqlite";
import {
  branchColumns,
  branchFromRow,
  branchPatchColumns,
  capabilityColumns,
  capabilityFromRow,
  jobColumns,
  jobFromRow,
  jobPatchColumns,
  kitColumns,
  kitFromRow,
  splitColumns,
  splitFromRow,
  splitPatchColumns,
} from "./_codec.ts";
import { JournalError, JournalVersionError } from "./errors.ts";
import type { KitRecord } from "./kits.ts";
import { applyMigrations, readSchemaVersion, SCHEMA_VERSION } from "./migrations.ts";
import {
  BRANCH_MUTABLE,
  type BranchPatch,
  type BranchRecord,
  type BranchState,
  type CapabilityRecord,
  isBranchState,
  isSplitState,
  JOB_MUTABLE,
  type JobFilter,
  type JobPatch,
  type JobRecord,
  type RecoveryReport,
  SPLIT_MUTABLE,
  type SplitCounts,
  type SplitFilter,
  type SplitPatch,
  type SplitRecord,
  type SplitState,
} from "./records.ts";

/** How long a writer waits for another connection's lock before failing. */
export const BUSY_TIMEOUT_MS = 5000;

/** The reason recorded on splits that a restart settled. */
export const RESTART_REASON = "daemon restarted";

/** The connection settings, read back from SQLite. */
export interface JournalSettings {
  /** `wal`. */
  readonly journalMode: string;
  /** `FULL`. */
  readonly synchronous: "OFF" | "NORMAL" | "FULL" | "EXTRA";
  readonly foreignKeys: boolean;
  readonly busyTimeoutMs: number;
}

type Params = Record<string, SQLInputValue>;
type Row = Record<string, SQLOutputValue>;

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
  #db: DatabaseSync | null;
  readonly #path: string;
  readonly #version: number;
  #depth = 0;
  readonly #statements = new Map<string, StatementSync>();

  private constructor(db: DatabaseSync, path: string, version: number) {
    this.#db = db;
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

  /** The schema version of the open file (always {@linkcode SCHEMA_VERSION}). */
  get schemaVersion(): number {
    return this.#version;
  }

  /** Whether `close()` has run. */
  get closed(): boolean {
    return this.#db === null;
  }

  /** Reads the connection's settings back from SQLite. */
  settings(): JournalSettings {
    return this.#read("read settings", () => {
      const mode = this.#get("PRAGMA journal_mode")?.journal_mode;
      const sync = this.#get("PRAGMA synchronous")?.synchronous;
      const fk = this.#get("PRAGMA foreign_keys")?.foreign_keys;
      const timeout = this.#get("PRAGMA busy_timeout")?.timeout;
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
    const db = this.#db;
    if (db === null) return;
    this.#db = null;
    this.#statements.clear();
    db.close();
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
    return this.#tx("DEFERRED", fn);
  }

  /** Like {@linkcode Journal.transaction}, with `BEGIN IMMEDIATE`: takes the write lock first. */
  immediate<T>(fn: () => T): T {
    return this.#tx("IMMEDIATE", fn);
  }

  // --- splits -------------------------------------------------------------

  /** Records a new split. @throws {Deno.errors.AlreadyExists} for a known id. */
  createSplit(rec: SplitRecord): void {
    const cols = splitColumns(rec);
    this.#write("create split", () => {
      if (this.#get("SELECT 1 AS x FROM splits WHERE id = :id", { id: rec.id }) !== undefined) {
        throw new Deno.errors.AlreadyExists(`Split already exists: "${rec.id}"`);
      }
      this.#insert("splits", cols);
    });
  }

  /** Reads one split, or null. */
  getSplit(id: string): SplitRecord | null {
    return this.#read("read split", () => {
      const row = this.#get("SELECT * FROM splits WHERE id = :id", { id });
      return row === undefined ? null : splitFromRow(row);
    });
  }

  /**
   * Changes a split's mutable fields ({@linkcode SPLIT_MUTABLE}); its state
   * changes only through {@linkcode Journal.transitionSplit}.
   *
   * @throws {Deno.errors.NotFound} for an unknown split.
   * @throws {TypeError} for a field that is not mutable.
   */
  updateSplit(id: string, patch: SplitPatch): void {
    const cols = splitPatchColumns(mutable(patch, SPLIT_MUTABLE, "split"));
    this.#write("update split", () => {
      if (!this.#update("splits", cols, "id = :k_id", { k_id: id })) throw splitNotFound(id);
    });
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
    checkStates(from, to, isSplitState, "split");
    const cols = { ...splitPatchColumns(mutable(patch, SPLIT_MUTABLE, "split")), state: to };
    return this.#write("transition split", () => {
      const current = this.#get("SELECT state FROM splits WHERE id = :id", { id });
      if (current === undefined) throw splitNotFound(id);
      if (!(from as readonly unknown[]).includes(current.state)) return false;
      return this.#update("splits", cols, "id = :k_id", { k_id: id });
    });
  }

  /** Adds or replaces entries of a split's `timing` (for example `capture:<label>`). */
  recordTiming(id: string, entries: Readonly<Record<string, number>>): void {
    this.#write("record timing", () => {
      const split = this.getSplit(id);
      if (split === null) throw splitNotFound(id);
      const cols = splitPatchColumns({ timing: { ...split.timing, ...entries } });
      this.#update("splits", cols, "id = :k_id", { k_id: id });
    });
  }

  /** The splits matching `filter`, newest first. */
  listSplits(filter: SplitFilter = {}): SplitRecord[] {
    const where: string[] = [];
    const params: Params = {};
    if (filter.creator !== undefined) {
      where.push("creator_kind = :ck");
      params.ck = filter.creator.kind;
      if (filter.creator.kind !== "host") {
        where.push("creator_id = :cid");
        params.cid = filter.creator.id;
      }
    }
    if (filter.states !== undefined) {
      if (filter.states.length === 0) return [];
      filter.states.forEach((s, i) => {
        if (!isSplitState(s)) throw new TypeError(`Unknown split state: ${JSON.stringify(s)}`);
        params[`s${i}`] = s;
      });
      where.push(`state IN (${filter.states.map((_, i) => `:s${i}`).join(", ")})`);
    }
    if (filter.parent !== undefined) {
      where.push("parent_split = :parent");
      params.parent = filter.parent;
    }
    params.lim = filter.limit ?? -1;
    const sql = `SELECT * FROM splits ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY created_ms DESC, rowid DESC LIMIT :lim`;
    return this.#read("list splits", () => this.#all(sql, params).map((r) => splitFromRow(r)));
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
    return this.#write("delete split", () => {
      const row = this.#get("SELECT state FROM splits WHERE id = :id", { id });
      if (row === undefined) return false;
      if (row.state === "run") {
        throw new Deno.errors.Busy(`Cannot delete split "${id}": it is in state "${row.state}"`);
      }
      const live = this.#get(
        "SELECT id FROM capabilities WHERE split = :id AND state = 'live' LIMIT 1",
        { id },
      );
      if (live !== undefined) {
        throw new Deno.errors.Busy(
          `Cannot delete split "${id}": its capability "${String(live.id)}" is live`,
        );
      }
      this.#run("DELETE FROM splits WHERE id = :id", { id });
      return true;
    });
  }

  /** What `marsh status` counts: splits in `run`, `await` and `kept`. */
  counts(): SplitCounts {
    return this.#read("count splits", () => {
      const n: Record<string, number> = {};
      for (
        const row of this.#all(
          "SELECT state, count(*) AS n FROM splits WHERE state IN ('run', 'await', 'kept') GROUP BY state",
        )
      ) n[String(row.state)] = Number(row.n);
      return { active: n.run ?? 0, awaiting: n.await ?? 0, kept: n.kept ?? 0 };
    });
  }

  // --- branches -----------------------------------------------------------

  /**
   * Records a split's branches, all or none.
   *
   * @throws {Deno.errors.NotFound} for an unknown split.
   * @throws {Deno.errors.AlreadyExists} for a label or index already used.
   * @throws {TypeError} for a branch of another split.
   */
  addBranches(splitId: string, branches: readonly BranchRecord[]): void {
    const rows = branches.map((b) => {
      if (b.split !== splitId) {
        throw new TypeError(`Branch "${b.label}" names split "${b.split}", not "${splitId}"`);
      }
      return branchColumns(b);
    });
    this.#write("add branches", () => {
      if (this.#get("SELECT 1 AS x FROM splits WHERE id = :id", { id: splitId }) === undefined) {
        throw splitNotFound(splitId);
      }
      for (const [i, b] of branches.entries()) {
        const clash = this.#get(
          "SELECT label FROM branches WHERE split = :split AND (label = :label OR idx = :idx)",
          { split: splitId, label: b.label, idx: b.index },
        );
        if (clash !== undefined) {
          throw new Deno.errors.AlreadyExists(
            `Branch already exists: "${splitId}/${
              String(clash.label)
            }" (label "${b.label}", index ${b.index})`,
          );
        }
        this.#insert("branches", rows[i] ?? {});
      }
    });
  }

  /** Reads one branch, or null. */
  getBranch(splitId: string, label: string): BranchRecord | null {
    return this.#read("read branch", () => {
      const row = this.#get(
        "SELECT * FROM branches WHERE split = :split AND label = :label",
        { split: splitId, label },
      );
      return row === undefined ? null : branchFromRow(row);
    });
  }

  /** A split's branches in declaration order. */
  branches(splitId: string): BranchRecord[] {
    return this.#read(
      "list branches",
      () =>
        this.#all("SELECT * FROM branches WHERE split = :split ORDER BY idx", { split: splitId })
          .map((r) => branchFromRow(r)),
    );
  }

  /**
   * Changes a branch's mutable fields ({@linkcode BRANCH_MUTABLE}); its state
   * changes only through {@linkcode Journal.transitionBranch}.
   *
   * @throws {Deno.errors.NotFound} for an unknown branch.
   * @throws {TypeError} for a field that is not mutable.
   */
  updateBranch(splitId: string, label: string, patch: BranchPatch): void {
    const cols = branchPatchColumns(mutable(patch, BRANCH_MUTABLE, "branch"));
    this.#write("update branch", () => {
      const found = this.#update("branches", cols, "split = :k_split AND label = :k_label", {
        k_split: splitId,
        k_label: label,
      });
      if (!found) throw branchNotFound(splitId, label);
    });
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
    checkStates(from, to, isBranchState, "branch");
    const cols = { ...branchPatchColumns(mutable(patch, BRANCH_MUTABLE, "branch")), state: to };
    return this.#write("transition branch", () => {
      const key = { k_split: splitId, k_label: label };
      const current = this.#get(
        "SELECT state FROM branches WHERE split = :k_split AND label = :k_label",
        key,
      );
      if (current === undefined) throw branchNotFound(splitId, label);
      if (!(from as readonly unknown[]).includes(current.state)) return false;
      return this.#update("branches", cols, "split = :k_split AND label = :k_label", key);
    });
  }

  // --- capabilities -------------------------------------------------------

  /**
   * Records a capability of a split (`label` null) or of one of its branches.
   *
   * @throws {Deno.errors.NotFound} for an unknown split or branch.
   * @throws {Deno.errors.AlreadyExists} for a known id.
   */
  createCapability(rec: CapabilityRecord): void {
    const cols = capabilityColumns(rec);
    this.#write("create capability", () => {
      if (this.#get("SELECT 1 AS x FROM splits WHERE id = :id", { id: rec.split }) === undefined) {
        throw splitNotFound(rec.split);
      }
      if (rec.label !== null && this.getBranch(rec.split, rec.label) === null) {
        throw branchNotFound(rec.split, rec.label);
      }
      if (
        this.#get("SELECT 1 AS x FROM capabilities WHERE id = :id", { id: rec.id }) !== undefined
      ) {
        throw new Deno.errors.AlreadyExists(`Capability already exists: "${rec.id}"`);
      }
      this.#insert("capabilities", cols);
    });
  }

  /** Reads one capability, or null. */
  getCapability(id: string): CapabilityRecord | null {
    return this.#read("read capability", () => {
      const row = this.#get("SELECT * FROM capabilities WHERE id = :id", { id });
      return row === undefined ? null : capabilityFromRow(row);
    });
  }

  /**
   * Revokes one capability. Returns false when it was already revoked.
   *
   * @throws {Deno.errors.NotFound} for an unknown capability.
   */
  revokeCapability(id: string, nowMs: number = Date.now()): boolean {
    return this.#write("revoke capability", () => {
      const changed = this.#run(
        "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE id = :id AND state = 'live'",
        { id, now: nowMs },
      );
      if (changed > 0) return true;
      if (this.getCapability(id) === null) {
        throw new Deno.errors.NotFound(`Capability not found: "${id}"`);
      }
      return false;
    });
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
    const sql = options.subtree
      ? `WITH RECURSIVE tree (id) AS (
           SELECT :split UNION SELECT s.id FROM splits s JOIN tree t ON s.parent_split = t.id
         )
         SELECT id FROM capabilities WHERE state = 'live' AND split IN (SELECT id FROM tree)
         ORDER BY created_ms, id`
      : `SELECT id FROM capabilities WHERE state = 'live' AND split = :split
         ORDER BY created_ms, id`;
    return this.#write("revoke capabilities", () => {
      const ids = this.#all(sql, { split: splitId }).map((r) => String(r.id));
      for (const id of ids) {
        this.#run(
          "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE id = :id",
          { id, now: nowMs },
        );
      }
      return ids;
    });
  }

  /** Every live capability, oldest first. */
  liveCapabilities(): CapabilityRecord[] {
    return this.#read(
      "list capabilities",
      () =>
        this.#all("SELECT * FROM capabilities WHERE state = 'live' ORDER BY created_ms, id")
          .map((r) => capabilityFromRow(r)),
    );
  }

  // --- kits ---------------------------------------------------------------

  /**
   * Registers a Kit command. With `replace`, an existing registration of
   * the same name is replaced in the same transaction and returned.
   *
   * @returns the registration it replaced, or null
   * @throws {Deno.errors.AlreadyExists} for a registered name without `replace`.
   * @throws {KitRuleError} (a `TypeError`) for a field that breaks its rule.
   */
  addKit(rec: KitRecord, options: { readonly replace?: boolean } = {}): KitRecord | null {
    const cols = kitColumns(rec);
    return this.#write("add kit", () => {
      const old = this.getKit(rec.name);
      if (old !== null) {
        if (!options.replace) {
          throw new Deno.errors.AlreadyExists(`Kit already registered: "${rec.name}"`);
        }
        this.#run("DELETE FROM kits WHERE name = :name", { name: rec.name });
      }
      this.#insert("kits", cols);
      return old;
    });
  }

  /** Reads one Kit registration, or null. */
  getKit(name: string): KitRecord | null {
    return this.#read("read kit", () => {
      const row = this.#get("SELECT * FROM kits WHERE name = :name", { name });
      return row === undefined ? null : kitFromRow(row);
    });
  }

  /** Every registered Kit, by name. */
  listKits(): KitRecord[] {
    return this.#read(
      "list kits",
      () => this.#all("SELECT * FROM kits ORDER BY name").map((r) => kitFromRow(r)),
    );
  }

  /**
   * Forgets a Kit registration (its home directory is not the journal's
   * business and stays where it is).
   *
   * @returns the registration removed, or null for an unknown name
   */
  removeKit(name: string): KitRecord | null {
    return this.#write("remove kit", () => {
      const old = this.getKit(name);
      if (old !== null) this.#run("DELETE FROM kits WHERE name = :name", { name });
      return old;
    });
  }

  // --- jobs ---------------------------------------------------------------

  /** Records a Kit job. @throws {Deno.errors.AlreadyExists} for a known id. */
  addJob(rec: JobRecord): void {
    const cols = jobColumns(rec);
    this.#write("add job", () => {
      if (this.#get("SELECT 1 AS x FROM jobs WHERE id = :id", { id: rec.id }) !== undefined) {
        throw new Deno.errors.AlreadyExists(`Job already exists: "${rec.id}"`);
      }
      this.#insert("jobs", cols);
    });
  }

  /** Reads one job, or null. */
  getJob(id: string): JobRecord | null {
    return this.#read("read job", () => {
      const row = this.#get("SELECT * FROM jobs WHERE id = :id", { id });
      return row === undefined ? null : jobFromRow(row);
    });
  }

  /**
   * Changes a job's mutable fields ({@linkcode JOB_MUTABLE}).
   *
   * @throws {Deno.errors.NotFound} for an unknown job.
   */
  updateJob(id: string, patch: JobPatch): void {
    const cols = jobPatchColumns(mutable(patch, JOB_MUTABLE, "job"));
    this.#write("update job", () => {
      if (!this.#update("jobs", cols, "id = :k_id", { k_id: id })) {
        throw new Deno.errors.NotFound(`Job not found: "${id}"`);
      }
    });
  }

  /** The jobs matching `filter`, newest first (a split's jobs in declaration order). */
  listJobs(filter: JobFilter = {}): JobRecord[] {
    const where: string[] = [];
    const params: Params = {};
    if (filter.kit !== undefined) {
      where.push("j.kit = :kit");
      params.kit = filter.kit;
    }
    if (filter.split !== undefined) {
      where.push("j.split = :split");
      params.split = filter.split;
    }
    if (filter.cleanups !== undefined) {
      if (filter.cleanups.length === 0) return [];
      filter.cleanups.forEach((c, i) => params[`c${i}`] = c);
      where.push(`j.cleanup IN (${filter.cleanups.map((_, i) => `:c${i}`).join(", ")})`);
    }
    if (filter.creatorSession !== undefined) {
      where.push(
        "j.split IN (SELECT id FROM splits WHERE creator_kind = 'session' AND creator_id = :cs)",
      );
      params.cs = filter.creatorSession;
    }
    if (filter.creatorJob !== undefined) {
      where.push(
        "j.split IN (SELECT id FROM splits WHERE creator_kind = 'job' AND creator_id = :cj)",
      );
      params.cj = filter.creatorJob;
    }
    const sql = `SELECT j.* FROM jobs j ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
      ORDER BY j.created_ms DESC, j.rowid`;
    return this.#read("list jobs", () => this.#all(sql, params).map((r) => jobFromRow(r)));
  }

  // --- restart ------------------------------------------------------------

  /**
   * Settles what a daemon restart left unfinished (spec 000 §6), in one
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
    return this.#write("recover after restart", () => {
      const splits = this.#all(
        `SELECT id, state FROM splits WHERE state IN ('run', 'await') ORDER BY created_ms, rowid`,
      ).map((r) => ({
        id: String(r.id),
        from: r.state === "run" ? "run" as const : "await" as const,
        to: r.state === "run" ? "uncertain" as const : "kept" as const,
      }));
      const branches = this.#all(
        `SELECT b.split, b.label, b.state, b.fork FROM branches b JOIN splits s ON s.id = b.split
         WHERE b.state IN ('running', 'pending') ORDER BY s.created_ms, s.rowid, b.idx`,
      ).map((r) => ({
        split: String(r.split),
        label: String(r.label),
        from: r.state === "running" ? "running" as const : "pending" as const,
        to: r.state === "running" ? "uncertain" as const : "cancelled" as const,
        fork: String(r.fork),
      }));
      const revokedCapabilities = this.#all(
        "SELECT id FROM capabilities WHERE state = 'live' ORDER BY created_ms, id",
      ).map((r) => String(r.id));
      const jobs = this.#all(
        `SELECT id, kit, split, label, state, container FROM jobs
         WHERE state IN ('queued', 'running') OR cleanup = 'live' ORDER BY created_ms, rowid`,
      ).map((r) => ({
        id: String(r.id),
        kit: String(r.kit),
        split: String(r.split),
        label: String(r.label),
        to: r.state === "queued" ? "cancelled" as const : "uncertain" as const,
        container: r.container === null ? null : String(r.container),
      }));
      this.#run(
        `UPDATE jobs SET state = 'cancelled', status = 'cancelled', code = 130,
           finished_ms = :now WHERE state = 'queued'`,
        { now: nowMs },
      );
      this.#run("UPDATE jobs SET state = 'uncertain' WHERE state = 'running'");
      this.#run("UPDATE jobs SET cleanup = 'uncertain' WHERE cleanup = 'live'");
      const reason = RESTART_REASON;
      this.#run("UPDATE splits SET state = 'uncertain', reason = :reason WHERE state = 'run'", {
        reason,
      });
      this.#run("UPDATE splits SET state = 'kept', reason = :reason WHERE state = 'await'", {
        reason,
      });
      this.#run(
        "UPDATE branches SET state = 'uncertain', trust = 'untrusted' WHERE state = 'running'",
      );
      this.#run(
        `UPDATE branches SET state = 'cancelled', status = 'cancelled', code = 130,
           finished_ms = :now WHERE state = 'pending'`,
        { now: nowMs },
      );
      this.#run(
        "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE state = 'live'",
        { now: nowMs },
      );
      return { atMs: nowMs, splits, branches, revokedCapabilities, jobs };
    });
  }

  // --- plumbing -----------------------------------------------------------

  #handle(): DatabaseSync {
    if (this.#db === null) {
      throw new Deno.errors.BadResource(`Journal is closed: "${this.#path}"`);
    }
    return this.#db;
  }

  #tx<T>(mode: "DEFERRED" | "IMMEDIATE", fn: () => T): T {
    const db = this.#handle();
    const nested = this.#depth > 0;
    const savepoint = `sp${this.#depth}`;
    try {
      db.exec(nested ? `SAVEPOINT ${savepoint}` : `BEGIN ${mode}`);
    } catch (error) {
      throw wrap(error, "begin a transaction");
    }
    this.#depth++;
    let result: T;
    try {
      result = fn();
      if (isThenable(result)) {
        throw new TypeError(
          "Journal transactions are synchronous: the callback returned a promise",
        );
      }
    } catch (error) {
      this.#depth--;
      this.#rollback(db, nested, savepoint, error);
      throw error;
    }
    this.#depth--;
    try {
      db.exec(nested ? `RELEASE ${savepoint}` : "COMMIT");
    } catch (error) {
      this.#rollback(db, nested, savepoint, error);
      throw wrap(error, "commit a transaction");
    }
    return result;
  }

  #rollback(db: DatabaseSync, nested: boolean, savepoint: string, reason: unknown): void {
    try {
      if (nested) db.exec(`ROLLBACK TO ${savepoint}; RELEASE ${savepoint}`);
      else if (db.isTransaction) db.exec("ROLLBACK");
    } catch (error) {
      throw new JournalError(`Journal could not roll back after: ${String(reason)}`, {
        cause: error,
      });
    }
  }

  #write<T>(what: string, fn: () => T): T {
    try {
      return this.immediate(fn);
    } catch (error) {
      throw wrap(error, what);
    }
  }

  #read<T>(what: string, fn: () => T): T {
    this.#handle();
    try {
      return fn();
    } catch (error) {
      throw wrap(error, what);
    }
  }

  #statement(sql: string): StatementSync {
    let st = this.#statements.get(sql);
    if (st === undefined) {
      st = this.#handle().prepare(sql);
      this.#statements.set(sql, st);
    }
    return st;
  }

  #get(sql: string, params: Params = {}): Row | undefined {
    return this.#statement(sql).get(params);
  }

  #all(sql: string, params: Params = {}): Row[] {
    return this.#statement(sql).all(params);
  }

  #run(sql: string, params: Params = {}): number {
    return Number(this.#statement(sql).run(params).changes);
  }

  #insert(table: string, cols: Params): void {
    const names = Object.keys(cols);
    this.#run(
      `INSERT INTO ${table} (${names.join(", ")}) VALUES (${names.map((n) => `:${n}`).join(", ")})`,
      cols,
    );
  }

  /** Returns whether a row matched `where` (an empty `cols` changes nothing but still looks). */
  #update(table: string, cols: Params, where: string, key: Params): boolean {
    const names = Object.keys(cols);
    if (names.length === 0) {
      return this.#get(`SELECT 1 AS x FROM ${table} WHERE ${where}`, key) !== undefined;
    }
    const set = names.map((n) => `${n} = :${n}`).join(", ");
    return this.#run(`UPDATE ${table} SET ${set} WHERE ${where}`, { ...cols, ...key }) > 0;
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

function mutable<P extends object>(patch: P, allowed: readonly string[], what: string): P {
  for (const key of Object.keys(patch)) {
    if (!allowed.includes(key)) {
      throw new TypeError(`Not a mutable ${what} field: "${key}"`);
    }
  }
  return patch;
}

function checkStates<S extends string>(
  from: readonly S[],
  to: S,
  known: (x: unknown) => boolean,
  what: string,
): void {
  if (from.length === 0) {
    throw new TypeError(`A ${what} transition needs at least one "from" state`);
  }
  for (const s of [...from, to]) {
    if (!known(s)) throw new TypeError(`Unknown ${what} state: ${JSON.stringify(s)}`);
  }
}

function splitNotFound(id: string): Deno.errors.NotFound {
  return new Deno.errors.NotFound(`Split not found: "${id}"`);
}

function branchNotFound(splitId: string, label: string): Deno.errors.NotFound {
  return new Deno.errors.NotFound(`Branch not found: "${splitId}/${label}"`);
}

function isThenable(x: unknown): boolean {
  return typeof x === "object" && x !== null &&
    typeof (x as { then?: unknown }).then === "function";
}

/** SQLite's own errors become a {@linkcode JournalError}; everything else passes through. */
function wrap(error: unknown, what: string): unknown {
  if (error instanceof JournalError) return error;
  const code = (error as { code?: unknown } | null)?.code;
  if (error instanceof Error && (code === "ERR_SQLITE_ERROR" || code === "ERR_INVALID_STATE")) {
    return new JournalError(`Journal could not ${what}: ${error.message}`, { cause: error });
  }
  return error;
}
