/**
 * What turning an overlay upper dir into a layer needs of its entries
 * (docs/checkpoints.md "An operation"): telling a whiteout (a 0/0 character
 * device) from another device, and listing and removing an entry's extended
 * attributes without following a symlink, through `/proc/self/fd/N/<name>`
 * of the open parent (as `Dir.xattrAt` reads one).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "./dir.ts";
import { AT, check, cstr, E, errno, FsError, libc } from "./ffi.ts";
import { checkName, childPath } from "./file_names.ts";
import { AT_STATX_SYNC_AS_STAT, decodeRdev, decodeStatx, statxInto } from "./stat.ts";

/** Whether `dir/<name>` is an overlay whiteout: a character device 0/0 (not followed). */
export function isWhiteout(dir: Dir, name: string): boolean {
  checkName(name, dir.path);
  const r = statxInto(dir.fd, cstr(name), AT.SYMLINK_NOFOLLOW | AT_STATX_SYNC_AS_STAT);
  if (r === -1) {
    const e = errno();
    if (e === E.ENOENT) return false;
    throw new FsError("statx", childPath(dir.path, name), e);
  }
  if (decodeStatx().kind !== "char") return false;
  const [major, minor] = decodeRdev();
  return major === 0 && minor === 0;
}

const dec = new TextDecoder();

/** The names of `dir/<name>`'s extended attributes (none when the file system keeps none). */
export function xattrNames(dir: Dir, name: string): string[] {
  checkName(name, dir.path);
  const path = cstr(`${dir.procPath}/${name}`);
  for (let size = 1024; size <= 1 << 20; size *= 4) {
    const buf = new Uint8Array(size);
    const n = Number(libc().llistxattr(path, buf, BigInt(buf.length)));
    if (n === -1) {
      const e = errno();
      if (e === E.ERANGE) continue;
      if (e === E.EOPNOTSUPP) return [];
      throw new FsError("llistxattr", childPath(dir.path, name), e);
    }
    return dec.decode(buf.subarray(0, n)).split("\0").filter((k) => k !== "");
  }
  throw new FsError("llistxattr", childPath(dir.path, name), E.ERANGE);
}

/** Removes one extended attribute of `dir/<name>`; one already gone is no error. */
export function removeXattr(dir: Dir, name: string, key: string): void {
  checkName(name, dir.path);
  const r = libc().lremovexattr(cstr(`${dir.procPath}/${name}`), cstr(key));
  if (r === -1 && errno() === E.ENODATA) return;
  check(r, "lremovexattr", childPath(dir.path, name));
}

/** Sets (creating or replacing) one extended attribute of `dir/<name>`, not following a symlink. */
export function setXattr(dir: Dir, name: string, key: string, value: Uint8Array): void {
  checkName(name, dir.path);
  check(
    libc().lsetxattr(
      cstr(`${dir.procPath}/${name}`),
      cstr(key),
      value as Uint8Array<ArrayBuffer>,
      BigInt(value.length),
      0,
    ),
    "lsetxattr",
    childPath(dir.path, name),
  );
}
