/**
 * The records a layer's index keeps per entry (see `layer_index.ts`), as
 * the snapshot walk builds them: a live stat turned into a record and
 * compared with a recorded one, nodes rebuilt in name order, and a node's
 * Git tree id.
 *
 * @module
 */

import { compareNames, type Stat } from "../fd/dir.ts";
import {
  F_CNSEC,
  F_CSEC,
  F_INOHI,
  F_INOLO,
  F_MNSEC,
  F_MODE,
  F_MSEC,
  F_SIZE,
  IndexNode,
  isZero,
  KIND_DIR,
  KIND_FILE,
  KIND_SYMLINK,
  kindOf,
  nameBytes,
  STRIDE,
} from "./layer_index.ts";
import { type TreeEntry, treeId } from "../git/tree_id.ts";
import { countWork, WORK } from "../work_counts.ts";

type StatBits = Stat & { readonly inoLo?: number; readonly inoHi?: number };

/** The inode's low and high 32 bits without BigInt when `Dir` already has them as numbers. */
function inoLo(st: StatBits): number {
  return st.inoLo ?? Number(st.ino & 0xffffffffn);
}

function inoHi(st: StatBits): number {
  return st.inoHi ?? Number(st.ino >> 32n);
}

/** The index's kind code of a stat's kind. */
export function kindCode(kind: Stat["kind"]): number {
  return kind === "file" ? KIND_FILE : kind === "dir" ? KIND_DIR : KIND_SYMLINK;
}

/** Whether a live stat equals a recorded one. */
export function sameLive(st: Float64Array, o: number, s: Stat, mode: number): boolean {
  return st[o + F_MODE] === mode && st[o + F_SIZE] === s.size &&
    st[o + F_MSEC] === s.mtimeSec && st[o + F_MNSEC] === s.mtimeNsec &&
    st[o + F_CSEC] === s.ctimeSec && st[o + F_CNSEC] === s.ctimeNsec &&
    st[o + F_INOLO] === inoLo(s) && st[o + F_INOHI] === inoHi(s);
}

/** A live stat as an index record, with the layer copy's mtime `lmSec`/`lmNsec`. */
export function record(s: Stat, mode: number, lmSec: number, lmNsec: number): number[] {
  return [
    mode,
    s.size,
    s.mtimeSec,
    s.mtimeNsec,
    s.ctimeSec,
    s.ctimeNsec,
    inoLo(s),
    inoHi(s),
    lmSec,
    lmNsec,
  ];
}

/** Whether two object ids (or two `null`s) are equal. */
export function sameOid(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  for (let i = 0; i < 20; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A node being rebuilt: entries appended in name order. */
export class Builder {
  readonly names: string[] = [];
  readonly st: number[] = [];
  readonly oids: Uint8Array[] = [];
  readonly kids: (IndexNode | null)[] = [];

  push(name: string, rec: ArrayLike<number>, oid: Uint8Array, kid: IndexNode | null): void {
    countWork(WORK.built);
    this.names.push(name);
    for (let f = 0; f < STRIDE; f++) this.st.push(rec[f] as number);
    this.oids.push(oid);
    this.kids.push(kid);
  }

  pushFrom(node: IndexNode, i: number): void {
    this.push(
      node.names[i] as string,
      node.st.subarray(i * STRIDE, (i + 1) * STRIDE),
      node.oids.subarray(i * 20, i * 20 + 20),
      node.kids[i] ?? null,
    );
  }

  build(gitignore: Uint8Array | null): IndexNode {
    const oids = new Uint8Array(this.oids.length * 20);
    this.oids.forEach((oid, i) => oids.set(oid, i * 20));
    return new IndexNode(this.names, Float64Array.from(this.st), oids, this.kids, gitignore);
  }
}

/** The Git tree id of a node, or `null` when Git would omit it (no files below). */
export function treeOf(node: IndexNode): Uint8Array | null {
  const entries: TreeEntry[] = [];
  countWork(WORK.hashed, node.names.length);
  for (let i = 0; i < node.names.length; i++) {
    const mode = node.st[i * STRIDE + F_MODE] as number;
    const oid = node.oids.subarray(i * 20, i * 20 + 20);
    const kind = kindOf(mode);
    if (kind === KIND_DIR) {
      if (isZero(oid)) continue;
      entries.push({ name: nameBytes(node.names[i] as string), mode: "40000", oid });
    } else {
      const m = kind === KIND_SYMLINK ? "120000" : (mode & 0o100) !== 0 ? "100755" : "100644";
      entries.push({ name: nameBytes(node.names[i] as string), mode: m, oid });
    }
  }
  return entries.length === 0 ? null : treeId(entries);
}

/** The record number of `name` in a node (its names are in {@linkcode compareNames} order), or -1. */
export function indexOfName(node: IndexNode, name: string): number {
  let lo = 0, hi = node.names.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const c = compareNames(node.names[mid] as string, name);
    if (c === 0) return mid;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return -1;
}

/** Whether a node holds `name`. */
export function hasName(node: IndexNode, name: string): boolean {
  return indexOfName(node, name) >= 0;
}
