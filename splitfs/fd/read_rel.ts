/**
 * Reading a small file at a relative path through no-follow descriptors.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "./dir.ts";
import { E, FsError } from "./ffi.ts";

/** Reads `rel` (`/`-separated) under `dir`, or `null` when it or a parent is absent. */
export function readRel(dir: Dir, rel: string, max: number): Uint8Array | null {
  const parts = rel.split("/");
  const name = parts.pop()!;
  let parent: Dir;
  try {
    parent = dir.openPath(parts.join("/"));
  } catch (error) {
    if (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) {
      return null;
    }
    throw error;
  }
  try {
    return parent.readFileIfExists(name, max);
  } finally {
    parent.close();
  }
}
