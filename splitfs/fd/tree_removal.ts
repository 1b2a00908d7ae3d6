/**
 * Removing a tree through descriptors, stopping at a mount boundary
 * (docs/engine.md "Removal"): every directory opened is checked to be on the
 * removal's mount, so nothing on a mount below is ever deleted. Behind
 * `Dir.removeTree` and `Dir.clear`.
 *
 * Needs `--allow-ffi=<libc path>` and read access to `/proc/self`.
 *
 * @module
 */

import { AT, check, cstr, E, errno, FsError, libc, O, retryEintr } from "./ffi.ts";
import { SymlinkRefusedError } from "./dir_errors.ts";
import { rawBytes, readRawEntries } from "./dir_listing.ts";
import { closeFd } from "./file_handle.ts";
import { childPath, showName } from "./file_names.ts";
import { mountOfFd, MountPointError } from "./mount_boundary.ts";
import { decodeStatx, statFd, statxInto } from "./stat.ts";

/** An open directory as removal needs it: its descriptor, and its path for messages. */
export interface OpenDirFd {
  readonly fd: number;
  readonly path: string;
}

/** A directory descriptor this module opened, closed when its scope ends. */
class OwnedFd implements Disposable, OpenDirFd {
  constructor(readonly fd: number, readonly path: string) {}
  [Symbol.dispose](): void {
    closeFd(this.fd, this.path);
  }
}

/**
 * Removes child `name` of `dir` (of kind directory when `isDir`) and
 * everything below it; a symlink is unlinked, never followed.
 *
 * @throws {MountPointError} at a mount point below (or on) the child; what
 *   was deleted before it stays deleted, nothing at or below it is touched
 */
export function removeChildTree(dir: OpenDirFd, name: string, isDir: boolean): void {
  const path = childPath(dir.path, name);
  const raw = cstr(name);
  if (!isDir) {
    removeEntry(dir, raw, path, 0, path);
    return;
  }
  const mount = mountOfFd(dir.fd, dir.path).id;
  {
    using child = new OwnedFd(openForRemoval(dir, raw, path, mount, path), path);
    clearOn(child, mount, path);
  }
  removeEntry(dir, raw, path, AT.REMOVEDIR, path);
}

/**
 * Removes everything inside `dir`, keeping it; names are raw bytes and a
 * read-only directory is made writable first.
 *
 * @throws {MountPointError} at a mount point below `dir`
 */
export function clearDir(dir: OpenDirFd): void {
  clearOn(dir, mountOfFd(dir.fd, dir.path).id, dir.path);
}

/** {@linkcode clearDir} of a directory on mount `mount`; `top` names the removal in errors. */
function clearOn(dir: OpenDirFd, mount: number, top: string): void {
  const perm = statFd(dir.fd, dir.path).perm;
  if ((perm & 0o700) !== 0o700) {
    check(libc().fchmod(dir.fd, perm | 0o700), "fchmod", dir.path);
  }
  for (const e of readRawEntries(dir.fd, dir.path)) {
    const bytes = rawBytes(e);
    const name = new Uint8Array(bytes.length + 1);
    name.set(bytes);
    const path = childPath(dir.path, showName(bytes));
    let kind = e.kind;
    if (kind === undefined) {
      const r = statxInto(dir.fd, name, AT.SYMLINK_NOFOLLOW);
      if (r === -1) {
        const err = errno();
        if (err === E.ENOENT) continue;
        throw new FsError("fstatat", path, err);
      }
      kind = decodeStatx().kind;
    }
    if (kind === "dir") {
      const fd = openForRemoval(dir, name, path, mount, top);
      {
        using child = new OwnedFd(fd, path);
        clearOn(child, mount, top);
      }
      removeEntry(dir, name, path, AT.REMOVEDIR, top);
    } else {
      removeEntry(dir, name, path, 0, top);
    }
  }
}

/** `unlinkat`; `EBUSY` means a mount point (a file or directory with something mounted on it). */
function removeEntry(
  dir: OpenDirFd,
  name: Uint8Array,
  path: string,
  flags: number,
  top: string,
): void {
  if (libc().unlinkat(dir.fd, name, flags) === -1) {
    const err = errno();
    if (err === E.EBUSY) throw new MountPointError(top, [path]);
    throw new FsError("unlinkat", path, err);
  }
}

/**
 * Opens a child directory (raw name) to empty it, and checks that it is on
 * `mount`: an open crosses a mount on the name, and a bind mount of the same
 * file system has the same device, so only the mount id tells. One its
 * owner made unreadable is given `0o700` first, through an `O_PATH`
 * descriptor (checked the same way), which needs no permission and never
 * follows a symlink.
 */
function openForRemoval(
  dir: OpenDirFd,
  name: Uint8Array,
  path: string,
  mount: number,
  top: string,
): number {
  const flags = O.RDONLY | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC;
  const onMount = (fd: number): number => {
    let other: boolean;
    try {
      other = mountOfFd(fd, path).id !== mount;
    } catch (error) {
      closeFd(fd, path);
      throw error;
    }
    if (other) {
      closeFd(fd, path);
      throw new MountPointError(top, [path]);
    }
    return fd;
  };
  let fd = retryEintr(() => libc().openat(dir.fd, name, flags, 0));
  if (fd === -1 && errno() === E.EACCES) {
    const p = retryEintr(() =>
      libc().openat(dir.fd, name, O.PATH | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC, 0)
    );
    if (p === -1) throw new FsError("openat", path, errno());
    onMount(p);
    try {
      check(libc().fchmodat(AT.FDCWD, cstr(`/proc/self/fd/${p}`), 0o700, 0), "chmod", path);
    } finally {
      closeFd(p, path);
    }
    fd = retryEintr(() => libc().openat(dir.fd, name, flags, 0));
  }
  if (fd === -1) {
    const err = errno();
    if (err === E.ELOOP || err === E.ENOTDIR) throw new SymlinkRefusedError(path);
    throw new FsError("openat", path, err);
  }
  return onMount(fd);
}
