/**
 * What `op-prepare` trusts of a stack it has checked before
 * (splitfs/layers/layer_trust.ts, docs/checkpoints.md "What an operation
 * trusts"): a second operation on the same stack walks no layer again; a
 * layer changed behind marsh at the top of its data, replaced or re-sealed
 * is refused even so; a change deeper in its data is caught where the
 * docs say: by `layer-check` (recovery's read-back) and by the next service
 * process's first use.
 */

import assert from "node:assert/strict";
import { fullDataChecks, releaseTrust } from "../layers/layer_trust.ts";
import { mountsBelow } from "../_testing.ts";
import { type SessionWorld, sessionWorld } from "./_session_testing.ts";
import type {
  LayerCheckedReply,
  OpPreparedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";

async function open(w: SessionWorld): Promise<SessionOpenedReply> {
  return await w.call<SessionOpenedReply>({
    t: "session-open",
    root: w.root,
    name: "s",
    withIgnored: false,
  });
}

/** Prepares op `op` on `layers` and drops it again; rejects as op-prepare does. */
async function prepare(w: SessionWorld, op: string, layers: readonly string[]): Promise<void> {
  const at = { root: w.root, name: "s" };
  await w.call<OpPreparedReply>({ t: "op-prepare", ...at, op, layers });
  await w.call({ t: "op-drop", ...at, op });
}

Deno.test("op-prepare: a stack checked (or sealed) by this process is not walked again", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
  const head = await open(w);
  await prepare(w, "o1", head.layers);
  const before = fullDataChecks();
  await prepare(w, "o2", head.layers);
  await prepare(w, "o3", head.layers);
  assert.equal(fullDataChecks(), before, "no layer was walked again");
  await w.call({ t: "session-close", root: w.root, name: "s" });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("op-prepare: a trusted layer changed at the top of its data, replaced or re-sealed is refused", async () => {
  for (
    const change of [
      (data: string) => Deno.writeTextFileSync(`${data}/data/new`, "x"),
      (data: string) => Deno.removeSync(`${data}/data/a`),
      (data: string) => {
        // A copy in its place: same names and bytes, other inodes.
        Deno.renameSync(`${data}/data`, `${data}/old`);
        new Deno.Command("cp", { args: ["-a", `${data}/old`, `${data}/data`] }).outputSync();
      },
      (data: string) => {
        Deno.chmodSync(`${data}/meta.json`, 0o644);
        Deno.writeTextFileSync(`${data}/meta.json`, " ", { append: true });
      },
    ]
  ) {
    using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
    const head = await open(w);
    await prepare(w, "o1", head.layers);
    const layer = `${w.root}/.marsh/layers/${head.layers[0]}`;
    change(layer);
    await assert.rejects(
      () => prepare(w, "o2", head.layers),
      /is not usable|was changed after it was sealed|does not match/,
      change.toString(),
    );
    await w.call({ t: "session-close", root: w.root, name: "s" });
    assert.deepEqual(mountsBelow(w.sb.top), []);
  }
});

Deno.test("op-prepare: a file deeper in a trusted layer changed behind marsh is caught by layer-check and by the next service process", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
  const head = await open(w);
  await prepare(w, "o1", head.layers);
  const data = `${w.root}/.marsh/layers/${head.layers[0]}/data`;
  Deno.chmodSync(`${data}/d/b`, 0o644);
  Deno.writeTextFileSync(`${data}/d/b`, "changed behind marsh\n");
  // The same process trusts its verdict (docs/checkpoints.md "What an operation trusts").
  await prepare(w, "o2", head.layers);
  // Recovery's read-back walks the layer.
  const r = await w.call<LayerCheckedReply>({
    t: "layer-check",
    root: w.root,
    layer: head.layers[0]!,
    rootId: head.rootId,
  });
  assert.equal(r.state, "ambiguous");
  assert.match(r.detail ?? "", /was changed after it was sealed: d\/b/);
  // A new service process keeps no verdict: its first operation refuses the layer.
  releaseTrust();
  await assert.rejects(
    () => prepare(w, "o3", head.layers),
    /was changed after it was sealed: d\/b/,
  );
  await w.call({ t: "session-close", root: w.root, name: "s" });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});
