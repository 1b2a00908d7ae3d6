/**
 * Random operation sequences: each operation runs in its op's overlay on
 * top of the previous one's sealed stack, and each capture's root id must be
 * Git's own tree id of what the operation saw, each sealed view byte for
 * byte what it saw. `MARSH_SEED=N` replays a run; the seed is printed.
 */

import assert from "node:assert/strict";
import { fingerprintDiff, mountsBelow } from "../_testing.ts";
import { type SessionWorld, sessionWorld, viewPrint } from "./_session_testing.ts";
import { Dir } from "../fd/dir.ts";
import { INDEX, LayersDir, releaseIndexCache } from "../layers/layers_dir.ts";
import { DELTA_VERSION, encodeIndex } from "../layers/index_codec.ts";
import {
  F_MODE,
  type IndexNode,
  isZero,
  KIND_DIR,
  KIND_SYMLINK,
  kindOf,
  STRIDE,
} from "../layers/layer_index.ts";
import { hexOf } from "../git/tree_id.ts";
import type {
  OpCapturedReply,
  OpPreparedReply,
  OpSealedReply,
  SessionOpenedReply,
} from "../../protocol/splitfs_session.ts";

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

/** Every path under `dir` with its kind. */
function tree(dir: string, prefix = ""): { files: string[]; dirs: string[]; links: string[] } {
  const out = { files: [] as string[], dirs: [] as string[], links: [] as string[] };
  for (const e of Deno.readDirSync(`${dir}/${prefix}`)) {
    const rel = prefix + e.name;
    if (e.isSymlink) out.links.push(rel);
    else if (e.isDirectory) {
      out.dirs.push(rel);
      const sub = tree(dir, `${rel}/`);
      out.files.push(...sub.files);
      out.dirs.push(...sub.dirs);
      out.links.push(...sub.links);
    } else out.files.push(rel);
  }
  return out;
}

const NAMES = ["a", "b", "c.txt", "d", "e.md"];
const CONTENTS = ["one\n", "two\n", "", "three\n"];

/** One random shell command on the tree at `dir`. */
function randomCommand(rnd: () => number, dir: string): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)] as T;
  const t = tree(dir);
  const anyDir = () => t.dirs.length > 0 && rnd() < 0.6 ? pick(t.dirs) : "";
  const place = () => {
    const d = anyDir();
    return d === "" ? pick(NAMES) : `${d}/${pick(NAMES)}`;
  };
  const q = (s: string) => `'${s}'`;
  switch (Math.floor(rnd() * 10)) {
    case 0:
    case 1: {
      const p = t.files.length > 0 && rnd() < 0.5 ? pick(t.files) : place();
      return `mkdir -p "$(dirname ${q(p)})" 2>/dev/null; [ -d ${q(p)} ] || printf ${
        q(pick(CONTENTS))
      } > ${q(p)}`;
    }
    case 2:
      return t.files.length > 0 ? `rm -f ${q(pick(t.files))}` : "true";
    case 3:
      return t.dirs.length > 0 ? `rm -rf ${q(pick(t.dirs))}` : "true";
    case 4: {
      // An opaque directory: removed and made again, maybe with one same file.
      if (t.dirs.length === 0) return "true";
      const d = pick(t.dirs);
      return `rm -rf ${q(d)} && mkdir ${q(d)} && printf ${q(pick(CONTENTS))} > ${q(`${d}/a`)}`;
    }
    case 5:
      return t.files.length > 0 ? `chmod ${pick(["+x", "-x"])} ${q(pick(t.files))}` : "true";
    case 6: {
      const p = place();
      return `[ -d ${q(p)} ] || ln -sfn ${q(pick(NAMES))} ${q(p)}`;
    }
    case 7: {
      const from = pick([...t.files, ...t.dirs, ...t.links, "none"]);
      const to = place();
      return from === "none"
        ? "true"
        : `[ -e ${q(to)} ] || mv ${q(from)} ${q(to)} 2>/dev/null || true`;
    }
    case 8: {
      const p = place();
      return `mkdir -p ${q(p)} 2>/dev/null || true`;
    }
    default: {
      // A file replaced by a directory, or a directory by a file.
      if (t.files.length > 0 && rnd() < 0.5) {
        const f = pick(t.files);
        return `rm -f ${q(f)} && mkdir ${q(f)} && printf x > ${q(`${f}/in`)}`;
      }
      if (t.dirs.length === 0) return "true";
      const d = pick(t.dirs);
      return `rm -rf ${q(d)} && printf ${q(pick(CONTENTS))} > ${q(d)}`;
    }
  }
}

/** The index's entries as `git ls-tree -r -t` prints them (a tree with no files is not Git's). */
function lsIndex(node: IndexNode, prefix = "", out: string[] = []): string[] {
  for (let i = 0; i < node.names.length; i++) {
    const path = prefix + (node.names[i] as string);
    const mode = node.st[i * STRIDE + F_MODE] as number;
    const oid = node.oids.subarray(i * 20, i * 20 + 20);
    if (kindOf(mode) === KIND_DIR) {
      if (isZero(oid)) continue;
      out.push(`040000 tree ${hexOf(oid)}\t${path}`);
      lsIndex(node.kids[i] as IndexNode, `${path}/`, out);
    } else {
      const m = kindOf(mode) === KIND_SYMLINK
        ? "120000"
        : (mode & 0o100) !== 0
        ? "100755"
        : "100644";
      out.push(`${m} blob ${hexOf(oid)}\t${path}`);
    }
  }
  return out;
}

/**
 * The top layer of `layers` holds a delta index, and the merged index derived
 * from the deltas on disk (no cached index) is byte for byte the one the
 * service kept in memory at the seal, and entry for entry Git's tree `rootId`.
 */
async function checkDerived(
  w: SessionWorld,
  layers: readonly string[],
  rootId: string,
  where: string,
) {
  using root = Dir.openAbsolute(w.root);
  using marsh = root.openDir(".marsh");
  using store = LayersDir.open(marsh);
  const metas = store.explicitStack(layers);
  const top = layers[layers.length - 1] as string;
  {
    using wrapper = store.openWrapper(top);
    const bytes = wrapper.readFileIfExists(INDEX, 1 << 30) as Uint8Array;
    assert.equal(new DataView(bytes.buffer).getUint32(4, true), DELTA_VERSION, where);
  }
  const kept = store.loadIndex(metas);
  releaseIndexCache();
  const derived = store.loadIndex(metas);
  assert.notEqual(derived, kept, where);
  assert.deepEqual(encodeIndex(derived), encodeIndex(kept), where);
  assert.deepEqual(lsIndex(derived.root), await w.lsTree(rootId), where);
}

Deno.test("op-capture: random operation sequences stack layer on layer, each root id Git's own", async () => {
  const seed = Number(Deno.env.get("MARSH_SEED") ?? Math.floor(Math.random() * 2 ** 31));
  console.log(`MARSH_SEED=${seed}`);
  const rnd = mulberry32(seed);
  using w = await sessionWorld({
    "a": "one\n",
    "d/b": "two\n",
    "d/d/c.txt": "three\n",
    "e.md": "",
  });
  const at = { root: w.root, name: "rand" };
  const opened = await w.call<SessionOpenedReply>({
    t: "session-open",
    ...at,
    withIgnored: false,
  });
  let layers = opened.layers;
  let rootId = opened.rootId;
  const view = `${w.root}/.marsh/session/rand/view`;
  let sealedCount = 0;
  for (let step = 0; step < 24; step++) {
    const op = `op-${step}`;
    const prep = await w.call<OpPreparedReply>({ t: "op-prepare", ...at, op, layers });
    const commands: string[] = [];
    for (let k = 1 + Math.floor(rnd() * 4); k > 0; k--) {
      const cmd = randomCommand(rnd, prep.merged);
      commands.push(cmd);
      // A command that fails (a name taken, a move into itself) changes what it changed.
      await w.sh(prep.merged, `(${cmd}) 2>/dev/null; true`);
    }
    const where = `seed ${seed}, step ${step}: ${commands.join(" ; ")}`;
    const expected = await w.gitTree(prep.merged);
    const printed = viewPrint(prep.merged);
    const cap = await w.call<OpCapturedReply>({ t: "op-capture", ...at, op, layers, rootId });
    assert.equal(cap.rootId, expected, where);
    if (cap.kind === "changed") {
      const sealed = await w.call<OpSealedReply>({
        t: "op-seal",
        ...at,
        op,
        layer: cap.layer,
        rootId: cap.rootId,
        layers,
      });
      layers = sealed.layers;
      rootId = cap.rootId;
      sealedCount++;
      await w.call({ t: "view-mount", ...at, layers });
      // Set-id bits aside (none here), the sealed view is what the operation saw.
      const got = viewPrint(view);
      const emptyDirsOnly = fingerprintDiff(printed, got);
      assert.deepEqual(emptyDirsOnly, [], where);
      // The next operation's capture then derives the head's index from disk again.
      await checkDerived(w, layers, rootId, where);
    } else {
      assert.equal(cap.rootId, rootId, where);
    }
    await w.call({ t: "op-drop", ...at, op });
  }
  assert.ok(sealedCount > 0, `seed ${seed}: no operation changed anything`);
  assert.equal(await w.gitTree(view), rootId);
  await w.call({ t: "session-close", ...at });
  assert.deepEqual(mountsBelow(w.sb.top), []);
});
