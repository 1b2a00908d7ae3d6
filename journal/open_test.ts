import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { BUSY_TIMEOUT_MS, Journal } from "./journal.ts";
import { JournalError } from "./errors.ts";
import { SCHEMA_VERSION } from "./migrations.ts";
import { freshPath, sampleSplit, scratchDir } from "./_testing.ts";

const granted = scratchDir("open");
const outside = scratchDir("outside");
const permissions: Deno.PermissionOptions = { read: [granted], write: [granted] };
// Making a symlink needs unscoped permissions, so the link is planted while the module loads.
const planted = `${granted}/planted.db`;
Deno.writeTextFileSync(`${outside}/target.db`, "");
Deno.symlinkSync(`${outside}/target.db`, planted);

Deno.test(
  { name: "open sets WAL, synchronous=FULL, foreign keys and a busy timeout", permissions },
  () => {
    using j = Journal.open(freshPath(granted));
    assert.deepEqual(j.settings(), {
      journalMode: "wal",
      synchronous: "FULL",
      foreignKeys: true,
      busyTimeoutMs: BUSY_TIMEOUT_MS,
    });
    assert.equal(j.schemaVersion, SCHEMA_VERSION);
  },
);

Deno.test({ name: "the journal and its WAL files are created 0600", permissions }, () => {
  const path = freshPath(granted);
  using j = Journal.open(path);
  j.createSplit(sampleSplit("s1"));
  assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
  // SQLite gives its side files the main file's mode.
  assert.equal(Deno.statSync(`${path}-wal`).mode! & 0o777, 0o600);
  assert.equal(Deno.statSync(`${path}-shm`).mode! & 0o777, 0o600);
});

Deno.test(
  { name: "an existing journal readable by others is tightened to 0600", permissions },
  () => {
    const path = freshPath(granted);
    Journal.open(path).close();
    Deno.chmodSync(path, 0o644);
    using _j = Journal.open(path);
    assert.equal(Deno.statSync(path).mode! & 0o777, 0o600);
  },
);

Deno.test({ name: "reopening keeps the data and the version", permissions }, () => {
  const path = freshPath(granted);
  {
    using j = Journal.open(path);
    j.createSplit(sampleSplit("s1"));
  }
  using j = Journal.open(path);
  assert.equal(j.getSplit("s1")?.id, "s1");
  const raw = new DatabaseSync(path);
  try {
    const versions = raw.prepare("SELECT version FROM schema_version ORDER BY version").all();
    assert.deepEqual(
      versions.map((r) => r.version),
      Array.from({ length: SCHEMA_VERSION }, (_, i) => i + 1),
    );
  } finally {
    raw.close();
  }
});

Deno.test(
  { name: "a second connection waits for the writer instead of failing", permissions },
  () => {
    const path = freshPath(granted);
    using a = Journal.open(path);
    using b = Journal.open(path);
    a.createSplit(sampleSplit("s1"));
    assert.equal(b.getSplit("s1")?.id, "s1");
    b.transitionSplit("s1", ["run"], "await");
    assert.equal(a.getSplit("s1")?.state, "await");
  },
);

Deno.test(
  { name: "something that is not a journal is refused and left alone", permissions },
  () => {
    const dir = Deno.makeTempDirSync({ dir: granted });
    const foreign = `${dir}/other.db`;
    const db = new DatabaseSync(foreign);
    db.exec("CREATE TABLE notes (body TEXT)");
    db.close();
    const before = Deno.readFileSync(foreign);
    assert.throws(
      () => Journal.open(foreign),
      (e) =>
        e instanceof JournalError &&
        e.message === `Not a marsh journal: "${foreign}" holds "notes" but no schema version`,
    );
    assert.deepEqual(Deno.readFileSync(foreign), before);

    const text = `${dir}/text.db`;
    Deno.writeTextFileSync(
      text,
      "hello, this is not SQLite at all, not even close to it\n".repeat(20),
    );
    assert.throws(() => Journal.open(text), JournalError);

    assert.throws(
      () => Journal.open(dir),
      (e) => e instanceof JournalError && e.message === `Journal is not a regular file: "${dir}"`,
    );
    assert.throws(() => Journal.open(planted), /not a regular file/);
    assert.ok(Deno.lstatSync(planted).isSymlink);
  },
);

Deno.test({
  name: "opening a journal outside the granted directory is NotCapable",
  permissions,
}, () => {
  assert.throws(() => Journal.open(`${outside}/journal.db`), Deno.errors.NotCapable);
  assert.deepEqual([...Deno.readDirSync(granted)].filter((e) => e.name === "journal.db"), []);
});

Deno.test({
  name: "opening a journal with read but not write permission is NotCapable",
  permissions: { read: [granted, outside] },
}, () => {
  assert.throws(() => Journal.open(`${outside}/journal.db`), Deno.errors.NotCapable);
});
