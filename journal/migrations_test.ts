import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import { JournalError, JournalVersionError } from "./errors.ts";
import { applyMigrations, MIGRATIONS, readSchemaVersion, SCHEMA_VERSION } from "./migrations.ts";
import { freshPath, sampleBranch, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("migrations");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

/** Schema version 1 as it shipped, frozen here so that editing migration 1 shows up. */
const V1_SQL = `
  CREATE TABLE schema_version (
    version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_ms INTEGER NOT NULL
  ) STRICT;
  CREATE TABLE splits (
    id TEXT PRIMARY KEY NOT NULL,
    creator_kind TEXT NOT NULL CHECK (creator_kind IN ('host', 'session', 'job')),
    creator_id TEXT, session TEXT NOT NULL, parent_split TEXT, parent_label TEXT,
    depth INTEGER NOT NULL CHECK (depth >= 1), root TEXT NOT NULL, dir TEXT NOT NULL,
    cwd TEXT NOT NULL, cap TEXT NOT NULL,
    state TEXT NOT NULL
      CHECK (state IN ('run', 'await', 'joined', 'kept', 'cancelled', 'uncertain')),
    status INTEGER, reason TEXT, identity_dev TEXT, identity_ino TEXT, git TEXT,
    created_ms INTEGER NOT NULL, finished_ms INTEGER, timing TEXT NOT NULL DEFAULT '{}',
    with_ignored INTEGER NOT NULL DEFAULT 0 CHECK (with_ignored IN (0, 1)),
    CHECK ((creator_kind = 'host') = (creator_id IS NULL)),
    CHECK ((parent_split IS NULL) = (parent_label IS NULL)),
    CHECK ((identity_dev IS NULL) = (identity_ino IS NULL))
  ) STRICT;
  CREATE TABLE branches (
    split TEXT NOT NULL REFERENCES splits (id) ON DELETE CASCADE,
    label TEXT NOT NULL, idx INTEGER NOT NULL CHECK (idx >= 0),
    kind TEXT NOT NULL CHECK (kind IN ('shell', 'argv')),
    placement TEXT NOT NULL
      CHECK (placement = 'shell-vm' OR (placement LIKE 'kit:%' AND length(placement) > 4)),
    run TEXT NOT NULL,
    state TEXT NOT NULL
      CHECK (state IN ('pending', 'running', 'captured', 'rejected', 'failed',
                       'cancelled', 'uncertain')),
    status TEXT, code INTEGER, job_id TEXT,
    files INTEGER NOT NULL DEFAULT 0 CHECK (files >= 0),
    trust TEXT CHECK (trust IS NULL OR trust = 'untrusted'),
    fork TEXT NOT NULL, fork_dev TEXT, fork_ino TEXT, started_ms INTEGER, finished_ms INTEGER,
    result TEXT,
    PRIMARY KEY (split, label), UNIQUE (split, idx),
    CHECK ((fork_dev IS NULL) = (fork_ino IS NULL))
  ) STRICT;
  CREATE TABLE capabilities (
    id TEXT PRIMARY KEY NOT NULL,
    split TEXT NOT NULL REFERENCES splits (id) ON DELETE CASCADE,
    label TEXT, holder TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('live', 'revoked')),
    created_ms INTEGER NOT NULL, revoked_ms INTEGER,
    CHECK ((state = 'revoked') = (revoked_ms IS NOT NULL)),
    FOREIGN KEY (split, label) REFERENCES branches (split, label) ON DELETE CASCADE
  ) STRICT;
  INSERT INTO schema_version VALUES (1, 'splits, branches and capabilities', 0);
`;

function rawDb(path: string, sql: string): void {
  const db = new DatabaseSync(path);
  try {
    db.exec(sql);
  } finally {
    db.close();
  }
}

function columns(path: string, table: string): string[] {
  const db = new DatabaseSync(path);
  try {
    return db.prepare(`SELECT name FROM pragma_table_info('${table}') ORDER BY cid`).all()
      .map((r) => String(r.name));
  } finally {
    db.close();
  }
}

function sideFiles(path: string): string[] {
  const base = path.slice(path.lastIndexOf("/") + 1);
  return [...Deno.readDirSync(path.slice(0, path.lastIndexOf("/")))]
    .map((e) => e.name)
    .filter((n) => n !== base && n.startsWith(base))
    .sort();
}

Deno.test({ name: "migrations are numbered 1..N in order", permissions }, () => {
  assert.deepEqual(MIGRATIONS.map((m) => m.version), MIGRATIONS.map((_, i) => i + 1));
  assert.equal(SCHEMA_VERSION, MIGRATIONS.length);
  const db = new DatabaseSync(":memory:");
  try {
    assert.throws(
      () => applyMigrations(db, ":memory:", 0, [MIGRATIONS[1]!, MIGRATIONS[0]!]),
      /Migrations out of order: position 0 holds version 2/,
    );
  } finally {
    db.close();
  }
});

Deno.test(
  { name: "an empty file (version 0) is brought to the current version", permissions },
  () => {
    const path = freshPath(dir);
    Deno.writeFileSync(path, new Uint8Array(0));
    using j = Journal.open(path);
    assert.equal(j.schemaVersion, SCHEMA_VERSION);
    j.createSplit(sampleSplit("s1"));
    assert.equal(j.getSplit("s1")?.id, "s1");
  },
);

Deno.test(
  { name: "a version table with no rows is version 0 and is upgraded", permissions },
  () => {
    const path = freshPath(dir);
    rawDb(
      path,
      "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, applied_ms INTEGER NOT NULL) STRICT",
    );
    using j = Journal.open(path);
    assert.equal(j.schemaVersion, SCHEMA_VERSION);
    j.createSplit(sampleSplit("s1"));
  },
);

Deno.test({ name: "a version 1 journal is upgraded and keeps its rows", permissions }, () => {
  const path = freshPath(dir);
  rawDb(
    path,
    V1_SQL + `
    INSERT INTO splits (id, creator_kind, creator_id, session, depth, root, dir, cwd, cap, state,
                        identity_dev, identity_ino, created_ms, timing)
      VALUES ('old', 'session', 'sess-1', 'sess-1', 1, '/p', '/p/.marsh/split/old', '.', 'cap-old',
              'await', '2049', '11', 1000, '{"snapshot":4}');
    INSERT INTO branches (split, label, idx, kind, placement, run, state, status, code, files, fork,
                          started_ms, finished_ms, result)
      VALUES ('old', 'a', 0, 'shell', 'shell-vm', '"make test"', 'captured', 'exited 0', 0, 2,
              '/p/.marsh/split/old/a', 1100, 1200, 'r1');
    INSERT INTO capabilities VALUES ('cap-old', 'old', NULL, 'session:sess-1', 'live', 1000, NULL);
  `,
  );
  assert.ok(!columns(path, "branches").includes("mechanism"));

  using j = Journal.open(path);
  assert.equal(j.schemaVersion, SCHEMA_VERSION);
  assert.deepEqual(
    j.getSplit("old"),
    sampleSplit("old", {
      creator: { kind: "session", id: "sess-1" },
      session: "sess-1",
      state: "await",
      identity: ["2049", "11"],
      timing: { snapshot: 4 },
    }),
  );
  assert.deepEqual(
    j.getBranch("old", "a"),
    sampleBranch("old", "a", 0, {
      run: "make test",
      state: "captured",
      status: "exited 0",
      code: 0,
      files: 2,
      startedMs: 1100,
      finishedMs: 1200,
      result: "r1",
    }),
  );
  assert.equal(j.liveCapabilities()[0]?.id, "cap-old");
  // The new columns work.
  j.updateBranch("old", "a", { mechanism: "cgroup", forkStrategy: "copy", attempt: "att-1" });
  assert.equal(j.getBranch("old", "a")?.mechanism, "cgroup");

  // An upgraded journal has exactly the schema of a fresh one.
  const fresh = freshPath(dir);
  Journal.open(fresh).close();
  const schema = (p: string) => {
    const db = new DatabaseSync(p);
    try {
      return db.prepare(
        "SELECT type, name, tbl_name FROM sqlite_schema ORDER BY type, name",
      ).all().map((r) => `${r.type} ${r.name} ${r.tbl_name}`);
    } finally {
      db.close();
    }
  };
  assert.deepEqual(schema(path), schema(fresh));
  for (const table of ["splits", "branches", "capabilities"]) {
    assert.deepEqual(columns(path, table), columns(fresh, table));
  }
});

Deno.test(
  { name: "a failing migration leaves the journal at its old version", permissions },
  () => {
    const path = freshPath(dir);
    rawDb(path, V1_SQL);
    const db = new DatabaseSync(path);
    try {
      const broken = [
        ...MIGRATIONS,
        { version: SCHEMA_VERSION + 1, name: "broken", sql: "CREATE TABLE broken (" },
      ];
      assert.throws(
        () => applyMigrations(db, path, 0, broken),
        (e) => e instanceof JournalError && e.message === `Journal migration failed: "${path}"`,
      );
      assert.equal(db.isTransaction, false);
      assert.equal(readSchemaVersion(db, path), 1);
    } finally {
      db.close();
    }
    assert.ok(!columns(path, "branches").includes("mechanism"));
  },
);

for (const walMode of [false, true]) {
  Deno.test({
    name: `a journal from a newer marsh is refused and left byte-identical (${
      walMode ? "WAL" : "rollback"
    } mode)`,
    permissions,
  }, () => {
    const path = freshPath(dir);
    const future = SCHEMA_VERSION + 7;
    rawDb(
      path,
      `${walMode ? "PRAGMA journal_mode = WAL;" : ""}
       CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL,
                                    applied_ms INTEGER NOT NULL) STRICT;
       INSERT INTO schema_version VALUES (1, 'one', 0), (${future}, 'from the future', 0);
       CREATE TABLE splits (id TEXT PRIMARY KEY, shape TEXT) STRICT;
       INSERT INTO splits VALUES ('s1', 'new');`,
    );
    Deno.chmodSync(path, 0o640);
    const before = Deno.readFileSync(path);
    const mtime = Deno.statSync(path).mtime;
    const sides = sideFiles(path);

    assert.throws(
      () => Journal.open(path),
      (e) =>
        e instanceof JournalVersionError &&
        e.found === future &&
        e.supported === SCHEMA_VERSION &&
        e.message ===
          `Journal is newer than this marsh: "${path}" has schema version ${future}, ` +
            `this marsh knows versions up to ${SCHEMA_VERSION}`,
    );
    assert.deepEqual(Deno.readFileSync(path), before);
    assert.deepEqual(Deno.statSync(path).mtime, mtime);
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o640);
    assert.deepEqual(sideFiles(path), sides);
  });
}
