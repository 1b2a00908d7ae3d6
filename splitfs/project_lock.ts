/**
 * One daemon per project: the split-filesystem service holds an exclusive
 * `flock` on `<root>/.marsh/lock` from the first request that touches a
 * project's `.marsh` until it exits (the kernel drops the lock then, however
 * it ends). A second daemon's service (another `MARSH_HOME`, or `sudo marsh`
 * beside `marsh`) is refused before it creates or deletes anything there: its
 * `gc` would otherwise delete layers the first daemon's splits are still
 * stacking (docs/engine.md "One daemon per project").
 *
 * The holder writes who it is into the file, so the refusal can name it.
 *
 * Needs `--allow-ffi` (libc).
 *
 * @module
 */

import { Dir, FileHandle } from "./fd/dir.ts";
import { RefusedError } from "./errors.ts";
import { check, cname, E, errno, FsError, libc, O, retryEintr } from "./fd/ffi.ts";
import { MARSH_DIR, PROJECT_LOCK_FILE } from "../model/layout.ts";

/** Who holds a project's lock: the daemon a refused caller must stop. */
export interface LockHolder {
  /** The daemon's pid. */
  readonly pid: number;
  /** The daemon's control dir (`MARSH_HOME`). */
  readonly home: string;
}

/** Another daemon holds the project's lock; nothing was changed. */
export class ProjectLockedError extends RefusedError {
  override name = "ProjectLockedError";
  constructor(readonly root: string, readonly holder: LockHolder | null) {
    super(lockedMessage(root, holder));
  }
}

const LOCK_EX = 2;
const LOCK_NB = 4;
const MAX_HOLDER_BYTES = 4096;
const SEEK_SET = 0;

/** The refusal, with the fix: stop the other daemon, or use it. */
export function lockedMessage(root: string, holder: LockHolder | null): string {
  const which = holder === null
    ? `another marsh daemon (it holds ${root}/${MARSH_DIR}/${PROJECT_LOCK_FILE})`
    : `another marsh daemon (pid ${holder.pid}, MARSH_HOME=${JSON.stringify(holder.home)})`;
  const stop = holder === null
    ? "stop that daemon (marsh daemon stop with its MARSH_HOME, as its user)"
    : `stop it with: MARSH_HOME=${JSON.stringify(holder.home)} marsh daemon stop (as its user)`;
  return `project ${root} is in use by ${which}: one daemon per project; ${stop}, or use that daemon for this project`;
}

/** Parses what a holder wrote; anything else (a partial write, junk) is an unknown holder. */
export function parseHolder(bytes: Uint8Array): LockHolder | null {
  let x: unknown;
  try {
    x = JSON.parse(new TextDecoder().decode(bytes));
  } catch (error) {
    if (error instanceof SyntaxError) return null;
    throw error;
  }
  if (typeof x !== "object" || x === null) return null;
  const { pid, home } = x as Record<string, unknown>;
  if (typeof pid !== "number" || !Number.isSafeInteger(pid) || pid <= 0) return null;
  if (typeof home !== "string" || !home.startsWith("/") || home.length > 1024) return null;
  // It is shown in a message: no control characters.
  for (const ch of home) if (ch < " " || ch === "\x7f") return null;
  return { pid, home };
}

/**
 * The project locks this service holds, each kept open until the service
 * exits. Keyed by the lock file's `(dev, ino)`: a second `flock` through a
 * new open file would conflict with this process's own lock.
 */
export class ProjectLocks {
  readonly #held = new Map<string, FileHandle>();
  readonly #holder: LockHolder | null;

  /** `holder`: what to write into each lock taken (null: the file is left empty). */
  constructor(holder: LockHolder | null) {
    this.#holder = holder;
  }

  /** How many projects are held (for tests). */
  get size(): number {
    return this.#held.size;
  }

  /**
   * Takes (or keeps) the lock of the project whose `.marsh` is open as
   * `marsh`. Creates only the lock file, and only when no one holds it.
   *
   * @throws {ProjectLockedError} when another process holds it
   * @throws {FsError} when the lock file cannot be opened (a symlink: ELOOP)
   */
  hold(marsh: Dir, root: string): void {
    const path = `${root}/${MARSH_DIR}/${PROJECT_LOCK_FILE}`;
    const { file, writable } = openLockFile(marsh, path);
    let kept = false;
    try {
      const st = file.stat();
      if (st.kind !== "file") throw new FsError("open", path, E.EINVAL);
      const key = `${st.dev}:${st.ino}`;
      if (this.#held.has(key)) return;
      const r = retryEintr(() => libc().flock(file.fd, LOCK_EX | LOCK_NB));
      if (r === -1) {
        const err = errno();
        if (err !== E.EAGAIN) throw new FsError("flock", path, err);
        throw new ProjectLockedError(root, readHolder(file));
      }
      if (writable && this.#holder !== null) {
        check(libc().ftruncate(file.fd, 0n), "ftruncate", path);
        check(libc().lseek(file.fd, 0n, SEEK_SET), "lseek", path);
        file.writeAll(new TextEncoder().encode(`${JSON.stringify(this.#holder)}\n`));
      }
      this.#held.set(key, file);
      kept = true;
    } finally {
      if (!kept) file.close();
    }
  }

  /**
   * Deletes the lock file of the project whose `.marsh` is open as `marsh`,
   * then drops the lock (`marsh gc --all`): unlinked while still held, so no
   * other daemon locks the file that is going. The caller holds it ({@linkcode hold}).
   *
   * @throws {Error} when this service does not hold that lock file
   */
  removeHeld(marsh: Dir, root: string): void {
    const st = marsh.statAt(PROJECT_LOCK_FILE);
    const key = st === null ? "" : `${st.dev}:${st.ino}`;
    const file = this.#held.get(key);
    if (file === undefined) {
      throw new Error(`${root}/${MARSH_DIR}/${PROJECT_LOCK_FILE} is not held by this service`);
    }
    marsh.unlink(PROJECT_LOCK_FILE);
    this.#held.delete(key);
    file.close();
  }

  /**
   * {@linkcode hold} for a project named by its root, when `<root>/.marsh`
   * is a directory; otherwise nothing: the caller's own checks say what is
   * gone or replaced.
   */
  holdIfPresent(root: string): void {
    let rootDir: Dir;
    try {
      rootDir = Dir.openAbsolute(root);
    } catch (error) {
      if (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) {
        return;
      }
      throw error;
    }
    try {
      if (rootDir.statAt(MARSH_DIR)?.kind !== "dir") return;
      using marsh = rootDir.openDir(MARSH_DIR);
      this.hold(marsh, root);
    } finally {
      rootDir.close();
    }
  }
}

/**
 * Opens (creating, mode 0644) the lock file without following a symlink.
 * Another user's file (root's, for a user's daemon) opens read-only: `flock`
 * needs no write access, and its holder is then not written.
 */
function openLockFile(marsh: Dir, path: string): { file: FileHandle; writable: boolean } {
  const c = libc();
  const base = O.NOFOLLOW | O.CLOEXEC | O.NONBLOCK | O.NOCTTY;
  let fd = retryEintr(() =>
    c.openat(marsh.fd, cname(PROJECT_LOCK_FILE), base | O.RDWR | O.CREAT, 0o644)
  );
  if (fd !== -1) return { file: new FileHandle(fd, path), writable: true };
  const err = errno();
  if (err !== E.EACCES) throw new FsError("open", path, err);
  fd = check(
    retryEintr(() => c.openat(marsh.fd, cname(PROJECT_LOCK_FILE), base | O.RDONLY, 0)),
    "open",
    path,
  );
  return { file: new FileHandle(fd, path), writable: false };
}

function readHolder(file: FileHandle): LockHolder | null {
  const buf = new Uint8Array(MAX_HOLDER_BYTES);
  let len = 0;
  check(libc().lseek(file.fd, 0n, SEEK_SET), "lseek", file.path);
  while (len < buf.length) {
    const n = file.read(buf.subarray(len));
    if (n === 0) break;
    len += n;
  }
  return parseHolder(buf.subarray(0, len));
}
