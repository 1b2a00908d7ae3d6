/**
 * `export-root` (docs/checkpoints.md, "Checkout and commit"): makes every
 * blob and tree of a sealed stack's root present in the project's Git object
 * store, writing only what Git lacks, without materialising a directory.
 *
 * The stack's index already names each file's blob id and each directory's
 * tree id (its root id is `git write-tree` of the view), so:
 *
 * 1. the whole index is checked against Git's admitted subset first (regular
 *    files, the executable bit, non-empty directories, symlinks whose target
 *    stays in the tree); anything else is {@linkcode UnsupportedGitExport}
 *    naming the path, and nothing is written;
 * 2. trees are written bottom-up, each after everything it names: a tree Git
 *    already has is taken with everything below it, as Git's own cache-tree
 *    takes a tree it finds (an object store holds what its trees name);
 * 3. each missing blob is streamed from the layer that shows it, hashed on
 *    the way and kept only when its id is the index's; each tree is rebuilt
 *    from the index's entries and kept only when its id is the index's.
 *
 * What a failure leaves is loose objects no ref names, which `git gc` prunes.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { deflateSync } from "node:zlib";
import { Zlib } from "fflate";
import type { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { dropTemp, writeObject } from "../git/object_export.ts";
import {
  blobHasher,
  compareTreeEntries,
  EMPTY_TREE_HEX,
  hexOf,
  objectHeader,
  treeBody,
  type TreeEntry,
} from "../git/tree_id.ts";
import {
  F_MODE,
  type IndexNode,
  isZero,
  KIND_DIR,
  KIND_SYMLINK,
  kindOf,
  nameBytes,
  STRIDE,
} from "../layers/layer_index.ts";
import type { RootExportedReply } from "../../protocol/splitfs_export.ts";
import { ExportError, UnsupportedGitExport } from "./export_errors.ts";
import { GitStore } from "./git_store.ts";
import { type Located, type StackDir, StackView } from "./stack_view.ts";
import { createHash } from "node:crypto";

/** What an export did. */
/** What an export did: the `root-exported` reply without its `v` and `t`. */
export type ExportRootResult = Omit<RootExportedReply, "v" | "t">;

/** Files up to this size are read whole; larger ones stream through a deflater. */
const WHOLE_MAX = 8 * 1024 * 1024;
const CHUNK = 1 << 20;
/** Git's loose-object level (`core.looseCompression` unset): best speed. */
const LEVEL = 1;

/**
 * Exports the root of `layers` (bottom first) of the project at `root` into
 * its Git object store; `rootId` must be the stack's.
 *
 * @throws {UnsupportedGitExport} for an entry outside the admitted subset (nothing written)
 * @throws {ExportError} for a missing or foreign repository, a stack whose root
 *   is not `rootId`, or a layer whose bytes are not what its index says
 * @throws {LayerError} for a stack that is not sealed and whole
 */
export function exportRoot(root: Dir, layers: readonly string[], rootId: string): ExportRootResult {
  using view = StackView.open(root, layers);
  const indexRoot = view.index.rootTree === null ? EMPTY_TREE_HEX : hexOf(view.index.rootTree);
  if (view.rootId !== rootId || indexRoot !== rootId) {
    throw new ExportError(
      `the stack ${
        layers.join(",")
      } shows root ${view.rootId} (index: ${indexRoot}), not ${rootId}`,
    );
  }
  const top = new LazyDir("", () => view.rootDir());
  try {
    checkSubset(view.index.root, "", top);
    using store = GitStore.open(root);
    const ctx: Ctx = { store, blobs: 0, trees: 0, bytes: 0, present: 0, written: new Set() };
    const oid = view.index.rootTree ?? emptyTreeOid();
    writeTree(ctx, view.index.root, oid, top);
    if (ctx.blobs + ctx.trees > 0) store.objects.syncFs();
    return {
      gitDir: store.location.gitDir,
      objectsDir: store.location.objectsDir,
      blobs: ctx.blobs,
      trees: ctx.trees,
      bytes: ctx.bytes,
      present: ctx.present,
    };
  } finally {
    top.close();
  }
}

function emptyTreeOid(): Uint8Array {
  return Uint8Array.from(EMPTY_TREE_HEX.match(/../g)!.map((h) => parseInt(h, 16)));
}

/**
 * A directory of the view, opened through the layers only when something
 * below it is read. The caller of {@linkcode LazyDir.child} closes the child.
 */
export class LazyDir implements Disposable {
  #dir: StackDir | null = null;

  constructor(readonly path: string, readonly open: () => StackDir) {}

  get(): StackDir {
    this.#dir ??= this.open();
    return this.#dir;
  }

  child(name: string): LazyDir {
    return new LazyDir(join(this.path, name), () => this.get().child(name));
  }

  close(): void {
    this.#dir?.close();
    this.#dir = null;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/** `dir/name`, or `name` at the root. */
export function join(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

/** The view's entry `name` of `dir`, or an error: the index names it. */
export function locate(dir: LazyDir, name: string): Located {
  const at = dir.get().locate(name);
  if (at === null) {
    throw new ExportError(
      `${join(dir.path, name)} is in the stack's index but in none of its layers`,
    );
  }
  return at;
}

/**
 * Refuses the first entry outside Git's admitted subset, in the index's
 * order: an empty directory (a directory with no file below it), a symlink
 * whose target is absolute, empty, or leaves the tree.
 */
function checkSubset(node: IndexNode, path: string, dir: LazyDir): void {
  for (let i = 0; i < node.names.length; i++) {
    const name = node.names[i] as string;
    const kind = kindOf(node.st[i * STRIDE + F_MODE] as number);
    const here = join(path, name);
    if (kind === KIND_DIR) {
      const kid = node.kids[i] as IndexNode;
      if (isZero(node.oids.subarray(i * 20, i * 20 + 20))) {
        throw new UnsupportedGitExport(
          emptyLeaf(kid, here),
          "empty-directory",
          "an empty directory; Git stores no empty directory (add a file to it, or remove it)",
        );
      }
      using child = dir.child(name);
      checkSubset(kid, here, child);
      continue;
    }
    if (kind !== KIND_SYMLINK) continue;
    const at = locate(dir, name);
    if (at.st.kind !== "symlink") throw special(here, at);
    symlinkProblem(here, new TextDecoder().decode(at.dir.readlink(name)));
  }
}

/** The first directory under `node` (at `path`) that has no entry at all. */
function emptyLeaf(node: IndexNode, path: string): string {
  let n = node, p = path;
  while (n.names.length > 0) {
    p = join(p, n.names[0] as string);
    n = n.kids[0] as IndexNode;
  }
  return p;
}

/** Refuses a symlink at `path` (in the tree) whose `target` is not a path inside the tree. */
export function symlinkProblem(path: string, target: string): void {
  if (target === "") {
    throw new UnsupportedGitExport(path, "escaping-symlink", "a symlink with an empty target");
  }
  if (target.startsWith("/")) {
    throw new UnsupportedGitExport(
      path,
      "absolute-symlink",
      `a symlink to the absolute path ${
        JSON.stringify(target)
      }; only targets inside the tree are exported`,
    );
  }
  const parts = path.split("/").slice(0, -1);
  for (const seg of target.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg !== "..") {
      parts.push(seg);
      continue;
    }
    if (parts.length === 0) {
      throw new UnsupportedGitExport(
        path,
        "escaping-symlink",
        `a symlink to ${JSON.stringify(target)}, which leaves the tree`,
      );
    }
    parts.pop();
  }
}

function special(path: string, at: Located): UnsupportedGitExport {
  return new UnsupportedGitExport(
    path,
    "special-file",
    `a ${at.st.kind} where the index has a ${at.st.kind === "dir" ? "file" : "file or symlink"}; ` +
      "Git stores regular files and symlinks only",
  );
}

interface Ctx {
  readonly store: GitStore;
  blobs: number;
  trees: number;
  bytes: number;
  present: number;
  /** Ids written by this export (a blob at two paths is written once). */
  readonly written: Set<string>;
}

/** Makes tree `oid` (the index's `node`, at `dir`) present, everything it names first. */
function writeTree(ctx: Ctx, node: IndexNode, oid: Uint8Array, dir: LazyDir): void {
  const hex = hexOf(oid);
  if (ctx.written.has(hex)) return;
  if (ctx.store.has(hex, oid)) {
    ctx.present++;
    return;
  }
  const entries: TreeEntry[] = [];
  for (let i = 0; i < node.names.length; i++) {
    const name = node.names[i] as string;
    const mode = node.st[i * STRIDE + F_MODE] as number;
    const kind = kindOf(mode);
    const koid = node.oids.slice(i * 20, i * 20 + 20);
    if (kind === KIND_DIR) {
      using child = dir.child(name);
      writeTree(ctx, node.kids[i] as IndexNode, koid, child);
      entries.push({ name: nameBytes(name), mode: "40000", oid: koid });
      continue;
    }
    const khex = hexOf(koid);
    if (!ctx.written.has(khex)) {
      if (ctx.store.has(khex, koid)) ctx.present++;
      else writeBlob(ctx, khex, dir, name, kind === KIND_SYMLINK);
    }
    entries.push({
      name: nameBytes(name),
      mode: kind === KIND_SYMLINK ? "120000" : (mode & 0o100) !== 0 ? "100755" : "100644",
      oid: koid,
    });
  }
  const body = treeBody(entries.sort(compareTreeEntries));
  const header = objectHeader("tree", body.length);
  const raw = new Uint8Array(header.length + body.length);
  raw.set(header);
  raw.set(body, header.length);
  const actual = createHash("sha1").update(raw).digest("hex");
  if (actual !== hex) {
    throw new ExportError(
      `the index's tree ${dir.path || "(root)"} hashes to ${actual}, not its recorded ${hex}`,
    );
  }
  writeObject(
    ctx.store.fanOf(hex),
    hex.slice(2),
    deflateSync(raw, { level: LEVEL }),
    ctx.store.fix,
  );
  ctx.written.add(hex);
  ctx.trees++;
}

/** Streams blob `hex` from the view's entry `name` of `dir` into the store, checking its id. */
function writeBlob(ctx: Ctx, hex: string, dir: LazyDir, name: string, symlink: boolean): void {
  const path = join(dir.path, name);
  const at = locate(dir, name);
  if (at.st.kind !== (symlink ? "symlink" : "file")) throw special(path, at);
  const fan = ctx.store.fanOf(hex);
  if (symlink) {
    const target = at.dir.readlink(name);
    writeWhole(ctx, fan, hex, target, path);
    return;
  }
  using file = at.dir.openFile(name);
  const size = file.stat().size;
  if (size <= WHOLE_MAX) {
    writeWhole(ctx, fan, hex, file.readAll(WHOLE_MAX), path);
    return;
  }
  streamBlob(ctx, fan, hex, file, size, path);
}

function mismatch(path: string, hex: string, actual: string): ExportError {
  return new ExportError(
    `${path} holds bytes whose blob id is ${actual}, not the index's ${hex}: its layer changed after it was sealed`,
  );
}

function writeWhole(ctx: Ctx, fan: Dir, hex: string, bytes: Uint8Array, path: string): void {
  const header = objectHeader("blob", bytes.length);
  const raw = new Uint8Array(header.length + bytes.length);
  raw.set(header);
  raw.set(bytes, header.length);
  const actual = createHash("sha1").update(raw).digest("hex");
  if (actual !== hex) throw mismatch(path, hex, actual);
  writeObject(fan, hex.slice(2), deflateSync(raw, { level: LEVEL }), ctx.store.fix);
  ctx.written.add(hex);
  ctx.blobs++;
  ctx.bytes += bytes.length;
}

/** A large blob: read, hashed and deflated one chunk at a time into a temporary object. */
function streamBlob(
  ctx: Ctx,
  fan: Dir,
  hex: string,
  file: { read(buf: Uint8Array): number },
  size: number,
  path: string,
): void {
  const tmp = `tmp_obj_marsh_${crypto.randomUUID().slice(0, 8)}`;
  const hasher = blobHasher(size);
  try {
    {
      using out = fan.createFile(tmp, 0o444);
      const z = new Zlib({ level: LEVEL });
      z.ondata = (chunk) => out.writeAll(chunk);
      z.push(objectHeader("blob", size), false);
      const buf = new Uint8Array(CHUNK);
      let total = 0;
      for (let n = file.read(buf); n > 0; n = file.read(buf)) {
        const piece = buf.subarray(0, n);
        hasher.update(piece);
        z.push(piece, false);
        total += n;
        if (total > size) break;
      }
      z.push(new Uint8Array(0), true);
      if (total !== size) {
        throw new ExportError(`${path} changed size while it was read (${total}, not ${size})`);
      }
      const actual = hasher.digest("hex");
      if (actual !== hex) throw mismatch(path, hex, actual);
      out.chmod(0o444);
      ctx.store.fix(out.fd, out.stat().uid, out.path);
    }
  } catch (error) {
    dropTemp(fan, tmp, error);
    throw error;
  }
  try {
    fan.rename(tmp, fan, hex.slice(2));
  } catch (error) {
    dropTemp(fan, tmp, error);
    if (!(error instanceof FsError && error.errno === E.EEXIST)) throw error;
  }
  ctx.written.add(hex);
  ctx.blobs++;
  ctx.bytes += size;
}
