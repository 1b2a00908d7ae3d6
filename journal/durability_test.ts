import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { DENO, killAfterWrite } from "./_crash.ts";
import { freshPath, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("durability");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir], run: [DENO] };

Deno.test({
  name: "a split written by a process killed with SIGKILL right after the call is there",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("split", path, dir);
  // The commit sits in the WAL: nothing closed the journal or checkpointed it.
  assert.ok(Deno.statSync(`${path}-wal`).size > 0);
  using j = Journal.open(path);
  assert.deepEqual(j.getSplit("s1"), sampleSplit("s1"));
});

Deno.test({
  name: "a transaction the killed process never committed leaves no trace and no lock",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("mid-transaction", path, dir);
  using j = Journal.open(path);
  assert.equal(j.getSplit("s1"), null);
  // The dead writer's lock died with it.
  j.createSplit(sampleSplit("s1"));
  assert.equal(j.getSplit("s1")?.id, "s1");
});
