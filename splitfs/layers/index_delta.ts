/**
 * The derivation of a layer's merged index from its delta
 * (docs/checkpoints.md, "The layer index"): what an operation's layer
 * changes in the merged view of the stack below it ({@linkcode diffIndex},
 * at its seal) and that view with the changes applied
 * ({@linkcode applyDelta}, when a stack is read). The two are inverse:
 * `applyDelta(base, diffIndex(base, next))` has `next`'s every entry,
 * record, id and `.gitignore` id. The on-disk form is `index_codec.ts`'s.
 *
 * Both cost O(the changed directories' sizes): a directory node the layer
 * does not change is the very node below (shared, as a snapshot shares
 * them), so the diff skips it by identity and the derivation reuses it.
 *
 * Pure: needs no permission.
 *
 * @module
 */

import { compareNames } from "../fd/dir.ts";
import type { IndexDelta, NodePatch } from "./index_codec.ts";
import { IndexFormatError } from "./index_codec.ts";
import { F_MODE, IndexNode, KIND_DIR, kindOf, type LayerIndex, STRIDE } from "./layer_index.ts";
import { Builder, sameOid } from "./layer_records.ts";
import { countWork, WORK } from "../work_counts.ts";

const EMPTY = IndexNode.empty();

/** What `next` changes in `base` (the merged index of the stack below it). */
export function diffIndex(base: LayerIndex, next: LayerIndex): IndexDelta {
  const patches: NodePatch[] = [];
  diffNode(base.root, next.root, "", patches);
  return {
    baseTree: base.rootTree,
    rootStat: next.rootStat,
    rootTree: next.rootTree,
    startSec: next.startSec,
    startNsec: next.startNsec,
    ignoreKey: next.ignoreKey,
    patches,
  };
}

/** The kid of entry `i` of `node` when it is a directory, else the empty node. */
function dirKid(node: IndexNode, i: number): IndexNode {
  if (i < 0 || kindOf(node.st[i * STRIDE + F_MODE] as number) !== KIND_DIR) return EMPTY;
  return node.kids[i] ?? EMPTY;
}

function join(path: string, name: string): string {
  return path === "" ? name : `${path}/${name}`;
}

function sameEntry(a: IndexNode, i: number, b: IndexNode, j: number): boolean {
  for (let f = 0; f < STRIDE; f++) {
    if (a.st[i * STRIDE + f] !== b.st[j * STRIDE + f]) return false;
  }
  return sameOid(a.oids.subarray(i * 20, i * 20 + 20), b.oids.subarray(j * 20, j * 20 + 20));
}

/**
 * Appends the patches of `node` against `base` (its subdirectories' first)
 * and says whether anything at or below it differs. A directory with a
 * changed descendant gets a patch even when its own entries are the same,
 * so the derivation rebuilds exactly the patched paths.
 */
function diffNode(base: IndexNode, node: IndexNode, path: string, out: NodePatch[]): boolean {
  if (base === node) return false;
  const set = new Builder();
  const deleted: string[] = [];
  let below = false;
  let j = 0;
  countWork(WORK.diffed, node.names.length);
  const visit = (i: number, jb: number): void => {
    if (kindOf(node.st[i * STRIDE + F_MODE] as number) !== KIND_DIR) return;
    const kid = node.kids[i] ?? EMPTY;
    if (diffNode(dirKid(base, jb), kid, join(path, node.names[i] as string), out)) below = true;
  };
  for (let i = 0; i < node.names.length; i++) {
    const name = node.names[i] as string;
    while (j < base.names.length && compareNames(base.names[j] as string, name) < 0) {
      deleted.push(base.names[j++] as string);
    }
    const match = j < base.names.length && base.names[j] === name ? j++ : -1;
    if (match < 0 || !sameEntry(node, i, base, match)) set.pushFrom(node, i);
    visit(i, match);
  }
  while (j < base.names.length) deleted.push(base.names[j++] as string);
  const own = set.names.length > 0 || deleted.length > 0 ||
    !sameOid(base.gitignore, node.gitignore);
  if (!own && !below) return false;
  const built = set.build(node.gitignore);
  out.push({
    path,
    gitignore: node.gitignore,
    names: built.names,
    st: built.st,
    oids: built.oids,
    deleted,
  });
  return true;
}

/**
 * `base` (the merged index of the stack below) with `delta` applied.
 *
 * @throws {IndexFormatError} when the delta was not made against `base`: its
 *   base root differs, it deletes a name `base` lacks, or a patch's path is
 *   not a directory of the result
 */
export function applyDelta(base: LayerIndex, delta: IndexDelta): LayerIndex {
  if (!sameOid(base.rootTree, delta.baseTree)) {
    throw new IndexFormatError("index delta was made against another root than the stack below");
  }
  const patches = new Map<string, NodePatch>();
  for (const p of delta.patches) {
    if (patches.has(p.path)) {
      throw new IndexFormatError(`index delta patches ${JSON.stringify(p.path)} twice`);
    }
    patches.set(p.path, p);
  }
  const used = { count: 0 };
  const root = applyNode(base.root, "", patches, used);
  if (used.count !== patches.size) {
    throw new IndexFormatError("index delta patches a directory the stack below does not lead to");
  }
  return {
    root,
    rootStat: delta.rootStat,
    rootTree: delta.rootTree,
    startSec: delta.startSec,
    startNsec: delta.startNsec,
    ignoreKey: delta.ignoreKey,
  };
}

function applyNode(
  base: IndexNode,
  path: string,
  patches: ReadonlyMap<string, NodePatch>,
  used: { count: number },
): IndexNode {
  const p = patches.get(path);
  if (p === undefined) return base;
  used.count++;
  const b = new Builder();
  const kidOf = (name: string, below: IndexNode): IndexNode =>
    applyNode(below, join(path, name), patches, used);
  let j = 0;
  let d = 0;
  const takeBase = (): void => {
    const name = base.names[j] as string;
    if (d < p.deleted.length && p.deleted[d] === name) {
      d++;
    } else {
      const isDir = kindOf(base.st[j * STRIDE + F_MODE] as number) === KIND_DIR;
      b.push(
        name,
        base.st.subarray(j * STRIDE, (j + 1) * STRIDE),
        base.oids.subarray(j * 20, j * 20 + 20),
        isDir ? kidOf(name, base.kids[j] ?? EMPTY) : null,
      );
    }
    j++;
  };
  for (let i = 0; i < p.names.length; i++) {
    const name = p.names[i] as string;
    while (j < base.names.length && compareNames(base.names[j] as string, name) < 0) takeBase();
    const match = j < base.names.length && base.names[j] === name ? j : -1;
    if (d < p.deleted.length && p.deleted[d] === name) {
      throw new IndexFormatError(`index delta both sets and deletes ${join(path, name)}`);
    }
    const isDir = kindOf(p.st[i * STRIDE + F_MODE] as number) === KIND_DIR;
    b.push(
      name,
      p.st.subarray(i * STRIDE, (i + 1) * STRIDE),
      p.oids.subarray(i * 20, i * 20 + 20),
      isDir ? kidOf(name, dirKid(base, match)) : null,
    );
    if (match >= 0) j++;
  }
  while (j < base.names.length) takeBase();
  if (d !== p.deleted.length) {
    throw new IndexFormatError(
      `index delta deletes ${join(path, p.deleted[d] as string)}, which the stack below lacks`,
    );
  }
  return b.build(p.gitignore);
}
