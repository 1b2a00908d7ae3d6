/**
 * Deleting the layers nothing uses (`marsh gc`, docs/guide.md "Snapshot
 * layers and marsh gc"): what `LayerStore.collect` does, over the store's
 * {@linkcode LayersDir}.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { compareNames, type Dir, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { CHAIN, DATA, LAYER_ID } from "./layer_seal.ts";
import { HEAD_SUFFIX, type LayersDir, TRASH_PREFIX } from "./layers_dir.ts";
import { MountPointError } from "../fd/mount_boundary.ts";
import { TRASH_DIR } from "../../model/layout.ts";

/**
 * Deletes every layer that is not in `referenced`, not below a referenced
 * layer, not in `exact` (kept alone) and not in a chain head's stack; unsealed leftovers of a crash go
 * too. Each is unsealed first, then renamed into `.marsh/.trash` and
 * removed there, so a crash never leaves a half-deleted layer that looks
 * valid. A dry run deletes nothing and reports the same. With `heads`
 * false (`marsh gc --all`), the chain heads' stacks go too; the head
 * files stay for the caller.
 *
 * @returns the removed ids (sorted) and the bytes of their files
 * @throws {MountPointError} after removing the rest, when a layer has a mount in it
 */
export function collectLayers(
  dir: LayersDir,
  referenced: ReadonlySet<string>,
  dryRun: boolean,
  heads: boolean,
  exact: ReadonlySet<string> = new Set(),
): { removed: string[]; bytes: number } {
  // Whole stacks named layer by layer: their parents are not followed, since
  // a stack on a compacted bottom no longer needs the layers it replaced
  // (docs/checkpoints.md "Compaction").
  const keep = new Set<string>([...exact].filter((id) => LAYER_ID.test(id)));
  const keepStack = (top: string) => {
    // Follow parents without trusting seals: keeping too much is the safe side.
    for (let id: string | null = top; id !== null && !keep.has(id);) {
      keep.add(id);
      id = dir.readMetaLoosely(id)?.parent ?? null;
    }
  };
  for (const id of referenced) if (LAYER_ID.test(id)) keepStack(id);
  for (const e of heads ? dir.layers.entries() : []) {
    if (!e.name.endsWith(HEAD_SUFFIX)) continue;
    const chain = e.name.slice(0, -HEAD_SUFFIX.length);
    const top = CHAIN.test(chain) ? dir.readHead(chain) : null;
    if (top !== null) keepStack(top);
  }
  const removed: string[] = [];
  let bytes = 0;
  for (const e of dir.layers.entries()) {
    if (!LAYER_ID.test(e.name) || keep.has(e.name)) continue;
    removed.push(e.name);
    bytes += dir.tryVerify(e.name)?.bytes ?? looseBytes(dir.layers, e.name);
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
      dir.forgetIndex(id);
      guarded(() => dir.discard(id));
    }
    sweepLeftovers(dir, guarded);
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

/** Bytes of the regular files under an unsealed layer (its meta cannot be trusted). */
function looseBytes(layers: Dir, id: string): number {
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
    using wrapper = layers.openDir(id);
    if (wrapper.statAt(DATA)?.kind !== "dir") return 0;
    using data = wrapper.openDir(DATA);
    return sum(data);
  } catch (error) {
    if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) return 0;
    throw error;
  }
}

/** Probe files, head temp files and trashed layers a crash left behind; each removal runs in `guarded`. */
function sweepLeftovers(dir: LayersDir, guarded: (remove: () => void) => void): void {
  for (const e of dir.layers.entries()) {
    if (e.name.startsWith(".probe-") || (e.name.startsWith(".") && e.name.endsWith(".tmp"))) {
      guarded(() => dir.layers.removeTree(e.name));
    }
  }
  if (dir.marsh.statAt(TRASH_DIR)?.kind !== "dir") return;
  using trash = dir.marsh.openDir(TRASH_DIR);
  for (const e of trash.entries()) {
    if (e.name.startsWith(TRASH_PREFIX)) guarded(() => trash.removeTree(e.name));
  }
}
