/**
 * The only FFI boundary of marsh: the handful of libc calls that descriptor-
 * relative, no-follow file-system work needs. Every call is checked where it
 * returns and turned into an {@linkcode FsError} naming the call and the path.
 *
 * Needs `--allow-ffi=<libc path>`. `errno` is read by `memcpy` out of
 * `__errno_location()` because `Deno.UnsafePointerView` would need unscoped
 * `--allow-ffi` (docs/architecture.md "Permissions").
 *
 * @module
 */

import { LIBC_PATHS } from "../../protocol/entrypoints.ts";

/** Where glibc lives on the Linux hosts marsh supports. */
export const LIBC_CANDIDATES = LIBC_PATHS;

const SYMBOLS = {
  openat: { parameters: ["i32", "buffer", "i32", "u32"], result: "i32" },
  close: { parameters: ["i32"], result: "i32" },
  lseek: { parameters: ["i32", "i64", "i32"], result: "i64" },
  statx: { parameters: ["i32", "buffer", "i32", "u32", "buffer"], result: "i32" },
  mkdirat: { parameters: ["i32", "buffer", "u32"], result: "i32" },
  renameat2: { parameters: ["i32", "buffer", "i32", "buffer", "u32"], result: "i32" },
  unlinkat: { parameters: ["i32", "buffer", "i32"], result: "i32" },
  readlinkat: { parameters: ["i32", "buffer", "buffer", "usize"], result: "isize" },
  symlinkat: { parameters: ["buffer", "i32", "buffer"], result: "i32" },
  linkat: { parameters: ["i32", "buffer", "i32", "buffer", "i32"], result: "i32" },
  read: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  write: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  getdents64: { parameters: ["i32", "buffer", "usize"], result: "isize" },
  copy_file_range: {
    parameters: ["i32", "pointer", "i32", "pointer", "usize", "u32"],
    result: "isize",
  },
  ioctl: { parameters: ["i32", "u64", "i32"], result: "i32" },
  fchmod: { parameters: ["i32", "u32"], result: "i32" },
  fchmodat: { parameters: ["i32", "buffer", "u32", "i32"], result: "i32" },
  fchown: { parameters: ["i32", "u32", "u32"], result: "i32" },
  futimens: { parameters: ["i32", "buffer"], result: "i32" },
  utimensat: { parameters: ["i32", "buffer", "buffer", "i32"], result: "i32" },
  fsync: { parameters: ["i32"], result: "i32" },
  // On a thread of its own: several at once are committed together (splitfs/apply/fs_extra.ts).
  fsync_nonblocking: { name: "fsync", parameters: ["i32"], result: "i32", nonblocking: true },
  realpath: { parameters: ["buffer", "buffer"], result: "pointer" },
  mknodat: { parameters: ["i32", "buffer", "u32", "u64"], result: "i32" },
  lgetxattr: { parameters: ["buffer", "buffer", "buffer", "usize"], result: "isize" },
  llistxattr: { parameters: ["buffer", "buffer", "usize"], result: "isize" },
  lremovexattr: { parameters: ["buffer", "buffer"], result: "i32" },
  lsetxattr: { parameters: ["buffer", "buffer", "buffer", "usize", "i32"], result: "i32" },
  // glibc 2.36 and later; optional so an older glibc still loads the rest.
  move_mount: {
    parameters: ["i32", "buffer", "i32", "buffer", "u32"],
    result: "i32",
    optional: true,
  },
  mount: { parameters: ["buffer", "buffer", "buffer", "u64", "buffer"], result: "i32" },
  umount2: { parameters: ["buffer", "i32"], result: "i32" },
  syncfs: { parameters: ["i32"], result: "i32" },
  flock: { parameters: ["i32", "i32"], result: "i32" },
  ftruncate: { parameters: ["i32", "i64"], result: "i32" },
  getppid: { parameters: [], result: "i32" },
  // Variadic in C; every argument passed here is an integer, which the ABIs
  // marsh runs on (x86_64, aarch64 Linux) pass alike either way.
  prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
  // For `pidfd_send_signal`, which glibc wraps only from 2.36 on.
  syscall: { parameters: ["i64", "i64", "i64", "i64", "i64"], result: "i64" },
  __errno_location: { parameters: [], result: "pointer" },
  memcpy: { parameters: ["buffer", "pointer", "usize"], result: "pointer" },
} as const satisfies Deno.ForeignLibraryInterface;

/** Open flags, Linux x86_64/aarch64 values. */
export const O = {
  RDONLY: 0,
  WRONLY: 1,
  RDWR: 2,
  CREAT: 0o100,
  EXCL: 0o200,
  NOCTTY: 0o400,
  TRUNC: 0o1000,
  NONBLOCK: 0o4000,
  DIRECTORY: 0o200000,
  NOFOLLOW: 0o400000,
  CLOEXEC: 0o2000000,
  PATH: 0o10000000,
} as const;

/** `*at` flags. */
export const AT = {
  FDCWD: -100,
  SYMLINK_NOFOLLOW: 0x100,
  REMOVEDIR: 0x200,
  EMPTY_PATH: 0x1000,
} as const;

/** `renameat2` flag: fail instead of replacing the destination. */
export const RENAME_NOREPLACE = 1;

/** `ioctl(dst, FICLONE, src)`: share the source's extents (reflink). */
export const FICLONE = 0x40049409n;

/** The errno values marsh branches on. */
export const E = {
  EPERM: 1,
  EIO: 5,
  ENOENT: 2,
  EINTR: 4,
  ENXIO: 6,
  EBADF: 9,
  EAGAIN: 11,
  EACCES: 13,
  EEXIST: 17,
  EXDEV: 18,
  ENOTDIR: 20,
  EISDIR: 21,
  EINVAL: 22,
  ENOTTY: 25,
  ETXTBSY: 26,
  ENOSPC: 28,
  ENOSYS: 38,
  ENOTEMPTY: 39,
  ELOOP: 40,
  EOPNOTSUPP: 95,
  EBUSY: 16,
  ENODEV: 19,
  ENODATA: 61,
  ERANGE: 34,
  ESRCH: 3,
} as const;

/** `umount2` flags. */
export const UMOUNT = { DETACH: 2, NOFOLLOW: 8 } as const;

/** `mknodat` mode of an overlay whiteout: a character device 0/0. */
export const S_IFCHR = 0o020000;

const ERRNO_NAMES: Record<number, string> = Object.fromEntries(
  Object.entries(E).map(([k, v]) => [v, k]),
);

/** A libc call that failed: which call, on which path, with which errno. */
export class FsError extends Error {
  override name = "FsError";
  constructor(
    readonly call: string,
    readonly path: string,
    readonly errno: number,
    options?: ErrorOptions,
  ) {
    super(`${call} "${path}": ${describeErrno(errno)}`, options);
  }
  /** The errno's symbolic name, for example `ENOENT`. */
  get code(): string {
    return errnoName(this.errno);
  }
}

const DESCRIPTIONS: Record<number, string> = {
  [E.EPERM]: "operation not permitted",
  [E.ENOENT]: "no such file or directory",
  [E.EACCES]: "permission denied",
  [E.EEXIST]: "already exists",
  [E.EXDEV]: "crosses file systems",
  [E.ENOTDIR]: "not a directory",
  [E.EISDIR]: "is a directory",
  [E.ENOSPC]: "no space left on device",
  [E.ENOTEMPTY]: "directory not empty",
  [E.ELOOP]: "is a symlink (not followed)",
};

/** A short description and the symbolic name: `no such file or directory (ENOENT)`. */
export function describeErrno(errno: number): string {
  const d = DESCRIPTIONS[errno];
  return d ? `${d} (${errnoName(errno)})` : errnoName(errno);
}

/** `ENOENT` for 2, `errno 123` for a value marsh has no name for. */
export function errnoName(errno: number): string {
  return ERRNO_NAMES[errno] ?? `errno ${errno}`;
}

type Libc = Deno.DynamicLibrary<typeof SYMBOLS>["symbols"];

let lib: Deno.DynamicLibrary<typeof SYMBOLS> | undefined;

/**
 * The libc symbols, opened on first use.
 *
 * @throws {Error} when no glibc is found at the known paths
 */
export function libc(): Libc {
  if (lib === undefined) {
    let lastError: unknown;
    for (const path of LIBC_CANDIDATES) {
      try {
        lib = Deno.dlopen(path, SYMBOLS);
        break;
      } catch (error) {
        lastError = error;
      }
    }
    if (lib === undefined) {
      throw new Error(`cannot load glibc from ${LIBC_CANDIDATES.join(", ")}`, {
        cause: lastError,
      });
    }
  }
  return lib.symbols;
}

const errnoBuf = new Uint8Array(4);
const errnoView = new DataView(errnoBuf.buffer);

/** The calling thread's errno, read right after a failed call. */
export function errno(): number {
  const c = libc();
  c.memcpy(errnoBuf, c.__errno_location(), 4n);
  return errnoView.getInt32(0, true);
}

const encoder = new TextEncoder();

/** A NUL-terminated copy of `s` for a `char *` parameter. */
export function cstr(s: string): Uint8Array<ArrayBuffer> {
  // At most 3 bytes per UTF-16 unit, plus the NUL.
  const out = new Uint8Array(s.length * 3 + 1);
  const { written } = encoder.encodeInto(s, out);
  const bytes = out.subarray(0, written);
  if (bytes.includes(0)) throw new TypeError(`path contains a NUL byte: ${JSON.stringify(s)}`);
  return out;
}

const scratch = new Uint8Array(4 * 4096 + 1);

/**
 * Like {@linkcode cstr}, but into one shared buffer: for hot calls that take a
 * single name and return before the next call (statx, openat, readlinkat).
 * The result is valid only until the next `cname`.
 */
export function cname(s: string): Uint8Array<ArrayBuffer> {
  if (s.length * 3 >= scratch.length) return cstr(s);
  const { written } = encoder.encodeInto(s, scratch);
  scratch[written] = 0;
  const bytes = scratch.subarray(0, written);
  if (bytes.includes(0)) throw new TypeError(`path contains a NUL byte: ${JSON.stringify(s)}`);
  return scratch;
}

/** Throws {@linkcode FsError} when a call returned -1; otherwise returns the value. */
export function check(result: number | bigint, call: string, path: string): number {
  const n = Number(result);
  if (n === -1) throw new FsError(call, path, errno());
  return n;
}

/** Retries a call that failed with EINTR. */
export function retryEintr(fn: () => number | bigint): number {
  for (;;) {
    const n = Number(fn());
    if (n !== -1 || errno() !== E.EINTR) return n;
  }
}
