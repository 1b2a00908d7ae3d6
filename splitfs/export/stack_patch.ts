/**
 * `checkpoint-patch` (docs/checkpoints.md, "Checkout and commit"): the
 * change between two sealed stacks as a `git apply`-ready patch, written by
 * the patch writer a split's capture uses (`patch/writer.ts`).
 *
 * The two stacks' indexes name every entry's blob or tree id, so only
 * directories whose tree ids differ are entered and only paths whose id or
 * mode differ are read: the work follows the change, not the tree. Paths
 * come in the order a capture gives them (name order; a path that turned
 * from a directory into a file, or back, as deletions then additions).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { ChangeStatus, FileChange, GitMode, Side } from "../../patch/change.ts";
import { writeFilePatch } from "../../patch/writer.ts";
import { compareNames, type Dir } from "../fd/dir.ts";
import { MAX_FILE_BYTES } from "../capture/compare.ts";
import { hexOf } from "../git/tree_id.ts";
import {
  F_MODE,
  IndexNode,
  KIND_DIR,
  KIND_SYMLINK,
  kindOf,
  STRIDE,
} from "../layers/layer_index.ts";
import { ExportError } from "./export_errors.ts";
import { join, LazyDir, locate } from "./export_root.ts";
import { StackView } from "./stack_view.ts";

/** One changed path and how. */
export interface PatchPath {
  readonly path: string;
  readonly status: ChangeStatus;
}

/** What a patch between two stacks held. */
export interface StackPatchResult {
  /** Changed paths. */
  readonly changed: number;
  /** The first `maxPaths` of them. */
  readonly paths: readonly PatchPath[];
  /** Bytes of patch text. */
  readonly bytes: number;
}

/** One side of the comparison: a stack's directory node and where its bytes are. */
interface SideDir {
  readonly node: IndexNode;
  readonly dir: LazyDir;
}

/** An entry's record in a node. */
interface Ent {
  readonly node: IndexNode;
  readonly i: number;
  readonly kind: number;
  readonly mode: number;
}

function ent(node: IndexNode, i: number): Ent {
  const mode = node.st[i * STRIDE + F_MODE] as number;
  return { node, i, kind: kindOf(mode), mode };
}

function oidOf(e: Ent): Uint8Array {
  return e.node.oids.subarray(e.i * 20, e.i * 20 + 20);
}

function sameOid(a: Uint8Array, b: Uint8Array): boolean {
  for (let k = 0; k < 20; k++) if (a[k] !== b[k]) return false;
  return true;
}

function gitMode(e: Ent): GitMode {
  if (e.kind === KIND_SYMLINK) return 0o120000;
  return (e.mode & 0o100) !== 0 ? 0o100755 : 0o100644;
}

/** The bytes of entry `e` (`name` in `dir`), checked against the index's blob id. */
function readSide(dir: LazyDir, name: string, e: Ent): Side {
  const path = join(dir.path, name);
  const at = locate(dir, name);
  let bytes: Uint8Array;
  if (e.kind === KIND_SYMLINK) {
    if (at.st.kind !== "symlink") {
      throw new ExportError(`${path} is a ${at.st.kind}, not a symlink`);
    }
    bytes = at.dir.readlink(name);
  } else {
    if (at.st.kind !== "file") throw new ExportError(`${path} is a ${at.st.kind}, not a file`);
    if (at.st.size > MAX_FILE_BYTES) {
      throw new ExportError(
        `${path} has ${at.st.size} bytes, over the ${MAX_FILE_BYTES}-byte limit of a patch's file`,
      );
    }
    bytes = at.dir.readFile(name, MAX_FILE_BYTES);
  }
  return { mode: gitMode(e), bytes };
}

/** Every leaf below (and at) `e` as one side of a change, in name order. */
function* leaves(
  dir: LazyDir,
  name: string,
  e: Ent,
): Generator<{ path: string; side: Side }> {
  if (e.kind !== KIND_DIR) {
    yield { path: join(dir.path, name), side: readSide(dir, name, e) };
    return;
  }
  const kid = e.node.kids[e.i] as IndexNode;
  using child = dir.child(name);
  for (let k = 0; k < kid.names.length; k++) {
    yield* leaves(child, kid.names[k] as string, ent(kid, k));
  }
}

/**
 * The changes that turn `from`'s view into `to`'s, one path at a time (at
 * most two files' bytes in memory).
 */
export function* stackChanges(from: StackView, to: StackView): Generator<FileChange> {
  using a = new LazyDir("", () => from.rootDir());
  using b = new LazyDir("", () => to.rootDir());
  yield* diffDir({ node: from.index.root, dir: a }, { node: to.index.root, dir: b });
}

function* diffDir(a: SideDir, b: SideDir): Generator<FileChange> {
  const an = a.node.names, bn = b.node.names;
  let i = 0, j = 0;
  while (i < an.length || j < bn.length) {
    const c = i >= an.length
      ? 1
      : j >= bn.length
      ? -1
      : compareNames(an[i] as string, bn[j] as string);
    if (c < 0) {
      const name = an[i] as string;
      for (const l of leaves(a.dir, name, ent(a.node, i++))) {
        yield { path: l.path, old: l.side, new: null };
      }
      continue;
    }
    if (c > 0) {
      const name = bn[j] as string;
      for (const l of leaves(b.dir, name, ent(b.node, j++))) {
        yield { path: l.path, old: null, new: l.side };
      }
      continue;
    }
    const name = an[i] as string;
    const x = ent(a.node, i++), y = ent(b.node, j++);
    const xDir = x.kind === KIND_DIR, yDir = y.kind === KIND_DIR;
    if (xDir && yDir) {
      if (sameOid(oidOf(x), oidOf(y))) continue;
      using ca = a.dir.child(name);
      using cb = b.dir.child(name);
      yield* diffDir(
        { node: x.node.kids[x.i] as IndexNode, dir: ca },
        { node: y.node.kids[y.i] as IndexNode, dir: cb },
      );
      continue;
    }
    if (xDir || yDir) {
      // A directory became a file or the reverse: Git sees deletions and additions.
      for (const l of leaves(a.dir, name, x)) yield { path: l.path, old: l.side, new: null };
      for (const l of leaves(b.dir, name, y)) yield { path: l.path, old: null, new: l.side };
      continue;
    }
    if (gitMode(x) === gitMode(y) && sameOid(oidOf(x), oidOf(y))) continue;
    const path = join(a.dir.path, name);
    const change = { path, old: readSide(a.dir, name, x), new: readSide(b.dir, name, y) };
    yield change;
  }
}

/**
 * Writes the patch from stack `from` to stack `to` (each bottom first; an
 * empty list is the empty tree) of the project at `root`: each path's
 * section goes to `emit` when given. Returns the counts and the first
 * `maxPaths` changed paths.
 *
 * @throws {LayerError} for a stack that is not sealed and whole
 * @throws {ExportError} for a file over the patch limit, or bytes that are
 *   not what the index says
 */
export function writeStackPatch(
  root: Dir,
  from: readonly string[],
  to: readonly string[],
  emit: ((bytes: Uint8Array) => void) | null,
  maxPaths: number,
): StackPatchResult {
  using a = StackView.open(root, from);
  using b = StackView.open(root, to);
  const paths: PatchPath[] = [];
  let changed = 0, bytes = 0;
  for (const change of stackChanges(a, b)) {
    const out = writeFilePatch(change);
    checkIds(a, b, change, out.oldId, out.newId);
    if (emit !== null) emit(out.patch);
    bytes += out.patch.length;
    if (paths.length < maxPaths) paths.push({ path: change.path, status: out.status });
    changed++;
  }
  return { changed, paths, bytes };
}

/** Each side's blob id is the one its index records (a layer changed after its seal otherwise). */
function checkIds(
  a: StackView,
  b: StackView,
  change: FileChange,
  oldId: string | null,
  newId: string | null,
): void {
  for (const [view, id] of [[a, oldId], [b, newId]] as const) {
    if (id === null) continue;
    const recorded = blobIdAt(view.index.root, change.path);
    if (recorded !== id) {
      throw new ExportError(
        `${change.path} holds bytes whose blob id is ${id}, not the index's ${recorded}: its layer changed after it was sealed`,
      );
    }
  }
}

/** The blob id the index records at `path`, or `null`. */
function blobIdAt(root: IndexNode, path: string): string | null {
  let node: IndexNode | null = root;
  const parts = path.split("/");
  for (let p = 0; p < parts.length; p++) {
    if (node === null) return null;
    const name = parts[p] as string;
    let lo = 0, hi = node.names.length - 1, found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const c = compareNames(node.names[mid] as string, name);
      if (c === 0) {
        found = mid;
        break;
      }
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    if (found < 0) return null;
    if (p === parts.length - 1) return hexOf(node.oids.subarray(found * 20, found * 20 + 20));
    node = node.kids[found] ?? null;
  }
  return null;
}
