/**
 * The layer store's way in for a layer it did not write itself
 * (docs/engine.md "The layered snapshot store", docs/checkpoints.md "An
 * operation"): an operation's normalised overlay upper dir becomes a layer's
 * `data/` by rename, is sealed in a staging wrapper beside it exactly as a
 * snapshot's layer is (`stat`, `index`, `meta.json`, a sync, `SEALED`),
 * and only then renamed into `layers/<id>`, so the store never shows a
 * half-sealed layer under its id. Also: a stack named by its ids, and a
 * layer read back by id and root id (recovery's evidence).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import type { LayerIndex } from "./layer_index.ts";
import { encodeDelta, encodeIndex } from "./index_codec.ts";
import { diffIndex } from "./index_delta.ts";
import {
  checkData,
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
import { type HeadStack, INDEX, isErrno, type LayersDir, writeDurable } from "./layers_dir.ts";
import { E } from "../fd/ffi.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";
import { syncWrapper } from "./layer_sync.ts";

const enc = new TextEncoder();
/** An adopted layer's seal steps (`phase_times.ts`; a snapshot's are in `layers.ts`). */
const PHASE = {
  records: "layer adopt: stat records",
  encode: "layer adopt: index encode",
  index: "layer adopt: index and meta written",
  sync: "layer adopt: sync",
  seal: "layer adopt: SEALED",
  rename: "layer adopt: rename and syncfs",
} as const;

/** What a layer adopted on top of a stack holds, for its `meta.json`. */
export interface AdoptedLayer {
  readonly id: string;
  /** The chain its `meta.json` names (never a chain's head: see {@linkcode sealStaged}). */
  readonly chain: string;
  readonly parent: LayerMeta;
  /**
   * The merged view's index with this layer on top; `null` only to finish a
   * staged wrapper that is sealed already (its index is written).
   */
  readonly index: LayerIndex | null;
  /**
   * The merged index of `parent`'s stack that `index` was computed from:
   * the layer's `index` is then sealed as its delta against it, O(changed)
   * (docs/checkpoints.md "The layer index"); absent, or for a compacted
   * layer, the whole index.
   */
  readonly base?: LayerIndex;
  readonly rootId: string;
  readonly counts: {
    readonly files: number;
    readonly dirs: number;
    readonly symlinks: number;
    readonly whiteouts: number;
    readonly bytes: number;
  };
  /**
   * The layer holds `parent`'s whole stack merged (docs/checkpoints.md
   * "Compaction"): sealed as a bottom layer (no parent) with `parent`'s
   * depth, naming `parent` as the layer it compacts.
   */
  readonly compacted?: boolean;
}

/**
 * The verified stack `ids` (bottom first) with its top's index: each layer
 * sealed, each one's parent the one below it.
 *
 * @throws {LayerError} when a layer is missing, unsealed, or the stack is not `ids`
 */
export function stackOfIds(dir: LayersDir, ids: readonly string[]): HeadStack {
  const metas = stackMetas(dir, ids);
  const topMeta = metas[metas.length - 1] as LayerMeta;
  return { ids: [...ids], metas, top: topMeta, index: dir.loadIndex(metas) };
}

/**
 * The verified metas of the stack `ids` (bottom first), as {@linkcode stackOfIds}
 * checks them, without its index.
 *
 * @throws {LayerError} when a layer is missing, unsealed, or the stack is not `ids`
 */
export function stackMetas(dir: LayersDir, ids: readonly string[]): LayerMeta[] {
  const top = ids[ids.length - 1];
  if (top === undefined) throw new TypeError("a stack has at least one layer");
  try {
    return dir.explicitStack(ids);
  } catch (error) {
    if (!(error instanceof LayerError)) throw error;
    throw new LayerError(
      top,
      `does not top the stack asked for (${ids.join(",")}): ${error.message}`,
      { cause: error },
    );
  }
}

/**
 * Seals the wrapper `staging/<name>` (which holds the layer's `data/`) as
 * layer `layer.id` and renames it into `layers/<id>`: records, index, meta,
 * one sync for all of them and the data (`layer_sync.ts`: one `syncfs`, or an
 * fsync of each of a small layer's files while the machine holds much dirty
 * data), `SEALED` (fsynced), then the
 * rename and an fsync of `layers/` for it.
 * A wrapper already sealed with the same meta (a seal a crash interrupted
 * before its rename) is renamed without sealing again.
 *
 * @throws {LayerError} when `layers/<id>` exists already, or the staged seal is another layer's
 */
export function sealStaged(
  dir: LayersDir,
  staging: Dir,
  name: string,
  layer: AdoptedLayer,
): LayerMeta {
  let meta: LayerMeta;
  {
    using wrapper = staging.openDir(name);
    if (wrapper.statAt(SEALED) !== null) {
      meta = readSealedMeta(layer.id, wrapper);
      const parent = layer.compacted === true ? null : layer.parent.id;
      if (
        meta.rootId !== layer.rootId || meta.parent !== parent ||
        (layer.compacted === true && meta.compacts !== layer.parent.id)
      ) {
        throw new LayerError(
          layer.id,
          `was staged with root ${meta.rootId} on ${meta.parent}, not root ${layer.rootId} on ${layer.parent.id}`,
        );
      }
    } else {
      meta = sealWrapper(staging, wrapper, layer);
    }
  }
  try {
    staging.rename(name, dir.layers, layer.id);
  } catch (error) {
    if (isErrno(error, E.EEXIST) || isErrno(error, E.ENOTEMPTY)) {
      throw new LayerError(layer.id, "exists already in the layer store", { cause: error });
    }
    throw error;
  }
  // The rename is durable once `layers/` is synced (an fsync of that one
  // directory: the layer's own files were synced before SEALED); only then is
  // the layer answered.
  const t = phaseStart();
  dir.layers.sync();
  phaseEnd(PHASE.rename, t);
  if (layer.index !== null) {
    dir.cacheIndex(layer.id, layer.index, layer.base === undefined || layer.compacted === true);
  }
  dir.trustSealed(meta);
  return meta;
}

/** Writes a new file with `data`, read-only; its durability is the caller's next sync. */
function writeReadOnly(dir: Dir, name: string, data: Uint8Array): void {
  using f = dir.createFile(name, 0o600);
  f.writeAll(data);
  f.chmod(0o444);
}

function sealWrapper(staging: Dir, wrapper: Dir, layer: AdoptedLayer): LayerMeta {
  if (layer.index === null) throw new TypeError(`layer ${layer.id} has no index to seal with`);
  // Any leftover of an interrupted attempt is rewritten from scratch.
  for (const f of [INDEX, META, "stat"]) if (wrapper.statAt(f) !== null) wrapper.unlink(f);
  let t = phaseStart();
  const data = recordData(wrapper);
  phaseEnd(PHASE.records, t);
  t = phaseStart();
  const compacted = layer.compacted === true;
  const indexBytes = layer.base !== undefined && !compacted
    ? encodeDelta(diffIndex(layer.base, layer.index))
    : encodeIndex(layer.index);
  phaseEnd(PHASE.encode, t);
  t = phaseStart();
  // Not synced here: `syncWrapper` below covers them, before SEALED.
  writeReadOnly(wrapper, INDEX, indexBytes);
  const meta: LayerMeta = {
    version: 2,
    id: layer.id,
    parent: compacted ? null : layer.parent.id,
    depth: compacted ? layer.parent.depth : layer.parent.depth + 1,
    chain: layer.chain,
    rootId: layer.rootId,
    created: Date.now(),
    full: compacted,
    ...layer.counts,
    index: { sha256: sha256Hex(indexBytes), size: indexBytes.length },
    data,
    ...(compacted ? { compacts: layer.parent.id } : {}),
  };
  const metaBytes = enc.encode(JSON.stringify(meta, null, 2) + "\n");
  writeReadOnly(wrapper, META, metaBytes);
  phaseEnd(PHASE.index, t);
  t = phaseStart();
  syncWrapper(staging, wrapper, data.entries);
  phaseEnd(PHASE.sync, t);
  t = phaseStart();
  writeDurable(wrapper, SEALED, enc.encode(sealOf(metaBytes)));
  wrapper.chmod(0o755);
  phaseEnd(PHASE.seal, t);
  return meta;
}

/** What {@linkcode checkLayer} found (see `protocol/splitfs_session.ts`, `LayerState`). */
export type LayerCheck =
  | { readonly state: "durable" }
  | { readonly state: "absent" }
  | { readonly state: "conflicting"; readonly detail: string }
  | { readonly state: "ambiguous"; readonly detail: string };

/**
 * Reads layer `id` back by its id and the root id it should hold: `durable`
 * (sealed, data intact, that root id), `conflicting` (sealed with another
 * root id), `absent` (no such directory, or one with no `SEALED`: the store
 * never shows a layer before its seal, so that is a removal gc began), or
 * `ambiguous` (a seal that does not match its meta, data changed since the
 * seal, or an error reading it).
 */
export function checkLayer(dir: LayersDir, id: string, rootId: string): LayerCheck {
  if (!LAYER_ID.test(id)) return { state: "absent" };
  try {
    if (dir.layers.statAt(id) === null) return { state: "absent" };
    using wrapper = dir.openWrapper(id);
    if (wrapper.statAt(SEALED) === null) return { state: "absent" };
    const meta = readSealedMeta(id, wrapper);
    if (meta.rootId !== rootId) {
      return { state: "conflicting", detail: `layer ${id} is sealed with root ${meta.rootId}` };
    }
    const problem = checkData(wrapper, meta);
    if (problem !== null) return { state: "ambiguous", detail: `layer ${id} ${problem}` };
    return { state: "durable" };
  } catch (error) {
    return { state: "ambiguous", detail: error instanceof Error ? error.message : String(error) };
  }
}
