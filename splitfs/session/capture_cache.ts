/**
 * The last capture of each op, kept in the service's memory so `op-seal`
 * need not read and hash the changed files a second time
 * (docs/checkpoints.md "An operation"). It is used only when the upper dir
 * is provably what the capture left: one `statx` per entry (kind, mode,
 * size, inode, mtime and ctime in ns, O(changed), no content read) must
 * hash to what was recorded then; ctime moves with any change and cannot be
 * set back. Otherwise, and after a service restart, the seal captures again.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { compareNames, type Dir } from "../fd/dir.ts";
import type { Capture } from "./op_capture.ts";

interface Kept {
  readonly top: string;
  readonly state: string;
  readonly capture: Capture;
}

/** At most this many ops' captures are kept (one per session is live at a time). */
const MAX_KEPT = 8;
const kept = new Map<string, Kept>();
let hits = 0;

/** How many seals used a kept capture (for tests). */
export function keptCaptureHits(): number {
  return hits;
}

/** Keeps `capture` of the op at `opPath` (its upper dir `upper`) over the head topped by `top`. */
export function keepCapture(opPath: string, top: string, upper: Dir, capture: Capture): void {
  kept.delete(opPath);
  kept.set(opPath, { top, state: upperState(upper), capture });
  while (kept.size > MAX_KEPT) kept.delete(kept.keys().next().value as string);
}

/**
 * The kept capture of the op at `opPath`, when it was made over `top`, gave
 * `rootId`, and `upper` has not changed since; else `null`.
 */
export function keptCapture(
  opPath: string,
  top: string,
  rootId: string,
  upper: Dir,
): Capture | null {
  const k = kept.get(opPath);
  if (k === undefined || k.top !== top || k.capture.rootId !== rootId) return null;
  if (upperState(upper) !== k.state) return null;
  hits++;
  return k.capture;
}

/** Forgets the op at `opPath` (dropped or sealed). */
export function forgetCapture(opPath: string): void {
  kept.delete(opPath);
}

/** A digest of every entry's stat below `dir`, itself included, in name order. */
function upperState(dir: Dir): string {
  const h = createHash("sha256");
  const st = dir.stat();
  h.update(`. ${st.kind} ${st.perm} ${st.size} ${st.ino} ${st.mtimeNs} ${st.ctimeNs}\0`);
  walk(dir, "", h);
  return h.digest("hex");
}

function walk(dir: Dir, rel: string, h: Hash): void {
  const names = dir.entries().map((e) => e.name).sort(compareNames);
  for (const name of names) {
    const path = rel === "" ? name : `${rel}/${name}`;
    const st = dir.statAt(name);
    if (st === null) {
      h.update(`${path} gone\0`);
      continue;
    }
    h.update(`${path} ${st.kind} ${st.perm} ${st.size} ${st.ino} ${st.mtimeNs} ${st.ctimeNs}\0`);
    if (st.kind !== "dir") continue;
    using child = dir.openDir(name);
    walk(child, path, h);
  }
}
