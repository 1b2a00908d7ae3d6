/**
 * The on-disk forms of a layer's `index` file (docs/checkpoints.md, "The
 * layer index"), both kinds, told apart by the version field:
 *
 * - version 1, a **whole index**: the merged view of the stack the layer
 *   tops, every directory and entry. A snapshot's layers and a compacted
 *   layer write it; so did every operation's layer before deltas.
 * - version 2, a **delta**: only what the layer changes in the merged view
 *   of the stack below it ({@linkcode IndexDelta}: per changed directory,
 *   the entries set and the names deleted), so an operation's layer is
 *   O(changed). Deriving the merged index from it is `index_delta.ts`'s.
 *
 * Both are flat binary images (little-endian host order), so loading one is
 * a few typed-array views, one UTF-8 decode and a walk:
 *
 * ```text
 * whole index (version 1)
 * header   magic "MXIX", u32 version, u32 nodes, u32 entries, u32 name bytes,
 *          u32 ignore-key bytes, f64 start sec, f64 start nsec, 8 bytes zero,
 *          f64 × STRIDE root record, 20-byte root tree id (zero: empty)
 * key      the ignore key's UTF-8 bytes                       (padded to 8)
 * counts   u32 × nodes: entries per node, pre-order           (padded to 8)
 * ignores  20 × nodes: the `.gitignore` blob id in effect (zero: none)
 * stats    f64 × STRIDE × entries                             (8-aligned)
 * oids     20 × entries
 * names    the entry names, UTF-8, each followed by NUL
 *
 * delta (version 2)
 * header   magic "MXIX", u32 version, u32 patches, u32 set entries,
 *          u32 string bytes, u32 ignore-key bytes, f64 start sec,
 *          f64 start nsec, u32 deleted names, u32 zero,
 *          f64 × STRIDE root record, 20-byte root tree id,
 *          20-byte root tree id of the stack below (zero: empty)
 * key      the ignore key's UTF-8 bytes                       (padded to 8)
 * counts   u32 × 2 × patches: set entries, deleted names      (padded to 8)
 * ignores  20 × patches: the `.gitignore` blob id in effect (zero: none)
 * stats    f64 × STRIDE × set entries                         (8-aligned)
 * oids     20 × set entries
 * strings  per patch: its directory's path, its set names, its deleted
 *          names, UTF-8, each followed by NUL
 * ```
 *
 * Pure: needs no permission.
 *
 * @module
 */

import { compareNames } from "../fd/dir.ts";
import {
  F_MODE,
  IndexNode,
  isZero,
  KIND_DIR,
  kindOf,
  type LayerIndex,
  NO_OID,
  STRIDE,
} from "./layer_index.ts";
import { countWork, WORK } from "../work_counts.ts";

/**
 * One directory of the merged view as a layer changes it, against the same
 * directory of the stack below (an empty one when the stack below has none
 * there): entries set (added or changed: record and id) and names deleted,
 * each in `compareNames` order.
 */
export interface NodePatch {
  /** The directory's path in the view, `""` for the root. */
  readonly path: string;
  /** The `.gitignore` blob id in effect there, or `null`. */
  readonly gitignore: Uint8Array | null;
  readonly names: readonly string[];
  /** `STRIDE` numbers per set entry. */
  readonly st: Float64Array;
  /** 20 bytes per set entry. */
  readonly oids: Uint8Array;
  readonly deleted: readonly string[];
}

/** What a layer changes in the merged index of the stack below it. */
export interface IndexDelta {
  /** The root tree id of the stack below (`null`: empty), checked before deriving. */
  readonly baseTree: Uint8Array | null;
  readonly rootStat: Float64Array;
  readonly rootTree: Uint8Array | null;
  readonly startSec: number;
  readonly startNsec: number;
  readonly ignoreKey: string;
  /** Every directory whose node differs from the one below, ancestors included. */
  readonly patches: readonly NodePatch[];
}

/** An `index` file, parsed: a whole index or a delta. */
export type IndexFile =
  | { readonly kind: "full"; readonly index: LayerIndex }
  | { readonly kind: "delta"; readonly delta: IndexDelta };

/** A malformed index file. */
export class IndexFormatError extends Error {
  override name = "IndexFormatError";
}

const MAGIC = 0x5849584d; // "MXIX" read little-endian
/** The version field of a whole index. */
export const FULL_VERSION = 1;
/** The version field of a layer's delta. */
export const DELTA_VERSION = 2;
const HEADER = 48 + STRIDE * 8 + 24;
const DELTA_HEADER = 48 + STRIDE * 8 + 40;
const enc = new TextEncoder();
const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

function pad8(n: number): number {
  return (n + 7) & ~7;
}

/** Serializes a whole index (see the module doc for the layout). */
export function encodeIndex(ix: LayerIndex): Uint8Array {
  const nodes: IndexNode[] = [];
  const stack: IndexNode[] = [ix.root];
  let entries = 0;
  const nameParts: string[] = [];
  while (stack.length > 0) {
    const node = stack.pop() as IndexNode;
    nodes.push(node);
    entries += node.names.length;
    for (const name of node.names) nameParts.push(name, "\0");
    // Pre-order, children in name order: push them reversed.
    for (let i = node.kids.length - 1; i >= 0; i--) {
      const kid = node.kids[i];
      if (kid) stack.push(kid);
    }
  }
  const names = enc.encode(nameParts.join(""));
  const key = enc.encode(ix.ignoreKey);
  const keyOff = HEADER;
  const countsOff = pad8(keyOff + key.length);
  const ignoresOff = pad8(countsOff + nodes.length * 4);
  const statsOff = pad8(ignoresOff + nodes.length * 20);
  const oidsOff = statsOff + entries * STRIDE * 8;
  const namesOff = oidsOff + entries * 20;
  const out = new Uint8Array(pad8(namesOff + names.length));
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, FULL_VERSION, true);
  view.setUint32(8, nodes.length, true);
  view.setUint32(12, entries, true);
  view.setUint32(16, names.length, true);
  view.setUint32(20, key.length, true);
  view.setFloat64(24, ix.startSec, true);
  view.setFloat64(32, ix.startNsec, true);
  for (let f = 0; f < STRIDE; f++) view.setFloat64(48 + f * 8, ix.rootStat[f] as number, true);
  out.set(ix.rootTree ?? NO_OID, 48 + STRIDE * 8);
  out.set(key, keyOff);
  const counts = new Uint32Array(out.buffer, countsOff, nodes.length);
  const stats = new Float64Array(out.buffer, statsOff, entries * STRIDE);
  let e = 0;
  for (let n = 0; n < nodes.length; n++) {
    const node = nodes[n] as IndexNode;
    counts[n] = node.names.length;
    if (node.gitignore) out.set(node.gitignore, ignoresOff + n * 20);
    stats.set(node.st.subarray(0, node.names.length * STRIDE), e * STRIDE);
    out.set(node.oids.subarray(0, node.names.length * 20), oidsOff + e * 20);
    e += node.names.length;
  }
  out.set(names, namesOff);
  return out;
}

/**
 * Parses {@linkcode encodeIndex}'s output. The nodes view the given bytes'
 * buffer, so the caller must not reuse it.
 *
 * @throws {IndexFormatError} when the bytes are not a well-formed whole index
 */
export function decodeIndex(bytes: Uint8Array): LayerIndex {
  const file = decodeIndexFile(bytes);
  if (file.kind !== "full") {
    throw new IndexFormatError("index is a layer's delta, not a whole index");
  }
  return file.index;
}

/**
 * Parses an `index` file of either kind (its version field says which).
 *
 * @throws {IndexFormatError} when the bytes are not a well-formed index
 */
export function decodeIndexFile(bytes: Uint8Array): IndexFile {
  countWork(WORK.decoded, bytes.length);
  if (bytes.byteOffset % 8 !== 0) bytes = bytes.slice();
  if (bytes.length < 8) throw new IndexFormatError("index is truncated");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (view.getUint32(0, true) !== MAGIC) throw new IndexFormatError("not a layer index");
  const version = view.getUint32(4, true);
  if (version === DELTA_VERSION) return { kind: "delta", delta: decodeDelta(bytes, view) };
  if (version !== FULL_VERSION) {
    throw new IndexFormatError(`unsupported index version: ${version}`);
  }
  return { kind: "full", index: decodeFull(bytes, view) };
}

function decodeFull(bytes: Uint8Array, view: DataView): LayerIndex {
  if (bytes.length < HEADER) throw new IndexFormatError("index is truncated");
  const nodeCount = view.getUint32(8, true);
  const entries = view.getUint32(12, true);
  const namesLen = view.getUint32(16, true);
  const keyLen = view.getUint32(20, true);
  const keyOff = HEADER;
  const countsOff = pad8(keyOff + keyLen);
  const ignoresOff = pad8(countsOff + nodeCount * 4);
  const statsOff = pad8(ignoresOff + nodeCount * 20);
  const oidsOff = statsOff + entries * STRIDE * 8;
  const namesOff = oidsOff + entries * 20;
  if (nodeCount < 1 || bytes.length !== pad8(namesOff + namesLen)) {
    throw new IndexFormatError("index sizes do not match its header");
  }
  const base = bytes.byteOffset;
  const buf = bytes.buffer;
  const rootStat = new Float64Array(STRIDE);
  for (let f = 0; f < STRIDE; f++) rootStat[f] = view.getFloat64(48 + f * 8, true);
  const rootTree = bytes.slice(48 + STRIDE * 8, 48 + STRIDE * 8 + 20);
  const counts = new Uint32Array(buf, base + countsOff, nodeCount);
  const stats = new Float64Array(buf, base + statsOff, entries * STRIDE);
  let allNames: string[];
  try {
    allNames = fatalUtf8.decode(bytes.subarray(namesOff, namesOff + namesLen)).split("\0");
  } catch (cause) {
    throw new IndexFormatError("index names are not UTF-8", { cause });
  }
  if (allNames.length !== entries + 1) throw new IndexFormatError("index name count is wrong");
  let nextNode = 0;
  let nextEntry = 0;
  const build = (depth: number): IndexNode => {
    if (nextNode >= nodeCount || depth > 4096) {
      throw new IndexFormatError("index tree is malformed");
    }
    const n = nextNode++;
    const count = counts[n] as number;
    const first = nextEntry;
    if (first + count > entries) throw new IndexFormatError("index tree is malformed");
    nextEntry += count;
    const st = stats.subarray(first * STRIDE, (first + count) * STRIDE);
    const oids = bytes.subarray(oidsOff + first * 20, oidsOff + (first + count) * 20);
    const names = allNames.slice(first, first + count);
    const kids: (IndexNode | null)[] = new Array(count).fill(null);
    for (let i = 0; i < count; i++) {
      if (kindOf(st[i * STRIDE + F_MODE] as number) === KIND_DIR) kids[i] = build(depth + 1);
    }
    const gi = bytes.subarray(ignoresOff + n * 20, ignoresOff + n * 20 + 20);
    return new IndexNode(names, st, oids, kids, isZero(gi) ? null : gi);
  };
  const root = build(0);
  if (nextNode !== nodeCount || nextEntry !== entries) {
    throw new IndexFormatError("index tree is malformed");
  }
  let ignoreKey: string;
  try {
    ignoreKey = fatalUtf8.decode(bytes.subarray(keyOff, keyOff + keyLen));
  } catch (cause) {
    throw new IndexFormatError("index ignore key is not UTF-8", { cause });
  }
  return {
    root,
    rootStat,
    rootTree: isZero(rootTree) ? null : rootTree,
    startSec: view.getFloat64(24, true),
    startNsec: view.getFloat64(32, true),
    ignoreKey,
  };
}

/** Serializes a layer's delta (see the module doc for the layout). */
export function encodeDelta(d: IndexDelta): Uint8Array {
  const parts: string[] = [];
  let sets = 0;
  let deletes = 0;
  for (const p of d.patches) {
    parts.push(p.path, "\0");
    for (const name of p.names) parts.push(name, "\0");
    for (const name of p.deleted) parts.push(name, "\0");
    sets += p.names.length;
    deletes += p.deleted.length;
  }
  const strings = enc.encode(parts.join(""));
  const key = enc.encode(d.ignoreKey);
  const n = d.patches.length;
  const keyOff = DELTA_HEADER;
  const countsOff = pad8(keyOff + key.length);
  const ignoresOff = pad8(countsOff + n * 8);
  const statsOff = pad8(ignoresOff + n * 20);
  const oidsOff = statsOff + sets * STRIDE * 8;
  const stringsOff = oidsOff + sets * 20;
  const out = new Uint8Array(pad8(stringsOff + strings.length));
  const view = new DataView(out.buffer);
  view.setUint32(0, MAGIC, true);
  view.setUint32(4, DELTA_VERSION, true);
  view.setUint32(8, n, true);
  view.setUint32(12, sets, true);
  view.setUint32(16, strings.length, true);
  view.setUint32(20, key.length, true);
  view.setFloat64(24, d.startSec, true);
  view.setFloat64(32, d.startNsec, true);
  view.setUint32(40, deletes, true);
  for (let f = 0; f < STRIDE; f++) view.setFloat64(48 + f * 8, d.rootStat[f] as number, true);
  out.set(d.rootTree ?? NO_OID, 48 + STRIDE * 8);
  out.set(d.baseTree ?? NO_OID, 48 + STRIDE * 8 + 20);
  out.set(key, keyOff);
  const counts = new Uint32Array(out.buffer, countsOff, n * 2);
  const stats = new Float64Array(out.buffer, statsOff, sets * STRIDE);
  let e = 0;
  d.patches.forEach((p, i) => {
    counts[i * 2] = p.names.length;
    counts[i * 2 + 1] = p.deleted.length;
    if (p.gitignore) out.set(p.gitignore, ignoresOff + i * 20);
    stats.set(p.st.subarray(0, p.names.length * STRIDE), e * STRIDE);
    out.set(p.oids.subarray(0, p.names.length * 20), oidsOff + e * 20);
    e += p.names.length;
  });
  out.set(strings, stringsOff);
  return out;
}

function decodeDelta(bytes: Uint8Array, view: DataView): IndexDelta {
  if (bytes.length < DELTA_HEADER) throw new IndexFormatError("index delta is truncated");
  const n = view.getUint32(8, true);
  const sets = view.getUint32(12, true);
  const stringsLen = view.getUint32(16, true);
  const keyLen = view.getUint32(20, true);
  const deletes = view.getUint32(40, true);
  const keyOff = DELTA_HEADER;
  const countsOff = pad8(keyOff + keyLen);
  const ignoresOff = pad8(countsOff + n * 8);
  const statsOff = pad8(ignoresOff + n * 20);
  const oidsOff = statsOff + sets * STRIDE * 8;
  const stringsOff = oidsOff + sets * 20;
  if (bytes.length !== pad8(stringsOff + stringsLen)) {
    throw new IndexFormatError("index delta sizes do not match its header");
  }
  const base = bytes.byteOffset;
  const rootStat = new Float64Array(STRIDE);
  for (let f = 0; f < STRIDE; f++) rootStat[f] = view.getFloat64(48 + f * 8, true);
  const rootTree = bytes.slice(48 + STRIDE * 8, 48 + STRIDE * 8 + 20);
  const baseTree = bytes.slice(48 + STRIDE * 8 + 20, 48 + STRIDE * 8 + 40);
  const counts = new Uint32Array(bytes.buffer, base + countsOff, n * 2);
  const stats = new Float64Array(bytes.buffer, base + statsOff, sets * STRIDE);
  let strings: string[];
  let ignoreKey: string;
  try {
    strings = fatalUtf8.decode(bytes.subarray(stringsOff, stringsOff + stringsLen)).split("\0");
    ignoreKey = fatalUtf8.decode(bytes.subarray(keyOff, keyOff + keyLen));
  } catch (cause) {
    throw new IndexFormatError("index delta strings are not UTF-8", { cause });
  }
  if (strings.length !== n + sets + deletes + 1) {
    throw new IndexFormatError("index delta string count is wrong");
  }
  const patches: NodePatch[] = [];
  let s = 0;
  let e = 0;
  let deleted = 0;
  for (let i = 0; i < n; i++) {
    const setCount = counts[i * 2] as number;
    const delCount = counts[i * 2 + 1] as number;
    if (e + setCount > sets || deleted + delCount > deletes) {
      throw new IndexFormatError("index delta counts do not match its header");
    }
    const path = strings[s++] as string;
    const names = strings.slice(s, s + setCount);
    s += setCount;
    const del = strings.slice(s, s + delCount);
    s += delCount;
    if (!ascending(names) || !ascending(del)) {
      throw new IndexFormatError(`index delta names of ${JSON.stringify(path)} are out of order`);
    }
    const gi = bytes.subarray(ignoresOff + i * 20, ignoresOff + i * 20 + 20);
    patches.push({
      path,
      gitignore: isZero(gi) ? null : gi,
      names,
      st: stats.subarray(e * STRIDE, (e + setCount) * STRIDE),
      oids: bytes.subarray(oidsOff + e * 20, oidsOff + (e + setCount) * 20),
      deleted: del,
    });
    e += setCount;
    deleted += delCount;
  }
  if (e !== sets || deleted !== deletes) {
    throw new IndexFormatError("index delta counts do not match its header");
  }
  return {
    baseTree: isZero(baseTree) ? null : baseTree,
    rootStat,
    rootTree: isZero(rootTree) ? null : rootTree,
    startSec: view.getFloat64(24, true),
    startNsec: view.getFloat64(32, true),
    ignoreKey,
    patches,
  };
}

/** Whether names are strictly in `compareNames` order. */
function ascending(names: readonly string[]): boolean {
  for (let i = 1; i < names.length; i++) {
    if (compareNames(names[i - 1] as string, names[i] as string) >= 0) return false;
  }
  return true;
}
