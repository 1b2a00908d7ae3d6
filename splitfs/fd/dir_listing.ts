/**
 * Reading a directory's names with `getdents64`, as the file system stores
 * them: ASCII names decoded on the spot (the common case), any other name
 * kept as bytes for the caller to decode or refuse.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { check, libc } from "./ffi.ts";
import { utf8 } from "./file_names.ts";
import { type EntryKind, kindFromDtype } from "./stat.ts";

/** A listed name: decoded already when it is ASCII (the common case), else its raw bytes. */
export interface RawEntry {
  readonly raw: Uint8Array;
  readonly ascii: string | null;
  readonly kind: EntryKind | undefined;
}

const EMPTY_RAW = new Uint8Array(0);
const direntBuf = new Uint8Array(64 * 1024);
const direntView = new DataView(direntBuf.buffer);

/** A listed name's bytes, whichever way it was kept. */
export function rawBytes(e: RawEntry): Uint8Array {
  return e.ascii !== null ? utf8(e.ascii) : e.raw;
}

/**
 * Every name in the open directory `fd` except `.` and `..`, in no
 * particular order; `path` names it in errors.
 */
export function readRawEntries(fd: number, path: string): RawEntry[] {
  const out: RawEntry[] = [];
  const buf = direntBuf;
  const view = direntView;
  // getdents64 continues from the fd's offset: rewind so every listing is whole.
  check(libc().lseek(fd, 0n, 0), "lseek", path);
  for (;;) {
    const n = check(libc().getdents64(fd, buf, BigInt(buf.length)), "getdents64", path);
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
