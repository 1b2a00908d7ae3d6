/**
 * An open regular file ({@linkcode FileHandle}) and the byte-copy strategies
 * behind every file copy marsh makes: reflink, then `copy_file_range`, then
 * read/write, each falling back when the file system says no.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { check, E, errno, FICLONE, FsError, libc, retryEintr } from "./ffi.ts";
import { TooLargeError } from "./dir_errors.ts";
import { type Stat, statFd } from "./stat.ts";
import { countWork, WORK } from "../work_counts.ts";

/** How a regular file's bytes were copied: the strategy that actually ran. */
export type CopyStrategy = "reflink" | "copy_file_range" | "readwrite";

/** What `Dir.copyFileTo` saw and did. */
export interface CopyResult {
  readonly before: Stat;
  readonly after: Stat;
  readonly strategy: CopyStrategy;
}

/** Closes an fd, ignoring nothing: a failed close is reported. */
export function closeFd(fd: number, path: string): void {
  check(libc().close(fd), "close", path);
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
    const n = check(
      retryEintr(() => libc().read(this.fd, buf, BigInt(buf.length))),
      "read",
      this.path,
    );
    // /proc (mountinfo) grows with the machine's mounts, not with what is counted.
    if (!this.path.startsWith("/proc/")) countWork(WORK.read, n);
    return n;
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
    countWork(WORK.fsync);
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
export function timespecs(ns: bigint): Uint8Array {
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

/**
 * Copies `size` bytes (the rest of `src`) into `dst`, trying `strategy`
 * first and falling back as the file system requires; returns the strategy
 * that ran.
 */
export function copyBytes(
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
