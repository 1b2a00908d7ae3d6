/**
 * `marsh gc` (docs/guide.md, "Snapshot layers and marsh gc"): the layers a
 * project's split dirs and checkpoint session dirs name, and those the
 * caller keeps (the daemon's checkpoint stacks), are kept; the others are
 * deleted from its layer store.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { LayerStore } from "../layers/layers.ts";
import { LAYERS_DIR, LAYERS_FILE, MARSH_DIR, SPLIT_DIR } from "../../model/layout.ts";
import { sessionPins } from "../session/session_pins.ts";

/**
 * `marsh gc`: deletes the project's layers that no split dir names (kept
 * splits included), no session dir or op dir pins, `keep` does not list
 * and no chain head stacks (each kept layer keeps the stack below it), and
 * that `keepExact` does not list (whole stacks, each layer kept alone: a
 * stack on a compacted bottom does not keep the layers it replaced). Every split dir on disk holds
 * the list of its layers from before its base was mounted, so a mounted
 * layer is always referenced.
 *
 * @throws {RefusedError} when `root` has no `.marsh` directory (no split
 *   was ever taken there: most likely not the project the caller meant)
 */
export function collectLayers(
  root: string,
  dryRun: boolean,
  keep: readonly string[] = [],
  keepExact: readonly string[] = [],
): { root: string; removed: string[]; bytes: number; kept: number } {
  using rootDir = Dir.openAbsolute(root);
  if (rootDir.statAt(MARSH_DIR)?.kind !== "dir") {
    throw new RefusedError(
      `no marsh project at ${root}: it has no ${MARSH_DIR} directory; run marsh gc in a project where marsh split ran`,
    );
  }
  using marsh = rootDir.openDir(MARSH_DIR);
  if (marsh.statAt(LAYERS_DIR)?.kind !== "dir") return { root, removed: [], bytes: 0, kept: 0 };
  using store = LayerStore.open(marsh);
  const referenced = new Set<string>(keep);
  // Session pins are whole stacks, which may stand on a compacted bottom.
  const exact = new Set<string>(keepExact);
  for (const id of sessionPins(marsh)) exact.add(id);
  if (marsh.statAt(SPLIT_DIR)?.kind === "dir") {
    using splits = marsh.openDir(SPLIT_DIR);
    for (const e of splits.entries()) {
      if (splits.statAt(e.name)?.kind !== "dir") continue;
      using split = splits.openDir(e.name);
      const list = split.readFileIfExists(LAYERS_FILE, 64 * 1024);
      if (list === null) continue;
      for (const id of new TextDecoder().decode(list).split("\n")) if (id) referenced.add(id);
    }
  }
  const total = store.list().length;
  const r = store.collect(referenced, dryRun, true, exact);
  return { root, removed: r.removed, bytes: r.bytes, kept: total - r.removed.length };
}
