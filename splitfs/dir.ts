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
  FICLONE,
  FsError,
  libc,
  O,
  RENAME_NOREPLACE,
  retryEintr,
  S_IFCHR,
} from "./ffi.ts";
import { mountOfFd, MountPointError } from "./mount_boundary.ts";

/** What an entry is, from `statx` or `d_type`. */
export type EntryKind = "file" | "dir" | "symlink" | "fifo" | "socket" | "char" | "block";

/** The subset of `statx` marsh uses; times in nanoseconds. */
export interface Stat {
  readonly kind: EntryKind;
  /** Permission bits and set-id bits (`mode & 0o7777`). */
  readonly perm: number;
  readonly dev: bigint;
  readonly ino: bigint;
  readonly nlink: number;
  readonly uid: number;
  readonly size: number;
  readonly mtimeNs: bigint;
  readonly ctimeNs: bigint;
  /** The same times as plain numbers, for hot comparisons without BigInt. */
  readonly mtimeSec: number;
  readonly mtimeNsec: number;
  readonly ctimeSec: number;
  readonly ctimeNsec: number;
}

/**
 * A stat decoded from `statx`. The 64-bit fields are BigInts built on first
 * use: a capture compares numbers for every file and rarely needs them.
 */
class StatRecord implements Stat {
  constructor(
    readonly kind: EntryKind,
    readonly perm: number,
    readonly nlink: number,
    readonly uid: number,
    readonly size: number,
    readonly mtimeSec: number,
    readonly mtimeNsec: number,
    readonly ctimeSec: number,
    readonly ctimeNsec: number,
    readonly inoLo: number,
    readonly inoHi: number,
    readonly devMajor: number,
    readonly devMinor: number,
  ) {}
  get mtimeNs(): bigint {
    return BigInt(this.mtimeSec) * 1_000_000_000n + BigInt(this.mtimeNsec);
  }
  get ctimeNs(): bigint {
    return BigInt(this.ctimeSec) * 1_000_000_000n + BigInt(this.ctimeNsec);
  }
  get ino(): bigint {
    return (BigInt(this.inoHi) << 32n) | BigInt(this.inoLo);
  }
  get dev(): bigint {
    return devOf(this.devMajor, this.devMinor);
  }
}

/** The same stat with other permission bits. */
export function withPerm(st: Stat, perm: number): Stat {
  if (st instanceof StatRecord) {
    return new StatRecord(
      st.kind,
      perm,
      st.nlink,
      st.uid,
      st.size,
      st.mtimeSec,
      st.mtimeNsec,
      st.ctimeSec,
      st.ctimeNsec,
      st.inoLo,
      st.inoHi,
      st.devMajor,
      st.devMinor,
    );
  }
  return { ...st, perm };
}

/** Whether two stats carry the same modification time. */
export function sameMtime(a: Stat, b: Stat): boolean {
  return a.mtimeSec === b.mtimeSec && a.mtimeNsec === b.mtimeNsec;
}

/** Whether `st`'s ctime is at or after `(sec, nsec)`. */
export function ctimeAtLeast(st: Stat, sec: number, nsec: number): boolean {
  return st.ctimeSec > sec || (st.ctimeSec === sec && st.ctimeNsec >= nsec);
}

/** One name in a directory listing, with its kind when the file system says it. */
export interface Entry {
  readonly name: string;
  /** `undefined` when the file system reports `DT_UNKNOWN`: stat it. */
  readonly kind: EntryKind | undefined;
}

/** How a regular file's bytes were copied: the strategy that actually ran. */
export type CopyStrategy = "reflink" | "copy_file_range" | "readwrite";

/** A path component that was a symlink where marsh needed a directory or a file. */
export class SymlinkRefusedError extends Error {
  override name = "SymlinkRefusedError";
  constructor(readonly path: string, options?: ErrorOptions) {
    super(`refusing to follow a symlink at ${path}`, options);
  }
}

/** An entry that is not of the kind a step requires (a FIFO where a file was expected). */
export class WrongKindError extends Error {
  override name = "WrongKindError";
  constructor(readonly path: string, readonly kind: EntryKind, readonly wanted: EntryKind) {
    super(`${path} is a ${describeKind(kind)}, not a ${describeKind(wanted)}`);
  }
}

/** A file larger than the caller's bound. */
export class TooLargeError extends Error {
  override name = "TooLargeError";
  constructor(readonly path: string, readonly size: number, readonly limit: number) {
    super(`${path} is larger than ${limit} bytes: ${size} bytes`);
  }
}

/** A file name that is not UTF-8: marsh cannot carry it in a path, a patch or a message. */
export class InvalidNameError extends Error {
  override name = "InvalidNameError";
  /** What the user can do about it (`rename it, or ignore it ...`), or `null`. */
  readonly fix: string | null;
  /** `options.fix` is appended to the message. */
  constructor(
    readonly dir: string,
    readonly shown: string,
    options?: ErrorOptions & { readonly fix?: string },
  ) {
    const fix = options?.fix ?? null;
    super(`file name is not valid UTF-8 in ${dir}: "${shown}"${fix ? `; ${fix}` : ""}`, options);
    this.fix = fix;
  }
}

/** A listed name that is not UTF-8: no method taking a name as a string can reach it. */
export interface InvalidEntry {
  readonly raw: Uint8Array;
  /** The name for messages: printable ASCII kept, every other byte as `\xNN`. */
  readonly shown: string;
  /** `undefined` when the file system reports `DT_UNKNOWN`: see {@linkcode Dir.statAtRaw}. */
  readonly kind: EntryKind | undefined;
}

/** A raw name with printable ASCII kept and every other byte as `\xNN`. */
function showName(raw: Uint8Array): string {
  return Array.from(
    raw,
    (b) => b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`,
  ).join("");
}

/** One listing entry with its name as the file system stores it. */
/** A listed name: decoded already when it is ASCII (the common case), else its raw bytes. */
interface RawEntry {
  readonly raw: Uint8Array;
  readonly ascii: string | null;
  readonly kind: EntryKind | undefined;
}

const EMPTY_RAW = new Uint8Array(0);

/** A listed name's bytes, NUL-terminated; refuses what a listing never yields. */
function rawName(raw: Uint8Array): Uint8Array<ArrayBuffer> {
  if (raw.length === 0 || raw.includes(0) || raw.includes(0x2f)) {
    throw new TypeError(`invalid file name: "${showName(raw)}"`);
  }
  const out = new Uint8Array(raw.length + 1);
  out.set(raw);
  return out;
}

function rawBytes(e: RawEntry): Uint8Array {
  return e.ascii !== null ? encoder.encode(e.ascii) : e.raw;
}

function describeKind(kind: EntryKind): string {
  switch (kind) {
    case "file":
      return "regular file";
    case "dir":
      return "directory";
    case "symlink":
      return "symlink";
    case "fifo":
      return "FIFO";
    case "socket":
      return "socket";
    case "char":
      return "character device";
    case "block":
      return "block device";
  }
}

const STATX_BASIC_STATS = 0x7ff;
const AT_STATX_SYNC_AS_STAT = 0;
const STATX_SIZE = 256;
const statxBuf = new Uint8Array(STATX_SIZE);
const statxView = new DataView(statxBuf.buffer);
const EMPTY = cstr("");

function kindFromMode(mode: number): EntryKind {
  switch (mode & 0o170000) {
    case 0o100000:
      return "file";
    case 0o040000:
      return "dir";
    case 0o120000:
      return "symlink";
    case 0o010000:
      return "fifo";
    case 0o140000:
      return "socket";
    case 0o020000:
      return "char";
    default:
      return "block";
  }
}

function kindFromDtype(t: number): EntryKind | undefined {
  switch (t) {
    case 8:
      return "file";
    case 4:
      return "dir";
    case 10:
      return "symlink";
    case 1:
      return "fifo";
    case 12:
      return "socket";
    case 2:
      return "char";
    case 6:
      return "block";
    default:
      return undefined;
  }
}

function makedev(major: number, minor: number): bigint {
  const ma = BigInt(major), mi = BigInt(minor);
  return ((ma & 0xfffff000n) << 32n) | ((ma & 0xfffn) << 8n) | ((mi & 0xffffff00n) << 12n) |
    (mi & 0xffn);
}

const devCache = new Map<number, bigint>();

/** `makedev`, cached: a walk sees one or two devices, and BigInt math is slow. */
function devOf(major: number, minor: number): bigint {
  const key = major * 4294967296 + minor;
  let dev = devCache.get(key);
  if (dev === undefined) {
    dev = makedev(major, minor);
    devCache.set(key, dev);
  }
  return dev;
}

function secOf(v: DataView, off: number): number {
  return v.getUint32(off, true) + v.getInt32(off + 4, true) * 4294967296;
}

function decodeStatx(): Stat {
  const v = statxView;
  const mode = v.getUint16(28, true);
  return new StatRecord(
    kindFromMode(mode),
    mode & 0o7777,
    v.getUint32(16, true),
    v.getUint32(20, true),
    v.getUint32(40, true) + v.getUint32(44, true) * 4294967296,
    secOf(v, 112),
    v.getUint32(120, true),
    secOf(v, 96),
    v.getUint32(104, true),
    v.getUint32(32, true),
    v.getUint32(36, true),
    v.getUint32(136, true),
    v.getUint32(140, true),
  );
}

function statFd(fd: number, path: string): Stat {
  check(libc().statx(fd, EMPTY, AT.EMPTY_PATH, STATX_BASIC_STATS, statxBuf), "fstat", path);
  return decodeStatx();
}

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });
const direntBuf = new Uint8Array(64 * 1024);
const direntView = new DataView(direntBuf.buffer);

/** Rejects names that could leave the directory or that a path cannot carry. */
function checkName(name: string, where: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new TypeError(`invalid file name in ${where}: ${JSON.stringify(name)}`);
  }
}

function join(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** Closes an fd, ignoring nothing: a failed close is reported. */
function closeFd(fd: number, path: string): void {
  check(libc().close(fd), "close", path);
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
    const r = libc().statx(
      AT.FDCWD,
      cstr(path),
      AT.SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
      STATX_BASIC_STATS,
      statxBuf,
    );
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
    return this.#statx(cname(name), () => join(this.path, name));
  }

  // The path is made only for an error: stat is on the hot path of every walk.
  #statx(name: Uint8Array, path: () => string): Stat | null {
    const r = libc().statx(
      this.fd,
      name,
      AT.SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT,
      STATX_BASIC_STATS,
      statxBuf,
    );
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
    const path = join(this.path, name);
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
    check(libc().mkdirat(this.fd, cstr(name), mode), "mkdirat", join(this.path, name));
  }

  /** Opens a child directory, creating it first when absent; a symlink there is refused. */
  ensureDir(name: string, mode = 0o755): Dir {
    checkName(name, this.path);
    const r = libc().mkdirat(this.fd, cstr(name), mode);
    if (r === -1) {
      const e = errno();
      if (e !== E.EEXIST) throw new FsError("mkdirat", join(this.path, name), e);
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
    for (const e of this.#rawEntries()) {
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
    return { entries, invalid };
  }

  /** `fstatat(AT_SYMLINK_NOFOLLOW)` of a listed name given as bytes, or `null` when absent. */
  statAtRaw(raw: Uint8Array): Stat | null {
    return this.#statx(rawName(raw), () => join(this.path, showName(raw)));
  }

  /**
   * Opens a child directory named by its bytes, without following a symlink.
   *
   * @throws {FsError} when it cannot be opened (ELOOP for a symlink, ENOTDIR for another kind)
   */
  openDirRaw(raw: Uint8Array): Dir {
    const path = join(this.path, showName(raw));
    const fd = retryEintr(() =>
      libc().openat(this.fd, rawName(raw), O.RDONLY | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC, 0)
    );
    if (fd === -1) throw new FsError("openat", path, errno());
    return new Dir(fd, path);
  }

  #rawEntries(): RawEntry[] {
    const out: RawEntry[] = [];
    const buf = direntBuf;
    const view = direntView;
    // getdents64 continues from the fd's offset: rewind so every listing is whole.
    check(libc().lseek(this.fd, 0n, 0), "lseek", this.path);
    for (;;) {
      const n = check(
        libc().getdents64(this.fd, buf, BigInt(buf.length)),
        "getdents64",
        this.path,
      );
      if (n === 0) break;
      let off = 0;
      while (off < n) {
        const reclen = view.getUint16(off + 16, true);
        const dtype = buf[off + 18] ?? 0;
        const nameStart = off + 19;
        let nameEnd = nameStart;
        while (nameEnd < off + reclen && buf[nameEnd] !== 0) nameEnd++;
        off += reclen;
        const len = nameEnd - nameStart;
        if (
          buf[nameStart] === 0x2e && (len === 1 || (len === 2 && buf[nameStart + 1] === 0x2e))
        ) {
          continue;
        }
        let ascii = true;
        for (let i = nameStart; i < nameEnd; i++) {
          if ((buf[i] as number) >= 0x80) {
            ascii = false;
            break;
          }
        }
        const raw = buf.subarray(nameStart, nameEnd);
        out.push(
          ascii
            ? {
              raw: EMPTY_RAW,
              ascii: String.fromCharCode.apply(null, raw as unknown as number[]),
              kind: kindFromDtype(dtype),
            }
            : { raw: raw.slice(), ascii: null, kind: kindFromDtype(dtype) },
        );
      }
    }
    return out;
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
    const path = join(this.path, name);
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
    const path = join(this.path, name);
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
      join(this.path, name),
    );
    return buf.slice(0, n);
  }

  /** Creates a symlink `name` whose target is the given bytes. */
  symlink(target: Uint8Array, name: string): void {
    checkName(name, this.path);
    if (target.includes(0) || target.length === 0) {
      throw new TypeError(`invalid symlink target for ${join(this.path, name)}`);
    }
    const t = new Uint8Array(target.length + 1);
    t.set(target);
    check(libc().symlinkat(t, this.fd, cstr(name)), "symlinkat", join(this.path, name));
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
      join(to.path, toName),
    );
  }

  /** Renames a child into another directory; never replaces an existing destination. */
  rename(name: string, to: Dir, toName: string): void {
    checkName(name, this.path);
    checkName(toName, to.path);
    check(
      libc().renameat2(this.fd, cstr(name), to.fd, cstr(toName), RENAME_NOREPLACE),
      "renameat",
      join(this.path, name),
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
      join(this.path, name),
    );
  }

  /** Removes a non-directory child. */
  unlink(name: string): void {
    checkName(name, this.path);
    check(libc().unlinkat(this.fd, cstr(name), 0), "unlinkat", join(this.path, name));
  }

  /** Removes an empty child directory. */
  rmdir(name: string): void {
    checkName(name, this.path);
    check(libc().unlinkat(this.fd, cstr(name), AT.REMOVEDIR), "unlinkat", join(this.path, name));
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
    const path = join(this.path, name);
    const raw = cstr(name);
    if (st.kind !== "dir") {
      this.#removeEntry(raw, path, 0, path);
      return;
    }
    const mount = mountOfFd(this.fd, this.path).id;
    {
      using child = new Dir(this.#openForRemoval(raw, path, mount, path), path);
      child.#clearOn(mount, path);
    }
    this.#removeEntry(raw, path, AT.REMOVEDIR, path);
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
    this.#clearOn(mountOfFd(this.fd, this.path).id, this.path);
  }

  /** {@linkcode Dir.clear} of a directory on mount `mount`; `top` names the removal in errors. */
  #clearOn(mount: number, top: string): void {
    const perm = this.stat().perm;
    if ((perm & 0o700) !== 0o700) this.chmod(perm | 0o700);
    for (const e of this.#rawEntries()) {
      const bytes = rawBytes(e);
      const name = new Uint8Array(bytes.length + 1);
      name.set(bytes);
      const path = join(this.path, showName(bytes));
      let kind = e.kind;
      if (kind === undefined) {
        const r = libc().statx(this.fd, name, AT.SYMLINK_NOFOLLOW, STATX_BASIC_STATS, statxBuf);
        if (r === -1) {
          const err = errno();
          if (err === E.ENOENT) continue;
          throw new FsError("fstatat", path, err);
        }
        kind = decodeStatx().kind;
      }
      if (kind === "dir") {
        const fd = this.#openForRemoval(name, path, mount, top);
        {
          using child = new Dir(fd, path);
          child.#clearOn(mount, top);
        }
        this.#removeEntry(name, path, AT.REMOVEDIR, top);
      } else {
        this.#removeEntry(name, path, 0, top);
      }
    }
  }

  /** `unlinkat`; `EBUSY` means a mount point (a file or directory with something mounted on it). */
  #removeEntry(name: Uint8Array, path: string, flags: number, top: string): void {
    if (libc().unlinkat(this.fd, name, flags) === -1) {
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
  #openForRemoval(name: Uint8Array, path: string, mount: number, top: string): number {
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
    let fd = retryEintr(() => libc().openat(this.fd, name, flags, 0));
    if (fd === -1 && errno() === E.EACCES) {
      const p = retryEintr(() =>
        libc().openat(this.fd, name, O.PATH | O.DIRECTORY | O.NOFOLLOW | O.CLOEXEC, 0)
      );
      if (p === -1) throw new FsError("openat", path, errno());
      onMount(p);
      try {
        check(libc().fchmodat(AT.FDCWD, cstr(`/proc/self/fd/${p}`), 0o700, 0), "chmod", path);
      } finally {
        closeFd(p, path);
      }
      fd = retryEintr(() => libc().openat(this.fd, name, flags, 0));
    }
    if (fd === -1) {
      const err = errno();
      if (err === E.ELOOP || err === E.ENOTDIR) throw new SymlinkRefusedError(path);
      throw new FsError("openat", path, err);
    }
    return onMount(fd);
  }

  /**
   * A path naming this open directory itself (`/proc/self/fd/N`): for calls
   * that take paths only (mount options, xattrs), so nothing is re-resolved
   * by name. Valid while this Dir is open.
   */
  get procPath(): string {
    return `/proc/self/fd/${this.fd}`;
  }

  /** Flushes the whole file system this directory is on (`syncfs`): one call instead of an fsync per file. */
  syncFs(): void {
    check(libc().syncfs(this.fd), "syncfs", this.path);
  }

  /** Creates an overlay whiteout (a 0/0 character device); any user may. */
  mknodWhiteout(name: string): void {
    checkName(name, this.path);
    check(
      libc().mknodat(this.fd, cstr(name), S_IFCHR | 0o000, 0n),
      "mknodat",
      join(this.path, name),
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
      throw new FsError("lgetxattr", join(this.path, name), e);
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
      join(this.path, name),
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

/** What {@linkcode Dir.copyFileTo} saw and did. */
export interface CopyResult {
  readonly before: Stat;
  readonly after: Stat;
  readonly strategy: CopyStrategy;
}

/** An open regular file: read, write, stat, and the copy strategies. */
export class FileHandle implements Disposable {
  #fd: number;
  readonly path: string;

  constructor(fd: number, path: string) {
    this.#fd = fd;
    this.path = path;
  }

  get fd(): number {
    if (this.#fd < 0) throw new Error(`file already closed: ${this.path}`);
    return this.#fd;
  }

  stat(): Stat {
    return statFd(this.fd, this.path);
  }

  /** Reads into `buf`, returning the count (0 at end of file). */
  read(buf: Uint8Array): number {
    return check(
      retryEintr(() => libc().read(this.fd, buf, BigInt(buf.length))),
      "read",
      this.path,
    );
  }

  /** Reads the rest of the file; throws {@linkcode TooLargeError} past `limit`. */
  readAll(limit: number): Uint8Array {
    const size = this.stat().size;
    if (size > limit) throw new TooLargeError(this.path, size, limit);
    // One byte of slack tells a file that grew past its stat size.
    let buf = new Uint8Array(Math.min(size, limit) + 1);
    let len = 0;
    for (;;) {
      if (len === buf.length) {
        if (len > limit) throw new TooLargeError(this.path, len, limit);
        const bigger = new Uint8Array(Math.min(buf.length * 2, limit + 1));
        bigger.set(buf);
        buf = bigger;
      }
      const n = this.read(buf.subarray(len));
      if (n === 0) break;
      len += n;
    }
    if (len > limit) throw new TooLargeError(this.path, len, limit);
    return buf.slice(0, len);
  }

  /** Writes every byte. */
  writeAll(data: Uint8Array): void {
    let off = 0;
    while (off < data.length) {
      const chunk = data.subarray(off);
      const n = check(
        retryEintr(() => libc().write(this.fd, chunk, BigInt(chunk.length))),
        "write",
        this.path,
      );
      off += n;
    }
  }

  chmod(mode: number): void {
    check(libc().fchmod(this.fd, mode), "fchmod", this.path);
  }

  setMtime(mtimeNs: bigint): void {
    check(libc().futimens(this.fd, timespecs(mtimeNs)), "futimens", this.path);
  }

  /**
   * Copies the rest of this file into `dst` (reflink, then
   * `copy_file_range`, then read/write through one 1 MiB buffer), never
   * holding the file in memory.
   */
  copyTo(dst: FileHandle, strategy: CopyStrategy = "copy_file_range"): CopyStrategy {
    return copyBytes(this, dst, this.stat().size, strategy);
  }

  /** Flushes to disk (`fsync`). */
  sync(): void {
    check(libc().fsync(this.fd), "fsync", this.path);
  }

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

/** `struct timespec[2]` with atime = mtime = the given time. */
function timespecs(ns: bigint): Uint8Array {
  const buf = new Uint8Array(32);
  const v = new DataView(buf.buffer);
  const sec = ns / 1_000_000_000n, nsec = ns % 1_000_000_000n;
  for (const off of [0, 16]) {
    v.setBigInt64(off, sec, true);
    v.setBigInt64(off + 8, nsec, true);
  }
  return buf;
}

const COPY_CHUNK = 1 << 20;
let copyBuf: Uint8Array | undefined;

function copyBytes(
  src: FileHandle,
  dst: FileHandle,
  size: number,
  strategy: CopyStrategy,
): CopyStrategy {
  if (strategy === "reflink") {
    if (size === 0) return "reflink";
    const r = libc().ioctl(dst.fd, FICLONE, src.fd);
    if (r === 0) return "reflink";
    const e = errno();
    if (![E.EOPNOTSUPP, E.EXDEV, E.EINVAL, E.ENOTTY, E.EPERM].includes(e as 95)) {
      throw new FsError("ioctl(FICLONE)", dst.path, e);
    }
    strategy = "copy_file_range";
  }
  if (strategy === "copy_file_range") {
    let first = true;
    for (;;) {
      const n = Number(
        libc().copy_file_range(src.fd, null, dst.fd, null, BigInt(COPY_CHUNK * 64), 0),
      );
      if (n === 0) return "copy_file_range";
      if (n === -1) {
        const e = errno();
        if (e === E.EINTR) continue;
        if (first && [E.ENOSYS, E.EXDEV, E.EOPNOTSUPP, E.EINVAL].includes(e as 38)) break;
        throw new FsError("copy_file_range", dst.path, e);
      }
      first = false;
    }
  }
  copyBuf ??= new Uint8Array(COPY_CHUNK);
  for (;;) {
    const n = src.read(copyBuf);
    if (n === 0) return "readwrite";
    dst.writeAll(copyBuf.subarray(0, n));
  }
}

/** Orders names by their UTF-8 bytes, as Git sorts paths. */
export function compareNames(a: string, b: string): number {
  // For strings without surrogates, UTF-16 order equals code point order,
  // which equals UTF-8 byte order; fall back to bytes only when needed.
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i), y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 || y >= 0xd800) return compareBytes(encoder.encode(a), encoder.encode(b));
      return x - y;
    }
  }
  return a.length - b.length;
}

const encoder = new TextEncoder();

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
