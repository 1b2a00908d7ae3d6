import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import { freshPath, sampleBranch, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("discard");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

Deno.test(
  { name: "discard: an ended branch reads back discarded, with its lineage", permissions },
  () => {
    const path = freshPath(dir);
    {
      using j = Journal.open(path);
      j.createSplit(sampleSplit("s", { state: "await" }));
      j.addBranches("s", [
        sampleBranch("s", "a", 0, { state: "captured", status: "exited 0", code: 0 }),
        sampleBranch("s", "b", 1, { state: "running" }),
      ]);
      const note = {
        reason: "too slow",
        by: { kind: "session", id: "s0/x" } as const,
        atMs: 5_000,
      };
      assert.equal(
        j.transitionBranch("s", "a", ["captured"], "discarded", { discard: note }),
        true,
      );
      const a = j.getBranch("s", "a")!;
      assert.equal(a.state, "discarded");
      assert.deepEqual(a.discard, { after: "captured", ...note });
      // Its status stays: what it did before it was discarded.
      assert.equal(a.status, "exited 0");
      // Final: a second discard, or any move, changes nothing.
      assert.equal(
        j.transitionBranch("s", "a", ["captured"], "discarded", { discard: note }),
        false,
      );
      // A running branch is stopped first: the table refuses running -> discarded.
      assert.throws(
        () => j.transitionBranch("s", "b", ["running"], "discarded", { discard: note }),
        /cannot move from "running" to "discarded"/,
      );
      // The note goes with that move only.
      assert.throws(() => j.transitionBranch("s", "b", ["running"], "captured", { discard: note }));
      assert.throws(() => j.transitionBranch("s", "b", ["running"], "discarded"), TypeError);
      assert.throws(() => j.updateBranch("s", "b", { discard: note }), TypeError);
      assert.equal(j.getBranch("s", "b")!.discard, null);
    }
    // On disk the state column keeps the end; the discard is its own columns.
    const db = new DatabaseSync(path, { readOnly: true });
    try {
      const row = db.prepare(
        "SELECT state, discarded_ms, discarded_by, discard_reason FROM branches WHERE label = 'a'",
      ).get();
      assert.deepEqual({ ...row }, {
        state: "captured",
        discarded_ms: 5_000,
        discarded_by: "session:s0/x",
        discard_reason: "too slow",
      });
    } finally {
      db.close();
    }
  },
);

Deno.test(
  { name: "discard: the schema refuses a discarded branch that never ended", permissions },
  () => {
    const path = freshPath(dir);
    {
      using j = Journal.open(path);
      j.createSplit(sampleSplit("s", { state: "run" }));
      j.addBranches("s", [sampleBranch("s", "a", 0, { state: "running" })]);
    }
    const db = new DatabaseSync(path);
    try {
      assert.throws(
        () =>
          db.exec(
            "UPDATE branches SET discarded_ms = 1, discarded_by = 'host' WHERE label = 'a'",
          ),
        /CHECK constraint failed/,
      );
      assert.throws(
        () => db.exec("UPDATE branches SET discarded_by = 'host' WHERE label = 'a'"),
        /CHECK constraint failed/,
      );
    } finally {
      db.close();
    }
  },
);
