/**
 * An operation's capture (docs/checkpoints.md "An operation", step 4): its
 * overlay's upper dir, read once the process tree is drained and the
 * overlay unmounted, is normalised in place into the layer format and its
 * requested root id computed from the head's index. O(changed): only the
 * upper dir is listed, and the head's cached tree ids stand for every
 * directory it does not touch.
 *
 * Normalising, entry by entry against the head's merged view:
 *
 * - a file or symlink whose kind, permission bits (`& 0o777`) and Git blob
 *   id equal the head's is removed (rewritten with the same bytes, or only
 *   touched: not a change); a file keeps `perm & 0o777` (set-id bits go);
 * - a whiteout (0/0 character device) of a name the head lacks is removed;
 * - an opaque directory gets a whiteout for each name the head has there
 *   and the upper dir lacks, each of its subdirectories the head also has
 *   becomes opaque in turn (nothing below it was merged either), then it
 *   loses its marker: every step shows the same view, so an interrupted
 *   capture is finished by the next one;
 * - a directory left empty that the head has with the same mode is removed;
 * - `.git` at any depth, the top-level `.marsh`, FIFOs, sockets and devices
 *   are removed: a snapshot never admits them either;
 * - overlay's own xattrs (`origin`, `impure`, ...) are removed; a redirect
 *   or metacopy marker (our mounts make neither: `redirect_dir=nofollow,
 *   metacopy=off`) or a name that is not UTF-8 fails the capture closed.
 *
 * Run again on a normalised upper dir, it finds the same result: recovery
 * may capture a drained operation again, and the seal recomputes it.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { compareNames, type Dir, type Stat } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { isWhiteout, removeXattr, setXattr, xattrNames } from "../fd/upper_entries.ts";
import { xattrPrefix } from "../fork/overlay.ts";
import type { OverlayMode } from "../fork/mount_record.ts";
import {
  F_MODE,
  IndexNode,
  isZero,
  KIND_DIR,
  KIND_FILE,
  KIND_SYMLINK,
  kindOf,
  type LayerIndex,
  NO_OID,
  STRIDE,
} from "../layers/layer_index.ts";
import { Builder, indexOfName, record, sameOid, treeOf } from "../layers/layer_records.ts";
import type { HeadStack } from "../layers/layers.ts";
import { isGitName } from "../layers/snapshot.ts";
import { blobHasher, blobId, EMPTY_TREE_HEX, hexOf } from "../git/tree_id.ts";
import { MARSH_DIR } from "../../model/layout.ts";
import type { CapturedPath, PathChange } from "../../protocol/splitfs_session.ts";

const CHUNK = 1 << 20;
/** The value overlay gives an opaque marker. */
const OPAQUE = new Uint8Array([0x79]); // "y"

/** What a capture found. */
export interface Capture {
  /** The requested root id: the Git tree id of the head with the changes. */
  readonly rootId: string;
  /** Whether it differs from the head's. */
  readonly changed: boolean;
  /** The merged view's index with the normalised upper dir on top. */
  readonly index: LayerIndex;
  /** The head's index it was computed from: the layer's index is sealed as its delta against it. */
  readonly base: LayerIndex;
  /** SHA-256 (hex) of the normalised changed set. */
  readonly digest: string;
  /** Every changed path, in UTF-8 byte order of the path. */
  readonly paths: CapturedPath[];
  /** What the normalised upper dir holds, for the layer's `meta.json`. */
  readonly counts: {
    files: number;
    dirs: number;
    symlinks: number;
    whiteouts: number;
    bytes: number;
  };
}

interface Ctx {
  readonly prefixes: readonly string[];
  readonly opaqueKey: string;
  readonly digest: Hash;
  readonly paths: CapturedPath[];
  readonly counts: Capture["counts"];
}

/**
 * Normalises `upper` (the unmounted upper dir of an operation over `head`)
 * in place and computes what it makes of the head.
 *
 * @throws {RefusedError} for a redirect or metacopy marker, or a name that is not UTF-8
 */
export function captureUpper(upper: Dir, head: HeadStack, mode: OverlayMode): Capture {
  const ctx: Ctx = {
    // Both namespaces: a `trusted.` marker in a `userxattr` upper would still be overlay's.
    prefixes: ["trusted.overlay.", "user.overlay."],
    opaqueKey: `${xattrPrefix(mode)}opaque`,
    digest: createHash("sha256"),
    paths: [],
    counts: { files: 0, dirs: 1, symlinks: 0, whiteouts: 0, bytes: 0 },
  };
  const prev = head.index;
  const r = visitDir(ctx, upper, "", prev.root, prev.rootTree);
  const rootStat = Float64Array.from(prev.rootStat);
  rootStat[F_MODE] = KIND_DIR * 0x10000 + upper.stat().perm;
  const index: LayerIndex = {
    root: r.node,
    rootStat,
    rootTree: r.tree,
    startSec: prev.startSec,
    startNsec: prev.startNsec,
    ignoreKey: prev.ignoreKey,
  };
  const rootId = r.tree ? hexOf(r.tree) : EMPTY_TREE_HEX;
  ctx.paths.sort((a, b) => compareNames(a.path, b.path));
  return {
    rootId,
    changed: rootId !== head.top.rootId,
    index,
    base: prev,
    digest: ctx.digest.digest("hex"),
    paths: ctx.paths,
    counts: ctx.counts,
  };
}

interface DirResult {
  readonly node: IndexNode;
  readonly tree: Uint8Array | null;
  /** Whether the upper dir holds nothing now. */
  readonly empty: boolean;
}

/** A new record for one name of a directory: its index record, id, and subtree node. */
interface Entry {
  readonly rec: number[];
  readonly oid: Uint8Array;
  readonly kid: IndexNode | null;
}

/** A name's record in `node`, or -1. */
function find(node: IndexNode | null, name: string): number {
  return node === null ? -1 : indexOfName(node, name);
}

/**
 * One upper directory against `prev` (the head's node at this path, `null`
 * when the head has no directory here), with no opaque marker left on it.
 */
function visitDir(
  ctx: Ctx,
  up: Dir,
  rel: string,
  prev: IndexNode | null,
  prevTree: Uint8Array | null,
): DirResult {
  const { entries, invalid } = up.listing();
  if (invalid.length > 0) {
    throw new RefusedError(
      `the operation wrote a name that is not UTF-8 in ${rel === "" ? "the project root" : rel}; ` +
        `checkpoints keep UTF-8 names only: rename it and run the operation again`,
    );
  }
  const names = entries.map((e) => e.name).sort(compareNames);
  const changes = new Map<string, Entry | null>();
  for (const name of names) {
    const path = rel === "" ? name : `${rel}/${name}`;
    if ((rel === "" && name === MARSH_DIR) || isGitName(name)) {
      up.removeTree(name);
      continue;
    }
    const i = find(prev, name);
    const prevMode = i < 0 ? 0 : (prev!.st[i * STRIDE + F_MODE] as number);
    const prevKind = i < 0 ? 0 : kindOf(prevMode);
    const st = up.statAt(name);
    if (st === null) continue;
    if (st.kind === "char" && isWhiteout(up, name)) {
      if (i < 0) {
        up.unlink(name);
        continue;
      }
      changes.set(name, null);
      noteDeleted(ctx, path);
      continue;
    }
    if (st.kind === "file" || st.kind === "symlink") {
      stripOverlayXattrs(ctx, up, name, path);
      const e = leafEntry(up, name, st);
      const oid = e.oid;
      const same = prevKind === kindOf(e.rec[F_MODE] as number) &&
        (prevMode & 0o777) === ((e.rec[F_MODE] as number) & 0o777) &&
        sameOid(prev!.oids.subarray(i * 20, i * 20 + 20), oid);
      if (same) {
        up.unlink(name);
        continue;
      }
      changes.set(name, e);
      const kindName = st.kind === "file" ? "file" : "symlink";
      note(
        ctx,
        path,
        i < 0 ? "added" : prevKind === kindOf(e.rec[F_MODE] as number) ? "modified" : "type",
        kindName,
        e.rec[F_MODE] as number,
        oid,
      );
      if (st.kind === "file") {
        ctx.counts.files++;
        ctx.counts.bytes += st.size;
      } else ctx.counts.symlinks++;
      continue;
    }
    if (st.kind !== "dir") {
      // FIFOs, sockets, devices: never admitted into a snapshot, nor into a
      // checkpoint. One that replaced a head entry deletes it: a whiteout
      // takes its place in one rename, so no interruption shows the head's again.
      if (i < 0) {
        up.unlink(name);
        continue;
      }
      const tmp = `.marsh-whiteout-${crypto.randomUUID().slice(0, 8)}`;
      up.mknodWhiteout(tmp);
      up.renameReplacing(tmp, up, name);
      changes.set(name, null);
      noteDeleted(ctx, path);
      continue;
    }
    const kidPrev = prevKind === KIND_DIR ? (prev!.kids[i] ?? IndexNode.empty()) : null;
    if (isOpaque(ctx, up, name)) expandOpaque(ctx, up, name, kidPrev);
    stripOverlayXattrs(ctx, up, name, path);
    const kidTree = kidPrev === null ? null : prev!.oids.slice(i * 20, i * 20 + 20);
    let r: DirResult;
    {
      using child = up.openDir(name);
      r = visitDir(
        ctx,
        child,
        path,
        kidPrev,
        kidTree && !isZero(kidTree) ? kidTree : null,
      );
    }
    const dirMode = KIND_DIR * 0x10000 + st.perm;
    if (kidPrev !== null && r.empty && prevMode === dirMode) {
      up.rmdir(name);
      continue;
    }
    if (prevKind !== KIND_DIR && prevKind !== 0) {
      note(ctx, path, "type", "dir", dirMode, NO_OID);
    } else {
      ctx.digest.update(`dir ${dirMode.toString(8)} ${path}\0`);
    }
    ctx.counts.dirs++;
    changes.set(name, {
      rec: record(st, dirMode, st.mtimeSec, st.mtimeNsec),
      oid: r.tree ?? NO_OID,
      kid: r.node,
    });
  }
  const node = merge(prev, changes);
  // An untouched directory keeps the head's cached tree id: nothing below it is hashed again.
  const tree = changes.size === 0 && prev !== null ? prevTree : treeOf(node);
  return { node, tree, empty: up.entries().length === 0 };
}

/** `prev` with `changes` applied (`null`: deleted), in name order. */
function merge(prev: IndexNode | null, changes: ReadonlyMap<string, Entry | null>): IndexNode {
  if (changes.size === 0 && prev !== null) return prev;
  const b = new Builder();
  const added = [...changes.keys()].filter((n) => find(prev, n) < 0).sort(compareNames);
  let j = 0;
  const n = prev?.names.length ?? 0;
  for (let i = 0; i < n; i++) {
    const name = prev!.names[i] as string;
    while (j < added.length && compareNames(added[j] as string, name) < 0) {
      const a = added[j++] as string;
      const e = changes.get(a);
      if (e) b.push(a, e.rec, e.oid, e.kid);
    }
    if (!changes.has(name)) {
      b.pushFrom(prev!, i);
      continue;
    }
    const e = changes.get(name);
    if (e) b.push(name, e.rec, e.oid, e.kid);
  }
  while (j < added.length) {
    const a = added[j++] as string;
    const e = changes.get(a);
    if (e) b.push(a, e.rec, e.oid, e.kid);
  }
  return b.build(prev?.gitignore ?? null);
}

/** A file's or symlink's record and blob id; a file's set-id and sticky bits are dropped. */
function leafEntry(up: Dir, name: string, st: Stat): Entry {
  if (st.kind === "symlink") {
    const target = up.readlink(name);
    return {
      rec: record(st, KIND_SYMLINK * 0x10000 + st.perm, st.mtimeSec, st.mtimeNsec),
      oid: blobId(target),
      kid: null,
    };
  }
  using f = up.openFile(name);
  let now = st;
  if ((st.perm & 0o7000) !== 0) {
    f.chmod(st.perm & 0o777);
    now = f.stat();
  }
  const hash = blobHasher(now.size);
  const buf = new Uint8Array(Math.min(CHUNK, Math.max(now.size, 1)));
  let len = 0;
  for (;;) {
    const n = f.read(buf);
    if (n === 0) break;
    len += n;
    hash.update(buf.subarray(0, n));
  }
  if (len !== now.size) {
    throw new RefusedError(
      `${up.path}/${name} changed while it was captured (${len} bytes read, ${now.size} expected): ` +
        `a process still writes there`,
    );
  }
  return {
    rec: record(now, KIND_FILE * 0x10000 + (now.perm & 0o777), now.mtimeSec, now.mtimeNsec),
    oid: new Uint8Array(hash.digest()),
    kid: null,
  };
}

/**
 * Turns the opaque directory `up/<name>` (its head node `prev`, `null` when
 * the head has no directory there) into a plain one that shows the same:
 * a whiteout for each name of the head the upper dir lacks (the opaque
 * marker hid it), each subdirectory the head also has there made opaque in
 * turn (it hid what lies below it too), then the marker removed. Each step
 * keeps the view the same, so an interrupted capture finishes it when run
 * again; nothing in the directory is dropped before its marker is gone.
 */
function expandOpaque(ctx: Ctx, up: Dir, name: string, prev: IndexNode | null): void {
  if (prev !== null) {
    using dir = up.openDir(name);
    const here = new Set(dir.listing().entries.map((e) => e.name));
    for (let i = 0; i < prev.names.length; i++) {
      const n = prev.names[i] as string;
      if (!here.has(n)) dir.mknodWhiteout(n);
      else if (
        kindOf(prev.st[i * STRIDE + F_MODE] as number) === KIND_DIR &&
        dir.statAt(n)?.kind === "dir"
      ) {
        setXattr(dir, n, ctx.opaqueKey, OPAQUE);
      }
    }
  }
  for (const prefix of ctx.prefixes) {
    if (up.xattrAt(name, `${prefix}opaque`) !== null) removeXattr(up, name, `${prefix}opaque`);
  }
}

function isOpaque(ctx: Ctx, up: Dir, name: string): boolean {
  for (const prefix of ctx.prefixes) {
    const v = up.xattrAt(name, `${prefix}opaque`);
    if (v !== null && v.length === 1 && v[0] === 0x79 /* "y" */) return true;
  }
  return false;
}

/**
 * Removes overlay's own xattrs from a directory of the upper dir: the layer
 * is a plain lower dir. A redirect or metacopy marker fails the capture.
 */
function stripOverlayXattrs(ctx: Ctx, up: Dir, name: string, path: string): void {
  for (const key of xattrNames(up, name)) {
    const prefix = ctx.prefixes.find((p) => key.startsWith(p));
    if (prefix === undefined) continue;
    const what = key.slice(prefix.length);
    if (what === "redirect" || what === "metacopy") {
      throw new RefusedError(
        `the operation's overlay left a ${what} marker on ${path}, which marsh's mounts never make ` +
          `(redirect_dir=nofollow, metacopy=off): the upper dir was not written through marsh's overlay`,
      );
    }
    removeXattr(up, name, key);
  }
}

function note(
  ctx: Ctx,
  path: string,
  change: PathChange,
  kind: string,
  mode: number,
  oid: Uint8Array,
): void {
  ctx.paths.push({ path, change });
  ctx.digest.update(`${kind} ${mode.toString(8)} ${hexOf(oid)} ${path}\0`);
}

function noteDeleted(ctx: Ctx, path: string): void {
  ctx.counts.whiteouts++;
  ctx.paths.push({ path, change: "deleted" });
  ctx.digest.update(`delete ${path}\0`);
}
