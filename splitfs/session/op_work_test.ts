/**
 * An operation's capture and seal do not grow with the tree
 * (docs/checkpoints.md "Measured: the op path"): the work one small
 * operation does, counted (`splitfs/work_counts.ts`: entries listed and
 * stat'd, bytes read, index records built, hashed, compared and decoded,
 * barriers), is the same over 2,000 and 20,000 files. Counted, not timed,
 * so it holds on a loaded machine: a step that walks the tree again shows
 * as ten times the count.
 */

import assert from "node:assert/strict";
import { changedReply, type SessionWorld, sessionWorld } from "./_session_testing.ts";
import { recordWork, stopWork, WORK } from "../work_counts.ts";
import { setSyncWay } from "../layers/layer_sync.ts";
import type {
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";

/**
 * `files` files: five `hot/` directories of 20 (where the operations write)
 * and the rest in `cold/` directories of 100. The changed paths' directories
 * are as wide at either size; only `cold/` grows.
 */
function tree(files: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let h = 0; h < 5; h++) {
    for (let i = 0; i < 20; i++) {
      out[`hot/h${h}/f${String(i).padStart(3, "0")}.txt`] = `hot ${h} ${i}\n`;
    }
  }
  for (let i = 0; i < files - 100; i++) {
    const dir = `cold/c${String(Math.floor(i / 100)).padStart(4, "0")}`;
    out[`${dir}/f${String(i % 100).padStart(3, "0")}.txt`] = `${String(i).padStart(63, "x")}\n`;
  }
  return out;
}

interface Head {
  layers: string[];
  rootId: string;
}

/** One operation appending a line to a file in each `hot/` directory, sealed, bound and shown. */
async function smallOp(w: SessionWorld, head: Head, n: number): Promise<Head> {
  const at = { root: w.root, name: "work" };
  const op = `op-${n}`;
  const prep = await w.call<OpPreparedReply>({ t: "op-prepare", ...at, op, layers: head.layers });
  for (let h = 0; h < 5; h++) {
    Deno.writeTextFileSync(`${prep.merged}/hot/h${h}/f007.txt`, `run ${n}\n`, { append: true });
  }
  const cap = changedReply(
    await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op,
      layers: head.layers,
      rootId: head.rootId,
    }),
  );
  assert.equal(cap.changed, 5);
  const sealed = await w.call<OpSealedReply>({
    t: "op-seal",
    ...at,
    op,
    layer: cap.layer,
    rootId: cap.rootId,
    layers: head.layers,
  });
  await w.call({ t: "view-mount", ...at, layers: sealed.layers });
  await w.call({ t: "op-drop", ...at, op });
  return { layers: [...sealed.layers], rootId: cap.rootId };
}

/** An operation that changes nothing, captured and dropped. */
async function noChangeOp(w: SessionWorld, head: Head, n: number): Promise<void> {
  const at = { root: w.root, name: "work" };
  const op = `nc-${n}`;
  await w.call<OpPreparedReply>({ t: "op-prepare", ...at, op, layers: head.layers });
  const cap = await w.call<OpCapturedReply>({
    t: "op-capture",
    ...at,
    op,
    layers: head.layers,
    rootId: head.rootId,
  });
  assert.equal(cap.kind, "no-change");
  await w.call({ t: "op-drop", ...at, op });
}

/** The work of three small operations and three no-change ones, after one of each to warm up. */
async function opWork(
  files: number,
): Promise<{ small: Map<string, number>; none: Map<string, number> }> {
  using w = await sessionWorld(tree(files), false);
  const at = { root: w.root, name: "work" };
  const opened = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  let head: Head = { layers: [...opened.layers], rootId: opened.rootId };
  // The way that does not depend on the machine's dirty data (the other is one syncfs).
  const way = setSyncWay("fsync");
  try {
    head = await smallOp(w, head, 0);
    await noChangeOp(w, head, 0);
    const small = recordWork();
    for (let n = 1; n <= 3; n++) head = await smallOp(w, head, n);
    const none = recordWork();
    for (let n = 1; n <= 3; n++) await noChangeOp(w, head, n);
    return { small, none };
  } finally {
    stopWork();
    setSyncWay(way);
    await w.call({ t: "session-close", ...at });
  }
}

/** Asserts every count of `big` is within `slack` of `small`'s. */
function same(what: string, small: Map<string, number>, big: Map<string, number>): void {
  const names = new Set([...small.keys(), ...big.keys()]);
  for (const name of names) {
    const a = small.get(name) ?? 0, b = big.get(name) ?? 0;
    // Slack for what legitimately differs: a layer id's bytes, a tree id's.
    const slack = Math.max(16, a * 0.05);
    assert.ok(
      Math.abs(b - a) <= slack,
      `${what}: ${name}: ${a} at 2,000 files, ${b} at 20,000 (all: ${
        JSON.stringify([...small])
      } vs ${JSON.stringify([...big])})`,
    );
  }
}

Deno.test("a small operation's capture and seal do the same work at 2,000 and 20,000 files", async () => {
  const a = await opWork(2_000);
  const b = await opWork(20_000);
  same("small operations", a.small, b.small);
  same("no-change operations", a.none, b.none);
  // Synced file by file, a small layer's seal waits for no one else's writes (a compaction's copy).
  assert.equal(b.small.get(WORK.syncfs) ?? 0, 0, "a small operation's seal issues no syncfs");
  assert.ok((b.small.get(WORK.fsync) ?? 0) <= 3 * 24, "about 20 fsyncs an operation");
  assert.ok((a.small.get(WORK.listed) ?? 0) > 0, "the counts are recorded");
});
