/**
 * Decoding `statx` into marsh's {@linkcode Stat}, and the helpers that
 * compare stats. One shared buffer receives every `statx` (a walk stats
 * every file; no allocation per call), so a result is decoded right after
 * the call that filled it.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { AT, check, cstr, libc } from "./ffi.ts";

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

/** `statx`'s `STATX_BASIC_STATS` mask: every field {@linkcode Stat} carries. */
export const STATX_BASIC_STATS = 0x7ff;
/** `statx`'s `AT_STATX_SYNC_AS_STAT`: what `stat(2)` would do about remote caches. */
export const AT_STATX_SYNC_AS_STAT = 0;
const STATX_SIZE = 256;
const statxBuf = new Uint8Array(STATX_SIZE);
const statxView = new DataView(statxBuf.buffer);
const EMPTY = cstr("");

/**
 * `statx(fd, name, flags, STATX_BASIC_STATS)` into the shared buffer; returns
 * libc's result (`-1` with errno set on failure). Read the result with
 * {@linkcode decodeStatx} before the next call.
 */
export function statxInto(fd: number, name: Uint8Array, flags: number): number {
  return libc().statx(fd, name, flags, STATX_BASIC_STATS, statxBuf);
}

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

/** A listing's `d_type` as a kind; `undefined` for `DT_UNKNOWN` (stat it). */
export function kindFromDtype(t: number): EntryKind | undefined {
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

/** The device numbers (`stx_rdev_major`, `stx_rdev_minor`) the last successful {@linkcode statxInto} wrote. */
export function decodeRdev(): readonly [number, number] {
  return [statxView.getUint32(128, true), statxView.getUint32(132, true)];
}

/** The stat the last successful {@linkcode statxInto} wrote. */
export function decodeStatx(): Stat {
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

/** `fstat` of an open descriptor; `path` names it in errors. */
export function statFd(fd: number, path: string): Stat {
  check(statxInto(fd, EMPTY, AT.EMPTY_PATH), "fstat", path);
  return decodeStatx();
}
