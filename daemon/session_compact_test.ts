import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import { freshPath, scratchDir } from "../journal/_testing.ts";
import { COMPACTED_PREFIX, compactionLine, PROJECT } from "../journal/_checkpoint_testing.ts";
import type { CompactedReply } from "../protocol/splitfs_session.ts";
import { Log } from "./log.ts";
import { COMPACT_DEPTH, Compactor, type CompactStore } from "./session_compact.ts";

const dir = scratchDir("session-compact");
const at = { root: PROJECT, name: "fix" };

/** A service that answers `steps` compacting steps, then sealed (or fails at `failAt`). */
class FakeStore implements CompactStore {
  calls: string[] = [];
  dropped: string[] = [];
  gate: Promise<void> = Promise.resolve();
  constructor(readonly steps: number, readonly failAt: number | null = null) {}
  async compact(
    _at: typeof at,
    layers: readonly string[],
    layer?: string,
  ): Promise<CompactedReply> {
    await this.gate;
    this.calls.push(`${layers.length}:${layer ?? "-"}`);
    if (this.calls.length === this.failAt) throw new Error("the service went away");
    const base = { v: 1, t: "compacted", layer: "cmp1", files: this.calls.length } as const;
    return this.calls.length > this.steps
      ? { ...base, state: "sealed", rootId: "0".repeat(40), bytes: 1 }
      : { ...base, state: "compacting" };
  }
  dropCompaction(_at: typeof at, layer: string): Promise<void> {
    this.dropped.push(layer);
    return Promise.resolve();
  }
}

function stacks(j: Journal): string[][] {
  return j.checkpoints.sessionLog("s1", { all: true }).map((e) => [...e.checkpoint.layers]);
}

Deno.test({
  name:
    "Compactor: nothing at the threshold; past it, steps until sealed, one compaction of a session at a time, the pin dropped",
  permissions: { read: [dir], write: [dir] },
}, async () => {
  using j = Journal.open(freshPath(dir));
  compactionLine(j.checkpoints);
  const store = new FakeStore(3);
  const c = new Compactor({
    journal: j,
    store,
    log: new Log(null),
    pause: () => Promise.resolve(),
  });
  c.afterBind(at, Array.from({ length: COMPACT_DEPTH }, (_, i) => `l${i}`));
  await c.idle();
  assert.deepEqual(store.calls, [], "a stack of exactly the threshold is left");
  // Deeper than the threshold (the sample line is shallower: the depth is the caller's).
  const deep = [...COMPACTED_PREFIX, ...Array.from({ length: COMPACT_DEPTH }, (_, i) => `x${i}`)];
  let release!: () => void;
  store.gate = new Promise((r) => release = r);
  c.afterBind(at, deep);
  c.afterBind(at, deep); // one at a time per session: ignored
  release();
  await c.idle();
  assert.deepEqual(store.calls, [`${deep.length}:-`, ...Array(3).fill(`${deep.length}:cmp1`)]);
  assert.deepEqual(store.dropped, ["cmp1"]);
  // The deep stack's prefix is not the sample line's: nothing of it was rewritten.
  assert.ok(stacks(j).every((s) => !s.includes("cmp1")));
});

Deno.test({
  name:
    "Compactor: a failing service is logged, unpinned, and the journal untouched; a sealed one rewrites the stacks starting with it",
  permissions: { read: [dir], write: [dir] },
}, async () => {
  using j = Journal.open(freshPath(dir));
  compactionLine(j.checkpoints);
  const before = stacks(j);
  const log = `${dir}/log-${crypto.randomUUID()}`;
  const failing = new FakeStore(5, 2);
  const pad = Array.from({ length: COMPACT_DEPTH }, (_, i) => `x${i}`);
  const c1 = new Compactor({
    journal: j,
    store: failing,
    log: new Log(log),
    pause: () => Promise.resolve(),
  });
  c1.afterBind(at, [...COMPACTED_PREFIX, ...pad]);
  await c1.idle();
  assert.deepEqual(stacks(j), before);
  assert.deepEqual(failing.dropped, ["cmp1"]);
  assert.deepEqual(failing.calls.length, 2, "no step after the failure");
  assert.match(
    Deno.readTextFileSync(log),
    /compact fix: the stack of 35 layers was not compacted: the service went away \(the next operation tries again\)/,
  );
  // A stack deeper than the threshold that the journal names: rewritten in one transaction.
  const deep = Array.from({ length: COMPACT_DEPTH + 1 }, (_, i) => `d${i}`);
  const s = j.checkpoints.createSession({
    id: "s3",
    project: PROJECT,
    name: "deep",
    withIgnored: false,
    start: { root: "0".repeat(40), layers: deep },
    createdMs: 5_000,
  });
  const ok = new FakeStore(0);
  const c2 = new Compactor({
    journal: j,
    store: ok,
    log: new Log(log),
    pause: () => Promise.resolve(),
  });
  c2.afterBind({ root: PROJECT, name: "deep" }, deep);
  await c2.idle();
  assert.deepEqual(ok.calls, [`${deep.length}:-`]);
  assert.deepEqual(j.checkpoints.getCheckpoint(s.head)!.layers, ["cmp1"]);
  assert.deepEqual(stacks(j), before, "the other session's stacks do not start with it");
  assert.deepEqual(ok.dropped, ["cmp1"]);
  assert.match(
    Deno.readTextFileSync(log),
    /compact deep: 1 checkpoint stacks now start with cmp1\n/,
  );
});
