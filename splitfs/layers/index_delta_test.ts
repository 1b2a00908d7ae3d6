/**
 * The delta index (docs/checkpoints.md "The layer index"): random trees and
 * random changes (seeded; `MARSH_SEED=N` replays), each delta through its
 * on-disk form and back onto its base, must give the changed index byte for
 * byte; a delta refuses a base it was not made against.
 */

import assert from "node:assert/strict";
import { compareNames } from "../fd/dir.ts";
import { blobId } from "../git/tree_id.ts";
import {
  decodeIndex,
  decodeIndexFile,
  encodeDelta,
  encodeIndex,
  IndexFormatError,
} from "./index_codec.ts";
import { applyDelta, diffIndex } from "./index_delta.ts";
import { IndexNode, KIND_DIR, KIND_FILE, KIND_SYMLINK, type LayerIndex } from "./layer_index.ts";
import { Builder, treeOf } from "./layer_records.ts";
import { throwsA } from "../_testing.ts";

/** A tree: a file's content (`@` first: a symlink's target), or a directory. */
type Spec = { [name: string]: string | Spec };

const enc = new TextEncoder();

function nodeOf(spec: Spec, rnd: () => number, gitignored: boolean): IndexNode {
  const b = new Builder();
  for (const name of Object.keys(spec).sort(compareNames)) {
    const v = spec[name] as string | Spec;
    const rec = Array.from({ length: 10 }, () => Math.floor(rnd() * 1e9));
    if (typeof v === "string") {
      const link = v.startsWith("@");
      rec[0] = link ? KIND_SYMLINK * 0x10000 + 0o777 : KIND_FILE * 0x10000 +
        (v.endsWith("!") ? 0o755 : 0o644);
      b.push(name, rec, blobId(enc.encode(link ? v.slice(1) : v)), null);
    } else {
      const kid = nodeOf(v, rnd, gitignored);
      rec[0] = KIND_DIR * 0x10000 + 0o755;
      b.push(name, rec, treeOf(kid) ?? new Uint8Array(20), kid);
    }
  }
  return b.build(gitignored ? blobId(enc.encode("*.o\n")) : null);
}

function indexOf(spec: Spec, seed: number, gitignored = false): LayerIndex {
  const root = nodeOf(spec, mulberry32(seed), gitignored);
  return {
    root,
    rootStat: Float64Array.from({ length: 10 }, (_, i) => i + seed),
    rootTree: treeOf(root),
    startSec: seed,
    startNsec: 7,
    ignoreKey: "none",
  };
}

function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const NAMES = ["a", "b", "c.txt", "d", "é", "z"];

function randomSpec(rnd: () => number, depth: number): Spec {
  const out: Spec = {};
  for (const name of NAMES) {
    const r = rnd();
    if (r < 0.35) continue;
    if (r < 0.55 && depth < 3) out[name] = randomSpec(rnd, depth + 1);
    else if (r < 0.6) out[name] = `@${name}`;
    else out[name] = `${name}${Math.floor(rnd() * 3)}${rnd() < 0.2 ? "!" : ""}`;
  }
  return out;
}

/** A copy of `spec` with a few random changes: added, removed, rewritten, kind changed. */
function mutate(spec: Spec, rnd: () => number, depth = 0): Spec {
  const out: Spec = {};
  for (const name of NAMES) {
    const v = spec[name];
    const r = rnd();
    if (v !== undefined && typeof v !== "string" && r < 0.7) out[name] = mutate(v, rnd, depth + 1);
    else if (r < 0.8) {
      if (v !== undefined) out[name] = v;
    } else if (r < 0.88) continue;
    else if (r < 0.94 && depth < 3) out[name] = randomSpec(rnd, depth + 1);
    else out[name] = `${name}-new${Math.floor(rnd() * 3)}`;
  }
  return out;
}

Deno.test("a delta through its bytes onto its base gives the changed index, byte for byte", () => {
  const seed = Number(Deno.env.get("MARSH_SEED") ?? Math.floor(Math.random() * 2 ** 31));
  console.log(`MARSH_SEED=${seed}`);
  const rnd = mulberry32(seed);
  let spec = randomSpec(rnd, 0);
  let base = indexOf(spec, 1);
  for (let step = 0; step < 200; step++) {
    const where = `seed ${seed}, step ${step}`;
    spec = mutate(spec, rnd);
    // Records are random per build: most unchanged names still differ in their stat record.
    const next = indexOf(spec, step + 2, rnd() < 0.2);
    const file = decodeIndexFile(encodeDelta(diffIndex(base, next)));
    assert.equal(file.kind, "delta", where);
    if (file.kind !== "delta") return;
    const derived = applyDelta(base, file.delta);
    assert.deepEqual(encodeIndex(derived), encodeIndex(next), where);
    base = derived;
  }
});

Deno.test("a delta holds only what changed, and shares what it does not change", () => {
  const spec: Spec = { d: { a: "1", b: "2", e: { f: "3" } }, x: "4" };
  const base = indexOf(spec, 1);
  const same = decodeIndexFile(encodeDelta(diffIndex(base, indexOf(spec, 1))));
  assert.equal(same.kind === "delta" && same.delta.patches.length, 0);
  const next = indexOf({ d: { a: "1", b: "2", e: { f: "3" } }, x: "5" }, 1);
  const delta = diffIndex(base, next);
  assert.deepEqual(delta.patches.map((p) => [p.path, p.names, p.deleted]), [["", ["x"], []]]);
  const derived = applyDelta(base, delta);
  // The untouched directory is the base's very node.
  assert.equal(derived.root.kids[0], base.root.kids[0]);
});

Deno.test("a delta refuses a base it was not made against, and bytes that are not one", () => {
  const base = indexOf({ a: "1", d: { b: "2" } }, 1);
  const next = indexOf({ a: "1", d: { c: "3" } }, 1);
  const delta = diffIndex(base, next);
  const other = indexOf({ a: "9" }, 1);
  assert.match(throwsA(() => applyDelta(other, delta), IndexFormatError).message, /another root/);
  // Same root, other directories (a base whose root id was forged): the deletion finds nothing.
  const forged = { ...other, rootTree: base.rootTree };
  assert.match(
    throwsA(() => applyDelta(forged, delta), IndexFormatError).message,
    /the stack below (lacks|does not lead to)/,
  );
  const bytes = encodeDelta(delta);
  throwsA(() => decodeIndexFile(bytes.subarray(0, bytes.length - 8)), IndexFormatError);
  assert.match(
    throwsA(() => decodeIndex(bytes), IndexFormatError).message,
    /delta, not a whole index/,
  );
  const version = bytes.slice();
  new DataView(version.buffer).setUint32(4, 9, true);
  assert.match(throwsA(() => decodeIndexFile(version), IndexFormatError).message, /version: 9/);
});
