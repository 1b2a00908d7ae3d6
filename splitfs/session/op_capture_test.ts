import assert from "node:assert/strict";
import { fingerprintDiff, mountsBelow } from "../_testing.ts";
import { changedReply, sessionWorld, viewPrint } from "./_session_testing.ts";
import type {
  LayerCheckedReply,
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
  ViewMountedReply,
} from "../../protocol/splitfs_session.ts";

const FILES = {
  "a.txt": "alpha\n",
  "b.txt": "bravo\n",
  "run.sh": "#!/bin/sh\necho hi\n",
  "src/main.ts": "main\n",
  "src/lib/util.ts": "util\n",
  "src/lib/deep/x.ts": "x\n",
  "docs/readme.md": "readme\n",
  "link": "",
};

interface Case {
  readonly name: string;
  readonly script: string;
  /** `null`: no change; else the changed paths with their kind of change. */
  readonly paths: readonly string[] | null;
}

const CASES: readonly Case[] = [
  {
    name: "add",
    script: "echo new > new.txt; mkdir -p n/m; echo z > n/m/z",
    paths: ["n/m/z added", "new.txt added"],
  },
  { name: "modify", script: "echo changed > a.txt", paths: ["a.txt modified"] },
  {
    name: "delete",
    script: "rm b.txt src/lib/util.ts",
    paths: ["b.txt deleted", "src/lib/util.ts deleted"],
  },
  { name: "rename file", script: "mv a.txt c.txt", paths: ["a.txt deleted", "c.txt added"] },
  {
    name: "rename dir",
    script: "mv src/lib src/lib2",
    paths: ["src/lib deleted", "src/lib2/deep/x.ts added", "src/lib2/util.ts added"],
  },
  { name: "chmod +x", script: "chmod +x a.txt", paths: ["a.txt modified"] },
  {
    name: "symlink",
    script: "ln -s a.txt l2; ln -sfn b.txt link",
    paths: ["l2 added", "link modified"],
  },
  {
    name: "dir replaced by file",
    script: "rm -rf src/lib && echo file > src/lib",
    paths: ["src/lib type"],
  },
  {
    name: "file replaced by dir",
    script: "rm a.txt && mkdir a.txt && echo in > a.txt/in",
    paths: ["a.txt type", "a.txt/in added"],
  },
  {
    name: "opaque dir",
    script: "rm -rf src && mkdir src && echo fresh > src/main.ts",
    paths: ["src/lib deleted", "src/main.ts modified"],
  },
  {
    name: "opaque dir, nested dir made again",
    script: "rm -rf src && mkdir -p src/lib/deep && echo y > src/lib/deep/y.ts",
    paths: [
      "src/lib/deep/x.ts deleted",
      "src/lib/deep/y.ts added",
      "src/lib/util.ts deleted",
      "src/main.ts deleted",
    ],
  },
  {
    name: "rewrite same bytes",
    script: "printf 'alpha\\n' > a.txt; touch b.txt src/main.ts",
    paths: null,
  },
  {
    name: "deleted then recreated identical",
    script: "rm a.txt; printf 'alpha\\n' > a.txt",
    paths: null,
  },
  {
    name: "dir deleted then recreated identical",
    script: "rm -rf docs; mkdir docs; printf 'readme\\n' > docs/readme.md",
    paths: null,
  },
  {
    name: "same bytes beside a change are not in the layer",
    script: "printf 'alpha\\n' > a.txt; touch src/main.ts; echo new > c.txt",
    paths: ["c.txt added"],
  },
  { name: "empty dir only", script: "mkdir empty", paths: null },
  {
    name: "fifo is never admitted",
    script: "mkfifo p; rm b.txt; mkfifo b.txt",
    paths: ["b.txt deleted"],
  },
  {
    name: ".git is never admitted",
    script: "mkdir -p sub/.git && echo x > sub/.git/HEAD; echo y > sub/f",
    paths: ["sub/f added"],
  },
];

async function openWorld() {
  const w = await sessionWorld(FILES);
  Deno.removeSync(`${w.root}/link`);
  Deno.symlinkSync("a.txt", `${w.root}/link`);
  Deno.chmodSync(`${w.root}/run.sh`, 0o755);
  const opened = await w.call<SessionOpenedReply>({
    t: "session-open",
    root: w.root,
    name: "fix",
    withIgnored: false,
  });
  return { w, opened };
}

for (const c of CASES) {
  Deno.test(`op-capture: ${c.name}: root id is git write-tree of the view; sealed, the view is byte for byte`, async () => {
    const { w, opened } = await openWorld();
    using _ = w;
    const at = { root: w.root, name: "fix" };
    const view = `${w.root}/.marsh/session/fix/view`;
    assert.equal(await w.gitTree(view), opened.rootId);
    const prep = await w.call<OpPreparedReply>({
      t: "op-prepare",
      ...at,
      op: "o1",
      layers: opened.layers,
    });
    await w.sh(prep.merged, c.script);
    const expected = await w.gitTree(prep.merged);
    const printed = viewPrint(prep.merged);
    const cap = await w.call<OpCapturedReply>({
      t: "op-capture",
      ...at,
      op: "o1",
      layers: opened.layers,
      rootId: opened.rootId,
    });
    assert.equal(cap.rootId, expected);
    assert.equal(mountsBelow(`${w.root}/.marsh/session/fix/op`).length, 0, "capture unmounts");
    if (c.paths === null) {
      assert.equal(cap.kind, "no-change");
      assert.equal(cap.rootId, opened.rootId);
      await w.call({ t: "op-drop", ...at, op: "o1" });
      return;
    }
    const ch = changedReply(cap);
    assert.deepEqual(ch.paths.map((p) => `${p.path} ${p.change}`), c.paths);
    assert.equal(ch.changed, c.paths.length);
    assert.equal(ch.truncated, false);
    const sealed = await w.call<OpSealedReply>({
      t: "op-seal",
      ...at,
      op: "o1",
      layer: ch.layer,
      rootId: ch.rootId,
      layers: opened.layers,
    });
    assert.deepEqual(sealed.layers, [...opened.layers, ch.layer]);
    const mounted = await w.call<ViewMountedReply>({
      t: "view-mount",
      ...at,
      layers: sealed.layers,
    });
    assert.equal(mounted.rootId, ch.rootId);
    assert.equal(mounted.class, "virtual");
    // Special files and .git are not admitted: the merged view showed them.
    const skip = (k: string) => k === "p" || k.startsWith("sub/.git") || k === "b.txt";
    const want = new Map([...printed].filter(([k]) => !skip(k)));
    const got = new Map([...viewPrint(view)].filter(([k]) => !skip(k)));
    assert.deepEqual(fingerprintDiff(want, got), []);
    assert.equal(await w.gitTree(view), ch.rootId);
    await w.call({ t: "op-drop", ...at, op: "o1" });
    // Read back by id and root id, its data checked against its seal after the op dir went.
    const checked = await w.call<LayerCheckedReply>({
      t: "layer-check",
      root: w.root,
      layer: ch.layer,
      rootId: ch.rootId,
    });
    assert.deepEqual(checked, { v: 1, t: "layer-checked", state: "durable" });
    await w.call({ t: "session-close", ...at });
    assert.deepEqual(mountsBelow(w.sb.top), []);
  });
}
