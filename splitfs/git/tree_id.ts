/**
 * Git object ids computed without Git: a blob's id is the SHA-1 of
 * `blob <size>\0<bytes>`, a tree's the SHA-1 of `tree <size>\0` and its
 * entries, each `<mode> <name>\0<20-byte id>` in Git's tree order (a
 * directory sorts as if its name ended with `/`). The same ids `git
 * hash-object` and `git write-tree` print, so a snapshot's root id can be
 * compared with a real repository's.
 *
 * Pure: needs no permission.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";

/** The modes a Git index (and so `git write-tree`) can give a tree entry. */
export type TreeMode = "100644" | "100755" | "120000" | "40000";

/** One entry of a tree object. */
export interface TreeEntry {
  /** The name's UTF-8 bytes: no `/`, no NUL, not empty. */
  readonly name: Uint8Array;
  readonly mode: TreeMode;
  /** The blob's (or subtree's) 20-byte id. */
  readonly oid: Uint8Array;
}

/** The id of the empty tree, which `git write-tree` prints for an empty index. */
export const EMPTY_TREE_HEX = "4b825dc642cb6eb9a060e54bf8d69288fbee4904";

const enc = new TextEncoder();
const SLASH = 0x2f;

/** The object header `<type> <size>\0`. */
export function objectHeader(type: "blob" | "tree", size: number): Uint8Array {
  return enc.encode(`${type} ${size}\0`);
}

/** A SHA-1 already fed a blob's header: update it with exactly `size` bytes, then digest. */
export function blobHasher(size: number): Hash {
  return createHash("sha1").update(objectHeader("blob", size));
}

/** The 20-byte id of a blob holding `bytes`. */
export function blobId(bytes: Uint8Array): Uint8Array {
  return new Uint8Array(blobHasher(bytes.length).update(bytes).digest());
}

/** Lower-case hex of an id. */
export function hexOf(oid: Uint8Array): string {
  let s = "";
  for (const b of oid) s += (b < 16 ? "0" : "") + b.toString(16);
  return s;
}

/**
 * Git's tree order (`base_name_compare`): bytewise, where the byte after a
 * name's end is `/` for a directory and NUL otherwise.
 */
export function compareTreeEntries(a: TreeEntry, b: TreeEntry): number {
  const x = a.name, y = b.name;
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) {
    const d = (x[i] as number) - (y[i] as number);
    if (d !== 0) return d;
  }
  const cx = x.length > n ? x[n] as number : a.mode === "40000" ? SLASH : 0;
  const cy = y.length > n ? y[n] as number : b.mode === "40000" ? SLASH : 0;
  return cx - cy;
}

/**
 * A tree object's body from entries already in Git's tree order.
 *
 * @throws {RangeError} when the entries are out of order, repeat a name, or
 * hold a malformed name or id
 */
export function treeBody(sorted: readonly TreeEntry[]): Uint8Array {
  let size = 0;
  const modes: Uint8Array[] = [];
  for (let i = 0; i < sorted.length; i++) {
    const e = sorted[i] as TreeEntry;
    if (e.name.length === 0 || e.name.includes(0) || e.name.includes(SLASH)) {
      throw new RangeError(`invalid tree entry name: "${new TextDecoder().decode(e.name)}"`);
    }
    if (e.oid.length !== 20) throw new RangeError(`invalid object id length: ${e.oid.length}`);
    if (i > 0 && compareTreeEntries(sorted[i - 1] as TreeEntry, e) >= 0) {
      throw new RangeError("tree entries are not in Git's tree order");
    }
    const mode = enc.encode(`${e.mode} `);
    modes.push(mode);
    size += mode.length + e.name.length + 1 + 20;
  }
  const out = new Uint8Array(size);
  let off = 0;
  for (let i = 0; i < sorted.length; i++) {
    const e = sorted[i] as TreeEntry;
    const mode = modes[i] as Uint8Array;
    out.set(mode, off);
    off += mode.length;
    out.set(e.name, off);
    off += e.name.length + 1; // the NUL is already zero
    out.set(e.oid, off);
    off += 20;
  }
  return out;
}

/**
 * The 20-byte id of the tree holding `entries` (any order; sorted here).
 * Git never writes an empty subtree: callers leave out directories whose
 * tree would be empty.
 *
 * @throws {RangeError} as {@linkcode treeBody} does
 */
export function treeId(entries: readonly TreeEntry[]): Uint8Array {
  const body = treeBody([...entries].sort(compareTreeEntries));
  return new Uint8Array(
    createHash("sha1").update(objectHeader("tree", body.length)).update(body).digest(),
  );
}
