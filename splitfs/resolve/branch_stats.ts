/**
 * `marsh compare`'s counts (docs/resolution.md, "Comparing branches"): per
 * branch, the paths its patch changes, its added and removed lines, its
 * binary files, and the other branches that change the same paths. Read
 * through the split's held `out/` descriptor, without following a symlink.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { parseFilesList, patchStats } from "../../patch/patch_stats.ts";
import { labelProblem } from "../../model/layout.ts";
import type { BranchStats } from "../../protocol/splitfs_compare.ts";
import type { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { RefusedError } from "../errors.ts";
import { FILES_FILE, PATCH_FILE } from "../capture/capture.ts";

/** A patch larger than this is not counted (`added`/`removed` stay 0 and the message says so). */
export const MAX_COUNTED_PATCH = 512 * 1024 * 1024;

/** The whole of `dir/name`, or `null` when it does not exist. */
function readAll(dir: Dir, name: string, max: number): Uint8Array | null {
  let file;
  try {
    file = dir.openFile(name);
  } catch (error) {
    if (error instanceof FsError && error.errno === E.ENOENT) return null;
    throw error;
  }
  using f = file;
  const size = f.stat().size;
  if (size > max) throw new RefusedError(`${name} is larger than ${max} bytes; not counted`);
  const out = new Uint8Array(size);
  let at = 0;
  while (at < size) {
    const n = f.read(out.subarray(at));
    if (n === 0) break;
    at += n;
  }
  return out.subarray(0, at);
}

/**
 * Counts each branch's patch under `out` (the split's `out/` dir), in the
 * order given. A branch without a files list (not captured) is `present:
 * false` with zeros.
 *
 * @throws {RefusedError} for an invalid label or a malformed files list
 */
export function branchStats(out: Dir, labels: readonly string[]): BranchStats[] {
  const paths = new Map<string, Set<string>>();
  const counted = new Map<string, Omit<BranchStats, "overlaps" | "label">>();
  for (const label of labels) {
    const problem = labelProblem(label);
    if (problem) throw new RefusedError(problem);
    if (paths.has(label)) throw new RefusedError(`duplicate label "${label}"`);
    let dir: Dir;
    try {
      dir = out.openDir(label);
    } catch (error) {
      if (error instanceof FsError && error.errno === E.ENOENT) {
        counted.set(label, { present: false, files: 0, added: 0, removed: 0, binary: 0 });
        paths.set(label, new Set());
        continue;
      }
      throw error;
    }
    using d = dir;
    const list = readAll(d, FILES_FILE, MAX_COUNTED_PATCH);
    if (list === null) {
      counted.set(label, { present: false, files: 0, added: 0, removed: 0, binary: 0 });
      paths.set(label, new Set());
      continue;
    }
    let listed;
    try {
      listed = parseFilesList(new TextDecoder("utf-8", { fatal: true }).decode(list));
    } catch (error) {
      throw new RefusedError(
        `out/${label}/${FILES_FILE} is malformed: ${
          error instanceof Error ? error.message : error
        }`,
      );
    }
    paths.set(label, new Set(listed.map((f) => f.path)));
    const patch = readAll(d, PATCH_FILE, MAX_COUNTED_PATCH);
    const s = patch === null ? { added: 0, removed: 0, binary: 0 } : patchStats(patch);
    counted.set(label, {
      present: true,
      files: listed.length,
      added: s.added,
      removed: s.removed,
      binary: s.binary,
    });
  }
  return labels.map((label) => {
    const mine = paths.get(label)!;
    const overlaps = labels.filter((other) => other !== label).flatMap((other) => {
      let n = 0;
      for (const p of paths.get(other)!) if (mine.has(p)) n++;
      return n > 0 ? [{ label: other, paths: n }] : [];
    });
    return { label, ...counted.get(label)!, overlaps };
  });
}
