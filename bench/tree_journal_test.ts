/** bench --tree's journal table: a full 64-job tree is admitted and cancelled in one step. */

import assert from "node:assert/strict";
import { measureTreeJournal, renderTreeJournal } from "./tree_journal.ts";

Deno.test({
  name: "bench tree journal: 64 launches admitted, the whole tree cancelled",
  permissions: { read: true, write: true },
}, () => {
  const r = measureTreeJournal();
  assert.equal(r.jobs, 64);
  assert.ok(r.admitMedianMs > 0 && r.admitMedianMs <= r.admitMaxMs);
  assert.match(renderTreeJournal(r), /^a 64-job tree in the journal/);
});
