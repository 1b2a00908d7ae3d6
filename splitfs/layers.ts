/**
 * The layered snapshot store: a project's snapshots as overlayfs lower
 * layers under `<root>/.marsh/layers/`, so a split's base is a stack of
 * read-only layers and a fork is an overlay mount over it.
 *
 * Each layer is a directory `layers/<id>/`:
 *
 * - `data/`: the overlay lower dir. Files keep their bytes, `perm & 0o777`
 *   and mtime; directories get the live tree's permission bits (the topmost
 *   layer's win); symlinks keep their target and mtime; a deletion is a
 *   whiteout (a 0/0 character device). No opaque-directory xattrs: a
 *   directory that lost children gets one whiteout per child, a file
 *   replaced by a directory is simply the directory (overlay ignores a lower
 *   non-directory under a directory), a directory replaced by a file is the
 *   file.
 * - `index`: the live tree's stat index at this snapshot (see
 *   {@linkcode LayerIndex}), so the next snapshot reads only changed files.
 * - `stat`: the stat records of `data/` at seal time (see `layer_seal.ts`).
 * - `meta.json`: id, parent, depth, chain, root id, creation time, counts,
 *   and the SHA-256 of the index and of `stat`.
 * - `SEALED`: `sha256 <hex of meta.json>`, written last and fsynced; a layer
 *   without it, or whose `meta.json` does not match it, is never trusted.
 *   (`index`, `meta.json` and `SEALED` are fsynced; the data files are left
 *   to writeback, since an fsync per file would cost more than the copy.)
 *
 * Nothing in a sealed layer is ever modified by marsh, and a snapshot reuses
 * a stack only after checking each layer's data against its `stat` records
 * (`layer_seal.ts`); the files marsh writes there are `0o444`. `layers/<id>`
 * itself stays `0o755`: its mode protects nothing the seal does not (the
 * owner could `chmod` it), and the owner can `rm -rf .marsh` without one
 * (docs/guide.md "Snapshot layers and marsh gc"). A chain's head,
 * `layers/<chain>.head`, names its top layer and is replaced atomically; the
 * stack is found by following `parent`.
 *
 * A later snapshot reads about as little as `git status` does:
 *
 * - an entry whose live stat (kind, bits, size, mtime, ctime, inode) equals
 *   the recorded one is unchanged and not read, unless its mtime or ctime is
 *   at or after the previous snapshot's start, taken as a file-system
 *   timestamp (the ctime of a probe file): such racy entries are re-read and
 *   compared by Git blob id;
 * - a directory whose stat is unchanged (and not racy) still has the same
 *   names, so it is not listed again;
 * - ignore rules are tested only for names the previous index lacks (or
 *   whose directory-ness changed). Every entry below a directory is tested
 *   again when that directory's or an ancestor's `.gitignore` was added,
 *   removed or edited, and every entry when the tree-wide inputs changed
 *   (`ignoreKey`): a verdict depends on nothing else.
 *
 * The root id is the Git tree id of the merged view; each directory's tree
 * id is kept in the index and recomputed only on changed paths.
 *
 * One writer per store: snapshots and {@linkcode LayerStore.collect} of one
 * project must not run in two processes at once (the splitfs service is the
 * only writer).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import {
  compareNames,
  type Dir,
  type FileHandle,
  type InvalidEntry,
  type Stat,
  SymlinkRefusedError,
  WrongKindError,
} from "./dir.ts";
import { SnapshotError } from "./errors.ts";
import { E, FsError } from "./ffi.ts";
import type { IgnoreInputs } from "./ignore_load.ts";
import type { IgnoreScope } from "./ignore_rules.ts";
import {
  decodeIndex,
  encodeIndex,
  F_CNSEC,
  F_CSEC,
  F_INOHI,
  F_INOLO,
  F_LMNSEC,
  F_LMSEC,
  F_MNSEC,
  F_MODE,
  F_MSEC,
  F_SIZE,
  IndexCache,
  IndexNode,
  isZero,
  KIND_DIR,
  KIND_FILE,
  KIND_SYMLINK,
  kindOf,
  type LayerIndex,
  nameBytes,
  NO_OID,
  statIndexOf,
  STRIDE,
} from "./layer_index.ts";
import {
  CHAIN,
  checkData,
  DATA,
  LAYER_ID,
  LayerError,
  type LayerMeta,
  MAX_META_BYTES,
  META,
  parseMeta,
  readSealedMeta,
  recordData,
  SEALED,
  sealOf,
  sha256Hex,
} from "./layer_seal.ts";
import { LAYERS_DIR, TRASH_DIR } from "../model/layout.ts";
import { MountPointError } from "./mount_boundary.ts";
import { passInvalid } from "./non_utf8.ts";
import type { StatIndex } from "./old_tree.ts";
import {
  COPY_ATTEMPTS,
  GITIGNORE,
  isGitName,
  type Progress,
  readGitignore,
  type SnapshotStats,
} from "./snapshot.ts";
import { blobHasher, blobId, EMPTY_TREE_HEX, hexOf, type TreeEntry, treeId } from "./tree_id.ts";

/** How to take one layered snapshot. */
export interface LayerSnapshotOptions {
  /** The live tree: the project root, or a fork for a nested split. Borrowed. */
  readonly source: Dir;
  /** The root ignore scope, or `null` to admit ignored entries (non-Git project, `--with-ignored`). */
  readonly ignore: IgnoreScope | null;
  /**
   * Identifies the tree-wide inputs `ignore` was built from (see
   * {@linkcode ignoreKeyOf}). Entries recorded by the previous snapshot are
   * not re-tested against the rules unless this key or a `.gitignore` above
   * them changed; without a key every entry is re-tested every time.
   */
  readonly ignoreKey?: string;
  /** Top-level names never admitted (`.marsh`). */
  readonly skipTop: ReadonlySet<string>;
  /** The chain (`tracked`, `with-ignored`): each has its own head and stack. */
  readonly chain: string;
  readonly progress?: Progress;
  /** The deepest stack a chain may reach before a snapshot rebases onto a full copy. Default 32. */
  readonly maxDepth?: number;
}

/** What a layered snapshot took. */
export interface SnapshotCounts extends SnapshotStats {
  /** Whether this snapshot copied the whole tree into a new bottom layer. */
  readonly full: boolean;
  /** Files and symlinks written into the new layer (0 when no layer was made). */
  readonly copied: number;
  readonly whiteouts: number;
  /** Files and symlinks whose recorded stat matched, so they were not read. */
  readonly reused: number;
}

/** A snapshot as a layer stack. */
export interface LayerSnapshot {
  /** Layer ids, bottom first: the split's base stack. */
  readonly layers: readonly string[];
  /** The Git tree id (40 hex digits) of the merged view, as `git write-tree` computes it. */
  readonly rootId: string;
  /**
   * The merged view's stats as the layer files hold them (what an overlay
   * mount of the stack shows): capture's old side. Shared: read-only.
   */
  readonly index: StatIndex;
  /**
   * `files`, `dirs`, `symlinks` and `bytes` describe the merged view; the
   * `pruned*` counts cover the entries this walk tested (a directory whose
   * listing was unchanged is not re-listed).
   */
  readonly stats: SnapshotCounts;
  /**
   * Why the chain's previous stack was not reused (a layer missing,
   * unsealed, or changed since its seal: see `layer_seal.ts`), so this
   * snapshot started a fresh chain; `null` otherwise.
   */
  readonly untrusted: string | null;
  /** The `.gitignore` files the rules read but left out, by directory (see `takeSnapshot`). */
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

/** One sealed layer, from its `meta.json`. */
export type LayerInfo = Pick<
  LayerMeta,
  "id" | "parent" | "depth" | "chain" | "rootId" | "created" | "bytes" | "files"
>;

export { DATA, LAYER_ID, LayerError, SEALED };
const HEAD_SUFFIX = ".head";
const INDEX = "index";
const SPILL = ".spill";
const EMPTY_DIR = ".empty";
const TRASH_PREFIX = "layer-";
const DEFAULT_MAX_DEPTH = 32;
/** Files up to this size are read into memory once, hashed, and written from memory. */
const IN_MEMORY_LIMIT = 64 * 1024 * 1024;
const CHUNK = 1 << 20;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** Parsed indexes of recent layers, shared by every store in the process (the service is long-lived). */
const cache = new IndexCache(4);

/**
 * Forgets every parsed index kept in memory (memory pressure, tests): the
 * next snapshot of each chain reads its head's index file again.
 */
export function releaseIndexCache(): void {
  cache.clear();
}

/**
 * A key for the tree-wide ignore inputs (global excludes, `info/exclude`,
 * case folding), or for "no rules" when `inputs` is `null`.
 */
export function ignoreKeyOf(inputs: IgnoreInputs | null): string {
  if (inputs === null) return "none";
  const h = createHash("sha256");
  for (const bytes of [inputs.globalExcludes, inputs.infoExclude]) {
    h.update(bytes === null ? "-" : `${bytes.length}:`);
    if (bytes) h.update(bytes);
  }
  h.update(inputs.ignoreCase ? "i" : "c");
  return `rules:${h.digest("hex")}`;
}

function isErrno(error: unknown, errno: number): boolean {
  return error instanceof FsError && error.errno === errno;
}

function newId(): string {
  const rnd = new Uint8Array(8);
  crypto.getRandomValues(rnd);
  let tail = "";
  for (const b of rnd) tail += (b % 36).toString(36);
  return Date.now().toString(36).padStart(9, "0") + tail.slice(0, 7);
}

/** Writes a new file with `data`, fsyncs it, and leaves it read-only. */
function writeDurable(dir: Dir, name: string, data: Uint8Array, mode = 0o444): void {
  using f = dir.createFile(name, 0o600);
  f.writeAll(data);
  f.chmod(mode);
  f.sync();
}

/**
 * The layer store of one project. Holds descriptors for `.marsh` and
 * `.marsh/layers`; close it (or `using`) when done.
 */
export class LayerStore implements Disposable {
  readonly #marsh: Dir;
  readonly #layers: Dir;
  /** Identifies this store's directory in the process-wide index cache. */
  readonly #key: string;

  private constructor(marsh: Dir, layers: Dir) {
    this.#marsh = marsh;
    this.#layers = layers;
    const st = layers.stat();
    this.#key = `${st.dev}:${st.ino}`;
  }

  /**
   * Opens the store in `marsh` (the open `<root>/.marsh`, borrowed), creating
   * `layers/` (`0o755`) when missing.
   *
   * @throws {SymlinkRefusedError} when `layers` is a symlink
   */
  static open(marsh: Dir): LayerStore {
    const own = marsh.dup();
    try {
      return new LayerStore(own, own.ensureDir(LAYERS_DIR, 0o755));
    } catch (error) {
      own.close();
      throw error;
    }
  }

  /**
   * Takes a snapshot of `opts.source` on `opts.chain`.
   *
   * The first snapshot of a chain copies the whole admitted tree into a new
   * bottom layer; so does one whose head is missing or unsealed, and one
   * whose change would push the stack past `maxDepth` (compaction by
   * rebase: the new full layer replaces the stack as the chain's head, and
   * the old layers stay until {@linkcode LayerStore.collect} finds them
   * unreferenced). Later snapshots compare the live tree with the head's
   * index and write only changed entries and whiteouts into a new layer on
   * top; when nothing changed, no layer is made and the head's stack is
   * returned.
   *
   * Admission is `takeSnapshot`'s: `.git` look-alikes at any depth, FIFOs,
   * sockets and devices, ignored paths and `skipTop` names stay out.
   *
   * @throws {SnapshotError} `file kept changing: <path>` when a file changed during every copy attempt
   * @throws {FsError} when the source or the store cannot be read or written
   */
  snapshot(opts: LayerSnapshotOptions): LayerSnapshot {
    if (!CHAIN.test(opts.chain)) throw new TypeError(`invalid chain name: "${opts.chain}"`);
    const maxDepth = opts.maxDepth ?? DEFAULT_MAX_DEPTH;
    if (!Number.isSafeInteger(maxDepth) || maxDepth < 1) {
      throw new RangeError(`invalid maxDepth: ${maxDepth}`);
    }
    const start = this.#probeTime();
    const ignoreKey = opts.ignore === null ? "none" : opts.ignoreKey ?? null;
    const head = this.#loadHead(opts.chain);
    let untrusted = head.problem;
    const prev = head.stack;
    if (prev !== null) {
      const walk = this.#walk(opts, prev.index, ignoreKey, start);
      const reuse = walk.layer === null || prev.top.depth < maxDepth;
      // Checked after the walk: as close as possible to the mount that stacks it.
      untrusted = reuse ? this.#checkData(prev.metas) : null;
      if (reuse && untrusted === null) {
        if (walk.layer === null) {
          // Nothing to write. The refreshed stats (files touched but not changed)
          // are worth keeping, in memory only: the layer's own index is sealed.
          cache.set(this.#cacheKey(prev.top.id), walk.index);
          return new Snapshot(prev.ids, prev.top.rootId, walk, null);
        }
        const meta = this.#seal(walk.layer, walk, opts.chain, prev.top, false);
        return new Snapshot([...prev.ids, meta.id], meta.rootId, walk, null);
      }
      if (walk.layer !== null) this.#layers.removeTree(walk.layer);
    }
    const walk = this.#walk(opts, null, ignoreKey, start);
    const meta = this.#seal(walk.layer as string, walk, opts.chain, null, true);
    return new Snapshot([meta.id], meta.rootId, walk, untrusted);
  }

  /**
   * Checks the data of `chain`'s head stack against its seals, as a
   * snapshot does before it reuses the stack.
   *
   * @returns `null` when there is no head or every layer is intact, else
   *   why the next snapshot will not reuse it
   */
  checkHead(chain: string): string | null {
    const head = this.#loadHead(chain);
    return head.stack === null ? head.problem : this.#checkData(head.stack.metas);
  }

  /**
   * A sealed layer's data directory, for an overlay `lowerdir`. The caller
   * closes it.
   *
   * @throws {LayerError} when the layer is missing, unsealed, or does not match its seal
   */
  openData(id: string): Dir {
    using wrapper = this.#openWrapper(id);
    this.#verify(id, wrapper);
    return wrapper.openDir(DATA);
  }

  /**
   * An always-empty directory (`layers/.empty`, `0o555`): overlay needs two
   * lower dirs when it has no upper, so a one-layer base stacks this below
   * its layer. The caller closes it.
   */
  emptyLayer(): Dir {
    for (let attempt = 0; attempt < 2; attempt++) {
      let made = false;
      try {
        this.#layers.mkdir(EMPTY_DIR, 0o555);
        made = true;
      } catch (error) {
        if (!isErrno(error, E.EEXIST)) throw error;
      }
      const dir = this.#layers.openDir(EMPTY_DIR);
      if (made) dir.chmod(0o555);
      if (dir.entries().length === 0 && (dir.stat().perm & 0o7777) === 0o555) return dir;
      // Something was put there: it is no longer the empty layer.
      dir.close();
      this.#discard(EMPTY_DIR);
    }
    throw new LayerError(EMPTY_DIR, "cannot be made empty");
  }

  /** Every sealed layer, oldest first. Unsealed or malformed directories are left out. */
  list(): LayerInfo[] {
    const out: LayerInfo[] = [];
    for (const e of this.#layers.entries()) {
      if (!LAYER_ID.test(e.name)) continue;
      const meta = this.#tryVerify(e.name);
      if (meta === null) continue;
      out.push({
        id: meta.id,
        parent: meta.parent,
        depth: meta.depth,
        chain: meta.chain,
        rootId: meta.rootId,
        created: meta.created,
        bytes: meta.bytes,
        files: meta.files,
      });
    }
    return out.sort((a, b) => compareNames(a.id, b.id));
  }

  /** Each chain's current stack, bottom first. A head whose stack is broken is left out. */
  heads(): ReadonlyMap<string, readonly string[]> {
    const out = new Map<string, readonly string[]>();
    for (const e of this.#layers.entries()) {
      if (!e.name.endsWith(HEAD_SUFFIX)) continue;
      const chain = e.name.slice(0, -HEAD_SUFFIX.length);
      if (!CHAIN.test(chain)) continue;
      const top = this.#readHead(chain);
      if (top === null) continue;
      try {
        out.set(chain, this.#stack(top).map((m) => m.id));
      } catch (error) {
        if (!(error instanceof LayerError)) throw error;
      }
    }
    return out;
  }

  /**
   * Deletes every layer that is not in `referenced`, not below a referenced
   * layer, and not in a chain head's stack; unsealed leftovers of a crash go
   * too. Each is unsealed first, then renamed into `.marsh/.trash` and
   * removed there, so a crash never leaves a half-deleted layer that looks
   * valid. A dry run deletes nothing and reports the same. With `heads`
   * false (`marsh gc --all`), the chain heads' stacks go too; the head
   * files stay for the caller.
   *
   * @returns the removed ids (sorted) and the bytes of their files
   */
  collect(
    referenced: ReadonlySet<string>,
    dryRun: boolean,
    heads = true,
  ): { removed: string[]; bytes: number } {
    const keep = new Set<string>();
    const keepStack = (top: string) => {
      // Follow parents without trusting seals: keeping too much is the safe side.
      for (let id: string | null = top; id !== null && !keep.has(id);) {
        keep.add(id);
        id = this.#readMetaLoosely(id)?.parent ?? null;
      }
    };
    for (const id of referenced) if (LAYER_ID.test(id)) keepStack(id);
    for (const e of heads ? this.#layers.entries() : []) {
      if (!e.name.endsWith(HEAD_SUFFIX)) continue;
      const chain = e.name.slice(0, -HEAD_SUFFIX.length);
      const top = CHAIN.test(chain) ? this.#readHead(chain) : null;
      if (top !== null) keepStack(top);
    }
    const removed: string[] = [];
    let bytes = 0;
    for (const e of this.#layers.entries()) {
      if (!LAYER_ID.test(e.name) || keep.has(e.name)) continue;
      removed.push(e.name);
      bytes += this.#tryVerify(e.name)?.bytes ?? this.#looseBytes(e.name);
    }
    removed.sort(compareNames);
    if (!dryRun) {
      // A layer with a mount in it stays (docs/engine.md "Removal"); the rest still go.
      const stuck: MountPointError[] = [];
      const guarded = (remove: () => void) => {
        try {
          remove();
        } catch (error) {
          if (!(error instanceof MountPointError)) throw error;
          stuck.push(error);
        }
      };
      for (const id of removed) {
        cache.delete(this.#cacheKey(id));
        guarded(() => this.#discard(id));
      }
      this.#sweepLeftovers(guarded);
      if (stuck.length > 0) {
        // The sweep meets a layer the loop above just moved into the trash again.
        throw new MountPointError(
          [...new Set(stuck.map((e) => e.tree))].join(", "),
          [...new Set(stuck.flatMap((e) => e.mountPoints))],
          "marsh gc",
        );
      }
    }
    return { removed, bytes };
  }

  /** Closes the store's descriptors; a second call does nothing. */
  close(): void {
    this.#layers.close();
    this.#marsh.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }

  // -------------------------------------------------------------------------
  // Heads, stacks and seals

  #cacheKey(id: string): string {
    return `${this.#key}:${id}`;
  }

  #readHead(chain: string): string | null {
    const bytes = this.#layers.readFileIfExists(chain + HEAD_SUFFIX, 256);
    if (bytes === null) return null;
    const id = dec.decode(bytes).trim();
    return LAYER_ID.test(id) ? id : null;
  }

  #writeHead(chain: string, id: string): void {
    const tmp = `.${chain}${HEAD_SUFFIX}.${newId()}.tmp`;
    writeDurable(this.#layers, tmp, enc.encode(`${id}\n`), 0o644);
    this.#layers.renameReplacing(tmp, this.#layers, chain + HEAD_SUFFIX);
  }

  /**
   * The head's stack with its top's index; `stack` is `null` when the chain
   * must be rebuilt from scratch, and `problem` then says why (`null` for a
   * chain without a head).
   */
  #loadHead(chain: string): {
    stack: { ids: string[]; metas: LayerMeta[]; top: LayerMeta; index: LayerIndex } | null;
    problem: string | null;
  } {
    const top = this.#readHead(chain);
    if (top === null) return { stack: null, problem: null };
    try {
      const metas = this.#stack(top);
      const topMeta = metas[metas.length - 1] as LayerMeta;
      const other = metas.find((m) => m.chain !== chain);
      if (other) {
        return { stack: null, problem: `layer "${other.id}" belongs to chain ${other.chain}` };
      }
      const index = this.#loadIndex(topMeta);
      return { stack: { ids: metas.map((m) => m.id), metas, top: topMeta, index }, problem: null };
    } catch (error) {
      // A head we cannot trust is replaced by a full copy, never patched.
      if (error instanceof LayerError) return { stack: null, problem: error.message };
      throw error;
    }
  }

  /** The first layer whose data no longer matches its seal, as a message; `null` when none. */
  #checkData(metas: readonly LayerMeta[]): string | null {
    for (const meta of metas) {
      try {
        using wrapper = this.#openWrapper(meta.id);
        const problem = checkData(wrapper, meta);
        if (problem !== null) return new LayerError(meta.id, problem).message;
      } catch (error) {
        // Gone since the head was read (another process's gc): not a base either.
        if (error instanceof LayerError) return error.message;
        throw error;
      }
    }
    return null;
  }

  /** Verified metas from the bottom layer up to `top`. @throws {LayerError} */
  #stack(top: string): LayerMeta[] {
    const metas: LayerMeta[] = [];
    let id: string | null = top;
    while (id !== null) {
      using wrapper = this.#openWrapper(id);
      const meta = this.#verify(id, wrapper);
      const above = metas[metas.length - 1];
      if (above && above.depth !== meta.depth + 1) {
        throw new LayerError(above.id, `has depth ${above.depth} above depth ${meta.depth}`);
      }
      if ((meta.parent === null) !== (meta.depth === 1)) {
        throw new LayerError(id, `has depth ${meta.depth} and parent ${meta.parent}`);
      }
      metas.push(meta);
      id = meta.parent;
    }
    return metas.reverse();
  }

  #loadIndex(meta: LayerMeta): LayerIndex {
    const key = this.#cacheKey(meta.id);
    const hit = cache.get(key);
    if (hit) return hit;
    using wrapper = this.#openWrapper(meta.id);
    const bytes = wrapper.readFileIfExists(INDEX, meta.index.size);
    if (
      bytes === null || bytes.length !== meta.index.size || sha256Hex(bytes) !== meta.index.sha256
    ) {
      throw new LayerError(meta.id, "has an index that does not match its meta.json");
    }
    let ix: LayerIndex;
    try {
      ix = decodeIndex(bytes);
    } catch (cause) {
      throw new LayerError(meta.id, "has a malformed index", { cause });
    }
    cache.set(key, ix);
    return ix;
  }

  #openWrapper(id: string): Dir {
    if (!LAYER_ID.test(id)) throw new LayerError(id, "is not a layer id");
    try {
      return this.#layers.openDir(id);
    } catch (error) {
      if (isErrno(error, E.ENOENT)) throw new LayerError(id, "is missing", { cause: error });
      if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
        throw new LayerError(id, "is not a directory", { cause: error });
      }
      throw error;
    }
  }

  /** The layer's meta after checking its seal. @throws {LayerError} */
  #verify(id: string, wrapper: Dir): LayerMeta {
    return readSealedMeta(id, wrapper);
  }

  #tryVerify(id: string): LayerMeta | null {
    try {
      using wrapper = this.#openWrapper(id);
      return this.#verify(id, wrapper);
    } catch (error) {
      if (error instanceof LayerError) return null;
      throw error;
    }
  }

  #readMetaLoosely(id: string): LayerMeta | null {
    try {
      using wrapper = this.#openWrapper(id);
      const bytes = wrapper.readFileIfExists(META, MAX_META_BYTES);
      return bytes === null ? null : parseMeta(bytes);
    } catch (error) {
      if (error instanceof LayerError) return null;
      throw error;
    }
  }

  /** Bytes of the regular files under an unsealed layer (its meta cannot be trusted). */
  #looseBytes(id: string): number {
    const sum = (dir: Dir): number => {
      let n = 0;
      for (const e of dir.entries()) {
        const st = dir.statAt(e.name);
        if (st?.kind === "file") n += st.size;
        else if (st?.kind === "dir") {
          using child = dir.openDir(e.name);
          n += sum(child);
        }
      }
      return n;
    };
    try {
      using wrapper = this.#layers.openDir(id);
      if (wrapper.statAt(DATA)?.kind !== "dir") return 0;
      using data = wrapper.openDir(DATA);
      return sum(data);
    } catch (error) {
      if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) return 0;
      throw error;
    }
  }

  /** Unseals, renames into `.marsh/.trash`, then removes there. */
  #discard(name: string): void {
    if (this.#layers.statAt(name)?.kind === "dir") {
      using wrapper = this.#layers.openDir(name);
      wrapper.chmod(0o755);
      if (wrapper.statAt(SEALED) !== null) wrapper.unlink(SEALED);
    }
    using trash = this.#marsh.ensureDir(TRASH_DIR, 0o700);
    const moved = `${TRASH_PREFIX}${name.replace(/^\./, "")}-${newId()}`;
    this.#layers.rename(name, trash, moved);
    trash.removeTree(moved);
  }

  /** Probe files, head temp files and trashed layers a crash left behind; each removal runs in `guarded`. */
  #sweepLeftovers(guarded: (remove: () => void) => void): void {
    for (const e of this.#layers.entries()) {
      if (e.name.startsWith(".probe-") || (e.name.startsWith(".") && e.name.endsWith(".tmp"))) {
        guarded(() => this.#layers.removeTree(e.name));
      }
    }
    if (this.#marsh.statAt(TRASH_DIR)?.kind !== "dir") return;
    using trash = this.#marsh.openDir(TRASH_DIR);
    for (const e of trash.entries()) {
      if (e.name.startsWith(TRASH_PREFIX)) guarded(() => trash.removeTree(e.name));
    }
  }

  /**
   * The file system's clock now: the ctime of a probe file. Entries touched
   * at or after it are racy for the next snapshot.
   */
  #probeTime(): { sec: number; nsec: number } {
    const name = `.probe-${newId()}`;
    let st: Stat;
    {
      using f = this.#layers.createFile(name, 0o600);
      st = f.stat();
    }
    this.#layers.unlink(name);
    return { sec: st.ctimeSec, nsec: st.ctimeNsec };
  }

  #walk(
    opts: LayerSnapshotOptions,
    prev: LayerIndex | null,
    ignoreKey: string | null,
    start: { sec: number; nsec: number },
  ): WalkResult {
    for (;;) {
      const id = newId();
      if (this.#layers.statAt(id) !== null) continue;
      const out = new LayerOut(this.#layers, id);
      try {
        return walkTree(opts, prev, ignoreKey, start, out);
      } catch (error) {
        out.discard();
        throw error;
      }
    }
  }

  /** Writes the index, meta and seal of a filled layer, then moves the chain's head. */
  #seal(
    id: string,
    walk: WalkResult,
    chain: string,
    parent: LayerMeta | null,
    full: boolean,
  ): LayerMeta {
    try {
      using wrapper = this.#layers.openDir(id);
      // Recorded after the data's last write (the walk set its directories' bits).
      const data = recordData(wrapper);
      const indexBytes = encodeIndex(walk.index);
      writeDurable(wrapper, INDEX, indexBytes);
      const meta: LayerMeta = {
        version: 2,
        id,
        parent: parent?.id ?? null,
        depth: parent ? parent.depth + 1 : 1,
        chain,
        rootId: walk.rootId,
        created: Date.now(),
        full,
        files: walk.written.files,
        dirs: walk.written.dirs,
        symlinks: walk.written.symlinks,
        whiteouts: walk.written.whiteouts,
        bytes: walk.written.bytes,
        index: { sha256: sha256Hex(indexBytes), size: indexBytes.length },
        data,
      };
      const metaBytes = enc.encode(JSON.stringify(meta, null, 2) + "\n");
      writeDurable(wrapper, META, metaBytes);
      // The data files are not synced one by one: one syncfs before the seal
      // makes a sealed layer's bytes durable (a torn file would poison every
      // later snapshot that trusts the index).
      wrapper.syncFs();
      writeDurable(wrapper, SEALED, enc.encode(sealOf(metaBytes)));
      // Readable by all, as the data is; writable by the owner (see the module's doc).
      wrapper.chmod(0o755);
      cache.set(this.#cacheKey(id), walk.index);
      this.#writeHead(chain, id);
      return meta;
    } catch (error) {
      this.#layers.removeTree(id);
      throw error;
    }
  }
}

class Snapshot implements LayerSnapshot {
  readonly #ix: LayerIndex;
  readonly stats: SnapshotCounts;
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
  constructor(
    readonly layers: readonly string[],
    readonly rootId: string,
    walk: WalkResult,
    readonly untrusted: string | null,
  ) {
    this.#ix = walk.index;
    this.stats = walk.stats;
    this.prunedIgnores = walk.prunedIgnores;
  }
  get index(): StatIndex {
    return statIndexOf(this.#ix);
  }
}

// ---------------------------------------------------------------------------
// The walk

/** What the new layer holds. */
interface Written {
  files: number;
  dirs: number;
  symlinks: number;
  whiteouts: number;
  bytes: number;
}

interface WalkResult {
  /** The new layer's id, or `null` when nothing had to be written. */
  readonly layer: string | null;
  readonly index: LayerIndex;
  readonly rootId: string;
  readonly stats: SnapshotCounts;
  readonly written: Written;
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

interface Counts extends SnapshotStats {
  full: boolean;
  copied: number;
  whiteouts: number;
  reused: number;
}

interface Ctx {
  readonly source: Dir;
  readonly skipTop: ReadonlySet<string>;
  /** Re-test every entry against the rules (the tree-wide inputs changed or are unknown). */
  readonly evalAll: boolean;
  /** The previous snapshot's start: entries touched at or after it are re-read. */
  readonly racySec: number;
  readonly racyNsec: number;
  readonly out: LayerOut;
  readonly stats: Counts;
  readonly written: Written;
  readonly progress: Progress | undefined;
  /** `.gitignore` files read but not admitted, by directory (see `takeSnapshot`). */
  readonly prunedIgnores: Map<string, Uint8Array>;
}

/** The new layer's wrapper directory, made on the first write. */
class LayerOut {
  readonly #layers: Dir;
  readonly id: string;
  #wrapper: Dir | null = null;
  created = false;

  constructor(layers: Dir, id: string) {
    this.#layers = layers;
    this.id = id;
  }

  wrapper(): Dir {
    if (this.#wrapper === null) {
      this.#layers.mkdir(this.id, 0o700);
      this.created = true;
      this.#wrapper = this.#layers.openDir(this.id);
    }
    return this.#wrapper;
  }

  close(): void {
    this.#wrapper?.close();
    this.#wrapper = null;
  }

  /** Removes the unsealed layer directory, if it was made. */
  discard(): void {
    this.close();
    if (this.created) this.#layers.removeTree(this.id);
    this.created = false;
  }
}

/**
 * A directory of the new layer, made (with its parents) on first use and
 * given the live directory's permission bits when the walk leaves it.
 */
class OutDir {
  #dir: Dir | null = null;

  constructor(
    readonly parent: OutDir | LayerOut,
    readonly name: string,
    readonly perm: number,
  ) {}

  get(): Dir {
    if (this.#dir === null) {
      const p = this.parent instanceof LayerOut ? this.parent.wrapper() : this.parent.get();
      p.mkdir(this.name, 0o700);
      this.#dir = p.openDir(this.name);
    }
    return this.#dir;
  }

  /** Permissions last, so a read-only directory could still be filled. */
  finish(): void {
    if (this.#dir === null) return;
    this.#dir.chmod(this.perm);
    this.#dir.close();
    this.#dir = null;
  }

  close(): void {
    this.#dir?.close();
    this.#dir = null;
  }
}

/** A directory's ignore scope, entered (and its `.gitignore` read) only when first needed. */
class ScopeFrame {
  #scope: IgnoreScope | null = null;
  #bytes: Uint8Array | null | undefined;

  constructor(
    readonly rules: IgnoreScope,
    readonly parent: ScopeFrame | null,
    readonly rel: string,
    readonly dir: Dir,
  ) {}

  /** The `.gitignore` bytes, when the walk read them already. */
  setBytes(bytes: Uint8Array | null): void {
    this.#bytes = bytes;
  }

  get(): IgnoreScope {
    if (this.#scope === null) {
      const bytes = this.#bytes !== undefined ? this.#bytes : readGitignore(this.dir);
      this.#scope = this.parent
        ? this.parent.get().enter(this.rel, bytes)
        : this.rules.enter("", bytes);
    }
    return this.#scope;
  }
}

type StatBits = Stat & { readonly inoLo?: number; readonly inoHi?: number };

/** The inode's low and high 32 bits without BigInt when `Dir` already has them as numbers. */
function inoLo(st: StatBits): number {
  return st.inoLo ?? Number(st.ino & 0xffffffffn);
}

function inoHi(st: StatBits): number {
  return st.inoHi ?? Number(st.ino >> 32n);
}

function kindCode(kind: Stat["kind"]): number {
  return kind === "file" ? KIND_FILE : kind === "dir" ? KIND_DIR : KIND_SYMLINK;
}

/** Whether a live stat equals a recorded one. */
function sameLive(st: Float64Array, o: number, s: Stat, mode: number): boolean {
  return st[o + F_MODE] === mode && st[o + F_SIZE] === s.size &&
    st[o + F_MSEC] === s.mtimeSec && st[o + F_MNSEC] === s.mtimeNsec &&
    st[o + F_CSEC] === s.ctimeSec && st[o + F_CNSEC] === s.ctimeNsec &&
    st[o + F_INOLO] === inoLo(s) && st[o + F_INOHI] === inoHi(s);
}

function record(s: Stat, mode: number, lmSec: number, lmNsec: number): number[] {
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

function sameOid(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  for (let i = 0; i < 20; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** A node being rebuilt: entries appended in name order. */
class Builder {
  readonly names: string[] = [];
  readonly st: number[] = [];
  readonly oids: Uint8Array[] = [];
  readonly kids: (IndexNode | null)[] = [];

  push(name: string, rec: ArrayLike<number>, oid: Uint8Array, kid: IndexNode | null): void {
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
function treeOf(node: IndexNode): Uint8Array | null {
  const entries: TreeEntry[] = [];
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

function walkTree(
  opts: LayerSnapshotOptions,
  prev: LayerIndex | null,
  ignoreKey: string | null,
  start: { sec: number; nsec: number },
  out: LayerOut,
): WalkResult {
  const stats: Counts = {
    files: 0,
    dirs: 0,
    symlinks: 0,
    bytes: 0,
    prunedIgnored: 0,
    prunedSpecial: 0,
    prunedGit: 0,
    strategy: "readwrite",
    full: prev === null,
    copied: 0,
    whiteouts: 0,
    reused: 0,
  };
  const written: Written = { files: 0, dirs: 0, symlinks: 0, whiteouts: 0, bytes: 0 };
  const ctx: Ctx = {
    source: opts.source,
    skipTop: opts.skipTop,
    evalAll: ignoreKey === null || prev?.ignoreKey !== ignoreKey,
    racySec: prev?.startSec ?? 0,
    racyNsec: prev?.startNsec ?? 0,
    out,
    stats,
    written,
    progress: opts.progress,
    prunedIgnores: new Map(),
  };
  const rootSt = opts.source.stat();
  const rootMode = KIND_DIR * 0x10000 + rootSt.perm;
  const rootSame = prev !== null && sameLive(prev.rootStat, 0, rootSt, rootMode);
  const data = new OutDir(out, DATA, rootSt.perm);
  // A new layer always has its root; a changed root mode alone is a change.
  if (prev === null || (prev.rootStat[F_MODE] as number) !== rootMode) {
    data.get();
    written.dirs++;
  }
  const scope = opts.ignore ? new ScopeFrame(opts.ignore, null, "", opts.source) : null;
  let r: DirResult;
  try {
    r = walkDir(
      ctx,
      opts.source,
      "",
      prev?.root ?? null,
      prev?.rootTree ?? null,
      rootSame && !isRacy(ctx, rootSt),
      false,
      scope,
      data,
    );
    data.finish();
  } finally {
    data.close();
    out.close();
  }
  const wrote = written.files + written.symlinks + written.dirs + written.whiteouts > 0;
  // A spill of a file that turned out unchanged may have made the layer directory.
  if (!wrote) out.discard();
  opts.progress?.(stats);
  const index: LayerIndex = {
    root: r.node,
    rootStat: Float64Array.from(record(rootSt, rootMode, rootSt.mtimeSec, rootSt.mtimeNsec)),
    rootTree: r.tree,
    startSec: start.sec,
    startNsec: start.nsec,
    ignoreKey: ignoreKey ?? "unknown",
  };
  return {
    layer: wrote ? out.id : null,
    index,
    rootId: r.tree ? hexOf(r.tree) : EMPTY_TREE_HEX,
    stats,
    written,
    prunedIgnores: ctx.prunedIgnores,
  };
}

function isRacy(ctx: Ctx, s: Stat): boolean {
  const sec = ctx.racySec, nsec = ctx.racyNsec;
  return s.mtimeSec > sec || (s.mtimeSec === sec && s.mtimeNsec >= nsec) ||
    s.ctimeSec > sec || (s.ctimeSec === sec && s.ctimeNsec >= nsec);
}

interface DirResult {
  /** The directory's node: `prev` itself when nothing in it changed. */
  readonly node: IndexNode;
  readonly tree: Uint8Array | null;
}

/**
 * The names of a directory that may be admitted, in name order; those that
 * are not UTF-8 go to `invalid`, for the rules to pass over or refuse.
 */
function listNames(ctx: Ctx, src: Dir, rel: string, invalid: InvalidEntry[]): string[] {
  const names: string[] = [];
  const listing = src.listing();
  invalid.push(...listing.invalid);
  for (const e of listing.entries) {
    if (rel === "" && ctx.skipTop.has(e.name)) continue;
    if (isGitName(e.name)) {
      ctx.stats.prunedGit++;
      continue;
    }
    names.push(e.name);
  }
  return names.sort(compareNames);
}

/**
 * The blob id of the `.gitignore` whose rules apply in this directory (or
 * `null`), and its bytes when they had to be read.
 */
function gitignoreOf(
  ctx: Ctx,
  src: Dir,
  prev: IndexNode | null,
  listed: readonly string[] | null,
): { oid: Uint8Array | null; bytes?: Uint8Array | null } {
  let pi = -1;
  if (prev) {
    for (let i = 0; i < prev.names.length; i++) {
      const c = compareNames(prev.names[i] as string, ".gitignore");
      if (c === 0) pi = i;
      if (c >= 0) break;
    }
  }
  const present = listed ? listed.includes(".gitignore") : pi >= 0 || prev?.gitignore != null;
  if (!present) return { oid: null, bytes: null };
  const s = src.statAt(".gitignore");
  if (s === null || s.kind !== "file") return { oid: null, bytes: null };
  if (
    prev && pi >= 0 && sameLive(prev.st, pi * STRIDE, s, KIND_FILE * 0x10000 + s.perm) &&
    !isRacy(ctx, s)
  ) {
    return { oid: prev.oids.subarray(pi * 20, pi * 20 + 20) };
  }
  const bytes = readGitignore(src);
  return { oid: bytes === null ? null : blobId(bytes), bytes };
}

function walkDir(
  ctx: Ctx,
  src: Dir,
  rel: string,
  prev: IndexNode | null,
  prevTree: Uint8Array | null,
  canSkip: boolean,
  parentEvalAll: boolean,
  scope: ScopeFrame | null,
  out: OutDir,
): DirResult {
  let evalAll = prev === null || ctx.evalAll || parentEvalAll;
  // An unchanged directory stat means an unchanged set of names: no listing needed.
  const invalid: InvalidEntry[] = [];
  let listed = canSkip && !evalAll ? null : listNames(ctx, src, rel, invalid);
  let gitignore: Uint8Array | null = null;
  let gitignoreBytes: Uint8Array | null | undefined;
  if (scope) {
    const gi = gitignoreOf(ctx, src, prev, listed);
    gitignore = gi.oid === null ? null : gi.oid.slice();
    gitignoreBytes = gi.bytes;
    if (gi.bytes !== undefined) scope.setBytes(gi.bytes);
    if (!sameOid(gi.oid, prev?.gitignore ?? null)) {
      // This directory's rules changed: every entry below is tested again.
      evalAll = true;
      listed ??= listNames(ctx, src, rel, invalid);
    }
  }
  if (invalid.length > 0) {
    for (const e of passInvalid(src, rel, invalid, scope?.get() ?? null)) {
      if (e.why === "ignored") ctx.stats.prunedIgnored++;
      else ctx.stats.prunedSpecial++;
    }
  }
  const w: WalkDirState = { ctx, src, rel, prev, scope, out, evalAll, treeDirty: prev === null };
  const built = listed === null ? walkKnown(w, prev as IndexNode) : walkListed(w, listed);
  const node = built === null ? prev as IndexNode : built.build(gitignore);
  if (gitignore !== null && !hasName(node, GITIGNORE)) {
    // Git reads it in the source although the snapshot leaves it out (it ignores itself).
    const bytes = gitignoreBytes !== undefined ? gitignoreBytes : readGitignore(src);
    if (bytes !== null) ctx.prunedIgnores.set(rel, bytes);
  }
  if (built === null) return { node, tree: prevTree };
  return { node, tree: w.treeDirty ? treeOf(node) : prevTree };
}

/** Whether a node holds `name` (its names are in {@linkcode compareNames} order). */
function hasName(node: IndexNode, name: string): boolean {
  let lo = 0, hi = node.names.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const c = compareNames(node.names[mid] as string, name);
    if (c === 0) return true;
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/**
 * Visits the previous node's names (the listing is known unchanged). The new
 * node is started only at the first difference; `null` means none.
 */
function walkKnown(w: WalkDirState, prev: IndexNode): Builder | null {
  let b: Builder | null = null;
  for (let k = 0; k < prev.names.length; k++) {
    const r = visit(w, prev.names[k] as string, k);
    if (r === SAME) {
      b?.pushFrom(prev, k);
      continue;
    }
    if (b === null) {
      b = new Builder();
      for (let t = 0; t < k; t++) b.pushFrom(prev, t);
    }
    if (r !== GONE) b.push(r.name, r.rec, r.oid, r.kid);
  }
  return b;
}

/** Merges the sorted listing with the previous node's names; names only the latter has are gone. */
function walkListed(w: WalkDirState, listed: readonly string[]): Builder {
  const prev = w.prev;
  const pNames = prev?.names ?? [];
  const b = new Builder();
  let i = 0, j = 0;
  while (i < listed.length || j < pNames.length) {
    const c = i >= listed.length
      ? 1
      : j >= pNames.length
      ? -1
      : compareNames(listed[i] as string, pNames[j] as string);
    if (c > 0) {
      whiteout(w, pNames[j++] as string);
      continue;
    }
    const pi = c === 0 ? j++ : -1;
    const r = visit(w, listed[i++] as string, pi);
    if (r === SAME) b.pushFrom(prev as IndexNode, pi);
    else if (r !== GONE) b.push(r.name, r.rec, r.oid, r.kid);
  }
  return b;
}

interface WalkDirState {
  readonly ctx: Ctx;
  readonly src: Dir;
  readonly rel: string;
  readonly prev: IndexNode | null;
  readonly scope: ScopeFrame | null;
  readonly out: OutDir;
  readonly evalAll: boolean;
  /** Whether the tree id must be recomputed. */
  treeDirty: boolean;
}

/** The entry is unchanged: keep the previous record. */
const SAME = 0;
/** The entry is not in the new view. */
const GONE = 1;
type Visit = typeof SAME | typeof GONE | {
  readonly name: string;
  readonly rec: ArrayLike<number>;
  readonly oid: Uint8Array;
  readonly kid: IndexNode | null;
};

function whiteout(w: WalkDirState, name: string): void {
  w.out.get().mknodWhiteout(name);
  w.ctx.stats.whiteouts++;
  w.ctx.written.whiteouts++;
  w.treeDirty = true;
}

/** An entry that vanished or is no longer admitted: a whiteout when the old view had it. */
function gone(w: WalkDirState, name: string, pi: number): Visit {
  if (pi >= 0) whiteout(w, name);
  return GONE;
}

/** Compares one live entry (at index `pi` of the previous node, or -1) and copies what changed. */
function visit(w: WalkDirState, name: string, pi: number): Visit {
  const { ctx, src, prev } = w;
  const path = w.rel === "" ? name : `${w.rel}/${name}`;
  if (w.rel === "" && ctx.skipTop.has(name)) return gone(w, name, pi);
  const s = src.statAt(name);
  if (s === null) return gone(w, name, pi);
  if (s.kind !== "file" && s.kind !== "dir" && s.kind !== "symlink") {
    ctx.stats.prunedSpecial++;
    return gone(w, name, pi);
  }
  const o = pi * STRIDE;
  const pst = prev?.st;
  const pMode = pi >= 0 ? (pst as Float64Array)[o + F_MODE] as number : -1;
  const pKind = pi >= 0 ? kindOf(pMode) : 0;
  const isDir = s.kind === "dir";
  if (w.scope && (w.evalAll || pi < 0 || (pKind === KIND_DIR) !== isDir)) {
    if (w.scope.get().isIgnored(path, isDir)) {
      ctx.stats.prunedIgnored++;
      return gone(w, name, pi);
    }
  }
  const mode = kindCode(s.kind) * 0x10000 + s.perm;
  const same = pi >= 0 && sameLive(pst as Float64Array, o, s, mode);
  if (isDir) return visitDir(w, name, path, pi, s, mode, same, pKind === KIND_DIR);
  if (same && !isRacy(ctx, s)) {
    ctx.stats.reused++;
    count(ctx, s);
    return SAME;
  }
  const read = s.kind === "file" ? readStable(ctx, src, name, path) : readLink(src, name, path);
  if (read === null) return gone(w, name, pi);
  const after = read.st;
  const afterMode = kindCode(after.kind) * 0x10000 + after.perm;
  const pOid = pi >= 0 ? (prev as IndexNode).oids.subarray(pi * 20, pi * 20 + 20) : null;
  count(ctx, after);
  if (pi >= 0 && kindOf(afterMode) === pKind && sameOid(read.oid, pOid)) {
    // The same content: keep the layer's copy (and its mtime) unless its bits differ.
    const bitsSame = after.kind === "symlink" || (pMode & 0o777) === (after.perm & 0o777);
    if (bitsSame) {
      discardSpill(ctx, read);
      if (sameLive(pst as Float64Array, o, after, afterMode)) return SAME;
      const p = pst as Float64Array;
      return {
        name,
        rec: record(after, afterMode, p[o + F_LMSEC] as number, p[o + F_LMNSEC] as number),
        oid: read.oid,
        kid: null,
      };
    }
    if ((pMode & 0o100) !== (after.perm & 0o100)) w.treeDirty = true;
  } else {
    w.treeDirty = true;
  }
  writeEntry(w, name, read);
  return {
    name,
    rec: record(after, afterMode, after.mtimeSec, after.mtimeNsec),
    oid: read.oid,
    kid: null,
  };
}

function count(ctx: Ctx, s: Stat): void {
  if (s.kind === "file") {
    ctx.stats.files++;
    ctx.stats.bytes += s.size;
  } else {
    ctx.stats.symlinks++;
  }
}

function visitDir(
  w: WalkDirState,
  name: string,
  path: string,
  pi: number,
  s: Stat,
  mode: number,
  same: boolean,
  wasDir: boolean,
): Visit {
  const { ctx, prev } = w;
  ctx.stats.dirs++;
  using child = w.src.openDir(name);
  const childOut = new OutDir(w.out, name, s.perm);
  try {
    const pMode = pi >= 0 ? (prev as IndexNode).st[pi * STRIDE + F_MODE] as number : -1;
    if (!wasDir || (pMode & 0o7777) !== s.perm) {
      // A new directory, or new permission bits: the layer must carry it even if empty.
      childOut.get();
      ctx.written.dirs++;
    }
    if (!wasDir) w.treeDirty = true;
    const pKid = wasDir ? (prev as IndexNode).kids[pi] ?? null : null;
    const pTree = wasDir ? (prev as IndexNode).oids.subarray(pi * 20, pi * 20 + 20) : null;
    const r = walkDir(
      ctx,
      child,
      path,
      pKid,
      pTree === null || isZero(pTree) ? null : pTree,
      same && !isRacy(ctx, s),
      w.evalAll,
      w.scope ? new ScopeFrame(w.scope.rules, w.scope, path, child) : null,
      childOut,
    );
    childOut.finish();
    const oid = r.tree ?? NO_OID;
    if (wasDir && !sameOid(oid, pTree)) w.treeDirty = true;
    if (same && r.node === pKid) return SAME;
    return { name, rec: record(s, mode, s.mtimeSec, s.mtimeNsec), oid, kid: r.node };
  } finally {
    childOut.close();
  }
}

/** File or symlink content read for one entry. */
interface Read {
  readonly st: Stat;
  readonly oid: Uint8Array;
  /** The bytes (a view valid until the next read), or `null` when they were spilled. */
  readonly bytes: Uint8Array | null;
}

let smallBuf = new Uint8Array(CHUNK);

function sameFile(a: Stat, b: Stat): boolean {
  return a.size === b.size && a.mtimeSec === b.mtimeSec && a.mtimeNsec === b.mtimeNsec &&
    a.perm === b.perm && a.ctimeSec === b.ctimeSec && a.ctimeNsec === b.ctimeNsec;
}

/** Opens a file of the source, or `null` when it vanished or is no longer a regular file. */
function openSource(src: Dir, name: string): FileHandle | null {
  try {
    return src.openFile(name);
  } catch (error) {
    // Replaced or removed since it was listed: the next snapshot sees what it became.
    if (isErrno(error, E.ENOENT)) return null;
    if (error instanceof WrongKindError || error instanceof SymlinkRefusedError) return null;
    throw error;
  }
}

/**
 * Reads a file once, hashing it as Git would: into memory up to
 * {@linkcode IN_MEMORY_LIMIT}, else streamed into the layer's spill file.
 * A file that changes while being read is read again, up to
 * {@linkcode COPY_ATTEMPTS} times.
 */
function readStable(ctx: Ctx, src: Dir, name: string, path: string): Read | null {
  for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
    const f = openSource(src, name);
    if (f === null) return null;
    try {
      const before = f.stat();
      if (before.size > IN_MEMORY_LIMIT) {
        const r = spill(ctx, f, before);
        if (r !== null) return r;
        continue;
      }
      let buf = before.size < smallBuf.length ? smallBuf : new Uint8Array(before.size + 1);
      let len = 0;
      for (;;) {
        const n = f.read(buf.subarray(len));
        if (n === 0) break;
        len += n;
        if (len === buf.length) break; // grew past its stat size: changed
      }
      const after = f.stat();
      if (len === after.size && sameFile(before, after)) {
        if (buf !== smallBuf && buf.length <= CHUNK * 4) smallBuf = buf;
        return { st: after, oid: blobId(buf.subarray(0, len)), bytes: buf.subarray(0, len) };
      }
      buf = smallBuf;
    } finally {
      f.close();
    }
  }
  throw new SnapshotError(`file kept changing: ${path}`);
}

/** Streams a large file into `<layer>/.spill`, hashing each chunk; `null` when it changed meanwhile. */
function spill(ctx: Ctx, f: FileHandle, before: Stat): Read | null {
  const wrapper = ctx.out.wrapper();
  if (wrapper.statAt(SPILL) !== null) wrapper.unlink(SPILL);
  const hash = blobHasher(before.size);
  let len = 0;
  let after: Stat;
  {
    using dst = wrapper.createFile(SPILL, 0o600);
    const chunk = new Uint8Array(CHUNK);
    for (;;) {
      const n = f.read(chunk);
      if (n === 0) break;
      len += n;
      if (len > before.size) break;
      hash.update(chunk.subarray(0, n));
      dst.writeAll(chunk.subarray(0, n));
    }
    after = f.stat();
    dst.chmod(after.perm & 0o777);
    dst.setMtime(after.mtimeNs);
  }
  if (len !== after.size || !sameFile(before, after)) {
    wrapper.unlink(SPILL);
    return null;
  }
  return { st: after, oid: new Uint8Array(hash.digest()), bytes: null };
}

function discardSpill(ctx: Ctx, read: Read): void {
  if (read.st.kind === "file" && read.bytes === null) ctx.out.wrapper().unlink(SPILL);
}

/** A symlink's target, stable across a stat before and after. */
function readLink(src: Dir, name: string, path: string): Read | null {
  for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
    const before = src.statAt(name);
    if (before === null || before.kind !== "symlink") return null;
    let target: Uint8Array;
    try {
      target = src.readlink(name);
    } catch (error) {
      // Replaced by another kind, or removed, since the stat: look again.
      if (isErrno(error, E.EINVAL) || isErrno(error, E.ENOENT)) continue;
      throw error;
    }
    const after = src.statAt(name);
    if (after !== null && after.kind === "symlink" && sameFile(before, after)) {
      return { st: after, oid: blobId(target), bytes: target };
    }
  }
  throw new SnapshotError(`file kept changing: ${path}`);
}

/** Writes a changed file or symlink into the new layer. */
function writeEntry(w: WalkDirState, name: string, read: Read): void {
  const { ctx } = w;
  const dst = w.out.get();
  const st = read.st;
  if (st.kind === "symlink") {
    dst.symlink(read.bytes as Uint8Array, name);
    dst.setMtime(name, st.mtimeNs);
    ctx.written.symlinks++;
  } else {
    if (read.bytes === null) {
      ctx.out.wrapper().rename(SPILL, dst, name);
    } else {
      using f = dst.createFile(name, 0o600);
      f.writeAll(read.bytes);
      f.chmod(st.perm & 0o777);
      f.setMtime(st.mtimeNs);
    }
    ctx.written.files++;
    ctx.written.bytes += st.size;
  }
  ctx.stats.copied++;
  ctx.progress?.(ctx.stats);
}
