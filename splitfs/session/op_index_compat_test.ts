/**
 * Operation layers sealed before deltas hold the merged view's whole index
 * (version 1): they still read, a delta layer sealed on one derives from
 * it, and a delta whose bytes were changed is refused, never derived
 * (docs/checkpoints.md "The layer index").
 */

import assert from "node:assert/strict";
import { Dir } from "../fd/dir.ts";
import { mountsBelow } from "../_testing.ts";
import { sealOneOp, sessionWorld } from "./_session_testing.ts";
import { INDEX, LayersDir, releaseIndexCache } from "../layers/layers_dir.ts";
import { DELTA_VERSION, encodeIndex, FULL_VERSION } from "../layers/index_codec.ts";
import { META, SEALED, sealOf, sha256Hex } from "../layers/layer_seal.ts";
import { releaseTrust } from "../layers/layer_trust.ts";
import { hexOf } from "../git/tree_id.ts";
import type { SessionOpenedReply, ViewMountedReply } from "../../protocol/splitfs_session.ts";

const enc = new TextEncoder();

function storeOf(root: string): LayersDir {
  using rootDir = Dir.openAbsolute(root);
  using marsh = rootDir.openDir(".marsh");
  return LayersDir.open(marsh);
}

function versionOf(root: string, layer: string): number {
  const bytes = Deno.readFileSync(`${root}/.marsh/layers/${layer}/${INDEX}`);
  return new DataView(bytes.buffer).getUint32(4, true);
}

/** Rewrites `path`, read-only as the store leaves its files. */
function rewrite(path: string, bytes: Uint8Array): void {
  Deno.chmodSync(path, 0o644);
  Deno.writeFileSync(path, bytes);
  Deno.chmodSync(path, 0o444);
}

/** Makes the top layer of `layers` what the seal wrote before deltas: the whole merged index. */
function asWholeIndexLayer(root: string, layers: readonly string[]): void {
  using store = storeOf(root);
  const top = layers[layers.length - 1] as string;
  const whole = encodeIndex(store.loadIndex(store.explicitStack(layers)));
  const dir = `${root}/.marsh/layers/${top}`;
  Deno.chmodSync(dir, 0o755);
  rewrite(`${dir}/${INDEX}`, whole);
  const meta = JSON.parse(Deno.readTextFileSync(`${dir}/${META}`));
  meta.index = { sha256: sha256Hex(whole), size: whole.length };
  const metaBytes = enc.encode(JSON.stringify(meta, null, 2) + "\n");
  rewrite(`${dir}/${META}`, metaBytes);
  rewrite(`${dir}/${SEALED}`, enc.encode(sealOf(metaBytes)));
  Deno.chmodSync(dir, 0o555);
}

Deno.test("a whole-index operation layer still reads, and a delta sealed on it derives from it", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n", "d/e/c": "3\n" });
  const at = { root: w.root, name: "s" };
  const opened = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  const one = await sealOneOp(w, "s", "o1", opened, "echo 2 > a && mkdir -p x && echo 4 > x/y");
  assert.equal(versionOf(w.root, one.layer), DELTA_VERSION);
  asWholeIndexLayer(w.root, one.layers);
  assert.equal(versionOf(w.root, one.layer), FULL_VERSION);
  releaseIndexCache();
  releaseTrust();
  const two = await sealOneOp(w, "s", "o2", one, "rm d/b && echo 5 > d/e/c && echo 6 > z");
  assert.equal(versionOf(w.root, two.layer), DELTA_VERSION);
  releaseIndexCache();
  const view = await w.call<ViewMountedReply>({ t: "view-mount", ...at, layers: two.layers });
  assert.equal(view.rootId, two.rootId);
  assert.equal(await w.gitTree(`${w.root}/.marsh/session/s/view`), two.rootId);
  {
    using store = storeOf(w.root);
    const ix = store.loadIndex(store.explicitStack(two.layers));
    assert.equal(hexOf(ix.rootTree as Uint8Array), two.rootId);
  }
  // A third op over the derived head: its capture reads the head's index through both kinds.
  releaseIndexCache();
  const three = await sealOneOp(w, "s", "o3", two, "echo 7 >> x/y");
  await w.call({ t: "view-mount", ...at, layers: three.layers });
  assert.equal(await w.gitTree(`${w.root}/.marsh/session/s/view`), three.rootId);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("a delta that does not fit the stack below is refused, not derived", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
  const at = { root: w.root, name: "s" };
  const opened = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  const one = await sealOneOp(w, "s", "o1", opened, "echo 2 > a");
  const two = await sealOneOp(w, "s", "o2", one, "rm d/b");
  // Layer two's delta stood on layer one; put it on the snapshot alone (its parent forged to match).
  const dir = `${w.root}/.marsh/layers/${two.layer}`;
  const meta = JSON.parse(Deno.readTextFileSync(`${dir}/${META}`));
  meta.parent = opened.layers[opened.layers.length - 1];
  meta.depth -= 1;
  const metaBytes = enc.encode(JSON.stringify(meta, null, 2) + "\n");
  Deno.chmodSync(dir, 0o755);
  rewrite(`${dir}/${META}`, metaBytes);
  rewrite(`${dir}/${SEALED}`, enc.encode(sealOf(metaBytes)));
  Deno.chmodSync(dir, 0o555);
  releaseIndexCache();
  releaseTrust();
  using store = storeOf(w.root);
  const forged = [...opened.layers, two.layer];
  assert.throws(
    () => store.loadIndex(store.explicitStack(forged)),
    new RegExp(`layer "${two.layer}" has an index delta that does not fit the stack below it`),
  );
  await w.call({ t: "session-close", ...at });
});
