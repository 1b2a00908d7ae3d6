import assert from "node:assert/strict";
import { mountsBelow } from "../_testing.ts";
import { Dir } from "../fd/dir.ts";
import { collectLayers } from "../workspace/split_gc.ts";
import { keptCaptureHits } from "./capture_cache.ts";
import {
  changedReply,
  sealOneOp as op,
  type SessionWorld,
  sessionWorld,
} from "./_session_testing.ts";
import type {
  LayerCheckedReply,
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
  ViewMountedReply,
} from "../../protocol/splitfs_session.ts";
import { MAX_SESSION_LAYERS } from "../../protocol/splitfs_session.ts";

async function open(w: SessionWorld, name = "s"): Promise<SessionOpenedReply> {
  return await w.call<SessionOpenedReply>({
    t: "session-open",
    root: w.root,
    name,
    withIgnored: false,
  });
}

Deno.test("op-seal: sealing again answers the same; another root id for the layer is refused", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const head = await open(w);
  const at = { root: w.root, name: "s" };
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op: "o1",
    layers: head.layers,
  });
  await w.sh(prep.merged, "echo 2 > a");
  const cap = changedReply(
    await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op: "o1",
      layers: head.layers,
      rootId: head.rootId,
    }),
  );
  const seal = {
    t: "op-seal",
    ...at,
    op: "o1",
    layer: cap.layer,
    rootId: cap.rootId,
    layers: head.layers,
  } as const;
  // Renamed, not copied: the layer's file is the very inode the operation wrote.
  const ino = Deno.lstatSync(`${prep.upper}/a`).ino;
  const first = await w.call<OpSealedReply>(seal);
  assert.equal(Deno.lstatSync(`${w.root}/.marsh/layers/${cap.layer}/data/a`).ino, ino);
  const again = await w.call<OpSealedReply>(seal);
  assert.deepEqual(again, first);
  // After the op dir went too: read back from the store.
  await w.call({ t: "op-drop", ...at, op: "o1" });
  assert.deepEqual(await w.call<OpSealedReply>(seal), first);
  await assert.rejects(
    () => w.call({ ...seal, rootId: head.rootId }),
    /cannot seal layer .* it is conflicting \(layer .* is sealed with root/,
  );
  // Sealed on one stack, it is not the top of another.
  await assert.rejects(() => w.call({ ...seal, layers: [cap.layer.replace(/.$/, "x")] }), /layer/);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("layer-check: durable, absent, conflicting, ambiguous", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
  const head = await open(w);
  const next = await op(w, "s", "o1", head, "echo 3 > a; rm d/b");
  const check = async (layer: string, rootId: string) =>
    (await w.call<LayerCheckedReply>({ t: "layer-check", root: w.root, layer, rootId })).state;
  assert.equal(await check(next.layer, next.rootId), "durable");
  assert.equal(await check(head.layers[0]!, head.rootId), "durable");
  assert.equal(await check("zzzzzzzzzzzz", next.rootId), "absent");
  assert.equal(await check(next.layer, head.rootId), "conflicting");
  // An unsealed leftover (a removal gc began) is absent.
  const data = `${w.root}/.marsh/layers/${next.layer}`;
  Deno.renameSync(`${data}/SEALED`, `${w.sb.top}/SEALED`);
  assert.equal(await check(next.layer, next.rootId), "absent");
  Deno.renameSync(`${w.sb.top}/SEALED`, `${data}/SEALED`);
  assert.equal(await check(next.layer, next.rootId), "durable");
  // Data changed after the seal: not to be trusted either way.
  Deno.chmodSync(`${data}/data/a`, 0o600);
  const r = await w.call<LayerCheckedReply>({
    t: "layer-check",
    root: w.root,
    layer: next.layer,
    rootId: next.rootId,
  });
  assert.equal(r.state, "ambiguous");
  assert.match(r.detail ?? "", /was changed after it was sealed: a: mode/);
  await w.call({ t: "session-close", root: w.root, name: "s" });
});

Deno.test("op-drop: the overlay unmounted, the op dir gone, nothing left mounted; twice is fine", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const head = await open(w);
  const at = { root: w.root, name: "s" };
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op: "o1",
    layers: head.layers,
  });
  await w.sh(prep.merged, "echo 2 > a; mkdir -p x/y; echo z > x/y/z");
  // The same op prepared again on the same stack: the same dirs, the upper untouched.
  assert.deepEqual(
    await w.call<OpPreparedReply>({ t: "op-prepare", ...at, op: "o1", layers: head.layers }),
    prep,
  );
  assert.equal(Deno.readTextFileSync(`${prep.upper}/a`), "2\n");
  assert.equal(mountsBelow(`${w.root}/.marsh/session/s/op`).length, 1);
  await w.call({ t: "op-drop", ...at, op: "o1" });
  assert.deepEqual(mountsBelow(`${w.root}/.marsh/session/s/op`), []);
  assert.throws(() => Deno.statSync(`${w.root}/.marsh/session/s/op/o1`), Deno.errors.NotFound);
  await w.call({ t: "op-drop", ...at, op: "o1" });
  // The project's own tree was never written.
  assert.equal(Deno.readTextFileSync(`${w.root}/a`), "1\n");
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
  // Closed twice, and dropped in a closed session: nothing to do.
  await w.call({ t: "session-close", ...at });
  await w.call({ t: "op-drop", ...at, op: "o1" });
});

Deno.test("view-mount: a remount replaces the view; a process inside the old one keeps reading it", async () => {
  using w = await sessionWorld({ "a": "old\n" });
  const head = await open(w);
  const next = await op(w, "s", "o1", head, "echo new > a");
  const view = `${w.root}/.marsh/session/s/view`;
  using inside = Dir.openAbsolute(view);
  const mounted = await w.call<ViewMountedReply>({
    t: "view-mount",
    root: w.root,
    name: "s",
    layers: next.layers,
  });
  assert.deepEqual(mounted, {
    v: 1,
    t: "view-mounted",
    view,
    rootId: next.rootId,
    class: "virtual",
  });
  assert.equal(Deno.readTextFileSync(`${view}/a`), "new\n");
  assert.equal(new TextDecoder().decode(inside.readFile("a", 100)), "old\n");
  assert.equal(mountsBelow(view).length, 1, "the old view is detached, not stacked");
  // And back (a rollback): the old stack again.
  await w.call({ t: "view-mount", root: w.root, name: "s", layers: head.layers });
  assert.equal(Deno.readTextFileSync(`${view}/a`), "old\n");
  assert.equal(mountsBelow(view).length, 1);
  inside.close();
  await w.call({ t: "session-close", root: w.root, name: "s" });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("gc keeps what a session dir, an op dir and the keep list pin; the rest goes", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const head = await open(w);
  const c1 = await op(w, "s", "o1", head, "echo 2 > a");
  const c2 = await op(w, "s", "o2", c1, "echo 3 > a");
  // The view still shows the start: only the keep list holds c1 and c2.
  let r = collectLayers(w.root, true, [c2.layer]);
  assert.deepEqual(r.removed, []);
  r = collectLayers(w.root, true, []);
  assert.deepEqual(r.removed, [c1.layer, c2.layer].sort());
  // An op in flight pins its stack.
  const at = { root: w.root, name: "s" };
  await w.call({ t: "op-prepare", ...at, op: "o3", layers: c2.layers });
  assert.deepEqual(collectLayers(w.root, true, []).removed, []);
  await w.call({ t: "op-drop", ...at, op: "o3" });
  await w.call({ t: "view-mount", ...at, layers: c1.layers });
  assert.deepEqual(collectLayers(w.root, false, []).removed, [c2.layer]);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(collectLayers(w.root, false, []).removed, [c1.layer]);
  // The snapshot's layer is the chain head's: kept.
  assert.equal(
    (await w.call<LayerCheckedReply>({
      t: "layer-check",
      root: w.root,
      layer: head.layers[0]!,
      rootId: head.rootId,
    })).state,
    "durable",
  );
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test(`a stack of ${MAX_SESSION_LAYERS} layers mounts as a view and under an op`, async () => {
  using w = await sessionWorld({ "f": "0\n" });
  let head: { layers: string[]; rootId: string } = { ...(await open(w)) } as never;
  head = { layers: [...head.layers], rootId: head.rootId };
  for (let i = 1; head.layers.length < MAX_SESSION_LAYERS; i++) {
    head = await op(w, "s", `o${i}`, head, `echo ${i} > f; echo ${i} > f${i}`);
  }
  assert.equal(head.layers.length, MAX_SESSION_LAYERS);
  const at = { root: w.root, name: "s" };
  await w.call({ t: "view-mount", ...at, layers: head.layers });
  const view = `${w.root}/.marsh/session/s/view`;
  assert.equal(Deno.readTextFileSync(`${view}/f`), `${MAX_SESSION_LAYERS - 1}\n`);
  assert.equal(await w.gitTree(view), head.rootId);
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op: "last",
    layers: head.layers,
  });
  assert.equal(Deno.readTextFileSync(`${prep.merged}/f1`), "1\n");
  await w.call({ t: "op-drop", ...at, op: "last" });
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("session-open refuses a second session of one name, a bad name, a root not canonical", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const head = await open(w);
  await assert.rejects(() => open(w), /session s already has a directory/);
  await assert.rejects(
    () => w.call({ t: "session-open", root: w.root, name: "n".repeat(64), withIgnored: false }),
    /invalid session name/,
  );
  Deno.symlinkSync(w.root, `${w.sb.top}/alias`);
  await assert.rejects(
    () => w.call({ t: "session-open", root: `${w.sb.top}/alias`, name: "t", withIgnored: false }),
    /must be canonical/,
  );
  // The refusals changed nothing: the session still shows its snapshot.
  const view = `${w.root}/.marsh/session/s/view`;
  assert.equal(Deno.readTextFileSync(`${view}/a`), "1\n");
  assert.equal(await w.gitTree(view), head.rootId);
  await w.call({ t: "session-close", root: w.root, name: "s" });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("op-seal finishes a seal a crash left staged: sealed before its rename, or not sealed yet", async () => {
  using w = await sessionWorld({ "a": "1\n", "d/b": "2\n" });
  const head = await open(w);
  const at = { root: w.root, name: "s" };
  const next = await op(w, "s", "o1", head, "echo 3 > a; rm d/b; mkdir e; echo 4 > e/f");
  const store = `${w.root}/.marsh/layers/${next.layer}`;
  const opDir = `${w.root}/.marsh/session/s/op/o2`;
  const seal = {
    t: "op-seal",
    ...at,
    op: "o2",
    layer: next.layer,
    rootId: next.rootId,
    layers: head.layers,
  } as const;
  const check = async () =>
    (await w.call<LayerCheckedReply>({
      t: "layer-check",
      root: w.root,
      layer: next.layer,
      rootId: next.rootId,
    })).state;
  for (const sealed of [true, false]) {
    // The state a kill leaves: the wrapper staged in the op dir, not yet in the store.
    Deno.mkdirSync(opDir, { recursive: true });
    Deno.renameSync(store, `${opDir}/layer`);
    if (!sealed) {
      for (const f of ["SEALED", "meta.json", "index", "stat"]) {
        Deno.removeSync(`${opDir}/layer/${f}`);
      }
    }
    assert.equal(await check(), "absent");
    assert.deepEqual((await w.call<OpSealedReply>(seal)).layers, next.layers);
    assert.equal(await check(), "durable");
    await w.call({ t: "view-mount", ...at, layers: next.layers });
    assert.equal(await w.gitTree(`${w.root}/.marsh/session/s/view`), next.rootId);
    await w.call({ t: "op-drop", ...at, op: "o2" });
  }
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("two sessions seal sibling layers on one parent stack and each view shows its own", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const s = await open(w, "s");
  const t = await open(w, "t");
  // Nothing changed between the two snapshots: one stack, shared.
  assert.deepEqual(t.layers, s.layers);
  const fromS = await op(w, "s", "o1", s, "echo from-s > a");
  const fromT = await op(w, "t", "o1", t, "echo from-t > a; echo t > t.txt");
  assert.notEqual(fromS.layer, fromT.layer);
  assert.notEqual(fromS.rootId, fromT.rootId);
  await w.call({ t: "view-mount", root: w.root, name: "s", layers: fromS.layers });
  await w.call({ t: "view-mount", root: w.root, name: "t", layers: fromT.layers });
  assert.equal(Deno.readTextFileSync(`${w.root}/.marsh/session/s/view/a`), "from-s\n");
  assert.equal(Deno.readTextFileSync(`${w.root}/.marsh/session/t/view/a`), "from-t\n");
  assert.equal(await w.gitTree(`${w.root}/.marsh/session/s/view`), fromS.rootId);
  assert.equal(await w.gitTree(`${w.root}/.marsh/session/t/view`), fromT.rootId);
  await w.call({ t: "session-close", root: w.root, name: "s" });
  // Closing one leaves the other mounted and whole.
  assert.equal(Deno.readTextFileSync(`${w.root}/.marsh/session/t/view/t.txt`), "t\n");
  await w.call({ t: "session-close", root: w.root, name: "t" });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("op-seal uses the capture's result only while the upper dir is unchanged since", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const head = await open(w);
  const at = { root: w.root, name: "s" };
  const run = async (id: string, between: (upper: string) => void) => {
    const prep = await w.call<OpPreparedReply>({
      t: "op-prepare",
      ...at,
      op: id,
      layers: head.layers,
    });
    await w.sh(prep.merged, "echo 2 > a; echo b > b");
    const cap = changedReply(
      await w.call<OpCapturedReply>({
        t: "op-capture",
        ...at,
        op: id,
        layers: head.layers,
        rootId: head.rootId,
      }),
    );
    between(prep.upper);
    const before = keptCaptureHits();
    const sealed = w.call<OpSealedReply>({
      t: "op-seal",
      ...at,
      op: id,
      layer: cap.layer,
      rootId: cap.rootId,
      layers: head.layers,
    });
    return {
      sealed,
      hit: async () => (await sealed.catch(() => null), keptCaptureHits() > before),
    };
  };
  // Untouched: the kept capture seals it, no file read twice.
  let r = await run("o1", () => {});
  await r.sealed;
  assert.equal(await r.hit(), true);
  await w.call({ t: "op-drop", ...at, op: "o1" });
  // Touched (same bytes, a new mtime): captured again, the same root, sealed.
  r = await run("o2", (upper) => Deno.utimeSync(`${upper}/b`, 1, 1));
  await r.sealed;
  assert.equal(await r.hit(), false);
  await w.call({ t: "op-drop", ...at, op: "o2" });
  // Rewritten behind the capture's back: captured again, another root, refused.
  r = await run("o3", (upper) => Deno.writeTextFileSync(`${upper}/b`, "other\n"));
  await assert.rejects(() => r.sealed, /upper dir gives root .*, not the requested/);
  assert.equal(await r.hit(), false);
  await w.call({ t: "op-drop", ...at, op: "o3" });
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("layer-check writes nothing: no .marsh, or no store, is absent and stays so", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const ask = async () =>
    (await w.call<LayerCheckedReply>({
      t: "layer-check",
      root: w.root,
      layer: "abcdefgh1234",
      rootId: "0".repeat(40),
    })).state;
  assert.equal(await ask(), "absent");
  assert.throws(() => Deno.statSync(`${w.root}/.marsh`), Deno.errors.NotFound);
  Deno.mkdirSync(`${w.root}/.marsh`);
  assert.equal(await ask(), "absent");
  assert.deepEqual([...Deno.readDirSync(`${w.root}/.marsh`)], []);
});
