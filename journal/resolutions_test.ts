import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import type { ResolutionRecord } from "./records.ts";
import { freshPath, scratchDir } from "./_testing.ts";

const dir = scratchDir("resolutions");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function resolution(id: string, over: Partial<ResolutionRecord> = {}): ResolutionRecord {
  return {
    id,
    split: "s1",
    label: "a",
    kind: "merge",
    scope: "git",
    root: "/work/p",
    who: { kind: "host" },
    state: "applying",
    createdMs: 1_000,
    finishedMs: null,
    undoes: null,
    undoneBy: null,
    summary: { take: 2, delete: 1, converged: 1, conflict: 0 },
    trees: { base: "a".repeat(40), source: "b".repeat(40), branch: "c".repeat(40), result: null },
    changed: null,
    message: null,
    ...over,
  };
}

Deno.test({ name: "resolutions: add, read back, settle, list", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  j.addResolution(resolution("r1"));
  assert.deepEqual(j.getResolution("r1"), resolution("r1"));
  assert.equal(j.getResolution("nope"), null);
  assert.throws(() => j.addResolution(resolution("r1")), Deno.errors.AlreadyExists);
  // Only a new one is added.
  assert.throws(() => j.addResolution(resolution("r2", { state: "applied" })), TypeError);
  assert.throws(() => j.addResolution(resolution("r2", { undoes: "r1" })), TypeError);

  assert.equal(j.endResolution("r1", { state: "applied", finishedMs: 2_000, changed: 4 }), true);
  // Settled once: a second end changes nothing.
  assert.equal(j.endResolution("r1", { state: "failed", finishedMs: 3_000, message: "x" }), false);
  assert.deepEqual(
    j.getResolution("r1"),
    resolution("r1", { state: "applied", finishedMs: 2_000, changed: 4 }),
  );
  assert.throws(
    () => j.endResolution("nope", { state: "applied", finishedMs: 1, changed: 0 }),
    Deno.errors.NotFound,
  );

  const who = { kind: "session", id: "s0/b" } as const;
  j.addResolution(resolution("r2", { kind: "promote", scope: "promote", createdMs: 5_000, who }));
  j.endResolution("r2", { state: "failed", finishedMs: 6_000, message: "refused: a.txt changed" });
  assert.equal(j.getResolution("r2")?.message, "refused: a.txt changed");
  assert.deepEqual(j.getResolution("r2")?.who, who);

  assert.deepEqual(j.listResolutions().map((r) => r.id), ["r2", "r1"]);
  assert.deepEqual(j.listResolutions({ state: "applied" }).map((r) => r.id), ["r1"]);
  assert.deepEqual(j.listResolutions({ who }).map((r) => r.id), ["r2"]);
  assert.deepEqual(j.listResolutions({ who: { kind: "host" } }).map((r) => r.id), ["r1"]);
  assert.deepEqual(j.listResolutions({ limit: 1 }).map((r) => r.id), ["r2"]);
  assert.deepEqual(j.listResolutions({ root: "/elsewhere" }), []);
});

Deno.test({ name: "resolutions: an applied undo marks what it undid undone", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  j.addResolution(resolution("r1"));
  j.endResolution("r1", { state: "applied", finishedMs: 2_000, changed: 3 });
  j.addResolution(
    resolution("u1", { kind: "undo", scope: "undo", undoes: "r1", createdMs: 3_000 }),
  );
  assert.equal(j.getResolution("r1")?.state, "applied");
  j.endResolution("u1", { state: "applied", finishedMs: 4_000, changed: 3 });
  assert.equal(j.getResolution("u1")?.state, "applied");
  assert.deepEqual(
    j.getResolution("r1"),
    resolution("r1", { state: "undone", finishedMs: 2_000, changed: 3, undoneBy: "u1" }),
  );

  // A failed undo leaves the original applied.
  j.addResolution(resolution("r2"));
  j.endResolution("r2", { state: "applied", finishedMs: 2_000, changed: 1 });
  j.addResolution(resolution("u2", { kind: "undo", scope: "undo", undoes: "r2" }));
  j.endResolution("u2", { state: "failed", finishedMs: 4_000, message: "refused" });
  assert.equal(j.getResolution("r2")?.state, "applied");
  assert.equal(j.getResolution("r2")?.undoneBy, null);
});

Deno.test({ name: "resolutions: SQLite refuses what the types forbid", permissions }, () => {
  const path = freshPath(dir);
  Journal.open(path).close();
  const db = new DatabaseSync(path);
  try {
    const insert = (state: string, undoneBy: string | null, whoKind = "host") =>
      db.prepare(
        `INSERT INTO resolutions (id, split, label, kind, scope, root, who_kind, who_id, state,
          created_ms, finished_ms, undoes, undone_by, takes, deletes, converged, conflicts)
         VALUES ('x', 's', 'a', 'merge', 'git', '/p', :who, NULL, :state, 1, 2, NULL, :by,
          0, 0, 0, 0)`,
      ).run({ state, by: undoneBy, who: whoKind });
    assert.throws(() => insert("undone", null), /CHECK/);
    assert.throws(() => insert("weird", null), /CHECK/);
    assert.throws(() => insert("applied", null, "alien"), /CHECK/);
    insert("applied", null);
  } finally {
    db.close();
  }
  using j = Journal.open(path);
  assert.equal(j.getResolution("x")?.state, "applied");
});
