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
 * The on-disk forms (a whole index, or a layer's delta against the stack
 * below it) are `index_codec.ts`'s; deriving a stack's index from them is
 * `index_delta.ts`'s.
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

const enc = new TextEncoder();

/** The UTF-8 bytes of a name, for tree building. */
export function nameBytes(name: string): Uint8Array {
  return enc.encode(name);
}
