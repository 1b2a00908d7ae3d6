import assert from "node:assert/strict";
import { LAYER_ID } from "../splitfs/layers/layer_seal.ts";
import { parseSplitfsReply, parseSplitfsRequest, ProtocolError, splitfsToWire } from "./splitfs.ts";
import { MAX_CAPTURED_PATHS, MAX_SESSION_LAYERS, SESSION_LAYER_ID } from "./splitfs_session.ts";

const R = "0123456789abcdef0123456789abcdef01234567";
const D = "ab".repeat(32);
const L = (i: number) => `layer${String(i).padStart(4, "0")}`;

Deno.test("session frames: the layer id rule is the store's", () => {
  assert.equal(SESSION_LAYER_ID.source, LAYER_ID.source);
});

Deno.test("session frames: every request round-trips through the wire", () => {
  const reqs = [
    { v: 1, t: "session-open", root: "/p", name: "fix", withIgnored: false },
    {
      v: 1,
      t: "session-open",
      root: "/p",
      name: "fix",
      withIgnored: true,
      env: { HOME: "/home/u" },
    },
    { v: 1, t: "view-mount", root: "/p", name: "fix", layers: [L(1), L(2)] },
    { v: 1, t: "op-prepare", root: "/p", name: "fix", op: "o-1", layers: [L(1)] },
    { v: 1, t: "op-capture", root: "/p", name: "fix", op: "o-1", layers: [L(1)], rootId: R },
    {
      v: 1,
      t: "op-seal",
      root: "/p",
      name: "fix",
      op: "o-1",
      layer: L(2),
      rootId: R,
      layers: [L(1)],
    },
    { v: 1, t: "op-drop", root: "/p", name: "fix", op: "o-1" },
    { v: 1, t: "layer-check", root: "/p", layer: L(1), rootId: R },
    { v: 1, t: "session-close", root: "/p", name: "fix" },
    { v: 1, t: "gc", cwd: "/p", dryRun: false, keep: [L(1)] },
    { v: 1, t: "gc", cwd: "/p", dryRun: false },
    { v: 1, t: "gc", cwd: "/p", dryRun: false, keepExact: [L(1), L(2)] },
    { v: 1, t: "compact", root: "/p", name: "fix", layers: [L(1), L(2)] },
    { v: 1, t: "compact", root: "/p", name: "fix", layers: [L(1)], layer: L(3), budgetMs: 5 },
    { v: 1, t: "compact-drop", root: "/p", name: "fix", layer: L(3) },
  ] as const;
  for (const r of reqs) {
    const parsed = parseSplitfsRequest(JSON.parse(JSON.stringify(r)));
    assert.deepEqual(parsed, r);
    assert.deepEqual(splitfsToWire(parsed), r);
  }
});

Deno.test("session frames: bounds are checked at the edge", () => {
  const ok = { v: 1, t: "op-prepare", root: "/p", name: "fix", op: "o-1", layers: [L(1)] };
  const max = Array.from({ length: MAX_SESSION_LAYERS }, (_, i) => L(i));
  assert.equal(parseSplitfsRequest({ ...ok, layers: max }).t, "op-prepare");
  assert.equal(parseSplitfsRequest({ ...ok, name: "n".repeat(63) }).t, "op-prepare");
  assert.equal(parseSplitfsRequest({ ...ok, op: "o".repeat(64) }).t, "op-prepare");
  const seal = { ...ok, t: "op-seal", layer: L(999), rootId: R };
  assert.equal(parseSplitfsRequest({ ...seal, layers: max.slice(1) }).t, "op-seal");
  for (
    const bad of [
      { ...ok, layers: [...max, L(999)] },
      { ...ok, layers: [] },
      { ...ok, layers: [L(1), L(1)] },
      { ...ok, layers: ["UPPER-case"] },
      { ...ok, layers: ["../x"] },
      { ...ok, name: "n".repeat(64) },
      { ...ok, name: ".hidden" },
      { ...ok, name: "a/b" },
      { ...ok, op: "o".repeat(65) },
      { ...ok, op: "-x" },
      { ...ok, root: "rel" },
      { ...seal, layers: max },
      { ...seal, layer: L(1) },
      { ...seal, rootId: R.toUpperCase() },
      { ...seal, rootId: R.slice(1) },
      { v: 1, t: "gc", cwd: "/p", dryRun: false, keep: ["x"] },
      { v: 1, t: "gc", cwd: "/p", dryRun: false, keep: L(1) },
      { v: 1, t: "gc", cwd: "/p", dryRun: false, keepExact: ["x"] },
      { v: 1, t: "compact", root: "/p", name: "fix", layers: [] },
      { v: 1, t: "compact", root: "/p", name: "fix", layers: [L(1)], layer: "x" },
      { v: 1, t: "compact", root: "/p", name: "fix", layers: [L(1)], budgetMs: 0 },
      { v: 1, t: "compact", root: "/p", name: "fix", layers: [L(1)], budgetMs: 60_001 },
      { v: 1, t: "compact-drop", root: "/p", name: "fix" },
    ]
  ) {
    assert.throws(() => parseSplitfsRequest(bad), ProtocolError, JSON.stringify(bad));
  }
});

Deno.test("session frames: replies parse, and a bad one is refused", () => {
  const replies = [
    { v: 1, t: "session-opened", layers: [L(1)], rootId: R, files: 3, bytes: 10 },
    { v: 1, t: "view-mounted", view: "/p/.marsh/session/fix/view", rootId: R, class: "virtual" },
    { v: 1, t: "op-prepared", merged: "/m", upper: "/u" },
    { v: 1, t: "op-captured", kind: "no-change", rootId: R },
    {
      v: 1,
      t: "op-captured",
      kind: "changed",
      layer: L(2),
      rootId: R,
      digest: D,
      changed: 2,
      paths: [{ path: "a", change: "added" }, { path: "b", change: "deleted" }],
      truncated: false,
    },
    { v: 1, t: "op-sealed", layers: [L(1), L(2)] },
    { v: 1, t: "op-dropped" },
    { v: 1, t: "layer-checked", state: "durable" },
    { v: 1, t: "layer-checked", state: "conflicting", detail: "root id x" },
    { v: 1, t: "session-closed" },
    { v: 1, t: "compacted", layer: L(3), files: 10, state: "compacting" },
    { v: 1, t: "compacted", layer: L(3), files: 10, state: "sealed", rootId: R, bytes: 99 },
    { v: 1, t: "compact-dropped" },
  ];
  for (const r of replies) assert.deepEqual(parseSplitfsReply(r), r);
  const changed = replies[4]!;
  const many = Array.from({ length: MAX_CAPTURED_PATHS + 1 }, (_, i) => ({
    path: `p${i}`,
    change: "added",
  }));
  for (
    const bad of [
      { ...changed, paths: many },
      { ...changed, paths: [{ path: "a", change: "renamed" }] },
      { ...changed, digest: "x" },
      { ...changed, kind: "other" },
      { v: 1, t: "view-mounted", view: "/v", rootId: R, class: "fuse" },
      { v: 1, t: "layer-checked", state: "maybe" },
      { v: 1, t: "compacted", layer: L(3), files: 10, state: "done" },
      { v: 1, t: "compacted", layer: L(3), files: 10, state: "sealed", bytes: 1 },
    ]
  ) {
    assert.throws(() => parseSplitfsReply(bad), ProtocolError, JSON.stringify(bad));
  }
});
