/**
 * The journal's schema as an ordered list of forward migrations. Version N
 * is the schema after migrations 1..N; an empty file is version 0. The
 * `schema_version` table holds one row per applied migration.
 *
 * Add a migration by appending to {@linkcode MIGRATIONS}; never edit one
 * that has shipped (a journal on disk already ran it).
 *
 * @module
 */

import type { DatabaseSync } from "node:sqlite";
import { JournalError } from "./errors.ts";

/** One step of the schema. */
export interface Migration {
  /** 1, 2, 3, ...: one more than the previous migration's. */
  readonly version: number;
  /** What the step does, stored with it. */
  readonly name: string;
  /** Statements run inside the migration's transaction. */
  readonly sql: string;
}

/** Every migration, oldest first. */
export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    name: "splits, branches and capabilities (spec 000 §5)",
    sql: `
      CREATE TABLE splits (
        id TEXT PRIMARY KEY NOT NULL,
        creator_kind TEXT NOT NULL CHECK (creator_kind IN ('host', 'session', 'job')),
        creator_id TEXT,
        session TEXT NOT NULL,
        parent_split TEXT,
        parent_label TEXT,
        depth INTEGER NOT NULL CHECK (depth >= 1),
        root TEXT NOT NULL,
        dir TEXT NOT NULL,
        cwd TEXT NOT NULL,
        cap TEXT NOT NULL,
        state TEXT NOT NULL
          CHECK (state IN ('run', 'await', 'joined', 'kept', 'cancelled', 'uncertain')),
        status INTEGER,
        reason TEXT,
        identity_dev TEXT,
        identity_ino TEXT,
        git TEXT,
        created_ms INTEGER NOT NULL,
        finished_ms INTEGER,
        timing TEXT NOT NULL DEFAULT '{}',
        with_ignored INTEGER NOT NULL DEFAULT 0 CHECK (with_ignored IN (0, 1)),
        CHECK ((creator_kind = 'host') = (creator_id IS NULL)),
        CHECK ((parent_split IS NULL) = (parent_label IS NULL)),
        CHECK ((identity_dev IS NULL) = (identity_ino IS NULL))
      ) STRICT;

      CREATE TABLE branches (
        split TEXT NOT NULL REFERENCES splits (id) ON DELETE CASCADE,
        label TEXT NOT NULL,
        idx INTEGER NOT NULL CHECK (idx >= 0),
        kind TEXT NOT NULL CHECK (kind IN ('shell', 'argv')),
        placement TEXT NOT NULL
          CHECK (placement = 'shell-vm' OR (placement LIKE 'kit:%' AND length(placement) > 4)),
        run TEXT NOT NULL,
        state TEXT NOT NULL
          CHECK (state IN ('pending', 'running', 'captured', 'rejected', 'failed',
                           'cancelled', 'uncertain')),
        status TEXT,
        code INTEGER,
        job_id TEXT,
        files INTEGER NOT NULL DEFAULT 0 CHECK (files >= 0),
        trust TEXT CHECK (trust IS NULL OR trust = 'untrusted'),
        fork TEXT NOT NULL,
        fork_dev TEXT,
        fork_ino TEXT,
        started_ms INTEGER,
        finished_ms INTEGER,
        result TEXT,
        PRIMARY KEY (split, label),
        UNIQUE (split, idx),
        CHECK ((fork_dev IS NULL) = (fork_ino IS NULL))
      ) STRICT;

      CREATE TABLE capabilities (
        id TEXT PRIMARY KEY NOT NULL,
        split TEXT NOT NULL REFERENCES splits (id) ON DELETE CASCADE,
        label TEXT,
        holder TEXT NOT NULL,
        state TEXT NOT NULL CHECK (state IN ('live', 'revoked')),
        created_ms INTEGER NOT NULL,
        revoked_ms INTEGER,
        CHECK ((state = 'revoked') = (revoked_ms IS NOT NULL)),
        FOREIGN KEY (split, label) REFERENCES branches (split, label) ON DELETE CASCADE
      ) STRICT;
    `,
  },
  {
    version: 2,
    name: "branch execution details (DESIGN.md §3) and indexes for the daemon's queries",
    sql: `
      ALTER TABLE branches ADD COLUMN fork_strategy TEXT;
      ALTER TABLE branches ADD COLUMN attempt TEXT;
      ALTER TABLE branches ADD COLUMN mechanism TEXT
        CHECK (mechanism IS NULL OR mechanism IN ('cgroup', 'subreaper'));

      CREATE INDEX splits_by_created ON splits (created_ms);
      CREATE INDEX splits_by_state ON splits (state);
      CREATE INDEX splits_by_parent ON splits (parent_split) WHERE parent_split IS NOT NULL;
      CREATE INDEX branches_by_state ON branches (state);
      CREATE INDEX capabilities_by_branch ON capabilities (split, label);
      CREATE INDEX capabilities_live ON capabilities (state) WHERE state = 'live';
    `,
  },
  {
    version: 3,
    name: "the Git tree id of a layered snapshot (issue 4)",
    sql: `
      ALTER TABLE splits ADD COLUMN root_id TEXT
        CHECK (root_id IS NULL OR (length(root_id) = 40 AND root_id NOT GLOB '*[^0-9a-f]*'));
    `,
  },
  {
    version: 4,
    name: "the Kit registry: registered Kit commands (issue 5 §2)",
    sql: `
      CREATE TABLE kits (
        name TEXT PRIMARY KEY NOT NULL
          CHECK (length(name) BETWEEN 1 AND 63 AND name NOT GLOB '*[^a-z0-9-]*'
                 AND substr(name, 1, 1) BETWEEN 'a' AND 'z'),
        image TEXT NOT NULL CHECK (length(image) > 0),
        image_id TEXT NOT NULL
          CHECK (length(image_id) = 71 AND substr(image_id, 1, 7) = 'sha256:'
                 AND substr(image_id, 8) NOT GLOB '*[^0-9a-f]*'),
        entrypoint TEXT
          CHECK (entrypoint IS NULL OR (json_valid(entrypoint) AND json_type(entrypoint) = 'array')),
        network TEXT NOT NULL DEFAULT 'none' CHECK (length(network) > 0),
        env TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(env) AND json_type(env) = 'array'),
        wall_s INTEGER NOT NULL DEFAULT 3600 CHECK (wall_s BETWEEN 1 AND 86400),
        home TEXT NOT NULL CHECK (substr(home, 1, 1) = '/'),
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0)
      ) STRICT;
    `,
  },
  {
    version: 5,
    name: "Kit jobs: argv branches run as Kit containers (issue 5 §3)",
    sql: `
      CREATE TABLE jobs (
        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) > 0),
        kit TEXT NOT NULL CHECK (length(kit) > 0),
        args TEXT NOT NULL CHECK (json_valid(args) AND json_type(args) = 'array'),
        split TEXT NOT NULL,
        label TEXT NOT NULL,
        session TEXT NOT NULL,
        state TEXT NOT NULL
          CHECK (state IN ('queued', 'running', 'finished', 'failed', 'cancelled', 'uncertain')),
        cleanup TEXT NOT NULL CHECK (cleanup IN ('none', 'live', 'removed', 'uncertain')),
        attempt TEXT,
        container TEXT,
        status TEXT,
        code INTEGER,
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        started_ms INTEGER,
        finished_ms INTEGER
      ) STRICT;
      CREATE INDEX jobs_by_split ON jobs (split, label);
      CREATE INDEX jobs_held ON jobs (kit) WHERE cleanup IN ('live', 'uncertain');
    `,
  },
  {
    version: 6,
    name: "what a shell branch sees: its fork at the project's path, or not (issue 10 §3)",
    sql: `
      ALTER TABLE branches ADD COLUMN view TEXT CHECK (view IS NULL OR view IN ('project', 'fork'));
      ALTER TABLE branches ADD COLUMN view_reason TEXT;
    `,
  },
  {
    version: 7,
    name: "resolutions: every merge, promote and undo, journaled before it is applied (issue 13)",
    sql: `
      CREATE TABLE resolutions (
        id TEXT PRIMARY KEY NOT NULL
          CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^a-z0-9-]*'),
        split TEXT NOT NULL,
        label TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('merge', 'promote', 'undo')),
        scope TEXT NOT NULL CHECK (scope IN ('git', 'filesystem', 'paths', 'promote', 'undo')),
        root TEXT NOT NULL CHECK (substr(root, 1, 1) = '/'),
        who_kind TEXT NOT NULL CHECK (who_kind IN ('host', 'session', 'job')),
        who_id TEXT,
        state TEXT NOT NULL CHECK (state IN ('applying', 'applied', 'failed', 'undone')),
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        finished_ms INTEGER,
        undoes TEXT,
        undone_by TEXT,
        takes INTEGER NOT NULL CHECK (takes >= 0),
        deletes INTEGER NOT NULL CHECK (deletes >= 0),
        converged INTEGER NOT NULL CHECK (converged >= 0),
        conflicts INTEGER NOT NULL CHECK (conflicts >= 0),
        base_tree TEXT,
        source_tree TEXT,
        branch_tree TEXT,
        result_tree TEXT,
        changed INTEGER CHECK (changed IS NULL OR changed >= 0),
        message TEXT,
        CHECK ((who_kind = 'host') = (who_id IS NULL)),
        CHECK ((kind = 'undo') = (undoes IS NOT NULL)),
        CHECK ((state = 'undone') = (undone_by IS NOT NULL)),
        CHECK ((state = 'applying') = (finished_ms IS NULL))
      ) STRICT;
      CREATE INDEX resolutions_by_state ON resolutions (state) WHERE state = 'applying';
      CREATE INDEX resolutions_by_created ON resolutions (created_ms);
    `,
  },
  {
    version: 8,
    name: "a discarded branch: when, by whom and why (issue 13 §1, marsh discard)",
    // The state column's CHECK of migration 1 cannot take a new value without
    // rebuilding the table the capabilities reference, so a discard is its own
    // columns: the state column keeps the state the branch had ended in, and
    // a branch with discarded_ms is read as `discarded` (journal/_codec.ts).
    sql: `
      ALTER TABLE branches ADD COLUMN discarded_ms INTEGER
        CHECK (discarded_ms IS NULL OR (discarded_ms >= 0
               AND state IN ('captured', 'rejected', 'failed', 'cancelled', 'uncertain')));
      ALTER TABLE branches ADD COLUMN discarded_by TEXT
        CHECK ((discarded_by IS NULL) = (discarded_ms IS NULL)
               AND (discarded_by IS NULL OR discarded_by = 'host'
                    OR discarded_by GLOB 'session:?*' OR discarded_by GLOB 'job:?*'));
      ALTER TABLE branches ADD COLUMN discard_reason TEXT
        CHECK (discard_reason IS NULL OR discarded_ms IS NOT NULL);
    `,
  },
  {
    version: 9,
    name: "operation checkpoints: sessions, checkpoints and operations (issue 14)",
    // docs/checkpoints.md "The model". The three tables name each other
    // (a session's head, a checkpoint's operation, an operation's checkpoint),
    // so those references are checked at commit, not per statement.
    sql: `
      CREATE TABLE sessions (
        id TEXT PRIMARY KEY NOT NULL
          CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^a-z0-9-]*'
                 AND substr(id, 1, 1) <> '-'),
        project TEXT NOT NULL CHECK (substr(project, 1, 1) = '/'),
        name TEXT NOT NULL
          CHECK (length(name) BETWEEN 1 AND 63 AND name NOT GLOB '*[^A-Za-z0-9_.-]*'
                 AND substr(name, 1, 1) NOT IN ('_', '.', '-')),
        base_checkpoint TEXT NOT NULL REFERENCES checkpoints (id) DEFERRABLE INITIALLY DEFERRED,
        base_root TEXT NOT NULL
          CHECK (length(base_root) = 40 AND base_root NOT GLOB '*[^0-9a-f]*'),
        head TEXT NOT NULL REFERENCES checkpoints (id) DEFERRABLE INITIALLY DEFERRED,
        view TEXT NOT NULL CHECK (substr(view, 1, 1) = '/'),
        with_ignored INTEGER NOT NULL CHECK (with_ignored IN (0, 1)),
        state TEXT NOT NULL CHECK (state IN ('open', 'removed')),
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        removed_ms INTEGER,
        CHECK ((state = 'removed') = (removed_ms IS NOT NULL))
      ) STRICT;
      CREATE UNIQUE INDEX sessions_open_name ON sessions (project, name) WHERE state = 'open';

      CREATE TABLE checkpoints (
        id TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 64 AND id NOT GLOB '*[^0-9a-f]*'),
        session TEXT NOT NULL REFERENCES sessions (id) DEFERRABLE INITIALLY DEFERRED,
        project TEXT NOT NULL CHECK (substr(project, 1, 1) = '/'),
        kind TEXT NOT NULL CHECK (kind IN ('start', 'operation')),
        parent TEXT REFERENCES checkpoints (id),
        parent_root TEXT
          CHECK (parent_root IS NULL
                 OR (length(parent_root) = 40 AND parent_root NOT GLOB '*[^0-9a-f]*')),
        root_id TEXT NOT NULL CHECK (length(root_id) = 40 AND root_id NOT GLOB '*[^0-9a-f]*'),
        layers TEXT NOT NULL CHECK (json_valid(layers) AND json_type(layers) = 'array'),
        layer TEXT CHECK (layer IS NULL OR length(layer) > 0),
        operation TEXT UNIQUE REFERENCES operations (id) DEFERRABLE INITIALLY DEFERRED,
        changes TEXT
          CHECK (changes IS NULL OR (length(changes) = 64 AND changes NOT GLOB '*[^0-9a-f]*')),
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        CHECK ((kind = 'start') = (parent IS NULL)),
        CHECK ((parent IS NULL) = (parent_root IS NULL)),
        CHECK ((kind = 'start') = (operation IS NULL)),
        CHECK ((kind = 'start') = (changes IS NULL)),
        CHECK (kind = 'operation' OR layer IS NULL),
        CHECK (kind = 'start' OR (layer IS NULL) = (root_id = parent_root))
      ) STRICT;
      CREATE INDEX checkpoints_by_session ON checkpoints (session, created_ms);
      CREATE INDEX checkpoints_by_parent ON checkpoints (parent) WHERE parent IS NOT NULL;

      CREATE TABLE operations (
        id TEXT PRIMARY KEY NOT NULL
          CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^a-z0-9-]*'
                 AND substr(id, 1, 1) <> '-'),
        session TEXT NOT NULL REFERENCES sessions (id),
        expected_head TEXT NOT NULL REFERENCES checkpoints (id),
        base_root TEXT NOT NULL
          CHECK (length(base_root) = 40 AND base_root NOT GLOB '*[^0-9a-f]*'),
        argv TEXT NOT NULL
          CHECK (json_valid(argv) AND json_type(argv) = 'array' AND json_array_length(argv) >= 1),
        cwd TEXT NOT NULL
          CHECK (cwd = '.' OR (length(cwd) > 0 AND substr(cwd, 1, 1) <> '/'
                               AND cwd NOT GLOB '*//*' AND substr(cwd, -1) <> '/')),
        state TEXT NOT NULL
          CHECK (state IN ('recorded', 'launched', 'drained', 'sealing', 'bound', 'discarded',
                           'stale', 'failed', 'escaped', 'recovery-required', 'abandoned')),
        exec_kind TEXT
          CHECK (exec_kind IS NULL
                 OR exec_kind IN ('exited', 'signaled', 'timed-out', 'cancelled', 'failed-to-start')),
        exec_code INTEGER,
        exec_detail TEXT,
        disposition TEXT
          CHECK (disposition IS NULL OR disposition IN ('sealed', 'no-change', 'discarded')),
        checkpoint TEXT UNIQUE REFERENCES checkpoints (id) DEFERRABLE INITIALLY DEFERRED,
        result_root TEXT
          CHECK (result_root IS NULL
                 OR (length(result_root) = 40 AND result_root NOT GLOB '*[^0-9a-f]*')),
        intent_root TEXT
          CHECK (intent_root IS NULL
                 OR (length(intent_root) = 40 AND intent_root NOT GLOB '*[^0-9a-f]*')),
        intent_layer TEXT CHECK (intent_layer IS NULL OR length(intent_layer) > 0),
        intent_changes TEXT
          CHECK (intent_changes IS NULL
                 OR (length(intent_changes) = 64 AND intent_changes NOT GLOB '*[^0-9a-f]*')),
        intent_ms INTEGER,
        seen_head TEXT,
        reason TEXT,
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        launched_ms INTEGER,
        drained_ms INTEGER,
        ended_ms INTEGER,
        CHECK ((coalesce(exec_kind, '') = 'exited') = (exec_code IS NOT NULL)),
        CHECK ((coalesce(exec_kind, '') IN ('signaled', 'failed-to-start'))
               = (exec_detail IS NOT NULL)),
        CHECK ((intent_root IS NULL) = (intent_layer IS NULL)
               AND (intent_root IS NULL) = (intent_changes IS NULL)
               AND (intent_root IS NULL) = (intent_ms IS NULL)),
        CHECK (intent_root IS NULL OR intent_root <> base_root),
        CHECK (state NOT IN ('recorded', 'launched') OR (exec_kind IS NULL AND intent_root IS NULL)),
        CHECK (state NOT IN ('drained', 'sealing', 'bound', 'discarded') OR exec_kind IS NOT NULL),
        CHECK (coalesce(exec_kind, '') <> 'failed-to-start' OR launched_ms IS NULL),
        CHECK (state <> 'sealing' OR intent_root IS NOT NULL),
        CHECK ((state = 'bound') = (checkpoint IS NOT NULL)),
        CHECK ((state = 'bound') = (coalesce(disposition, '') IN ('sealed', 'no-change'))),
        CHECK ((state = 'discarded') = (coalesce(disposition, '') = 'discarded')),
        CHECK ((result_root IS NOT NULL) = (state = 'bound')),
        CHECK (coalesce(disposition, '') <> 'sealed'
               OR (intent_root IS NOT NULL AND result_root = intent_root)),
        CHECK (coalesce(disposition, '') <> 'no-change'
               OR (intent_root IS NULL AND result_root = base_root)),
        CHECK ((state = 'stale') = (seen_head IS NOT NULL)),
        CHECK (state NOT IN ('stale', 'failed', 'escaped', 'recovery-required', 'abandoned')
               OR reason IS NOT NULL),
        CHECK (state NOT IN ('bound', 'discarded', 'stale', 'abandoned') OR ended_ms IS NOT NULL)
      ) STRICT;
      -- At most one live operation per session (docs/checkpoints.md "An operation").
      CREATE UNIQUE INDEX operations_one_live ON operations (session)
        WHERE state IN ('recorded', 'launched', 'drained', 'sealing');
    `,
  },
  {
    version: 10,
    name: "the paths an operation changed and the view it ran in, for marsh log (issue 14)",
    // docs/checkpoints.md "Rollback, fork, log": what the capture listed, kept
    // with the operation (at most 1,000 paths; `changed` counts them all).
    sql: `
      CREATE TABLE operation_changes (
        operation TEXT PRIMARY KEY NOT NULL REFERENCES operations (id),
        changed INTEGER NOT NULL CHECK (changed >= 0),
        truncated INTEGER NOT NULL CHECK (truncated IN (0, 1)),
        paths TEXT NOT NULL CHECK (json_valid(paths) AND json_type(paths) = 'array')
      ) STRICT;
      -- How the operation saw the project (docs/checkpoints.md "An operation", step 2):
      -- \`project\` (its overlay at the project's path) or \`relative\` (its cwd only).
      CREATE TABLE operation_views (
        operation TEXT PRIMARY KEY NOT NULL REFERENCES operations (id),
        view TEXT NOT NULL CHECK (view IN ('project', 'relative')),
        reason TEXT NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 11,
    name:
      "resolutions: marsh checkout of a checkpoint's root, with its session and checkpoint (issue 14)",
    // docs/checkpoints.md "Checkout and commit". The kind and scope CHECKs of
    // migration 7 cannot take a new value in place, so the table is rebuilt
    // (nothing references it); a checkout's split and label are empty.
    sql: `
      CREATE TABLE resolutions_v10 (
        id TEXT PRIMARY KEY NOT NULL
          CHECK (length(id) BETWEEN 1 AND 64 AND id NOT GLOB '*[^a-z0-9-]*'),
        split TEXT NOT NULL,
        label TEXT NOT NULL,
        kind TEXT NOT NULL CHECK (kind IN ('merge', 'promote', 'undo', 'checkout')),
        scope TEXT NOT NULL
          CHECK (scope IN ('git', 'filesystem', 'paths', 'promote', 'undo', 'checkout')),
        root TEXT NOT NULL CHECK (substr(root, 1, 1) = '/'),
        who_kind TEXT NOT NULL CHECK (who_kind IN ('host', 'session', 'job')),
        who_id TEXT,
        state TEXT NOT NULL CHECK (state IN ('applying', 'applied', 'failed', 'undone')),
        created_ms INTEGER NOT NULL CHECK (created_ms >= 0),
        finished_ms INTEGER,
        undoes TEXT,
        undone_by TEXT,
        takes INTEGER NOT NULL CHECK (takes >= 0),
        deletes INTEGER NOT NULL CHECK (deletes >= 0),
        converged INTEGER NOT NULL CHECK (converged >= 0),
        conflicts INTEGER NOT NULL CHECK (conflicts >= 0),
        base_tree TEXT,
        source_tree TEXT,
        branch_tree TEXT,
        result_tree TEXT,
        changed INTEGER CHECK (changed IS NULL OR changed >= 0),
        message TEXT,
        checkout_session TEXT,
        checkout_name TEXT,
        checkout_checkpoint TEXT,
        CHECK ((who_kind = 'host') = (who_id IS NULL)),
        CHECK ((kind = 'undo') = (undoes IS NOT NULL)),
        CHECK ((state = 'undone') = (undone_by IS NOT NULL)),
        CHECK ((state = 'applying') = (finished_ms IS NULL)),
        CHECK ((checkout_session IS NULL) = (checkout_name IS NULL)
               AND (checkout_session IS NULL) = (checkout_checkpoint IS NULL)),
        CHECK (kind <> 'checkout' OR (checkout_session IS NOT NULL AND scope = 'checkout')),
        CHECK (kind NOT IN ('merge', 'promote') OR checkout_session IS NULL)
      ) STRICT;
      INSERT INTO resolutions_v10 (id, split, label, kind, scope, root, who_kind, who_id, state,
        created_ms, finished_ms, undoes, undone_by, takes, deletes, converged, conflicts,
        base_tree, source_tree, branch_tree, result_tree, changed, message)
      SELECT id, split, label, kind, scope, root, who_kind, who_id, state,
        created_ms, finished_ms, undoes, undone_by, takes, deletes, converged, conflicts,
        base_tree, source_tree, branch_tree, result_tree, changed, message FROM resolutions;
      DROP TABLE resolutions;
      ALTER TABLE resolutions_v10 RENAME TO resolutions;
      CREATE INDEX resolutions_by_state ON resolutions (state) WHERE state = 'applying';
      CREATE INDEX resolutions_by_created ON resolutions (created_ms);
    `,
  },
  {
    version: 12,
    name: "the job tree: lineage on job records, and admission counters (issue 15)",
    // docs/rules.md "Admission" and "Lineage". Columns are added, not a
    // rebuild: a job from before has no lineage (NULL) and is its own root. A
    // job no split started has an empty split and label, as a checkout's
    // resolution has.
    sql: `
      ALTER TABLE jobs ADD COLUMN parent TEXT;
      ALTER TABLE jobs ADD COLUMN parent_job TEXT;
      ALTER TABLE jobs ADD COLUMN root TEXT;
      ALTER TABLE jobs ADD COLUMN depth INTEGER CHECK (depth IS NULL OR depth >= 1);
      ALTER TABLE jobs ADD COLUMN spawn TEXT
        CHECK (spawn IS NULL OR (json_valid(spawn) AND json_type(spawn) = 'array'));
      ALTER TABLE jobs ADD COLUMN kit_ref TEXT;
      ALTER TABLE jobs ADD COLUMN branch INTEGER CHECK (branch IS NULL OR branch IN (0, 1));
      ALTER TABLE jobs ADD COLUMN deadline_ms INTEGER;
      ALTER TABLE jobs ADD COLUMN parent_deadline INTEGER
        CHECK (parent_deadline IS NULL OR parent_deadline IN (0, 1));
      ALTER TABLE jobs ADD COLUMN cap TEXT
        CHECK (cap IS NULL OR cap IN ('live', 'cancelling', 'revoked'));
      CREATE INDEX jobs_by_parent ON jobs (parent_job) WHERE parent_job IS NOT NULL;
      CREATE INDEX jobs_by_root ON jobs (root) WHERE root IS NOT NULL;
      CREATE INDEX jobs_by_cap ON jobs (cap) WHERE cap IN ('live', 'cancelling');

      CREATE TABLE job_tree_launches (
        root TEXT PRIMARY KEY NOT NULL CHECK (length(root) > 0),
        launches INTEGER NOT NULL CHECK (launches >= 0)
      ) STRICT;
      CREATE TABLE admission_counts (
        name TEXT PRIMARY KEY NOT NULL CHECK (name IN ('admitted', 'refused')),
        n INTEGER NOT NULL CHECK (n >= 0)
      ) STRICT;
      INSERT INTO admission_counts (name, n) VALUES ('admitted', 0), ('refused', 0);
    `,
  },
  {
    version: 13,
    name: "operation_views.drain: what proved an operation's process tree gone (issue 14)",
    // docs/checkpoints.md "An operation", step 3: the completeness receipt is
    // this drain proof with the view. NULL: an operation from before, or one
    // never launched.
    sql: `
      ALTER TABLE operation_views ADD COLUMN drain TEXT
        CHECK (drain IS NULL OR drain IN ('cgroup', 'subreaper'));
    `,
  },
  {
    version: 14,
    name:
      "shell branches' supervisors: an uncertain shell branch's slot held until its end is verified (issue 15)",
    // docs/rules.md "Budgets and capabilities": a restarted daemon holds the
    // slot of a shell branch whose end is unknown until the supervisor it
    // recorded (pid and /proc start time) is seen gone.
    sql: `
      CREATE TABLE shell_supervisors (
        split TEXT NOT NULL,
        label TEXT NOT NULL,
        pid INTEGER NOT NULL CHECK (pid > 0),
        start INTEGER NOT NULL CHECK (start >= 0),
        ended_ms INTEGER,
        PRIMARY KEY (split, label),
        FOREIGN KEY (split, label) REFERENCES branches (split, label) ON DELETE CASCADE
      ) STRICT;
    `,
  },
  {
    version: 15,
    name: "jobs.fanout and jobs.consumes: a job's display marks in its lineage (issue 15)",
    // docs/rules.md "Lineage": `fanout` (`<fanout id>/<label>`) groups jobs a
    // `marsh fanout` branch started without a parent job; `consumes` (a split
    // id) marks a root job a stage after `marsh join` started. Display only.
    // NULL: not marked, or a job from before.
    sql: `
      ALTER TABLE jobs ADD COLUMN fanout TEXT CHECK (fanout IS NULL OR instr(fanout, '/') > 1);
      ALTER TABLE jobs ADD COLUMN consumes TEXT CHECK (consumes IS NULL OR length(consumes) > 0);
    `,
  },
];

/** The schema version this code writes and reads. */
export const SCHEMA_VERSION: number = MIGRATIONS.length;

const VERSION_TABLE = `
  CREATE TABLE IF NOT EXISTS schema_version (
    version INTEGER PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    applied_ms INTEGER NOT NULL
  ) STRICT`;

/**
 * Reads the schema version of an open database without writing: 0 for an
 * empty file. Throws {@linkcode JournalError} for a database that has
 * tables but no `schema_version` (not a journal, so never migrated).
 */
export function readSchemaVersion(db: DatabaseSync, path: string): number {
  const hasTable = db.prepare(
    "SELECT 1 AS x FROM sqlite_schema WHERE type = 'table' AND name = 'schema_version'",
  ).get();
  if (hasTable === undefined) {
    const other = db.prepare("SELECT name FROM sqlite_schema LIMIT 1").get();
    if (other !== undefined) {
      throw new JournalError(
        `Not a marsh journal: "${path}" holds "${String(other.name)}" but no schema version`,
      );
    }
    return 0;
  }
  const row = db.prepare("SELECT max(version) AS v FROM schema_version").get();
  const v = row?.v ?? 0;
  if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 0) {
    throw new JournalError(`Journal schema version cannot be read: "${path}" holds ${String(v)}`);
  }
  return v;
}

/**
 * Applies the migrations after the database's version in one `BEGIN
 * IMMEDIATE` transaction (re-reading the version under the write lock, so
 * two processes opening at once migrate once). Returns the versions applied.
 */
export function applyMigrations(
  db: DatabaseSync,
  path: string,
  nowMs: number,
  migrations: readonly Migration[] = MIGRATIONS,
): number[] {
  checkOrder(migrations);
  db.exec("BEGIN IMMEDIATE");
  try {
    const from = readSchemaVersion(db, path);
    const pending = migrations.filter((m) => m.version > from);
    if (pending.length > 0) db.exec(VERSION_TABLE);
    const record = db.prepare(
      "INSERT INTO schema_version (version, name, applied_ms) VALUES (?, ?, ?)",
    );
    for (const m of pending) {
      db.exec(m.sql);
      record.run(m.version, m.name, nowMs);
    }
    const violation = db.prepare("PRAGMA foreign_key_check").get();
    if (violation !== undefined) {
      throw new JournalError(
        `Journal migration broke a reference: table "${String(violation.table)}"`,
      );
    }
    db.exec("COMMIT");
    return pending.map((m) => m.version);
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK");
    if (error instanceof JournalError) throw error;
    throw new JournalError(`Journal migration failed: "${path}"`, { cause: error });
  }
}

function checkOrder(migrations: readonly Migration[]): void {
  migrations.forEach((m, i) => {
    if (m.version !== i + 1) {
      throw new TypeError(`Migrations out of order: position ${i} holds version ${m.version}`);
    }
  });
}
