import assert from "node:assert/strict";
import { mountsBelow } from "../_testing.ts";
import { collectLayers } from "../workspace/split_gc.ts";
import { changedReply, type SessionWorld, sessionWorld } from "./_session_testing.ts";
import type {
  CompactedReply,
  LayerCheckedReply,
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";

type Head = { layers: string[]; rootId: string };

/** Prepares op `id` on `head` and runs `script` in its overlay (not captured yet). */
async function prepared(w: SessionWorld, id: string, head: Head, script: string): Promise<void> {
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    root: w.root,
    name: "s",
    op: id,
    layers: head.layers,
  });
  await w.sh(prep.merged, script);
}

/** Captures and seals op `id` prepared on `head`; returns the stack `bound` on (the journal's). */
async function seal(w: SessionWorld, id: string, head: Head, bound = head.layers): Promise<Head> {
  const at = { root: w.root, name: "s" };
  const cap = changedReply(
    await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op: id,
      layers: head.layers,
      rootId: head.rootId,
    }),
  );
  const sealed = await w.call<OpSealedReply>({
    t: "op-seal",
    ...at,
    op: id,
    layer: cap.layer,
    rootId: cap.rootId,
    layers: head.layers,
  });
  await w.call({ t: "op-drop", ...at, op: id });
  assert.equal(sealed.layers.at(-1), cap.layer);
  return { layers: [...bound, cap.layer], rootId: cap.rootId };
}

async function op(w: SessionWorld, id: string, head: Head, script: string): Promise<Head> {
  await prepared(w, id, head, script);
  return await seal(w, id, head);
}

/** Every step of a compaction of `layers`, each 1 ms long; returns the steps' replies. */
async function compact(
  w: SessionWorld,
  layers: readonly string[],
  into?: string,
): Promise<CompactedReply[]> {
  const out: CompactedReply[] = [];
  let layer = into;
  for (;;) {
    const r = await w.call<CompactedReply>({
      t: "compact",
      root: w.root,
      name: "s",
      layers,
      budgetMs: 1,
      ...(layer === undefined ? {} : { layer }),
    });
    out.push(r);
    layer = r.layer;
    if (r.state === "sealed") return out;
  }
}

function fileList(n: number): Record<string, string> {
  const files: Record<string, string> = { "run.sh": "#!/bin/sh\necho hi\n", "doc/a.md": "a\n" };
  for (let i = 0; i < n; i++) files[`src/d${i % 7}/f${i}.txt`] = `${i}\n`.repeat(i % 50 + 1);
  return files;
}

Deno.test("compact: one bottom layer with the stack's root id, in steps; layers sealed on the old stack stand on it; gc drops the replaced layers only when nothing names them", async () => {
  using w = await sessionWorld(fileList(300));
  await w.sh(w.root, "chmod +x run.sh; ln -s doc/a.md link");
  const at = { root: w.root, name: "s" };
  const opened = await w.call<SessionOpenedReply>({
    t: "session-open",
    ...at,
    withIgnored: false,
  });
  let head: Head = { layers: [...opened.layers], rootId: opened.rootId };
  const scripts = [
    "echo changed > src/d1/f1.txt",
    "rm -r src/d3; mkdir -p new/empty; echo n > new/n.txt",
    "chmod +x doc/a.md; rm link; ln -s run.sh link",
    "rm run.sh; mkdir run.sh; echo x > run.sh/x",
    "echo big > big; head -c 3000000 /dev/urandom > big.bin",
  ];
  const line: Head[] = [head];
  for (const [i, script] of scripts.entries()) {
    head = await op(w, `o${i}`, head, script);
    line.push(head);
  }
  const view = `${w.root}/.marsh/session/s/view`;
  await w.call({ t: "view-mount", ...at, layers: head.layers });
  const before = await w.gitTree(view);
  assert.equal(before, head.rootId);
  // An operation in flight on the old stack while the compaction runs.
  await prepared(w, "late", head, "echo late > late.txt; rm doc/a.md");

  const steps = await compact(w, head.layers);
  const last = steps.at(-1)!;
  assert.ok(last.state === "sealed");
  assert.ok(steps.length > 3, `the copy ran in steps (${steps.length})`);
  assert.equal(last.rootId, head.rootId);
  assert.ok(steps.every((s) => s.layer === last.layer));
  // Asked again once sealed: the same answer, nothing copied again.
  const again = await compact(w, head.layers, last.layer);
  assert.equal(again.length, 1);
  assert.equal(again[0]!.state, "sealed");

  // The compacted stack shows the same tree, Git's own tree id of the view.
  const compacted: Head = { layers: [last.layer], rootId: head.rootId };
  await w.call({ t: "view-mount", ...at, layers: compacted.layers });
  assert.equal(await w.gitTree(view), before);
  assert.equal(Deno.statSync(`${view}/doc/a.md`).mode! & 0o111, 0o111);
  assert.equal(Deno.readLinkSync(`${view}/link`), "run.sh");
  assert.equal(Deno.readTextFileSync(`${view}/run.sh/x`), "x\n");
  assert.ok(Deno.statSync(`${view}/new/empty`).isDirectory);
  // The layers it was copied from still pass their seal check (no hard link moved a ctime).
  for (const id of head.layers) {
    const r = await w.call<LayerCheckedReply>({
      t: "layer-check",
      root: w.root,
      layer: id,
      rootId: line[head.layers.indexOf(id)]?.rootId ?? "",
    });
    assert.equal(r.state, "durable", `${id}: ${JSON.stringify(r)}`);
  }

  // A layer stands on a compacted one only where it stood on the layer that one compacts.
  await assert.rejects(
    () => w.call({ t: "view-mount", ...at, layers: [last.layer, line[2]!.layers[2]!] }),
    /has parent [a-z0-9]+, not [a-z0-9]+ or the [a-z0-9]+ it compacts/,
  );

  // The op prepared on the old stack seals there; its layer stands on the compacted one.
  const late = await seal(w, "late", head, compacted.layers);
  await w.call({ t: "view-mount", ...at, layers: late.layers });
  assert.equal(await w.gitTree(view), late.rootId);
  assert.equal(Deno.readTextFileSync(`${view}/late.txt`), "late\n");
  // A new op on the compacted stack.
  const next = await op(w, "next", late, "echo next > next.txt");
  await w.call({ t: "view-mount", ...at, layers: next.layers });
  assert.equal(await w.gitTree(view), next.rootId);

  // gc: while the compaction dir pins the new layer and the journal (keepExact) names the old line, nothing goes.
  const old = head.layers.slice(1); // the op layers; the snapshot's is the chain head's
  let r = collectLayers(w.root, false, [], [...head.layers]);
  assert.deepEqual(r.removed, []);
  // The journal names the new layer now: its pin goes.
  await w.call({ t: "compact-drop", ...at, layer: last.layer });
  r = collectLayers(w.root, true, [], [...head.layers]);
  assert.deepEqual(r.removed, [], "the old line is still named: nothing goes");
  r = collectLayers(w.root, false, [], []);
  assert.deepEqual(r.removed.toSorted(), old.toSorted(), "only the replaced op layers go");
  assert.equal(await w.gitTree(view), next.rootId);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("compact refuses a stack whose layer data does not match its index, and seals nothing", async () => {
  using w = await sessionWorld(fileList(20));
  const at = { root: w.root, name: "s" };
  const opened = await w.call<SessionOpenedReply>({
    t: "session-open",
    ...at,
    withIgnored: false,
  });
  const head = await op(
    w,
    "o1",
    { layers: [...opened.layers], rootId: opened.rootId },
    "echo one > one",
  );
  // Same size, other bytes, in the op's sealed layer.
  const file = `${w.root}/.marsh/layers/${head.layers[1]}/data/one`;
  Deno.chmodSync(file, 0o644);
  Deno.writeTextFileSync(file, "two\n");
  await assert.rejects(
    () => compact(w, head.layers),
    /one does not hold the blob the stack's index records/,
  );
  assert.deepEqual(
    [...Deno.readDirSync(`${w.root}/.marsh/session/s/compact`)],
    [],
    "the copy is removed",
  );
  await w.call({ t: "session-close", ...at });
});

Deno.test("compact: a stack whose view is empty compacts to Git's empty tree", async () => {
  using w = await sessionWorld({ "only": "1\n" });
  const at = { root: w.root, name: "s" };
  const opened = await w.call<SessionOpenedReply>({
    t: "session-open",
    ...at,
    withIgnored: false,
  });
  const head = await op(
    w,
    "o1",
    { layers: [...opened.layers], rootId: opened.rootId },
    "rm only",
  );
  assert.equal(head.rootId, "4b825dc642cb6eb9a060e54bf8d69288fbee4904");
  const last = (await compact(w, head.layers)).at(-1)!;
  assert.ok(last.state === "sealed");
  assert.equal(last.rootId, head.rootId);
  await w.call({ t: "view-mount", ...at, layers: [last.layer] });
  assert.deepEqual([...Deno.readDirSync(`${w.root}/.marsh/session/s/view`)], []);
  await w.call({ t: "session-close", ...at });
});
