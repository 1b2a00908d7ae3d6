/**
 * The mount table as the kernel shows it to this process
 * (`/proc/self/mountinfo`), and the mount an open directory is on
 * (`statx(STATX_MNT_ID)`): how overlay forks are found and verified, before
 * and after a daemon restart, by mount id rather than by path alone.
 *
 * `/proc/self/mountinfo` is read through the FFI ({@linkcode Dir.readAbsolute}):
 * Deno's own file APIs refuse `/proc` without `--allow-all`.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "./dir.ts";
import { TooLargeError } from "./dir_errors.ts";
import { AT, check, cstr, libc } from "./ffi.ts";
import { type MountOf, mountOfFd, mountOfName } from "./mount_boundary.ts";

/** One line of `/proc/self/mountinfo` (proc(5)), with paths unescaped. */
export interface MountInfo {
  /** The mount id, unique among live mounts (a freed id may be reused). */
  readonly id: number;
  readonly parentId: number;
  /** `st_dev` of files on this mount (for an overlay: its anonymous device). */
  readonly major: number;
  readonly minor: number;
  /** The directory of the file system that is the root of this mount. */
  readonly root: string;
  /** Where it is mounted, relative to this process's root. */
  readonly mountPoint: string;
  /** Per-mount options (`rw,nosuid,relatime`). */
  readonly options: string;
  /** Optional fields (`shared:1`, `master:2`), possibly none. */
  readonly optional: readonly string[];
  readonly fsType: string;
  readonly source: string;
  /** Per-superblock options; for an overlay, its layers and features. */
  readonly superOptions: string;
}

const dec = new TextDecoder();

/**
 * Undoes the kernel's escaping of a mountinfo field: a space, tab, newline
 * or backslash in a path is written as a 3-digit octal escape (`\040`,
 * `\011`, `\012`, `\134`). Bytes that are not UTF-8 become U+FFFD.
 */
export function unescapeMountField(field: Uint8Array): string {
  if (!field.includes(0x5c)) return dec.decode(field);
  const out = new Uint8Array(field.length);
  let n = 0;
  for (let i = 0; i < field.length; i++) {
    const b = field[i]!;
    if (b === 0x5c && isOctal(field, i + 1)) {
      out[n++] = (field[i + 1]! - 0x30) * 64 + (field[i + 2]! - 0x30) * 8 + (field[i + 3]! - 0x30);
      i += 3;
    } else {
      out[n++] = b;
    }
  }
  return dec.decode(out.subarray(0, n));
}

function isOctal(bytes: Uint8Array, at: number): boolean {
  for (let i = at; i < at + 3; i++) {
    const b = bytes[i];
    if (b === undefined || b < 0x30 || b > 0x37) return false;
  }
  return true;
}

/** Thrown for a line that is not in the mountinfo format. */
export class MountinfoFormatError extends Error {
  override name = "MountinfoFormatError";
  constructor(readonly line: string) {
    super(`not a mountinfo line: "${line}"`);
  }
}

/**
 * Parses the text of a mountinfo file: one {@linkcode MountInfo} per line.
 *
 * @throws {MountinfoFormatError} for a malformed line
 */
export function parseMountinfo(text: Uint8Array | string): MountInfo[] {
  const bytes = typeof text === "string" ? new TextEncoder().encode(text) : text;
  const out: MountInfo[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    if (end > start) out.push(parseLine(bytes.subarray(start, end)));
    start = end + 1;
  }
  return out;
}

function parseLine(line: Uint8Array): MountInfo {
  const fields: Uint8Array[] = [];
  let start = 0;
  for (let i = 0; i <= line.length; i++) {
    if (i === line.length || line[i] === 0x20) {
      fields.push(line.subarray(start, i));
      start = i + 1;
    }
  }
  const bad = () => new MountinfoFormatError(dec.decode(line));
  const sep = fields.findIndex((f, i) => i >= 6 && f.length === 1 && f[0] === 0x2d);
  if (sep === -1 || fields.length < sep + 4) throw bad();
  const text = (i: number) => unescapeMountField(fields[i]!);
  const id = Number(text(0)), parentId = Number(text(1));
  const dev = /^(\d+):(\d+)$/.exec(text(2));
  if (!Number.isSafeInteger(id) || !Number.isSafeInteger(parentId) || dev === null) throw bad();
  return {
    id,
    parentId,
    major: Number(dev[1]),
    minor: Number(dev[2]),
    root: text(3),
    mountPoint: text(4),
    options: text(5),
    optional: fields.slice(6, sep).map((f) => unescapeMountField(f)),
    fsType: text(sep + 1),
    source: text(sep + 2),
    superOptions: text(sep + 3),
  };
}

/** More than any real mount table; a bound so a runaway one cannot exhaust memory. */
const MAX_MOUNTINFO_BYTES = 64 * 1024 * 1024;
const MOUNTINFO = "/proc/self/mountinfo";
const enc = new TextEncoder();

/**
 * This process's mount table, read now from `/proc/self/mountinfo`.
 *
 * @throws {FsError} when `/proc` cannot be read
 */
export function readMounts(): MountInfo[] {
  return parseMountinfo(readMountinfoBytes());
}

/**
 * The mounts stacked directly on `point` over mount `parentId`, read now
 * from `/proc/self/mountinfo`: what {@linkcode readMounts} would give,
 * filtered, but only the lines whose parent id and mount point match are
 * parsed (a fork checks its mount point before and after its mount).
 *
 * @throws {MountinfoFormatError} for a malformed matching line
 * @throws {FsError} when `/proc` cannot be read
 */
export function readMountsOn(parentId: number, point: string): MountInfo[] {
  const bytes = readMountinfoBytes();
  const parent = enc.encode(` ${parentId} `);
  const out: MountInfo[] = [];
  let start = 0;
  while (start < bytes.length) {
    let end = bytes.indexOf(0x0a, start);
    if (end === -1) end = bytes.length;
    const line = bytes.subarray(start, end);
    start = end + 1;
    // Field 1 (the parent id) sits between the first two spaces.
    const first = line.indexOf(0x20);
    if (first === -1 || !startsWith(line, first, parent)) continue;
    const m = parseLine(line);
    if (m.parentId === parentId && m.mountPoint === point) out.push(m);
  }
  return out;
}

function startsWith(bytes: Uint8Array, at: number, prefix: Uint8Array): boolean {
  if (bytes.length < at + prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (bytes[at + i] !== prefix[i]) return false;
  return true;
}

/**
 * `/proc/self/mountinfo`'s bytes. Its stat size is 0, so the read starts
 * with a buffer that holds a usual table whole (one `read`, not a doubling
 * from one byte).
 */
function readMountinfoBytes(): Uint8Array {
  using f = Dir.openAbsoluteFile(MOUNTINFO);
  let buf = new Uint8Array(64 * 1024);
  let len = 0;
  for (;;) {
    if (len === buf.length) {
      if (len >= MAX_MOUNTINFO_BYTES) throw new TooLargeError(MOUNTINFO, len, MAX_MOUNTINFO_BYTES);
      const bigger = new Uint8Array(Math.min(len * 2, MAX_MOUNTINFO_BYTES));
      bigger.set(buf);
      buf = bigger;
    }
    const n = f.read(buf.subarray(len));
    if (n === 0) return buf.subarray(0, len);
    len += n;
  }
}

/**
 * The mount with this id, or the topmost mount at this absolute path (a
 * mount stacked on another at the same point is the visible one), or `null`.
 * Reads the mount table unless one is given.
 */
export function findMount(
  query: { readonly id: number } | { readonly path: string },
  mounts: readonly MountInfo[] = readMounts(),
): MountInfo | null {
  if ("id" in query) return mounts.find((m) => m.id === query.id) ?? null;
  const at = mounts.filter((m) => m.mountPoint === query.path);
  return at.find((m) => !at.some((o) => o.parentId === m.id)) ?? null;
}

export type { MountOf } from "./mount_boundary.ts";

/**
 * The mount an open directory is on (`statx(fd, "", AT_EMPTY_PATH)`).
 *
 * @throws {FsError} when `statx` fails
 */
export function mountOf(dir: Dir): MountOf {
  return mountOfFd(dir.fd, dir.path);
}

/**
 * The mount of a child of `dir` without following a symlink; a mount on the
 * child is crossed, so this is the id of what a path lookup would reach.
 *
 * @throws {FsError} when `statx` fails (ENOENT when absent)
 */
export function mountAt(dir: Dir, name: string): MountOf {
  return mountOfName(dir.fd, name, `${dir.path}/${name}`);
}

/**
 * The mount at an absolute path, crossing a mount on its last component but
 * not following a symlink there.
 *
 * @throws {FsError} when `statx` fails
 */
export function mountAtPath(path: string): MountOf {
  if (!path.startsWith("/")) throw new TypeError(`not an absolute path: ${path}`);
  return mountOfName(AT.FDCWD, path, path);
}

/**
 * The path the kernel gives an open directory (`readlink /proc/self/fd/N`),
 * in the form `/proc/self/mountinfo` uses for mount points.
 *
 * @throws {FsError} when it cannot be read
 */
export function kernelPath(dir: Dir): string {
  const buf = new Uint8Array(4097);
  const n = check(
    libc().readlinkat(AT.FDCWD, cstr(dir.procPath), buf, BigInt(buf.length)),
    "readlink",
    dir.path,
  );
  return dec.decode(buf.subarray(0, n));
}
