/**
 * A sealed layer stack read without mounting it (docs/checkpoints.md,
 * "Checkout and commit"): its merged index (the top layer's, whole or
 * derived from the deltas of the stack: `layers_dir.ts`), which names every path of
 * the merged view with its Git blob or tree id, and, per directory, the
 * layers' `data/` dirs that contribute to it, top first, so one entry's
 * bytes are read from the layer an overlay mount would show them from.
 *
 * The overlay rules of the store's lower format (`splitfs/layers/layers.ts`):
 * the topmost layer holding a name decides it; a whiteout (a character
 * device) hides it, a non-directory hides every lower layer's entry, a
 * directory merges with the lower layers' directories of that name until one
 * of them holds a whiteout or a non-directory there. No opaque xattrs.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, Stat } from "../fd/dir.ts";
import { IndexNode, type LayerIndex, STRIDE } from "../layers/layer_index.ts";
import { DATA, LayerError, type LayerMeta } from "../layers/layer_seal.ts";
import { LayersDir } from "../layers/layers_dir.ts";
import { MARSH_DIR } from "../../model/layout.ts";
import { EMPTY_TREE_HEX } from "../git/tree_id.ts";

/** An open, verified stack: its index and its layers' `data/` dirs, top first. */
export class StackView implements Disposable {
  readonly #store: LayersDir;
  readonly #data: Dir[];
  /** The stack's root id, as its top layer's sealed meta records it. */
  readonly rootId: string;
  readonly index: LayerIndex;
  /** The stack's layer ids, bottom first (empty: the empty tree). */
  readonly layers: readonly string[];

  private constructor(
    store: LayersDir,
    data: Dir[],
    rootId: string,
    index: LayerIndex,
    layers: readonly string[],
  ) {
    this.#store = store;
    this.#data = data;
    this.rootId = rootId;
    this.index = index;
    this.layers = layers;
  }

  /**
   * Opens the stack `layers` (bottom first) of the project at `root`: each
   * layer sealed, each the parent of the one above, and the top's index the
   * one its meta names. An empty list is the empty tree.
   *
   * @throws {LayerError} when a layer is missing, unsealed, out of order or
   *   its index does not match its meta
   */
  static open(root: Dir, layers: readonly string[]): StackView {
    using marsh = root.openDir(MARSH_DIR);
    const store = LayersDir.open(marsh);
    const data: Dir[] = [];
    try {
      if (layers.length === 0) {
        return new StackView(store, data, EMPTY_TREE_HEX, emptyIndex(), []);
      }
      // A compacted bottom stands for the stack it merged (docs/checkpoints.md "Compaction").
      const metas = store.explicitStack(layers);
      const ids = metas.map((m) => m.id);
      const topMeta = metas[metas.length - 1] as LayerMeta;
      const index = store.loadIndex(metas);
      for (let i = metas.length - 1; i >= 0; i--) {
        using wrapper = store.openWrapper((metas[i] as LayerMeta).id);
        data.push(wrapper.openDir(DATA));
      }
      return new StackView(store, data, topMeta.rootId, index, ids);
    } catch (error) {
      for (const d of data) d.close();
      store.close();
      throw error;
    }
  }

  /** The merged view's root directory. */
  rootDir(): StackDir {
    return new StackDir(this.#data.map((d) => d.dup()), "");
  }

  close(): void {
    for (const d of this.#data) d.close();
    this.#data.length = 0;
    this.#store.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

function emptyIndex(): LayerIndex {
  return {
    root: IndexNode.empty(),
    rootStat: new Float64Array(STRIDE),
    rootTree: null,
    startSec: 0,
    startNsec: 0,
    ignoreKey: "none",
  };
}

/** Where an entry of the merged view is: the layer dir holding it and its stat there. */
export interface Located {
  readonly dir: Dir;
  readonly st: Stat;
}

/**
 * One directory of the merged view: the `data/` dirs of the layers that
 * contribute to it, top first. Owns them; close it.
 */
export class StackDir implements Disposable {
  readonly #dirs: Dir[];
  /** Its path in the view, `""` at the root. */
  readonly path: string;

  constructor(dirs: Dir[], path: string) {
    this.#dirs = dirs;
    this.path = path;
  }

  /**
   * The entry `name` as the merged view shows it, or `null` when no layer
   * shows one (absent or whited out). Borrowed: valid while this is open.
   */
  locate(name: string): Located | null {
    for (const dir of this.#dirs) {
      const st = dir.statAt(name);
      if (st === null) continue;
      if (st.kind === "char") return null;
      return { dir, st };
    }
    return null;
  }

  /**
   * The subdirectory `name`: every layer's directory of that name from the
   * top down, until a whiteout or a non-directory stops the merge.
   *
   * @throws {LayerError} when the view has no directory there
   */
  child(name: string): StackDir {
    const out: Dir[] = [];
    try {
      for (const dir of this.#dirs) {
        const st = dir.statAt(name);
        if (st === null) continue;
        if (st.kind !== "dir") break;
        out.push(dir.openDir(name));
      }
    } catch (error) {
      for (const d of out) d.close();
      throw error;
    }
    const path = this.path === "" ? name : `${this.path}/${name}`;
    if (out.length === 0) {
      throw new LayerError("(stack)", `has no directory ${JSON.stringify(path)} its index names`);
    }
    return new StackDir(out, path);
  }

  close(): void {
    for (const d of this.#dirs) d.close();
    this.#dirs.length = 0;
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
