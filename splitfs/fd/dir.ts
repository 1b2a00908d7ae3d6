/**
 * Directory descriptors that never follow a symlink below the root they were
 * opened at. Every walk, copy, read and removal of a project tree goes
 * through {@linkcode Dir}: a planted symlink at any step is an error, a FIFO
 * is never opened blocking, and new files are created `O_EXCL`.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import {
  AT,
  check,
  cname,
  cstr,
  E,
  errno,
  FsError,
  libc,
  O,
  RENAME_NOREPLACE,
  retryEintr,
  S_IFCHR,
} from "./ffi.ts";
import {
  InvalidNameError,
  SymlinkRefusedError,
  TooLargeError,
  WrongKindError,
} from "./dir_errors.ts";
import { readRawEntries } from "./dir_listing.ts";
import {
  closeFd,
  copyBytes,
  type CopyResult,
  type CopyStrategy,
  FileHandle,
  timespecs,
} from "./file_handle.ts";
import { checkName, childPath, compareNames, fatalUtf8, rawName, showName } from "./file_names.ts";
import {
  AT_STATX_SYNC_AS_STAT,
  decodeStatx,
  type EntryKind,
  type Stat,
  statFd,
  statxInto,
} from "./stat.ts";
import { clearDir, removeChildTree } from "./tree_removal.ts";
import { countWork, WORK } from "../work_counts.ts";

export { InvalidNameError, SymlinkRefusedError, TooLargeError, WrongKindError };
export { compareNames, FileHandle };
export type { CopyResult, CopyStrategy, EntryKind, Stat };
export { ctimeAtLeast, sameMtime, withPerm } from "./stat.ts";

/** One name in a directory listing, with its kind when the file system says it. */
export interface Entry {
  readonly name: string;
  /** `undefined` when the file system reports `DT_UNKNOWN`: stat it. */
  readonly kind: EntryKind | undefined;
}

/** A listed name that is not UTF-8: no method taking a name as a string can reach it. */
export interface InvalidEntry {
  readonly raw: Uint8Array;
  /** The name for messages: printable ASCII kept, every other byte as `\xNN`. */
  readonly shown: string;
  /** `undefined` when the file system reports `DT_UNKNOWN`: see {@linkcode Dir.statAtRaw}. */
  readonly kind: EntryKind | undefined;
}

/**
 * An open directory. Children are opened one component at a time with
 * `O_NOFOLLOW`, so nothing below the root is ever reached through a symlink.
 */
export class Dir implements Disposable {
  #fd: number;
  /** The path this directory was reached by, for messages only; never re-resolved. */
  readonly path: string;

  private constructor(fd: number, path: string) {
    this.#fd = fd;
    this.path = path;
  }

  /**
   * Opens an absolute directory path given by the user. Symlinks in this path
   * are followed (it is the caller's own choice of root); nothing below it is.
   */
  static openAbsolute(path: string): Dir {
    if (!path.startsWith("/")) throw new TypeError(`not an absolute path: ${path}`);
    const fd = retryEintr(() =>
      libc().openat(AT.FDCWD, cstr(path), O.RDONLY | O.DIRECTORY | O.CLOEXEC, 0)
    );
    if (fd === -1) throw new FsError("open", path, errno());
    return new Dir(fd, path);
  }

  /**
   * Reads a file of the user's own outside any project (`~/.gitconfig`, the
   * global excludes file). Symlinks are followed, as Git follows them there;
   * the open is still non-blocking and the file must be regular.
   */
  static readAbsolute(path: string, limit: number): Uint8Array {
    using file = Dir.openAbsoluteFile(path);
    return file.readAll(limit);
  }

  /**
   * Opens a regular file outside any project by absolute path (the user's
   * own config files, the daemon's attempt output): symlinks in the path are
   * followed, the open is non-blocking, and the file must be regular.
   *
   * @throws {WrongKindError} when it is not a regular file
   * @throws {FsError} when it cannot be opened
   */
  static openAbsoluteFile(path: string): FileHandle {
    if (!path.startsWith("/")) throw new TypeError(`not an absolute path: ${path}`);
    const fd = retryEintr(() =>
      libc().openat(AT.FDCWD, cstr(path), O.RDONLY | O.NONBLOCK | O.NOCTTY | O.CLOEXEC, 0)
    );
    if (fd === -1) throw new FsError("open", path, errno());
    const file = new FileHandle(fd, path);
    const st = file.stat();
    if (st.kind !== "file") {
      file.close();
      throw new WrongKindError(path, st.kind, "file");
    }
    return file;
  }

  /**
   * `lstat` of an absolute path: its last component is not followed.
   * Returns `null` when it is absent.
   */
  static statAbsolute(path: string): Stat | null {
    if (!path.startsWith("/")) throw new TypeError(`not an absolute path: ${path}`);
    const r = statxInto(AT.FDCWD, cstr(path), AT.SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT);
    if (r === -1) {
      const e = errno();
      if (e === E.ENOENT) return null;
      throw new FsError("stat", path, e);
    }
    return decodeStatx();
  }

  /** The canonical absolute path (`realpath(3)`) of a user-given path. */
  static realPath(path: string): string {
    const out = new Uint8Array(4097);
    const r = libc().realpath(cstr(path), out);
    if (r === null) throw new FsError("realpath", path, errno());
    const end = out.indexOf(0);
    return fatalUtf8.decode(out.subarray(0, end));
  }

  /** The raw descriptor, for the few callers (copy strategies) that pair two fds. */
  get fd(): number {
    if (this.#fd < 0) throw new Error(`directory already closed: ${this.path}`);
    return this.#fd;
  }

  /** `fstat` of this directory itself. */
  stat(): Stat {
    return statFd(this.fd, this.path);
  }

  /** `fstatat(name, AT_SYMLINK_NOFOLLOW)`, or `null` when absent. */
  statAt(name: string): Stat | null {
    checkName(name, this.path);
    return this.#statx(cname(name), () => childPath(this.path, name));
  }

  // The path is made only for an error: stat is on the hot path of every walk.
  #statx(name: Uint8Array, path: () => string): Stat | null {
    countWork(WORK.statted);
    const r = statxInto(this.fd, name, AT.SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT);
    if (r === -1) {
      const e = errno();
      if (e === E.ENOENT) return null;
      throw new FsError("fstatat", path(), e);
    }
    return decodeStatx();
  }

  /**
   * Opens a child directory without following a symlink.
   *
   * @throws {SymlinkRefusedError} when the child is a symlink
   * @throws {WrongKindError} when it is something other than a directory
   * @throws {FsError} otherwise (ENOENT when absent)
   */
  openDir(name: string): Dir {
    checkName(name, this.path);
    const path = childPath(this.path, name);
    const fd = retryEintr(() =>
      libc().openat(this.fd, cname(name), O.RDONLY | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC, 0)
    );
    if (fd === -1) {
      const e = errno();
      if (e === E.ELOOP) throw new SymlinkRefusedError(path);
      if (e === E.ENOTDIR) {
        const st = this.statAt(name);
        if (st?.kind === "symlink") throw new SymlinkRefusedError(path);
        if (st) throw new WrongKindError(path, st.kind, "dir");
      }
      throw new FsError("openat", path, e);
    }
    return new Dir(fd, path);
  }

  /** Opens a `/`-separated relative path one no-follow component at a time. */
  openPath(rel: string): Dir {
    const parts = rel.split("/").filter((p) => p !== "" && p !== ".");
    if (parts.length === 0) return this.dup();
    let cur: Dir | null = null;
    try {
      for (const part of parts) {
        const next: Dir = (cur ?? this).openDir(part);
        cur?.close();
        cur = next;
      }
    } catch (error) {
      // The directories opened so far would otherwise leak their descriptors.
      cur?.close();
      throw error;
    }
    return cur!;
  }

  /** Another descriptor for the same directory (closing one leaves the other open). */
  dup(): Dir {
    const fd = retryEintr(() =>
      libc().openat(this.fd, cstr("."), O.RDONLY | O.DIRECTORY | O.CLOEXEC, 0)
    );
    if (fd === -1) throw new FsError("openat", this.path, errno());
    return new Dir(fd, this.path);
  }

  /** `mkdirat`; throws FsError EEXIST when the name exists (of any kind). */
  mkdir(name: string, mode = 0o755): void {
    checkName(name, this.path);
    check(libc().mkdirat(this.fd, cstr(name), mode), "mkdirat", childPath(this.path, name));
  }

  /** Opens a child directory, creating it first when absent; a symlink there is refused. */
  ensureDir(name: string, mode = 0o755): Dir {
    checkName(name, this.path);
    const r = libc().mkdirat(this.fd, cstr(name), mode);
    if (r === -1) {
      const e = errno();
      if (e !== E.EEXIST) throw new FsError("mkdirat", childPath(this.path, name), e);
    }
    return this.openDir(name);
  }

  /**
   * The names in this directory, without `.` and `..`, in no particular order.
   *
   * @throws {InvalidNameError} for a name that is not UTF-8 (see {@linkcode Dir.listing})
   */
  entries(): Entry[] {
    const { entries, invalid } = this.listing();
    const first = invalid[0];
    if (first) throw new InvalidNameError(this.path, first.shown);
    return entries;
  }

  /** Like {@linkcode Dir.entries}, with the names that are not UTF-8 set apart. */
  listing(): { entries: Entry[]; invalid: InvalidEntry[] } {
    const entries: Entry[] = [], invalid: InvalidEntry[] = [];
    for (const e of readRawEntries(this.fd, this.path)) {
      if (e.ascii !== null) {
        entries.push({ name: e.ascii, kind: e.kind });
        continue;
      }
      try {
        entries.push({ name: fatalUtf8.decode(e.raw), kind: e.kind });
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;
        invalid.push({ raw: e.raw, shown: showName(e.raw), kind: e.kind });
      }
    }
    countWork(WORK.listed, entries.length + invalid.length);
    return { entries, invalid };
  }

  /** `fstatat(AT_SYMLINK_NOFOLLOW)` of a listed name given as bytes, or `null` when absent. */
  statAtRaw(raw: Uint8Array): Stat | null {
    return this.#statx(rawName(raw), () => childPath(this.path, showName(raw)));
  }

  /**
   * Opens a child directory named by its bytes, without following a symlink.
   *
   * @throws {FsError} when it cannot be opened (ELOOP for a symlink, ENOTDIR for another kind)
   */
  openDirRaw(raw: Uint8Array): Dir {
    const path = childPath(this.path, showName(raw));
    const fd = retryEintr(() =>
      libc().openat(this.fd, rawName(raw), O.RDONLY | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC, 0)
    );
    if (fd === -1) throw new FsError("openat", path, errno());
    return new Dir(fd, path);
  }

  /** Entries sorted by the bytes of their names, as Git orders paths. */
  sortedEntries(): Entry[] {
    return this.entries().sort((a, b) => compareNames(a.name, b.name));
  }

  /**
   * Opens a child regular file for reading: `O_NOFOLLOW | O_NONBLOCK`, then
   * `fstat` must say regular, so a FIFO never blocks and a symlink is never read.
   */
  openFile(name: string): FileHandle {
    checkName(name, this.path);
    const path = childPath(this.path, name);
    const fd = retryEintr(() =>
      libc().openat(
        this.fd,
        cname(name),
        O.RDONLY | O.NOFOLLOW | O.NONBLOCK | O.NOCTTY | O.CLOEXEC,
        0,
      )
    );
    if (fd === -1) {
      const e = errno();
      if (e === E.ELOOP) throw new SymlinkRefusedError(path);
      if (e === E.ENXIO) throw new WrongKindError(path, "socket", "file");
      throw new FsError("openat", path, e);
    }
    const file = new FileHandle(fd, path);
    const st = file.stat();
    if (st.kind !== "file") {
      file.close();
      throw new WrongKindError(path, st.kind, "file");
    }
    return file;
  }

  /**
   * Reads a whole regular file of at most `limit` bytes.
   *
   * @throws {TooLargeError} when the file is (or grows) past `limit`
   */
  readFile(name: string, limit: number): Uint8Array {
    using file = this.openFile(name);
    return file.readAll(limit);
  }

  /** Reads a file, or returns `null` when it is absent. Other kinds still throw. */
  readFileIfExists(name: string, limit: number): Uint8Array | null {
    try {
      return this.readFile(name, limit);
    } catch (error) {
      if (error instanceof FsError && error.errno === E.ENOENT) return null;
      throw error;
    }
  }

  /** Creates a new file `O_CREAT | O_EXCL | O_NOFOLLOW` and returns it open for writing. */
  createFile(name: string, mode = 0o644): FileHandle {
    checkName(name, this.path);
    const path = childPath(this.path, name);
    const fd = retryEintr(() =>
      libc().openat(
        this.fd,
        cstr(name),
        O.WRONLY | O.CREAT | O.EXCL | O.NOFOLLOW | O.CLOEXEC,
        mode,
      )
    );
    if (fd === -1) {
      const e = errno();
      if (e === E.EEXIST && this.statAt(name)?.kind === "symlink") {
        throw new SymlinkRefusedError(path);
      }
      throw new FsError("openat", path, e);
    }
    return new FileHandle(fd, path);
  }

  /** Creates a new file with these bytes; its mode is set exactly (umask does not apply). */
  writeNewFile(name: string, data: Uint8Array, mode = 0o644): void {
    using file = this.createFile(name, mode);
    file.writeAll(data);
    file.chmod(mode);
  }

  /** A symlink's target bytes. */
  readlink(name: string): Uint8Array {
    checkName(name, this.path);
    const buf = new Uint8Array(4096);
    const n = check(
      libc().readlinkat(this.fd, cname(name), buf, BigInt(buf.length)),
      "readlinkat",
      childPath(this.path, name),
    );
    return buf.slice(0, n);
  }

  /** Creates a symlink `name` whose target is the given bytes. */
  symlink(target: Uint8Array, name: string): void {
    checkName(name, this.path);
    if (target.includes(0) || target.length === 0) {
      throw new TypeError(`invalid symlink target for ${childPath(this.path, name)}`);
    }
    const t = new Uint8Array(target.length + 1);
    t.set(target);
    check(libc().symlinkat(t, this.fd, cstr(name)), "symlinkat", childPath(this.path, name));
  }

  /**
   * Hard-links a child as `toName` in `to` (`linkat` with flags 0): both ends
   * are (descriptor, name), nothing is resolved by path, and a symlink at
   * `name` is never followed (the new name would be that symlink itself).
   * Never replaces an existing destination (`EEXIST`).
   */
  link(name: string, to: Dir, toName: string): void {
    checkName(name, this.path);
    checkName(toName, to.path);
    check(
      libc().linkat(this.fd, cstr(name), to.fd, cstr(toName), 0),
      "linkat",
      childPath(to.path, toName),
    );
  }

  /** Renames a child into another directory; never replaces an existing destination. */
  rename(name: string, to: Dir, toName: string): void {
    checkName(name, this.path);
    checkName(toName, to.path);
    check(
      libc().renameat2(this.fd, cstr(name), to.fd, cstr(toName), RENAME_NOREPLACE),
      "renameat",
      childPath(this.path, name),
    );
  }

  /**
   * Renames a child over `toName` in `to`, replacing an existing file there
   * atomically (`renameat`). Only for files marsh rewrites as a whole
   * (`out/manifest.json`); everything else uses {@linkcode Dir.rename}.
   */
  renameReplacing(name: string, to: Dir, toName: string): void {
    checkName(name, this.path);
    checkName(toName, to.path);
    check(
      libc().renameat2(this.fd, cstr(name), to.fd, cstr(toName), 0),
      "renameat",
      childPath(this.path, name),
    );
  }

  /** Removes a non-directory child. */
  unlink(name: string): void {
    checkName(name, this.path);
    check(libc().unlinkat(this.fd, cstr(name), 0), "unlinkat", childPath(this.path, name));
  }

  /** Removes an empty child directory. */
  rmdir(name: string): void {
    checkName(name, this.path);
    check(
      libc().unlinkat(this.fd, cstr(name), AT.REMOVEDIR),
      "unlinkat",
      childPath(this.path, name),
    );
  }

  /**
   * Removes a child and everything below it through descriptors: a symlink is
   * unlinked, never followed. Absent is fine. Stops at a mount boundary
   * (docs/engine.md "Removal"): every directory opened is checked to be on
   * this directory's mount, so nothing on a mount below is ever deleted.
   *
   * @throws {MountPointError} at a mount point below (or on) the child; what
   *   was deleted before it stays deleted, nothing at or below it is touched
   */
  removeTree(name: string): void {
    const st = this.statAt(name);
    if (st === null) return;
    removeChildTree(this, name, st.kind === "dir");
  }

  /**
   * Removes everything inside this directory, keeping the directory. Names
   * are used as raw bytes, so whatever a branch named its files goes too, and
   * a read-only directory (copied so from a project) is made writable first.
   * Stops at a mount boundary, as {@linkcode Dir.removeTree} does.
   *
   * @throws {MountPointError} at a mount point below this directory
   */
  clear(): void {
    clearDir(this);
  }

  /**
   * A path naming this open directory itself (`/proc/self/fd/N`): for calls
   * that take paths only (mount options, xattrs), so nothing is re-resolved
   * by name. Valid while this Dir is open.
   */
  get procPath(): string {
    return `/proc/self/fd/${this.fd}`;
  }

  /** Flushes this directory's own entries (`fsync` of the directory): a rename into it, durable. */
  sync(): void {
    countWork(WORK.fsync);
    check(libc().fsync(this.fd), "fsync", this.path);
  }

  /** Flushes the whole file system this directory is on (`syncfs`): one call instead of an fsync per file. */
  syncFs(): void {
    countWork(WORK.syncfs);
    check(libc().syncfs(this.fd), "syncfs", this.path);
  }

  /** Creates an overlay whiteout (a 0/0 character device); any user may. */
  mknodWhiteout(name: string): void {
    checkName(name, this.path);
    check(
      libc().mknodat(this.fd, cstr(name), S_IFCHR | 0o000, 0n),
      "mknodat",
      childPath(this.path, name),
    );
  }

  /**
   * A child's extended attribute without following a symlink, or `null` when
   * it has none by that name (or the file system keeps none).
   */
  xattrAt(name: string, key: string): Uint8Array | null {
    checkName(name, this.path);
    const path = cstr(`${this.procPath}/${name}`);
    const buf = new Uint8Array(256);
    const n = Number(libc().lgetxattr(path, cstr(key), buf, BigInt(buf.length)));
    if (n === -1) {
      const e = errno();
      if (e === E.ENODATA || e === E.EOPNOTSUPP) return null;
      throw new FsError("lgetxattr", childPath(this.path, name), e);
    }
    return buf.slice(0, n);
  }

  /** Sets the mode of this directory. */
  chmod(mode: number): void {
    check(libc().fchmod(this.fd, mode), "fchmod", this.path);
  }

  /** Sets a child's modification time without following a symlink (atime = mtime). */
  setMtime(name: string, mtimeNs: bigint): void {
    checkName(name, this.path);
    check(
      libc().utimensat(this.fd, cstr(name), timespecs(mtimeNs), AT.SYMLINK_NOFOLLOW),
      "utimensat",
      childPath(this.path, name),
    );
  }

  /**
   * Copies a child regular file into `dest` as a new file (`O_EXCL`), with
   * its permission bits and mtime, trying `strategy` first and falling back
   * reflink → copy_file_range → read/write when the file system says no.
   * Returns the source's stat before and after, so callers can tell a file
   * that changed while it was copied.
   */
  copyFileTo(name: string, dest: Dir, destName: string, strategy: CopyStrategy): CopyResult {
    using src = this.openFile(name);
    const before = src.stat();
    using dst = dest.createFile(destName, 0o600);
    const used = copyBytes(src, dst, before.size, strategy);
    dst.chmod(before.perm & 0o777);
    dst.setMtime(before.mtimeNs);
    const after = src.stat();
    return { before, after, strategy: used };
  }

  /** Closes the descriptor; a second call does nothing. */
  close(): void {
    if (this.#fd >= 0) {
      const fd = this.#fd;
      this.#fd = -1;
      closeFd(fd, this.path);
    }
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
