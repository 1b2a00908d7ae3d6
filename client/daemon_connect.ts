/**
 * The CLI's way to the daemon: which socket to use, the checks on the
 * control dir and the socket before trusting them, starting the daemon when
 * none answers, and one connection carrying typed frames.
 *
 * Inside a shell branch `MARSH_SOCK` names the branch's own socket; the CLI
 * uses it and never starts a daemon (the branch's daemon is the one that
 * made the socket). Elsewhere the socket is `marshd.sock` in the control dir.
 *
 * Inside a Kit job, `MARSH_JOB_SOCK` ({@linkcode JOB_SOCK_ENV}) names the
 * job's capability socket, `/run/marsh/cap.sock`. The in-job client
 * (`job/main.ts`) sets it in its own process from `job.json`; it is not part
 * of any container's environment. It wins over `MARSH_SOCK`, never starts a
 * daemon, and touches neither the control dir nor `HOME`. Its owner and mode
 * are not checked: inside the container the socket belongs to the host
 * daemon's uid, and the directory it sits in is the daemon's, read-only.
 *
 * Needs `--allow-env`, read and write on the control dir (and on
 * `MARSH_SOCK`), `--allow-net=unix:<socket>`, and `--allow-run` for the
 * pinned Deno when it starts the daemon. In a job: `--allow-env`, write and
 * `--allow-net=unix:` on the job's socket.
 *
 * @module
 */

import {
  type ClientFrame,
  type DaemonFrame,
  MAX_DAEMON_FRAME,
  parseDaemonFrame,
} from "../protocol/daemon.ts";
import { encodeFrame, FrameError, readFramesFrom } from "../protocol/frame.ts";
import {
  checkOwned,
  ControlDirError,
  controlDirPath,
  ensureControlDir,
  LOCK_NAME,
  LOG_NAME,
  SOCKET_NAME,
} from "../protocol/control_dir.ts";
import { denoPath, entryCommand } from "../protocol/entrypoints.ts";
import { CliError } from "./cli_error.ts";

/**
 * The job's capability socket, set by the in-job client from `job.json`
 * (never by a container's environment).
 */
export const JOB_SOCK_ENV = "MARSH_JOB_SOCK";

/**
 * The status when a job's socket no longer answers: the job's end is unknown (docs/rules.md
 * "The job capability").
 */
export const JOB_REVOKED = 125;

/** How often to try the socket while the daemon starts or stops. */
export const POLL_MS = 50;
/** How long the daemon has to start answering, or to stop. */
export const START_TIMEOUT_MS = 10_000;
/** After a started daemon exits, how long another one (a concurrent start) may take to answer. */
const AFTER_EXIT_GRACE_MS = 2_000;

/** The connection broke or carried a frame that is not the protocol's. */
export class DaemonConnectionError extends Error {
  override name = "DaemonConnectionError";
}

/** One connection to the daemon: one request and its stream of replies. */
export class DaemonConnection implements AsyncDisposable {
  readonly #conn: Deno.UnixConn;
  readonly #frames: AsyncGenerator<unknown>;
  #sending: Promise<void> = Promise.resolve();
  #closed = false;

  private constructor(conn: Deno.UnixConn) {
    this.#conn = conn;
    // read/write, not conn.readable/writable: the web streams cost ~5 ms to load.
    this.#frames = readFramesFrom((buf) => conn.read(buf), MAX_DAEMON_FRAME);
  }

  /**
   * Connects to a socket.
   *
   * @throws the `Deno.errors` of `Deno.connect` (NotFound, ConnectionRefused, NotCapable, ...)
   */
  static async open(path: string): Promise<DaemonConnection> {
    return new DaemonConnection(await Deno.connect({ transport: "unix", path }));
  }

  /** Whether {@linkcode close} was called. */
  get closed(): boolean {
    return this.#closed;
  }

  /**
   * Sends one frame; frames go out in the order `send` was called.
   *
   * @throws {DaemonConnectionError} when the connection is closed or broken
   */
  send(frame: ClientFrame): Promise<void> {
    const bytes = encodeFrame(frame, MAX_DAEMON_FRAME);
    const sent = this.#sending.then(async () => {
      if (this.#closed) throw new DaemonConnectionError("the connection to the daemon is closed");
      try {
        for (let off = 0; off < bytes.length;) off += await this.#conn.write(bytes.subarray(off));
      } catch (cause) {
        throw new DaemonConnectionError(`lost the connection to the daemon: ${message(cause)}`, {
          cause,
        });
      }
    });
    // A failed send is reported to its caller; later sends fail on their own.
    this.#sending = sent.then(() => undefined, () => undefined);
    return sent;
  }

  /**
   * The next frame from the daemon, or undefined when it closed the
   * connection cleanly (or {@linkcode close} was called).
   *
   * @throws {DaemonConnectionError} on a broken connection or a malformed frame
   */
  async next(): Promise<DaemonFrame | undefined> {
    if (this.#closed) return undefined;
    let result: IteratorResult<unknown>;
    try {
      result = await this.#frames.next();
    } catch (cause) {
      if (this.#closed) return undefined;
      const what = cause instanceof FrameError
        ? `a malformed frame from the daemon: ${cause.message}`
        : `lost the connection to the daemon: ${message(cause)}`;
      throw new DaemonConnectionError(what, { cause });
    }
    if (result.done) return undefined;
    try {
      return parseDaemonFrame(result.value);
    } catch (cause) {
      throw new DaemonConnectionError(`a malformed frame from the daemon: ${message(cause)}`, {
        cause,
      });
    }
  }

  /** The daemon's frames until it closes the connection. */
  async *[Symbol.asyncIterator](): AsyncGenerator<DaemonFrame> {
    for (;;) {
      const frame = await this.next();
      if (frame === undefined) return;
      yield frame;
    }
  }

  /** Drops the connection; the daemon treats a dropped stream as a cancel. Idempotent. */
  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    try {
      this.#conn.close();
    } catch (error) {
      if (!(error instanceof Deno.errors.BadResource)) throw error;
      // Already closed by the runtime after the peer left.
    }
  }

  [Symbol.asyncDispose](): Promise<void> {
    this.close();
    return Promise.resolve();
  }
}

/** Where the daemon answers for this caller. */
export interface DaemonSocket {
  /** The socket's path. */
  readonly path: string;
  /** The control dir; empty when unknown (inside a branch) or not used (inside a job). */
  readonly home: string;
  /** From `MARSH_SOCK` or `MARSH_JOB_SOCK`: someone else's socket, never autostarted. */
  readonly branch: boolean;
  /** From `MARSH_JOB_SOCK`: a Kit job's capability socket, taken as it is. */
  readonly job?: boolean;
}

/**
 * Locates the daemon's socket and checks it: `MARSH_JOB_SOCK` when set (a
 * job's socket, not checked), else `MARSH_SOCK` when set, else the control
 * dir's socket, after creating the control dir 0700 or refusing one with the
 * wrong owner or mode. An existing socket file must be ours and reachable by
 * no one else.
 *
 * @throws {CliError} (status 2) with the fix when the control dir or the socket is unsafe
 */
export function daemonSocket(
  env: { get(name: string): string | undefined } = Deno.env,
): DaemonSocket {
  try {
    const jobSocket = env.get(JOB_SOCK_ENV);
    if (jobSocket) {
      if (!jobSocket.startsWith("/")) {
        throw new ControlDirError(`${JOB_SOCK_ENV} must be an absolute path: ${jobSocket}`);
      }
      return { path: jobSocket, home: "", branch: true, job: true };
    }
    const branchSocket = env.get("MARSH_SOCK");
    if (branchSocket) {
      if (!branchSocket.startsWith("/")) {
        throw new ControlDirError(`MARSH_SOCK must be an absolute path: ${branchSocket}`);
      }
      checkSocket(branchSocket);
      const home = safeHome(env);
      return { path: branchSocket, home, branch: true };
    }
    const home = controlDirPath(env);
    ensureControlDir(home);
    const path = `${home}/${SOCKET_NAME}`;
    checkSocket(path);
    return { path, home, branch: false };
  } catch (cause) {
    if (cause instanceof ControlDirError) {
      throw new CliError(`marsh: ${cause.message}`, 2, { cause });
    }
    if (cause instanceof Deno.errors.NotCapable || cause instanceof Deno.errors.PermissionDenied) {
      throw new CliError(`marsh: cannot use the control dir: ${message(cause)}`, 2, { cause });
    }
    throw cause;
  }
}

function safeHome(env: { get(name: string): string | undefined }): string {
  try {
    return controlDirPath(env);
  } catch (error) {
    if (!(error instanceof ControlDirError)) throw error;
    // Inside a branch the control dir may be unknown; only the socket matters there.
    return "";
  }
}

function checkSocket(path: string): void {
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return;
    throw error;
  }
  checkOwned(path, st, "daemon socket", false);
}

/**
 * Connects when something answers on the socket; null when nothing does
 * (no socket file, or a stale one).
 *
 * @throws {CliError} when the socket cannot be used at all
 */
export async function tryConnect(sock: DaemonSocket): Promise<DaemonConnection | null> {
  try {
    return await DaemonConnection.open(sock.path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound || error instanceof Deno.errors.ConnectionRefused) {
      return null;
    }
    throw new CliError(
      `marsh: cannot connect to the daemon at ${sock.path}: ${message(error)}`,
      2,
      {
        cause: error,
      },
    );
  }
}

/**
 * Connects to the daemon, starting it first when none answers (never for a
 * branch socket).
 *
 * @throws {CliError} when no daemon answers and none could be started
 */
export async function connectDaemon(
  sock: DaemonSocket = daemonSocket(),
): Promise<DaemonConnection> {
  return (await ensureDaemon(sock)).conn;
}

/**
 * Like {@linkcode connectDaemon}, and says whether this call started the daemon.
 *
 * @throws {CliError} when no daemon answers and none could be started
 */
export async function ensureDaemon(
  sock: DaemonSocket = daemonSocket(),
): Promise<{ conn: DaemonConnection; started: boolean }> {
  const conn = await tryConnect(sock);
  if (conn) return { conn, started: false };
  if (sock.job) {
    throw new CliError(
      `marsh: no daemon answers at ${sock.path}; this job's capability was revoked (the job ended or the daemon restarted)`,
      JOB_REVOKED,
    );
  }
  if (sock.branch) {
    throw new CliError(
      `marsh: no daemon answers at MARSH_SOCK=${sock.path}; the shell branch that set it has ended, or unset MARSH_SOCK to use your own daemon`,
    );
  }
  return { conn: await startDaemon(sock), started: true };
}

/**
 * Starts `daemon/main.ts` detached with the daemon's own permissions (it
 * writes its own log in the control dir) and waits until it answers.
 */
async function startDaemon(sock: DaemonSocket): Promise<DaemonConnection> {
  const deno = denoPath();
  const child = entryCommand("daemon", { home: sock.home, deno }, {
    deno,
    env: { MARSH_HOME: sock.home },
    detached: true,
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  child.unref();
  let deadline = Date.now() + START_TIMEOUT_MS;
  const shorten = () => {
    // Another CLI's daemon may have won the race for the socket; give it a moment.
    deadline = Math.min(deadline, Date.now() + AFTER_EXIT_GRACE_MS);
  };
  child.status.then(shorten, shorten);
  for (;;) {
    const conn = await tryConnect(sock);
    if (conn) return conn;
    if (Date.now() >= deadline) {
      throw new CliError(`marsh: the daemon did not start; see ${sock.home}/${LOG_NAME}`);
    }
    await delay(POLL_MS);
  }
}

/**
 * Waits until nothing answers on the socket any more and no process holds
 * the control dir's daemon lock: the daemon has exited, so a start now is
 * not refused.
 *
 * @returns false when something still answered after `timeoutMs`
 */
export async function waitUntilGone(
  sock: DaemonSocket,
  timeoutMs = START_TIMEOUT_MS,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    let conn: DaemonConnection | null;
    try {
      conn = await tryConnect(sock);
    } catch (error) {
      // A daemon closing its socket can reset a connect that raced it: it is going.
      if (!(error instanceof CliError && error.cause instanceof Deno.errors.ConnectionReset)) {
        throw error;
      }
      if (Date.now() >= deadline) return false;
      await delay(POLL_MS);
      continue;
    }
    if (!conn) {
      // Silent is not yet gone: a stopping daemon closes its socket first, then ends its
      // children and its journal, holding the control dir's lock until it exits. A start
      // before then is refused (`marshd: already running`).
      if (daemonLockFree(sock.home)) return true;
    } else conn.close();
    if (Date.now() >= deadline) return false;
    await delay(POLL_MS);
  }
}

/** Whether no process holds the control dir's daemon lock (`marshd.lock`) now. */
export function daemonLockFree(home: string): boolean {
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(`${home}/${LOCK_NAME}`, { read: true, write: true });
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return true;
    throw error;
  }
  try {
    if (!file.tryLockSync(true)) return false;
    file.unlockSync();
    return true;
  } finally {
    file.close();
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Sends one request and returns its reply, which must be one of `types`;
 * notices before it go to `notice`. `who` prefixes the messages (`marsh splits`).
 *
 * @throws {CliError} with the daemon's message and status on an `error` reply, or status 2 when the connection fails
 */
export async function request<T extends DaemonFrame["t"]>(
  conn: DaemonConnection,
  frame: ClientFrame,
  types: readonly T[],
  who: string,
  notice: (line: string) => void,
): Promise<Extract<DaemonFrame, { t: T }>> {
  try {
    await conn.send(frame);
    for await (const reply of conn) {
      if ((types as readonly string[]).includes(reply.t)) {
        return reply as Extract<DaemonFrame, { t: T }>;
      }
      if (reply.t === "notice") notice(reply.message);
      else if (reply.t === "error") throw new CliError(`${who}: ${reply.message}`, reply.code);
      else throw new DaemonConnectionError(`an unexpected ${reply.t} frame from the daemon`);
    }
    throw new DaemonConnectionError("the daemon closed the connection without a reply");
  } catch (cause) {
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    throw new CliError(`${who}: ${cause.message}`, 2, { cause });
  }
}
