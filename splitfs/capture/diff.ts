/**
 * `marsh diff OLD NEW`: the capture engine on two directories the user names.
 * Paths are relative to each directory; `.git` entries are skipped at every
 * depth; no ignore rules apply and no objects are written.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type CaptureSink, type CaptureSummary, writeChanges } from "./capture.ts";
import { type CompareStats, compareTrees } from "./compare.ts";
import { Dir } from "../fd/dir.ts";

/** Compares `oldPath` with `newPath` and writes the patch (or files list) to the sink. */
export function diffDirs(oldPath: string, newPath: string, sink: CaptureSink): CaptureSummary {
  using oldDir = Dir.openAbsolute(Dir.realPath(oldPath));
  using newDir = Dir.openAbsolute(Dir.realPath(newPath));
  const stats: CompareStats = { changedBytes: 0, skippedIgnored: 0, skippedSpecial: 0 };
  const changes = compareTrees({
    old: oldDir,
    new: newDir,
    readyNs: null,
    nestedGit: "skip",
    newIgnore: null,
    // A user diffing two trees is not bound by a split's total budget; one
    // file pair in memory at a time still bounds what a file may weigh.
    maxChangedBytes: Number.MAX_SAFE_INTEGER,
  }, stats);
  return writeChanges(changes, sink, null, stats);
}
