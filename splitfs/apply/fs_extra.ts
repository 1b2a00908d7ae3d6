/**
 * The few descriptor-only calls the applier needs beyond `Dir`
 * (docs/resolution.md, "The applier"): `fsync` of a directory, an
 * append-only open, walking to a path's parent without following a symlink,
 * and a Git blob id computed while reading an open file.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import { check, E, errno, FsError, libc, O, retryEintr } from "../fd/ffi.ts";
import { Dir, FileHandle } from "../fd/dir.ts";
import { objectHeader } from "../git/tree_id.ts";
import { childPath } from "../fd/file_names.ts";

/** `O_APPEND` (Linux x86_64/aarch64), which splitfs/fd/ffi.ts does not list. */
const O_APPEND = 0o2000;

/** Flushes a directory's own entries (the names renamed, made or removed in it) to disk. */
export function fsyncDir(dir: Dir): void {
  check(libc().fsync(dir.fd), "fsync", dir.path);
}

/**
 * Flushes every descriptor given (files or directories), all at once, each
 * `fsync` on a thread of its own: the file system commits them together,
 * where one after the other each would wait for a commit of its own. When
 * this returns, each is on disk.
 *
 * @throws {FsError} naming the first that failed
 */
export async function fsyncAll(
  targets: readonly { readonly fd: number; readonly path: string }[],
): Promise<void> {
  const results = await Promise.all(targets.map((t) => libc().fsync_nonblocking(t.fd)));
  for (const [i, r] of results.entries()) {
    if (r !== -1) continue;
    const t = targets[i]!;
    // Its errno belongs to the thread that ran it: flushing again here names the error, and a
    // second flush that succeeds does not undo the first one's failure (EIO is said then).
    check(libc().fsync(t.fd), "fsync", t.path);
    throw new FsError("fsync", t.path, E.EIO);
  }
}

/** Opens (creating it when absent, never through a symlink) a child file for appending. */
export function openAppend(dir: Dir, name: string): FileHandle {
  const path = childPath(dir.path, name);
  const fd = retryEintr(() =>
    libc().openat(
      dir.fd,
      new TextEncoder().encode(`${name}\0`),
      O.WRONLY | O.CREAT | O_APPEND | O.NOFOLLOW | O.CLOEXEC,
      0o600,
    )
  );
  if (fd === -1) throw new FsError("openat", path, errno());
  return new FileHandle(fd, path);
}

/** Where a relative path's parent is: open, or why it cannot be. */
export type Parent =
  | { readonly ok: true; readonly dir: Dir; readonly name: string }
  /** `at` (an ancestor) is absent, or is not a directory (`kind` says what it is). */
  | { readonly ok: false; readonly at: string; readonly kind: string };

/**
 * Opens the parent directory of `rel` (a normalised relative path) one
 * component at a time under `root`, never through a symlink. Close the
 * returned `dir`.
 */
export function openParent(root: Dir, rel: string): Parent {
  const parts = rel.split("/");
  const name = parts.pop()!;
  let cur = root.dup();
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    const st = cur.statAt(part);
    if (st === null || st.kind !== "dir") {
      cur.close();
      return { ok: false, at: parts.slice(0, i + 1).join("/"), kind: st?.kind ?? "absent" };
    }
    const next = cur.openDir(part);
    cur.close();
    cur = next;
  }
  return { ok: true, dir: cur, name };
}

/** Opens the parent of `rel`, which must exist as a directory; throws naming the path. */
export function parentOf(root: Dir, rel: string): { dir: Dir; name: string } {
  const p = openParent(root, rel);
  if (!p.ok) {
    throw new FsError(
      "openat",
      childPath(root.path, p.at),
      p.kind === "absent" ? E.ENOENT : E.ENOTDIR,
    );
  }
  return p;
}

/** The hash a blob id of `hexLength` digits is made with: SHA-1 (40) or SHA-256 (64). */
export function blobHash(size: number, hexLength: number): Hash {
  return createHash(hexLength === 64 ? "sha256" : "sha1").update(objectHeader("blob", size));
}

const CHUNK = 1 << 20;

/** The Git blob id (hex) of an open regular file's bytes, read from its start. */
export function blobIdOfFile(file: FileHandle, hexLength: number): string {
  check(libc().lseek(file.fd, 0n, 0), "lseek", file.path);
  const size = file.stat().size;
  const h = blobHash(size, hexLength);
  const buf = new Uint8Array(Math.min(CHUNK, Math.max(size, 1)));
  let total = 0;
  for (;;) {
    const n = file.read(buf);
    if (n === 0) break;
    total += n;
    h.update(buf.subarray(0, n));
  }
  if (total !== size) {
    // An id of bytes that changed under the read would name neither version.
    throw new Error(`${file.path} changed while it was read: try again once it is idle`);
  }
  return h.digest("hex");
}
