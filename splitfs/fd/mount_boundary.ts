/**
 * Mount boundaries: the mount an open descriptor is on (`statx`
 * `STATX_MNT_ID`), and the error every tree removal raises when it meets a
 * mount point instead of descending into it (docs/engine.md "Removal"). A
 * bind mount of the same file system has the device of its source, so only
 * the mount id tells it from the directory it covers.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { AT, check, cname, cstr, libc } from "./ffi.ts";

/** The mount an inode was reached through, and the device it reports. */
export interface MountOf {
  /** The mount id, as in `/proc/self/mountinfo`. */
  readonly id: number;
  readonly major: number;
  readonly minor: number;
}

const STATX_MNT_ID = 0x1000;
const statxBuf = new Uint8Array(256);
const statxView = new DataView(statxBuf.buffer);

function decodeMountOf(path: string): MountOf {
  if ((statxView.getUint32(0, true) & STATX_MNT_ID) === 0) {
    throw new Error(`the kernel reports no mount id (statx STATX_MNT_ID) for "${path}"`);
  }
  return {
    id: Number(statxView.getBigUint64(144, true)),
    major: statxView.getUint32(136, true),
    minor: statxView.getUint32(140, true),
  };
}

/**
 * The mount of an open descriptor (`statx(fd, "", AT_EMPTY_PATH)`); works on
 * an `O_PATH` descriptor too.
 *
 * @throws {FsError} when `statx` fails
 * @throws {Error} when the kernel reports no mount id (before Linux 5.8)
 */
export function mountOfFd(fd: number, path: string): MountOf {
  check(libc().statx(fd, cstr(""), AT.EMPTY_PATH, STATX_MNT_ID, statxBuf), "statx", path);
  return decodeMountOf(path);
}

/**
 * The mount of `name` under the directory `fd`, without following a symlink
 * there; a mount on `name` is crossed, as a path lookup crosses it.
 *
 * @throws {FsError} when `statx` fails (ENOENT when absent)
 */
export function mountOfName(fd: number, name: string, path: string): MountOf {
  check(libc().statx(fd, cname(name), AT.SYMLINK_NOFOLLOW, STATX_MNT_ID, statxBuf), "statx", path);
  return decodeMountOf(path);
}

/** A path as one shell word: single-quoted only when it needs to be. */
export function shellWord(path: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(path) ? path : `'${path.replaceAll("'", `'\\''`)}'`;
}

/**
 * A removal stopped at a mount point: nothing at or below `mountPoints` was
 * deleted, and the mounts stay. `then` is the command that finishes the
 * removal once they are unmounted (`marsh splits rm ID`, `marsh gc`).
 */
export class MountPointError extends Error {
  override name = "MountPointError";
  /** The mount points, deepest first (the order `umount` takes them in). */
  readonly mountPoints: readonly string[];

  constructor(
    readonly tree: string,
    mountPoints: readonly string[],
    readonly then: string | null = null,
    options?: ErrorOptions,
  ) {
    const points = [...mountPoints].sort((a, b) => b.length - a.length);
    const which = points.length === 1
      ? `${points[0]} is a mount point`
      : `${points.join(", ")} are mount points`;
    const umount = `umount ${points.map(shellWord).join(" ")}`;
    super(
      `cannot remove ${tree}: ${which} (${then ? `${umount}, then ${then}` : umount})`,
      options,
    );
    this.mountPoints = points;
  }

  /** The same refusal, naming the command that finishes the removal. */
  withFix(then: string): MountPointError {
    return new MountPointError(this.tree, this.mountPoints, then, { cause: this.cause });
  }
}
