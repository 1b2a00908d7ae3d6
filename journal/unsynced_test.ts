/**
 * The journal's unsynced commits (`Connection.unsynced`, docs/checkpoints.md
 * "An operation"): an operation's launch, view and drain commit without an
 * fsync of their own, and the connection is back at `synchronous=FULL`
 * for every other write, even when the write failed; a nested call changes
 * nothing of its outer transaction.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Connection } from "./_connection.ts";
import { Journal } from "./journal.ts";
import { freshPath, scratchDir } from "./_testing.ts";
import { drained, startSession } from "./_checkpoint_testing.ts";

const dir = scratchDir("unsynced");

function synchronous(c: Connection): number {
  return Number(c.get("PRAGMA synchronous")?.synchronous);
}

Deno.test("unsynced: NORMAL for its own transaction, FULL again after it, even when it throws", () => {
  const path = freshPath(dir);
  const db = new DatabaseSync(path);
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = FULL");
  const c = new Connection(db, path);
  try {
    c.run("CREATE TABLE t (x INTEGER)");
    const inside = c.unsynced(() => {
      const s = synchronous(c);
      c.write("insert", () => c.run("INSERT INTO t VALUES (1)"));
      return s;
    });
    assert.equal(inside, 1, "NORMAL inside");
    assert.equal(synchronous(c), 2, "FULL after");
    assert.throws(() =>
      c.unsynced(() => c.write("fail", () => c.run("INSERT INTO nope VALUES (1)")))
    );
    assert.equal(synchronous(c), 2, "FULL after a failed write");
    // Inside another transaction: that transaction's commit decides, and is FULL.
    const nested = c.write("outer", () => c.unsynced(() => synchronous(c)));
    assert.equal(nested, 2);
    assert.equal(c.get("SELECT count(*) AS n FROM t")?.n, 1);
  } finally {
    c.close();
  }
});

Deno.test("an operation's launch and drain are kept, and the journal is FULL for the intent", () => {
  const path = freshPath(dir);
  {
    using j = Journal.open(path);
    startSession(j.checkpoints);
    drained(j.checkpoints, "s1", "o1");
    assert.equal(j.settings().synchronous, "FULL");
  }
  using j = Journal.open(path);
  assert.equal(j.checkpoints.getOperation("o1")?.state, "drained");
});
