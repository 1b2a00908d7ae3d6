/**
 * Blobs in a split's `store.git` for resolving a branch (docs/resolution.md,
 * "The `--git` scope"): whether one is there, a symlink's target read from
 * one, and a source file's bytes written as one so Git can merge it.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { MAX_FILE_BYTES } from "../capture/compare.ts";
import type { Dir, FileHandle } from "../fd/dir.ts";
import { check, libc } from "../fd/ffi.ts";
import { fatalUtf8 } from "../fd/file_names.ts";
import { ObjectExportError, readStoreBlob } from "../git/object_export.ts";
import type { ObjectStore } from "../git/store.ts";
import { blobIdOfFile } from "../apply/fs_extra.ts";

/** Whether `objects` (a `store.git/objects`) holds loose object `id`. */
export function storeHas(objects: Dir, id: string): boolean {
  const fan = objects.statAt(id.slice(0, 2));
  if (fan?.kind !== "dir") return false;
  using dir = objects.openDir(id.slice(0, 2));
  return dir.statAt(id.slice(2))?.kind === "file";
}

/**
 * The target a symlink blob holds.
 *
 * @throws {ObjectExportError} for a blob missing, corrupt, or not UTF-8
 */
export function symlinkTarget(objects: Dir, id: string): string {
  const bytes = readStoreBlob(objects, id);
  try {
    return fatalUtf8.decode(bytes);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new ObjectExportError(`symlink blob ${id} in ${objects.path} is not UTF-8`);
  }
}

/** A source file's blob id, and whether it is in the store now. */
export interface SourceBlob {
  readonly blob: string;
  /** `false`: larger than capture's limit, so not stored (Git cannot merge it here). */
  readonly stored: boolean;
}

/**
 * Hashes an open source file and, unless the store has its blob already,
 * writes it there. A file larger than capture's limit is hashed only.
 *
 * @throws {Error} when the file changed while it was read
 */
export function storeSourceFile(file: FileHandle, store: ObjectStore): SourceBlob {
  const blob = blobIdOfFile(file, 40);
  if (store.has(blob)) return { blob, stored: true };
  const size = file.stat().size;
  if (size > MAX_FILE_BYTES) return { blob, stored: false };
  check(libc().lseek(file.fd, 0n, 0), "lseek", file.path);
  const bytes = file.readAll(MAX_FILE_BYTES);
  const written = store.writeBlob(bytes);
  if (written !== blob) {
    throw new Error(`${file.path} changed while it was read: try again once it is idle`);
  }
  return { blob, stored: true };
}
