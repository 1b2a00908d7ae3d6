import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import { applyMigrations, MIGRATIONS } from "./migrations.ts";
import type { ResolutionRecord } from "./records.ts";
import { freshPath, scratchDir } from "./_testing.ts";

const dir = scratchDir("resolutions-checkout");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

/** The migration that added `marsh checkout`'s resolutions (docs/checkpoints.md). */
const CHECKOUT_MIGRATION = MIGRATIONS.findIndex((m) => m.name.includes("marsh checkout")) + 1;

function merge(id: string): ResolutionRecord {
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
  };
}

function checkout(id: string, over: Partial<ResolutionRecord> = {}): ResolutionRecord {
  return {
    ...merge(id),
    split: "",
    label: "",
    kind: "checkout",
    scope: "checkout",
    trees: { base: "a".repeat(40), source: null, branch: "c".repeat(40), result: "c".repeat(40) },
    checkout: { session: "sess1", name: "fix", checkpoint: "e".repeat(64) },
    ...over,
  };
}

Deno.test({
  name: "resolutions: the checkout migration keeps every earlier resolution as it was",
  permissions,
}, () => {
  assert.ok(CHECKOUT_MIGRATION > 1);
  const path = freshPath(dir);
  const db = new DatabaseSync(path);
  try {
    applyMigrations(db, path, 1, MIGRATIONS.slice(0, CHECKOUT_MIGRATION - 1));
  } finally {
    db.close();
  }
  {
    // Written by the code of the version before: no checkout columns yet.
    const raw = new DatabaseSync(path);
    raw.exec(`INSERT INTO resolutions (id, split, label, kind, scope, root, who_kind, state,
      created_ms, finished_ms, takes, deletes, converged, conflicts, changed)
      VALUES ('r1', 's1', 'a', 'promote', 'promote', '/work/p', 'host', 'applied',
              1000, 2000, 3, 0, 0, 0, 3)`);
    raw.close();
  }
  using j = Journal.open(path);
  const r1 = j.getResolution("r1")!;
  assert.equal(r1.kind, "promote");
  assert.equal(r1.changed, 3);
  assert.equal("checkout" in r1, false, "a branch's resolution has no checkout fields");
  j.addResolution(checkout("c1"));
  assert.deepEqual(j.getResolution("c1"), checkout("c1"));
  assert.deepEqual(j.listResolutions({ state: "applying" }).map((r) => r.id), ["c1"]);
});

Deno.test({ name: "resolutions: a checkout names its session and checkpoint", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  j.addResolution(checkout("c1"));
  assert.ok(j.endResolution("c1", { state: "applied", finishedMs: 2_000, changed: 11 }));
  // Its undo carries them too.
  j.addResolution(checkout("u1", { kind: "undo", scope: "undo", undoes: "c1" }));
  assert.ok(j.endResolution("u1", { state: "applied", finishedMs: 3_000, changed: 11 }));
  assert.equal(j.getResolution("c1")?.state, "undone");
  assert.deepEqual(j.getResolution("u1")?.checkout, checkout("u1").checkout);
  assert.throws(() => j.addResolution(checkout("c2", { checkout: null })), TypeError);
  // The table refuses what the record check lets through: a merge naming a checkpoint.
  assert.throws(() => j.addResolution({ ...merge("m1"), checkout: checkout("m1").checkout }));
  assert.throws(() => j.addResolution(checkout("c3", { scope: "promote" })));
  assert.equal(j.getResolution("m1"), null);
});
