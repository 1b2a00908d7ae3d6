/**
 * The stat index a layered snapshot keeps of the tree it copied: per
 * directory, its admitted entries in name order with the live tree's stat
 * (kind, permission bits, size, mtime, ctime, inode), the cached Git blob id
 * of each file and symlink (the tree id of each directory), and the mtime
 * the layer copy holds. The next snapshot compares the live tree against it
 * without reading unchanged files.
 *
 * Directories are immutable {@linkcode IndexNode}s: a snapshot replaces only
 * the nodes on changed paths and shares the rest with the previous index.
 *
 * The on-disk form is a flat binary image of the same arrays (little-endian
 * host order), so loading it is a few typed-array views, one UTF-8 decode and
 * a walk that links the nodes:
 *
 * ```text
 * header   magic "MXIX", u32 version, u32 nodes, u32 entries, u32 name bytes,
 *          u32 ignore-key bytes, f64 start sec, f64 start nsec,
 *          f64 × STRIDE root record, 20-byte root tree id (zero: empty)
 * key      the ignore key's UTF-8 bytes                       (padded to 8)
 * counts   u32 × nodes: entries per node, pre-order           (padded to 8)
 * ignores  20 × nodes: the `.gitignore` blob id in effect (zero: none)
 * stats    f64 × STRIDE × entries                             (8-aligned)
 * oids     20 × entries
 * names    the entry names, UTF-8, each followed by NUL
 * ```
 *
 * Pure: needs no permission.
 *
 * @module
 */

import type { EntryKind, Stat } from "../fd/dir.ts";
import type { StatIndex } from "../capture/old_tree.ts";

/** `kind` part of a record's mode field. */
export const KIND_FILE = 1;
/** `kind` part of a record's mode field. */
export const KIND_DIR = 2;
/** `kind` part of a record's mode field. */
export const KIND_SYMLINK = 3;

/** Numbers per entry record. */
export const STRIDE = 10;
/** Record fields: `kind * 0x10000 + (perm & 0o7777)`, of the live entry. */
export const F_MODE = 0;
/** Record field: the live size (a symlink's target length). */
export const F_SIZE = 1;
/** Record fields: the live mtime and ctime, seconds and nanoseconds. */
export const F_MSEC = 2, F_MNSEC = 3, F_CSEC = 4, F_CNSEC = 5;
/** Record fields: the live inode number, low and high 32 bits. */
export const F_INOLO = 6, F_INOHI = 7;
/** Record fields: the mtime of the copy a layer holds (a file touched since keeps the old one). */
export const F_LMSEC = 8, F_LMNSEC = 9;

/** The 20 zero bytes that stand for "no id" (an empty directory's tree, no `.gitignore`). */
export const NO_OID = new Uint8Array(20);

/** One directory of the merged view: immutable once built. */
export class IndexNode {
  /**
   * @param names entry names in `compareNames` order (UTF-8 byte order)
   * @param st `STRIDE` numbers per entry
   * @param oids 20 bytes per entry: blob id, or the subtree's id ({@linkcode NO_OID} when empty)
   * @param kids the subdirectory nodes, `null` for other entries
   * @param gitignore the blob id of the `.gitignore` whose rules applied here, or `null`
   */
  constructor(
    readonly names: readonly string[],
    readonly st: Float64Array,
    readonly oids: Uint8Array,
    readonly kids: readonly (IndexNode | null)[],
    readonly gitignore: Uint8Array | null,
  ) {}

  /** The empty directory. */
  static empty(): IndexNode {
    return new IndexNode([], new Float64Array(0), new Uint8Array(0), [], null);
  }
}

/** A whole index: the tree, the root's own record, and what the next snapshot compares against. */
export interface LayerIndex {
  readonly root: IndexNode;
  /** The live root directory's record (`STRIDE` numbers). */
  readonly rootStat: Float64Array;
  /** The root tree id, or `null` for the empty tree. */
  readonly rootTree: Uint8Array | null;
  /**
   * When the snapshot that recorded these stats started, as a file-system
   * timestamp: entries touched at or after it are re-read next time.
   */
  readonly startSec: number;
  readonly startNsec: number;
  /** Identifies the tree-wide ignore inputs the admissions were made with. */
  readonly ignoreKey: string;
}

/** The kind code of a record's mode field. */
export function kindOf(mode: number): number {
  return Math.floor(mode / 0x10000);
}

/** A malformed index file. */
export class IndexFormatError extends Error {
  override name = "IndexFormatError";
}

const MAGIC = 0x5849584d; // "MXIX" read little-endian
const VERSION = 1;
const HEADER = 48 + STRIDE * 8 + 24;
const enc = new TextEncoder();
const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

function pad8(n: number): number {
  return (n + 7) & ~7;
}

/** Serializes an index (see the module doc for the layout). */
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
  view.setUint32(4, VERSION, true);
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
 * @throws {IndexFormatError} when the bytes are not a well-formed index
 */
export function decodeIndex(bytes: Uint8Array): LayerIndex {
  if (bytes.byteOffset % 8 !== 0) bytes = bytes.slice();
  if (bytes.length < HEADER) throw new IndexFormatError("index is truncated");
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.length);
  if (view.getUint32(0, true) !== MAGIC) throw new IndexFormatError("not a layer index");
  const version = view.getUint32(4, true);
  if (version !== VERSION) throw new IndexFormatError(`unsupported index version: ${version}`);
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

/** Whether an id is all zeros ({@linkcode NO_OID}). */
export function isZero(oid: Uint8Array): boolean {
  for (let i = 0; i < oid.length; i++) if (oid[i] !== 0) return false;
  return true;
}

/**
 * An entry as a layer stack shows it through an overlay mount: the layer
 * copy's permission bits, size and mtime. Device, inode, link count, owner
 * and ctime are not recorded and read as zero (ctime as the mtime).
 */
class LayerStat implements Stat {
  constructor(
    readonly kind: EntryKind,
    readonly perm: number,
    readonly size: number,
    readonly mtimeSec: number,
    readonly mtimeNsec: number,
  ) {}
  get dev(): bigint {
    return 0n;
  }
  get ino(): bigint {
    return 0n;
  }
  get nlink(): number {
    return 1;
  }
  get uid(): number {
    return 0;
  }
  get ctimeSec(): number {
    return this.mtimeSec;
  }
  get ctimeNsec(): number {
    return this.mtimeNsec;
  }
  get mtimeNs(): bigint {
    return BigInt(this.mtimeSec) * 1_000_000_000n + BigInt(this.mtimeNsec);
  }
  get ctimeNs(): bigint {
    return this.mtimeNs;
  }
}

const views = new WeakMap<IndexNode, StatIndex>();

/**
 * The merged view as capture's old side wants it ({@linkcode StatIndex}):
 * files with `perm & 0o777`, symlinks, and directories with the permission
 * bits their top layer copy has. Built once per index and shared: treat it
 * as read-only.
 */
export function statIndexOf(ix: LayerIndex): StatIndex {
  let out = views.get(ix.root);
  if (out) return out;
  out = new Map();
  const fill = (node: IndexNode, rel: string): void => {
    const here = new Map<string, Stat>();
    (out as StatIndex).set(rel, here);
    for (let i = 0; i < node.names.length; i++) {
      const name = node.names[i] as string;
      const o = i * STRIDE;
      const mode = node.st[o + F_MODE] as number;
      const kind = kindOf(mode);
      const perm = mode & 0o7777;
      const size = node.st[o + F_SIZE] as number;
      if (kind === KIND_DIR) {
        here.set(
          name,
          new LayerStat(
            "dir",
            perm,
            size,
            node.st[o + F_MSEC] as number,
            node.st[o + F_MNSEC] as number,
          ),
        );
        const kid = node.kids[i];
        fill(kid ?? IndexNode.empty(), rel === "" ? name : `${rel}/${name}`);
      } else {
        here.set(
          name,
          new LayerStat(
            kind === KIND_FILE ? "file" : "symlink",
            kind === KIND_FILE ? perm & 0o777 : 0o777,
            size,
            node.st[o + F_LMSEC] as number,
            node.st[o + F_LMNSEC] as number,
          ),
        );
      }
    }
  };
  fill(ix.root, "");
  views.set(ix.root, out);
  return out;
}

/** A small least-recently-used map of parsed indexes, shared by every store in the process. */
export class IndexCache {
  readonly #max: number;
  readonly #map = new Map<string, LayerIndex>();

  constructor(max: number) {
    this.#max = max;
  }

  get(key: string): LayerIndex | undefined {
    const ix = this.#map.get(key);
    if (ix) {
      this.#map.delete(key);
      this.#map.set(key, ix);
    }
    return ix;
  }

  set(key: string, ix: LayerIndex): void {
    this.#map.delete(key);
    this.#map.set(key, ix);
    while (this.#map.size > this.#max) {
      const oldest = this.#map.keys().next().value as string;
      this.#map.delete(oldest);
    }
  }

  delete(key: string): void {
    this.#map.delete(key);
  }

  clear(): void {
    this.#map.clear();
  }
}

/** The UTF-8 bytes of a name, for tree building. */
export function nameBytes(name: string): Uint8Array {
  return enc.encode(name);
}
