/**
 * Other processes, as the daemon's restart needs them: the start time of a
 * pid (from `/proc/<pid>/stat`), and SIGKILL to a pid only while it is still
 * the process that started then. The daemon cannot read `/proc` (Deno grants
 * it only with every permission); this service reads it through libc
 * (docs/engine.md "Processes").
 *
 * Needs `--allow-ffi` (libc).
 *
 * @module
 */

import type { ProcessId } from "../../protocol/processes.ts";
import { AT, check, cname, E, errno, FsError, libc, O, retryEintr } from "./ffi.ts";

/** `pidfd_send_signal`: the same number on x86_64 and aarch64 (the generic table). */
const SYS_PIDFD_SEND_SIGNAL = 424n;
const SIGKILL = 9n;
const statBuf = new Uint8Array(4096);

/** A process's state letter and start time (clock ticks after boot). */
interface ProcStat {
  readonly state: string;
  readonly start: number;
}

/**
 * Opens `/proc/<pid>`: the descriptor names that one process (a pidfd), so
 * what is read and signalled through it can never be a later process that
 * reused the pid. Null when there is no such process.
 */
function openProc(pid: number): number | null {
  if (!Number.isSafeInteger(pid) || pid <= 0) throw new TypeError(`invalid pid: ${pid}`);
  const path = `/proc/${pid}`;
  const fd = retryEintr(() =>
    libc().openat(AT.FDCWD, cname(path), O.RDONLY | O.DIRECTORY | O.CLOEXEC, 0)
  );
  if (fd !== -1) return fd;
  const err = errno();
  if (err === E.ENOENT || err === E.ESRCH) return null;
  throw new FsError("open", path, err);
}

/** Reads `stat` below an open `/proc/<pid>`; null once the process is gone. */
function readStat(dirfd: number, pid: number): ProcStat | null {
  const c = libc();
  const path = `/proc/${pid}/stat`;
  const fd = retryEintr(() => c.openat(dirfd, cname("stat"), O.RDONLY | O.CLOEXEC, 0));
  if (fd === -1) {
    const err = errno();
    if (err === E.ENOENT || err === E.ESRCH) return null;
    throw new FsError("open", path, err);
  }
  let len = 0;
  try {
    for (;;) {
      const rest = statBuf.subarray(len);
      const n = retryEintr(() => c.read(fd, rest, BigInt(rest.length)));
      if (n === -1) {
        const err = errno();
        if (err === E.ESRCH) return null;
        throw new FsError("read", path, err);
      }
      if (n === 0) break;
      len += n;
      if (len === statBuf.length) break;
    }
  } finally {
    check(c.close(fd), "close", path);
  }
  return parseStat(new TextDecoder().decode(statBuf.subarray(0, len)), path);
}

/**
 * Field 3 (state) and field 22 (starttime) of a `/proc/<pid>/stat` line.
 * The command name (field 2) may hold spaces and parentheses: fields are
 * counted after its last `)`.
 *
 * @throws {TypeError} for a line that is not one
 */
export function parseStat(line: string, path = "stat"): ProcStat {
  const close = line.lastIndexOf(")");
  const fields = close < 0 ? [] : line.slice(close + 2).split(" ");
  const state = fields[0];
  const start = Number(fields[19]);
  if (state === undefined || !/^[A-Za-z]$/.test(state) || !Number.isSafeInteger(start)) {
    throw new TypeError(`unexpected contents of ${path}: ${JSON.stringify(line.slice(0, 200))}`);
  }
  return { state, start };
}

/** A zombie has closed its files and dropped its mounts: it counts as gone. */
function alive(st: ProcStat | null): st is ProcStat {
  return st !== null && st.state !== "Z" && st.state !== "X";
}

/** The start time of a live (not zombie) process `pid`, or null when there is none. */
export function processStart(pid: number): number | null {
  const fd = openProc(pid);
  if (fd === null) return null;
  try {
    const st = readStat(fd, pid);
    return alive(st) ? st.start : null;
  } finally {
    check(libc().close(fd), "close", `/proc/${pid}`);
  }
}

/**
 * Sends SIGKILL to `p.pid` if it is alive and started at `p.start`.
 *
 * @returns whether the signal was sent
 */
export function killProcess(p: ProcessId): boolean {
  const fd = openProc(p.pid);
  if (fd === null) return false;
  const c = libc();
  try {
    const st = readStat(fd, p.pid);
    if (!alive(st) || st.start !== p.start) return false;
    const r = Number(c.syscall(SYS_PIDFD_SEND_SIGNAL, BigInt(fd), SIGKILL, 0n, 0n));
    if (r === -1) {
      const err = errno();
      if (err === E.ESRCH) return false;
      throw new FsError("pidfd_send_signal", `/proc/${p.pid}`, err);
    }
    return true;
  } finally {
    check(c.close(fd), "close", `/proc/${p.pid}`);
  }
}
