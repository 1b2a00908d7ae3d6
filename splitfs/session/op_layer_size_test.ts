/**
 * A small operation's sealed layer holds its changed files and metadata,
 * not the tree (docs/checkpoints.md "The layer index"): the same five-file
 * change sealed over 2,000 and over 20,000 files gives layers within 10% of
 * each other in bytes on disk.
 */

import assert from "node:assert/strict";
import { sessionWorld } from "./_session_testing.ts";
import { changedReply } from "./_session_testing.ts";
import type {
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";

/** `files` files of 64 bytes, 100 to a directory. */
function tree(files: number): Record<string, string> {
  const out: Record<string, string> = {};
  for (let i = 0; i < files; i++) {
    const dir = `d${String(Math.floor(i / 100)).padStart(4, "0")}`;
    out[`${dir}/f${String(i % 100).padStart(3, "0")}.txt`] = `${String(i).padStart(63, "x")}\n`;
  }
  return out;
}

/** The apparent size of every file under `path` (the layer's data, index, stat, meta, seal). */
function bytesUnder(path: string): number {
  let total = 0;
  for (const e of Deno.readDirSync(path)) {
    const p = `${path}/${e.name}`;
    if (e.isDirectory) total += bytesUnder(p);
    else total += Deno.lstatSync(p).size;
  }
  return total;
}

/** Seals one operation that appends a line to five files in five directories; its layer's bytes. */
async function smallOpLayerBytes(files: number): Promise<{ layer: number; index: number }> {
  using w = await sessionWorld(tree(files), false);
  const at = { root: w.root, name: "size" };
  const opened = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  const op = "op-1";
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op,
    layers: opened.layers,
  });
  await w.sh(
    prep.merged,
    "for d in d0000 d0003 d0007 d0011 d0019; do echo more >> $d/f042.txt; done",
  );
  const cap = changedReply(
    await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op,
      layers: opened.layers,
      rootId: opened.rootId,
    }),
  );
  assert.equal(cap.changed, 5);
  await w.call<OpSealedReply>({
    t: "op-seal",
    ...at,
    op,
    layer: cap.layer,
    rootId: cap.rootId,
    layers: opened.layers,
  });
  await w.call({ t: "op-drop", ...at, op });
  await w.call({ t: "session-close", ...at });
  const path = `${w.root}/.marsh/layers/${cap.layer}`;
  return { layer: bytesUnder(path), index: Deno.statSync(`${path}/index`).size };
}

Deno.test("a small operation's layer does not grow with the tree: 2k and 20k files within 10%", async () => {
  const small = await smallOpLayerBytes(2_000);
  const large = await smallOpLayerBytes(20_000);
  const ratio = large.layer / small.layer;
  assert.ok(
    ratio < 1.1,
    `the layer is ${large.layer} B at 20k files, ${small.layer} B at 2k (×${ratio.toFixed(2)}; ` +
      `index ${large.index} B and ${small.index} B)`,
  );
});
