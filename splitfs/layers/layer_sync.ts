/**
 * The barrier before an adopted layer's `SEALED` (docs/checkpoints.md
 * "Measured: the op path"): everything the seal covers made durable. Two
 * ways, the same files durable either way:
 *
 * - one `syncfs`: a journal commit and a flush when the file system holds
 *   little dirty data (about 1 ms on the bench's disk), but it writes out
 *   every dirty page of the file system, other writers' too: under a
 *   compaction's copy of a 100k-file view it made an operation's seal wait
 *   for that copy;
 * - an fsync of each file and directory of `data/` and of the wrapper's own
 *   files and directories: O(changed) and no one else's pages, but about 20
 *   flushes for a five-file operation (about 5 ms here when calm).
 *
 * So a small layer (at most {@linkcode FSYNC_MAX_ENTRIES} entries) is synced
 * file by file when the machine holds more than {@linkcode DIRTY_MAX_BYTES}
 * of dirty data (`/proc/meminfo`), else, and for a big layer (a compaction's
 * whole view), by one `syncfs`.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { DATA, META, STAT } from "./layer_seal.ts";
import { INDEX } from "./layers_dir.ts";

/** Past this many entries in `data/` one `syncfs` is cheaper than an fsync of each. */
export const FSYNC_MAX_ENTRIES = 256;
/** Above this much dirty or writeback data on the machine, a `syncfs` would wait for others' writes. */
export const DIRTY_MAX_BYTES = 1 << 20;

/** How {@linkcode syncWrapper} chooses: by the dirty data (`auto`), or always one way (tests). */
export type SyncWay = "auto" | "fsync" | "syncfs";
let way: SyncWay = "auto";

/** Sets how layers are synced from now on; returns the previous way. For tests. */
export function setSyncWay(next: SyncWay): SyncWay {
  const before = way;
  way = next;
  return before;
}

/**
 * Makes the wrapper `staging/<wrapper>` durable before its `SEALED` is
 * written: every file and directory of its `data/` (`entries` of them, as
 * `recordData` counted), its `stat`, `index` and `meta.json`, the wrapper's
 * own entries, and `staging`'s (the wrapper's name in it, and what the
 * caller renamed or wrote there before, such as an operation's pin).
 */
export function syncWrapper(staging: Dir, wrapper: Dir, entries: number): void {
  const fsync = way === "fsync" ||
    (way === "auto" && entries <= FSYNC_MAX_ENTRIES && dirtyBytes() > DIRTY_MAX_BYTES);
  if (!fsync) {
    wrapper.syncFs();
    return;
  }
  {
    using data = wrapper.openDir(DATA);
    syncTree(data);
  }
  for (const name of [STAT, INDEX, META]) {
    using f = wrapper.openFile(name);
    f.sync();
  }
  wrapper.sync();
  staging.sync();
}

/** The machine's `Dirty` plus `Writeback` bytes; unknown (no `/proc`) counts as a lot. */
function dirtyBytes(): number {
  let text: string;
  try {
    text = new TextDecoder().decode(Dir.readAbsolute("/proc/meminfo", 1 << 16));
  } catch (error) {
    if (error instanceof Error) return Infinity;
    throw error;
  }
  let kb = 0;
  for (const key of ["Dirty", "Writeback"]) {
    const m = new RegExp(`^${key}:\\s+(\\d+) kB$`, "m").exec(text);
    if (m === null) return Infinity;
    kb += Number(m[1]);
  }
  return kb * 1024;
}

/**
 * Each regular file below `dir`, then `dir` itself. Symlinks and whiteouts
 * have no data of their own and cannot be opened to fsync: their inode is
 * made with their entry, which their directory's fsync makes durable (one
 * journal transaction on ext4 and xfs).
 */
function syncTree(dir: Dir): void {
  for (const e of dir.entries()) {
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    if (kind === "dir") {
      using kid = dir.openDir(e.name);
      syncTree(kid);
    } else if (kind === "file") {
      using f = dir.openFile(e.name);
      f.sync();
    }
  }
  dir.sync();
}
