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
 * The store's code, by responsibility: this module (the snapshot and the
 * store's public face), `layers_dir.ts` (ids, heads, verified stacks, the
 * index cache, discarding), `layer_walk.ts` (the walk against the previous
 * index), `layer_records.ts` (index records and tree ids), `layer_write.ts`
 * (reading the live tree and writing the new layer), `layer_gc.ts`
 * (`collect`), `layer_seal.ts` and `index_codec.ts` (the on-disk formats;
 * `layer_index.ts` the index in memory, `index_delta.ts` its derivation).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { compareNames, type Dir } from "../fd/dir.ts";
import { E } from "../fd/ffi.ts";
import type { IgnoreInputs } from "../git/ignore_load.ts";
import { type LayerIndex, statIndexOf } from "./layer_index.ts";
import { encodeIndex } from "./index_codec.ts";
import { collectLayers } from "./layer_gc.ts";
import {
  CHAIN,
  DATA,
  LAYER_ID,
  LayerError,
  type LayerMeta,
  META,
  readSealedMeta,
  recordData,
  SEALED,
  sealOf,
  sha256Hex,
} from "./layer_seal.ts";
import {
  type LayerSnapshotOptions,
  type SnapshotCounts,
  walkLayer,
  type WalkResult,
} from "./layer_walk.ts";
import {
  HEAD_SUFFIX,
  type HeadStack,
  INDEX,
  isErrno,
  LayersDir,
  newId,
  writeDurable,
} from "./layers_dir.ts";
import {
  type AdoptedLayer,
  checkLayer,
  type LayerCheck,
  sealStaged,
  stackMetas,
  stackOfIds,
} from "./layer_adopt.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";

export type { LayerSnapshotOptions, SnapshotCounts } from "./layer_walk.ts";
export type { AdoptedLayer, LayerCheck } from "./layer_adopt.ts";
export type { HeadStack } from "./layers_dir.ts";
export type { LayerMeta } from "./layer_seal.ts";
export { releaseIndexCache } from "./layers_dir.ts";
export { releaseTrust } from "./layer_trust.ts";
export { DATA, LAYER_ID, LayerError, SEALED };
export { PHASE_READ, PHASE_WRITE } from "./layer_walk.ts";
const EMPTY_DIR = ".empty";

/** A snapshot's phases, as `phase_times.ts` records them (bench/breakdown_snapshot.ts prints them). */
export const PHASE = {
  head: "layer store: probe and head",
  walk: "layer walk",
  check: "layer seal check",
  records: "layer stat records",
  index: "layer index and meta",
  sync: "layer syncfs",
  seal: "layer seal and head",
} as const;
const DEFAULT_MAX_DEPTH = 32;
const enc = new TextEncoder();

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

/**
 * The layer store of one project. Holds descriptors for `.marsh` and
 * `.marsh/layers`; close it (or `using`) when done.
 */
export class LayerStore implements Disposable {
  readonly #dir: LayersDir;

  private constructor(dir: LayersDir) {
    this.#dir = dir;
  }

  /**
   * Opens the store in `marsh` (the open `<root>/.marsh`, borrowed), creating
   * `layers/` (`0o755`) when missing.
   *
   * @throws {SymlinkRefusedError} when `layers` is a symlink
   */
  static open(marsh: Dir): LayerStore {
    return new LayerStore(LayersDir.open(marsh));
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
    let t = phaseStart();
    const start = this.#dir.probeTime();
    const ignoreKey = opts.ignore === null ? "none" : opts.ignoreKey ?? null;
    const head = this.#dir.loadHead(opts.chain);
    phaseEnd(PHASE.head, t);
    let untrusted = head.problem;
    const prev = head.stack;
    if (prev !== null) {
      t = phaseStart();
      const walk = walkLayer(this.#dir.layers, opts, prev.index, ignoreKey, start);
      phaseEnd(PHASE.walk, t);
      const reuse = walk.layer === null || prev.top.depth < maxDepth;
      // Checked after the walk: as close as possible to the mount that stacks it.
      t = phaseStart();
      untrusted = reuse ? this.#dir.checkData(prev.metas) : null;
      phaseEnd(PHASE.check, t);
      if (reuse && untrusted === null) {
        if (walk.layer === null) {
          // Nothing to write. The refreshed stats (files touched but not changed)
          // are worth keeping, in memory only: the layer's own index is sealed.
          this.#dir.cacheIndex(prev.top.id, walk.index);
          return new Snapshot(prev.ids, prev.top.rootId, walk, null);
        }
        const meta = this.#seal(walk.layer, walk, opts.chain, prev.top, false);
        return new Snapshot([...prev.ids, meta.id], meta.rootId, walk, null);
      }
      if (walk.layer !== null) this.#dir.layers.removeTree(walk.layer);
    }
    t = phaseStart();
    const walk = walkLayer(this.#dir.layers, opts, null, ignoreKey, start);
    phaseEnd(PHASE.walk, t);
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
    const head = this.#dir.loadHead(chain);
    return head.stack === null ? head.problem : this.#dir.checkData(head.stack.metas);
  }

  /**
   * A sealed layer's data directory, for an overlay `lowerdir`. The caller
   * closes it.
   *
   * @throws {LayerError} when the layer is missing, unsealed, or does not match its seal
   */
  openData(id: string): Dir {
    using wrapper = this.#dir.openWrapper(id);
    readSealedMeta(id, wrapper);
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
        this.#dir.layers.mkdir(EMPTY_DIR, 0o555);
        made = true;
      } catch (error) {
        if (!isErrno(error, E.EEXIST)) throw error;
      }
      const dir = this.#dir.layers.openDir(EMPTY_DIR);
      if (made) dir.chmod(0o555);
      if (dir.entries().length === 0 && (dir.stat().perm & 0o7777) === 0o555) return dir;
      // Something was put there: it is no longer the empty layer.
      dir.close();
      this.#dir.discard(EMPTY_DIR);
    }
    throw new LayerError(EMPTY_DIR, "cannot be made empty");
  }

  /**
   * The verified stack `ids` (bottom first) and its top's index, for a
   * layer adopted on top of it (`layer_adopt.ts`).
   *
   * @throws {LayerError} when a layer is missing, unsealed, or the stack is not `ids`
   */
  stackOf(ids: readonly string[]): HeadStack {
    return stackOfIds(this.#dir, ids);
  }

  /**
   * The verified metas of the stack `ids` (bottom first), without its index:
   * for a mount, which needs no index (one not in memory would be derived).
   *
   * @throws {LayerError} when a layer is missing, unsealed, or the stack is not `ids`
   */
  stackMetasOf(ids: readonly string[]): LayerMeta[] {
    return stackMetas(this.#dir, ids);
  }

  /**
   * The first layer of `stack` whose data no longer matches its seal, as a
   * message; `null` when none. A layer this service process checked or
   * sealed is not walked again while its evidence holds (`layer_trust.ts`).
   */
  checkStack(stack: HeadStack): string | null {
    return this.#dir.checkDataTrusted(stack.metas);
  }

  /**
   * The store's way in for a layer written elsewhere: seals the wrapper
   * `staging/<name>` as `layer` and renames it into the store (see
   * {@linkcode sealStaged}). No chain's head moves.
   */
  adopt(staging: Dir, name: string, layer: AdoptedLayer): LayerMeta {
    return sealStaged(this.#dir, staging, name, layer);
  }

  /** Layer `id` read back by its id and the root id it should hold (see {@linkcode checkLayer}). */
  check(id: string, rootId: string): LayerCheck {
    return checkLayer(this.#dir, id, rootId);
  }

  /** A fresh layer id, not used in the store. */
  freshId(): string {
    for (;;) {
      const id = newId();
      if (this.#dir.layers.statAt(id) === null) return id;
    }
  }

  /** Every sealed layer, oldest first. Unsealed or malformed directories are left out. */
  list(): LayerInfo[] {
    const out: LayerInfo[] = [];
    for (const e of this.#dir.layers.entries()) {
      if (!LAYER_ID.test(e.name)) continue;
      const meta = this.#dir.tryVerify(e.name);
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
    for (const e of this.#dir.layers.entries()) {
      if (!e.name.endsWith(HEAD_SUFFIX)) continue;
      const chain = e.name.slice(0, -HEAD_SUFFIX.length);
      if (!CHAIN.test(chain)) continue;
      const top = this.#dir.readHead(chain);
      if (top === null) continue;
      try {
        out.set(chain, this.#dir.stack(top).map((m) => m.id));
      } catch (error) {
        if (!(error instanceof LayerError)) throw error;
      }
    }
    return out;
  }

  /**
   * Deletes every layer that is not in `referenced`, not below a referenced
   * layer, not in `exact` (whole stacks, kept layer by layer without their
   * parents: see `layer_gc.ts`) and not in a chain head's stack; unsealed leftovers of a crash go
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
    exact: ReadonlySet<string> = new Set(),
  ): { removed: string[]; bytes: number } {
    return collectLayers(this.#dir, referenced, dryRun, heads, exact);
  }

  /** Closes the store's descriptors; a second call does nothing. */
  close(): void {
    this.#dir.close();
  }

  [Symbol.dispose](): void {
    this.close();
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
      using wrapper = this.#dir.layers.openDir(id);
      // Recorded after the data's last write (the walk set its directories' bits).
      let t = phaseStart();
      const data = recordData(wrapper);
      phaseEnd(PHASE.records, t);
      t = phaseStart();
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
      phaseEnd(PHASE.index, t);
      // The data files are not synced one by one: one syncfs before the seal
      // makes a sealed layer's bytes durable (a torn file would poison every
      // later snapshot that trusts the index).
      t = phaseStart();
      wrapper.syncFs();
      phaseEnd(PHASE.sync, t);
      t = phaseStart();
      writeDurable(wrapper, SEALED, enc.encode(sealOf(metaBytes)));
      // Readable by all, as the data is; writable by the owner (see the module's doc).
      wrapper.chmod(0o755);
      this.#dir.cacheIndex(id, walk.index);
      this.#dir.trustSealed(meta);
      this.#dir.writeHead(chain, id);
      phaseEnd(PHASE.seal, t);
      return meta;
    } catch (error) {
      this.#dir.layers.removeTree(id);
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
