/**
 * The open `.marsh/layers/` of one project (docs/engine.md, "The layered
 * snapshot store"): layer ids, chain heads (`<chain>.head`), the verified
 * stack below a head with its top's index, and discarding a layer through
 * `.marsh/.trash`. The snapshot (`layers.ts`), the tree walk
 * (`layer_walk.ts`) and the collector (`layer_gc.ts`) all reach the store's
 * directory through this.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type Dir, type Stat, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { IndexCache, type LayerIndex } from "./layer_index.ts";
import { decodeIndexFile, type IndexDelta, type IndexFile } from "./index_codec.ts";
import { applyDelta } from "./index_delta.ts";
import { EMPTY_TREE_HEX, hexOf } from "../git/tree_id.ts";
import {
  checkData,
  LAYER_ID,
  LayerError,
  type LayerMeta,
  MAX_META_BYTES,
  META,
  parseMeta,
  readSealedMeta,
  SEALED,
  sha256Hex,
} from "./layer_seal.ts";
import { LAYERS_DIR, TRASH_DIR } from "../../model/layout.ts";
import { forgetTrust, trustedData, trustedMeta, trustSealed } from "./layer_trust.ts";

/** A chain's head file is `<chain>` plus this. */
export const HEAD_SUFFIX = ".head";
/**
 * Under `layers/<id>/`: the merged view's stat index, whole or as the
 * layer's delta against the stack below (`index_codec.ts`).
 */
export const INDEX = "index";
/** Trashed layers are `.marsh/.trash/<prefix><id>-<random>`. */
export const TRASH_PREFIX = "layer-";
const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Parsed whole indexes of recent layers, shared by every store in the
 * process (the service is long-lived): each holds a whole tree.
 */
const cache = new IndexCache(4);
/**
 * Indexes derived from deltas (`index_delta.ts`), or computed by a capture:
 * each shares every directory it does not change with the index below it,
 * so they cost little more than their changes and are kept more.
 */
const derived = new IndexCache(32);

/**
 * Forgets every parsed index kept in memory (memory pressure, tests): the
 * next snapshot of each chain reads its head's index file again.
 */
export function releaseIndexCache(): void {
  cache.clear();
  derived.clear();
}

/** Whether `error` is an {@linkcode FsError} with `errno`. */
export function isErrno(error: unknown, errno: number): boolean {
  return error instanceof FsError && error.errno === errno;
}

/** A fresh layer id (time-ordered base36, then random base36): see `LAYER_ID`. */
export function newId(): string {
  const rnd = new Uint8Array(8);
  crypto.getRandomValues(rnd);
  let tail = "";
  for (const b of rnd) tail += (b % 36).toString(36);
  return Date.now().toString(36).padStart(9, "0") + tail.slice(0, 7);
}

/** Writes a new file with `data`, fsyncs it, and leaves it read-only. */
export function writeDurable(dir: Dir, name: string, data: Uint8Array, mode = 0o444): void {
  using f = dir.createFile(name, 0o600);
  f.writeAll(data);
  f.chmod(mode);
  f.sync();
}

/** A head's verified stack, bottom first, with its top's index. */
export interface HeadStack {
  readonly ids: string[];
  readonly metas: LayerMeta[];
  readonly top: LayerMeta;
  readonly index: LayerIndex;
}

/**
 * The descriptors of `.marsh` and `.marsh/layers`, and what a store does to
 * the entries of the latter. Close it when done.
 */
export class LayersDir implements Disposable {
  /** The open `.marsh`. */
  readonly marsh: Dir;
  /** The open `.marsh/layers`. */
  readonly layers: Dir;
  /** Identifies this directory in the process-wide index cache. */
  readonly #key: string;

  private constructor(marsh: Dir, layers: Dir) {
    this.marsh = marsh;
    this.layers = layers;
    const st = layers.stat();
    this.#key = `${st.dev}:${st.ino}`;
  }

  /**
   * Opens `layers/` in `marsh` (borrowed), creating it (`0o755`) when missing.
   *
   * @throws {SymlinkRefusedError} when `layers` is a symlink
   */
  static open(marsh: Dir): LayersDir {
    const own = marsh.dup();
    try {
      return new LayersDir(own, own.ensureDir(LAYERS_DIR, 0o755));
    } catch (error) {
      own.close();
      throw error;
    }
  }

  /**
   * Keeps `index` as layer `id`'s index in the process-wide cache: `whole`
   * for one the layer holds whole, else one that shares the nodes below it.
   */
  cacheIndex(id: string, index: LayerIndex, whole = true): void {
    (whole ? cache : derived).set(this.#cacheKey(id), index);
  }

  /** Drops layer `id`'s index from the cache. */
  forgetIndex(id: string): void {
    cache.delete(this.#cacheKey(id));
    derived.delete(this.#cacheKey(id));
  }

  #cached(id: string): LayerIndex | null {
    const key = this.#cacheKey(id);
    return derived.get(key) ?? cache.get(key) ?? null;
  }

  #cacheKey(id: string): string {
    return `${this.#key}:${id}`;
  }

  /** The layer id `<chain>.head` names, or `null` when it is missing or malformed. */
  readHead(chain: string): string | null {
    const bytes = this.layers.readFileIfExists(chain + HEAD_SUFFIX, 256);
    if (bytes === null) return null;
    const id = dec.decode(bytes).trim();
    return LAYER_ID.test(id) ? id : null;
  }

  /** Points `<chain>.head` at `id`, replacing it atomically and durably. */
  writeHead(chain: string, id: string): void {
    const tmp = `.${chain}${HEAD_SUFFIX}.${newId()}.tmp`;
    writeDurable(this.layers, tmp, enc.encode(`${id}\n`), 0o644);
    this.layers.renameReplacing(tmp, this.layers, chain + HEAD_SUFFIX);
  }

  /**
   * The head's stack with its top's index; `stack` is `null` when the chain
   * must be rebuilt from scratch, and `problem` then says why (`null` for a
   * chain without a head).
   */
  loadHead(chain: string): { stack: HeadStack | null; problem: string | null } {
    const top = this.readHead(chain);
    if (top === null) return { stack: null, problem: null };
    try {
      const metas = this.stack(top);
      const topMeta = metas[metas.length - 1] as LayerMeta;
      const other = metas.find((m) => m.chain !== chain);
      if (other) {
        return { stack: null, problem: `layer "${other.id}" belongs to chain ${other.chain}` };
      }
      const index = this.loadIndex(metas);
      return { stack: { ids: metas.map((m) => m.id), metas, top: topMeta, index }, problem: null };
    } catch (error) {
      // A head we cannot trust is replaced by a full copy, never patched.
      if (error instanceof LayerError) return { stack: null, problem: error.message };
      throw error;
    }
  }

  /** The first layer whose data no longer matches its seal, as a message; `null` when none. */
  checkData(metas: readonly LayerMeta[]): string | null {
    for (const meta of metas) {
      try {
        using wrapper = this.openWrapper(meta.id);
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

  /**
   * Like {@linkcode LayersDir.checkData}, but a layer this process checked
   * or sealed is not walked again while its evidence holds
   * (`layer_trust.ts`): for an operation's stack, not a snapshot's reuse.
   */
  checkDataTrusted(metas: readonly LayerMeta[]): string | null {
    for (const meta of metas) {
      try {
        using wrapper = this.openWrapper(meta.id);
        const problem = trustedData(
          this.#cacheKey(meta.id),
          wrapper,
          meta,
          () => checkData(wrapper, meta),
        );
        if (problem !== null) return new LayerError(meta.id, problem).message;
      } catch (error) {
        if (error instanceof LayerError) return error.message;
        throw error;
      }
    }
    return null;
  }

  /** Marks layer `meta.id`, just sealed by this process, as checked (`layer_trust.ts`). */
  trustSealed(meta: LayerMeta): void {
    using wrapper = this.openWrapper(meta.id);
    trustSealed(this.#cacheKey(meta.id), wrapper, meta);
  }

  /** Verified metas from the bottom layer up to `top`. @throws {LayerError} */
  stack(top: string): LayerMeta[] {
    const metas: LayerMeta[] = [];
    let id: string | null = top;
    while (id !== null) {
      using wrapper = this.openWrapper(id);
      const layer = id;
      const meta = trustedMeta(this.#cacheKey(id), wrapper, () => readSealedMeta(layer, wrapper));
      const above = metas[metas.length - 1];
      if (above && above.depth !== meta.depth + 1) {
        throw new LayerError(above.id, `has depth ${above.depth} above depth ${meta.depth}`);
      }
      if (meta.compacts === undefined && (meta.parent === null) !== (meta.depth === 1)) {
        throw new LayerError(id, `has depth ${meta.depth} and parent ${meta.parent}`);
      }
      metas.push(meta);
      id = meta.parent;
    }
    return metas.reverse();
  }

  /**
   * Verified metas of the stack `ids` exactly (bottom first): each layer
   * sealed, the bottom one's parent none, and each other one's parent the
   * layer below it, or the layer a compacted layer below it stands for
   * (docs/checkpoints.md "Compaction": a layer sealed on the old stack
   * stands on its compacted bottom unchanged), with depths that follow.
   *
   * @throws {LayerError} when a layer is missing, unsealed, or the stack is not one
   */
  explicitStack(ids: readonly string[]): LayerMeta[] {
    const metas: LayerMeta[] = [];
    for (const id of ids) {
      using wrapper = this.openWrapper(id);
      const meta = readSealedMeta(id, wrapper);
      const below = metas[metas.length - 1];
      if (below === undefined) {
        if (meta.parent !== null) {
          throw new LayerError(id, `is not a bottom layer: its parent is ${meta.parent}`);
        }
        if (meta.compacts === undefined && meta.depth !== 1) {
          throw new LayerError(id, `has depth ${meta.depth} and no parent`);
        }
      } else if (meta.parent !== below.id && meta.parent !== (below.compacts ?? null)) {
        throw new LayerError(
          id,
          `has parent ${meta.parent}, not ${below.id}` +
            (below.compacts === undefined ? "" : ` or the ${below.compacts} it compacts`),
        );
      } else if (meta.depth !== below.depth + 1) {
        throw new LayerError(id, `has depth ${meta.depth} above depth ${below.depth}`);
      }
      metas.push(meta);
    }
    return metas;
  }

  /**
   * The merged index of the verified stack `metas` (bottom first): the top
   * layer's own when it is whole, else derived from the stack below and the
   * deltas above it (`index_delta.ts`), starting from the highest layer whose
   * index is cached or whole; each derived root must be its layer's root id.
   * The top's is cached.
   *
   * @throws {LayerError} when an index is missing, does not match its meta,
   *   or a delta does not apply to the stack below it
   */
  loadIndex(metas: readonly LayerMeta[]): LayerIndex {
    const deltas: { meta: LayerMeta; delta: IndexDelta }[] = [];
    let index: LayerIndex | null = null;
    for (let i = metas.length - 1; i >= 0; i--) {
      const meta = metas[i] as LayerMeta;
      index = this.#cached(meta.id);
      if (index !== null) break;
      const file = this.#readIndexFile(meta);
      if (file.kind === "full") {
        index = file.index;
        cache.set(this.#cacheKey(meta.id), index);
        break;
      }
      deltas.push({ meta, delta: file.delta });
    }
    if (index === null) {
      const bottom = metas[0];
      if (bottom === undefined) throw new TypeError("a stack has at least one layer");
      throw new LayerError(bottom.id, "has a delta index but no layer below it to derive from");
    }
    for (let k = deltas.length - 1; k >= 0; k--) {
      const { meta, delta } = deltas[k] as { meta: LayerMeta; delta: IndexDelta };
      try {
        index = applyDelta(index, delta);
      } catch (cause) {
        throw new LayerError(meta.id, "has an index delta that does not fit the stack below it", {
          cause,
        });
      }
      const root = index.rootTree === null ? EMPTY_TREE_HEX : hexOf(index.rootTree);
      if (root !== meta.rootId) {
        throw new LayerError(meta.id, `derives root ${root} from its index, not ${meta.rootId}`);
      }
      if (k === 0) derived.set(this.#cacheKey(meta.id), index);
    }
    return index;
  }

  /** Layer `meta.id`'s `index` file, parsed, after checking it against the meta. */
  #readIndexFile(meta: LayerMeta): IndexFile {
    using wrapper = this.openWrapper(meta.id);
    const bytes = wrapper.readFileIfExists(INDEX, meta.index.size);
    if (
      bytes === null || bytes.length !== meta.index.size || sha256Hex(bytes) !== meta.index.sha256
    ) {
      throw new LayerError(meta.id, "has an index that does not match its meta.json");
    }
    try {
      return decodeIndexFile(bytes);
    } catch (cause) {
      throw new LayerError(meta.id, "has a malformed index", { cause });
    }
  }

  /**
   * `layers/<id>`, opened. The caller closes it.
   *
   * @throws {LayerError} when `id` is not a layer id, or the layer is missing or not a directory
   */
  openWrapper(id: string): Dir {
    if (!LAYER_ID.test(id)) throw new LayerError(id, "is not a layer id");
    try {
      return this.layers.openDir(id);
    } catch (error) {
      if (isErrno(error, E.ENOENT)) throw new LayerError(id, "is missing", { cause: error });
      if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
        throw new LayerError(id, "is not a directory", { cause: error });
      }
      throw error;
    }
  }

  /** The layer's meta after checking its seal; `null` when it is missing, unsealed or broken. */
  tryVerify(id: string): LayerMeta | null {
    try {
      using wrapper = this.openWrapper(id);
      return readSealedMeta(id, wrapper);
    } catch (error) {
      if (error instanceof LayerError) return null;
      throw error;
    }
  }

  /** The layer's `meta.json` without checking the seal (for gc, which keeps too much, never too little). */
  readMetaLoosely(id: string): LayerMeta | null {
    try {
      using wrapper = this.openWrapper(id);
      const bytes = wrapper.readFileIfExists(META, MAX_META_BYTES);
      return bytes === null ? null : parseMeta(bytes);
    } catch (error) {
      if (error instanceof LayerError) return null;
      throw error;
    }
  }

  /** Unseals `layers/<name>`, renames it into `.marsh/.trash`, then removes it there. */
  discard(name: string): void {
    forgetTrust(this.#cacheKey(name));
    if (this.layers.statAt(name)?.kind === "dir") {
      using wrapper = this.layers.openDir(name);
      wrapper.chmod(0o755);
      if (wrapper.statAt(SEALED) !== null) wrapper.unlink(SEALED);
    }
    using trash = this.marsh.ensureDir(TRASH_DIR, 0o700);
    const moved = `${TRASH_PREFIX}${name.replace(/^\./, "")}-${newId()}`;
    this.layers.rename(name, trash, moved);
    trash.removeTree(moved);
  }

  /**
   * The file system's clock now: the ctime of a probe file. Entries touched
   * at or after it are racy for the next snapshot.
   */
  probeTime(): { sec: number; nsec: number } {
    const name = `.probe-${newId()}`;
    let st: Stat;
    {
      using f = this.layers.createFile(name, 0o600);
      st = f.stat();
    }
    this.layers.unlink(name);
    return { sec: st.ctimeSec, nsec: st.ctimeNsec };
  }

  /** Closes both descriptors; a second call does nothing. */
  close(): void {
    this.layers.close();
    this.marsh.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
