/**
 * `kill -9` of the split-filesystem service in the middle of an op-seal:
 * afterwards the layer reads back `absent` (and sealing again finishes it)
 * or `durable` (and its stack mounts and shows the requested root), never a
 * half layer accepted. The kill lands at a different point each round.
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../_testing.ts";
import { SplitfsService } from "../../protocol/splitfs_client.ts";
import { SessionFs } from "../../protocol/splitfs_session_client.ts";
import { sessionWorld } from "./_session_testing.ts";
import type { OpCapturedReply } from "../../protocol/splitfs_session.ts";

const FILES = 1500;

Deno.test("op-seal killed with SIGKILL at any point: the layer is absent or durable, never half", async () => {
  using w = await sessionWorld({ "a": "1\n" });
  const at = { root: w.root, name: "s" };
  const states: string[] = [];
  // Round 0 seals undisturbed and times it; the others kill at points spread over that time.
  let sealMs = 0;
  const ROUNDS = 7;
  for (let round = 0; round < ROUNDS; round++) {
    await using svc = SplitfsService.start();
    const fs = new SessionFs(svc);
    if (round === 0) await fs.open(at, false);
    const view = await fs.mountView(at, headOf(at).layers);
    const head = headOf(at);
    const op = `o${round}`;
    const prep = await fs.prepareOp(at, op, head.layers);
    // Enough files that the seal takes a while: its records, its index, two syncfs.
    await w.sh(
      prep.merged,
      `mkdir -p r${round}; for i in $(seq ${FILES}); do echo $i-${round} > r${round}/f$i; done; echo ${round} > a`,
    );
    const cap = await fs.captureOp(at, op, head);
    assert.equal(cap.kind, "changed");
    if (cap.kind !== "changed") return;
    const t0 = performance.now();
    const sealing = fs.sealOp(at, op, { layer: cap.layer, rootId: cap.rootId, layers: head.layers })
      .then(() => "sealed", (e) => `failed: ${e}`);
    if (round > 0) {
      await new Promise((r) => setTimeout(r, (sealMs * round) / (ROUNDS - 1)));
      Deno.kill(svc.pid, "SIGKILL");
    }
    const outcome = await sealing;
    if (round === 0) sealMs = performance.now() - t0;
    await svc.close();
    await using again = SplitfsService.start();
    const fs2 = new SessionFs(again);
    const state = (await fs2.checkLayer(w.root, cap.layer, cap.rootId)).state;
    states.push(`${round}: ${outcome.startsWith("sealed") ? "sealed" : "killed"} -> ${state}`);
    assert.ok(state === "absent" || state === "durable", states.join("; "));
    if (outcome === "sealed") assert.equal(state, "durable");
    // Absent: sealing again finishes it from what the op dir kept. Durable: the same answer.
    const layers = await fs2.sealOp(at, op, {
      layer: cap.layer,
      rootId: cap.rootId,
      layers: head.layers,
    });
    assert.deepEqual(layers, [...head.layers, cap.layer]);
    assert.equal((await fs2.checkLayer(w.root, cap.layer, cap.rootId)).state, "durable");
    const mounted = await fs2.mountView(at, layers);
    assert.equal(mounted.rootId, cap.rootId);
    assert.equal(await w.gitTree(view.view), cap.rootId);
    await fs2.dropOp(at, op);
  }
  console.log(`seal ${Math.round(sealMs)} ms\n${states.join("\n")}`);
  {
    await using svc = SplitfsService.start();
    await new SessionFs(svc).close(at);
  }
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

/** The stack the session's view pins now. */
function headOf(at: { root: string; name: string }): { layers: string[]; rootId: string } {
  const layers = Deno.readTextFileSync(`${at.root}/.marsh/session/${at.name}/layers`).split("\n")
    .filter((l) => l !== "");
  const top = layers[layers.length - 1]!;
  const meta = JSON.parse(Deno.readTextFileSync(`${at.root}/.marsh/layers/${top}/meta.json`));
  return { layers, rootId: meta.rootId };
}

Deno.test("op-capture killed with SIGKILL at any point: capturing again gives the operation's root", async () => {
  const files: Record<string, string> = {};
  for (let d = 0; d < 150; d++) {
    files[`d${d}/same`] = "same\n";
    files[`d${d}/gone`] = `gone ${d}\n`;
    files[`d${d}/sub/deep`] = `deep ${d}\n`;
  }
  using w = await sessionWorld(files);
  const at = { root: w.root, name: "s" };
  let captureMs = 0;
  const ROUNDS = 6;
  const lines: string[] = [];
  let head: { layers: string[]; rootId: string } | null = null;
  for (let round = 0; round < ROUNDS; round++) {
    await using svc = SplitfsService.start();
    const fs = new SessionFs(svc);
    if (head === null) {
      const opened = await fs.open(at, false);
      head = { layers: [...opened.layers], rootId: opened.rootId };
    }
    const op = `c${round}`;
    const prep = await fs.prepareOp(at, op, head.layers);
    // Every directory removed and made again: opaque, with a same file, a new one, a new subdir.
    await w.sh(
      prep.merged,
      `for d in d*; do rm -rf $d && mkdir -p $d/sub && printf 'same\\n' > $d/same && echo ${round} > $d/new && echo x > $d/sub/x; done`,
    );
    const expected = await w.gitTree(prep.merged);
    const t0 = performance.now();
    const capturing = fs.captureOp(at, op, head).then((r) => r.rootId, (e) => `failed: ${e}`);
    const where = () => `round ${round} after ${lines.join("; ") || "nothing"}`;
    if (round > 0) {
      await new Promise((r) => setTimeout(r, (captureMs * round) / ROUNDS));
      Deno.kill(svc.pid, "SIGKILL");
    }
    const first = await capturing;
    if (round === 0) captureMs = performance.now() - t0;
    await svc.close();
    await using again = SplitfsService.start();
    const fs2 = new SessionFs(again);
    const cap: OpCapturedReply = await fs2.captureOp(at, op, head).catch((e) => {
      throw new Error(`${where()}: the capture again failed (the first: ${first}): ${e}`);
    });
    lines.push(`${round}: ${first === expected ? "captured" : "killed"}, again ${cap.kind}`);
    assert.equal(cap.rootId, expected, lines.join("; "));
    if (cap.kind !== "changed") throw new Error("expected a change");
    const layers = await fs2.sealOp(at, op, { ...cap, layers: head.layers });
    await fs2.mountView(at, layers);
    assert.equal(await w.gitTree(`${w.root}/.marsh/session/s/view`), expected);
    await fs2.dropOp(at, op);
    await fs2.mountView(at, head.layers);
  }
  console.log(`capture ${Math.round(captureMs)} ms\n${lines.join("\n")}`);
  {
    await using svc = SplitfsService.start();
    await new SessionFs(svc).close(at);
  }
  assert.deepEqual(mountsBelow(w.sb.top), []);
});
