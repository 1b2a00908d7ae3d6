/**
 * op-capture at its edges: the changed-path list bounded at 1,000 (the count
 * exact), and an upper dir it will not turn into a layer (a name that is not
 * UTF-8, a redirect marker marsh's mounts never make) failing closed, with
 * nothing sealed.
 */

import assert from "node:assert/strict";
import { gitOk, mountsBelow } from "../_testing.ts";
import { changedReply, sessionWorld } from "./_session_testing.ts";
import type {
  LayerCheckedReply,
  OpCapturedReply,
  OpPreparedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";
import { MAX_CAPTURED_PATHS } from "../../protocol/splitfs_session.ts";

async function prepared(files: Record<string, string>) {
  const w = await sessionWorld(files);
  const at = { root: w.root, name: "s" };
  const head = await w.call<SessionOpenedReply>({ t: "session-open", ...at, withIgnored: false });
  const prep = await w.call<OpPreparedReply>({
    t: "op-prepare",
    ...at,
    op: "o1",
    layers: head.layers,
  });
  const capture = () =>
    w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op: "o1",
      layers: head.layers,
      rootId: head.rootId,
    });
  return { w, at, head, prep, capture };
}

Deno.test(`op-capture lists the first ${MAX_CAPTURED_PATHS} changed paths and counts them all`, async () => {
  const { w, at, prep, capture } = await prepared({ "a": "1\n" });
  using _ = w;
  await w.sh(
    prep.merged,
    `mkdir d; for i in $(seq 0 ${MAX_CAPTURED_PATHS}); do echo $i > d/f$i; done`,
  );
  const cap = changedReply(await capture());
  assert.equal(cap.changed, MAX_CAPTURED_PATHS + 1);
  assert.equal(cap.paths.length, MAX_CAPTURED_PATHS);
  assert.equal(cap.truncated, true);
  // UTF-8 byte order of the whole path: d/f0, d/f1, d/f10, d/f100, d/f1000, d/f101 ...
  assert.deepEqual(cap.paths.slice(0, 5).map((p) => p.path), [
    "d/f0",
    "d/f1",
    "d/f10",
    "d/f100",
    "d/f1000",
  ]);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("op-capture fails closed on a name that is not UTF-8; nothing is sealed", async () => {
  const { w, at, prep, capture } = await prepared({ "a": "1\n" });
  using _ = w;
  await w.sh(prep.merged, "echo x > \"$(printf 'bad\\377name')\"; echo 2 > a");
  await assert.rejects(capture, /wrote a name that is not UTF-8 in the project root/);
  await w.call({ t: "op-drop", ...at, op: "o1" });
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("op-capture refuses a redirect marker (our mounts never make one); the layer is never sealed", async () => {
  const { w, at, head, prep, capture } = await prepared({ "d/f": "1\n" });
  using _ = w;
  await w.sh(prep.merged, "echo 2 > d/f");
  // Written past the overlay, as nothing marsh runs can.
  await w.sh(
    `${w.root}/.marsh/session/s/op/o1`,
    `python3 -c "import os; os.setxattr('upper/d', 'trusted.overlay.redirect', b'/x')"`,
  );
  await assert.rejects(capture, /left a redirect marker on d/);
  const check = await w.call<LayerCheckedReply>({
    t: "layer-check",
    root: w.root,
    layer: "zzzzzzzzzzzz",
    rootId: head.rootId,
  });
  assert.equal(check.state, "absent");
  await w.call({ t: "op-drop", ...at, op: "o1" });
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});

Deno.test("an ignored file an operation writes is in its layer and its root: the view shows it", async () => {
  const { w, at, head, prep, capture } = await prepared({
    ".gitignore": "build/\n",
    "a": "1\n",
    "build/old": "left out of the snapshot\n",
  });
  using _ = w;
  // The snapshot left the ignored file out, as marsh split does.
  assert.throws(
    () => Deno.statSync(`${w.root}/.marsh/session/s/view/build/old`),
    Deno.errors.NotFound,
  );
  await w.sh(prep.merged, "mkdir -p build && echo out > build/out && echo 2 > a");
  const withIgnored = await w.gitTree(prep.merged);
  const cap = changedReply(await capture());
  assert.equal(cap.rootId, withIgnored);
  assert.deepEqual(cap.paths.map((p) => p.path), ["a", "build/out"]);
  // Plain `git add -A` would leave build/out out: the root is the view's, ignored files and all.
  const index = `${w.sb.top}/plain-index`;
  const git = [
    "-c",
    "core.bare=false",
    `--git-dir=${w.sb.top}/tree.git`,
    `--work-tree=${prep.merged}`,
  ];
  await gitOk(prep.merged, [...git, "add", "-A", "."], {
    home: w.sb.home,
    env: { GIT_INDEX_FILE: index },
  });
  const plain = (await gitOk(prep.merged, [...git, "write-tree"], {
    home: w.sb.home,
    env: { GIT_INDEX_FILE: index },
  })).trim();
  assert.notEqual(plain, cap.rootId);
  assert.notEqual(head.rootId, cap.rootId);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});
