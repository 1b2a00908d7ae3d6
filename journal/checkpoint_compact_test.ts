import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { freshPath, scratchDir } from "./_testing.ts";
import { DENO, killAfterWrite } from "./_crash.ts";
import {
  COMPACTED,
  COMPACTED_PREFIX,
  compactionLine,
  PROJECT,
  R0,
  startSession,
} from "./_checkpoint_testing.ts";
import type { CheckpointJournal } from "./checkpoints.ts";

const dir = scratchDir("checkpoint-compact");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir], run: [DENO] };

/** Each checkpoint's stack, by the operation that made it (`start` for the start). */
function stacks(c: CheckpointJournal): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const s of ["s1", "s2"]) {
    for (const e of c.sessionLog(s, { all: true })) {
      out[e.operation?.id ?? "start"] = [...e.checkpoint.layers];
    }
  }
  return out;
}

/** Everything but the stacks: ids, roots, parents, heads, in log order. */
function rest(c: CheckpointJournal): unknown {
  return ["s1", "s2"].map((s) => ({
    head: c.getSession(s)!.head,
    log: c.sessionLog(s, { all: true }).map((e) => ({ ...e.checkpoint, layers: null })),
  }));
}

const OLD = {
  start: ["l0"],
  "op-1": ["l0", "layer-op-1"],
  "op-2": ["l0", "layer-op-1", "layer-op-2"],
  "op-3": ["l0", "layer-op-1", "layer-op-2", "layer-op-3"],
  "op-4": ["l0", "layer-op-1", "layer-op-2", "layer-op-4"],
};
const NEW = {
  start: ["l0"],
  "op-1": ["l0", "layer-op-1"],
  "op-2": [COMPACTED],
  "op-3": [COMPACTED, "layer-op-3"],
  "op-4": [COMPACTED, "layer-op-4"],
};

Deno.test({
  name:
    "compactStacks: every stack starting with the prefix, the fork's too, gets the compacted layer; nothing else changes; again is a no-op",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  compactionLine(c);
  // Another project's stack with the same ids is not this project's.
  c.createSession({
    id: "s9",
    project: "/work/other",
    name: "fix",
    withIgnored: false,
    start: { root: R0, layers: COMPACTED_PREFIX },
    createdMs: 1,
  });
  assert.deepEqual(stacks(c), OLD);
  const before = rest(c);
  assert.equal(c.compactStacks(PROJECT, COMPACTED_PREFIX, COMPACTED), 3);
  assert.deepEqual(stacks(c), NEW);
  assert.deepEqual(rest(c), before, "ids, roots, parents and heads are unchanged");
  assert.deepEqual(c.getCheckpoint(c.getSession("s9")!.head)!.layers, COMPACTED_PREFIX);
  assert.equal(c.compactStacks(PROJECT, COMPACTED_PREFIX, COMPACTED), 0);
  assert.deepEqual(stacks(c), NEW);
  // A prefix that is not a whole leading run of layers matches nothing ("l0" vs "l0x").
  assert.equal(c.compactStacks(PROJECT, ["l"], "cmp2"), 0);
});

Deno.test(
  { name: "compactStacks refuses an empty prefix or one holding the layer", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    const c = j.checkpoints;
    startSession(c);
    assert.throws(() => c.compactStacks(PROJECT, [], "x"), TypeError);
    assert.throws(() => c.compactStacks(PROJECT, ["l0"], "l0"), TypeError);
    assert.deepEqual(c.getCheckpoint(c.getSession("s1")!.head)!.layers, ["l0"]);
  },
);

Deno.test({
  name: "compactStacks killed with SIGKILL inside its transaction: every stack is the old one",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("compact-open", path, dir);
  using j = Journal.open(path);
  assert.deepEqual(stacks(j.checkpoints), OLD);
  assert.equal(j.checkpoints.compactStacks(PROJECT, COMPACTED_PREFIX, COMPACTED), 3);
  assert.deepEqual(stacks(j.checkpoints), NEW);
});

Deno.test({
  name: "compactStacks killed with SIGKILL after its commit: every stack is the new one",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("compact-done", path, dir);
  using j = Journal.open(path);
  assert.deepEqual(stacks(j.checkpoints), NEW);
});
