/**
 * A private Docker engine for machines without one (docs/architecture.md "Platform choices"):
 * `dockerd --storage-driver=vfs --iptables=false --bridge=none` with its own
 * socket, data root, pidfile, log and (empty) config file under
 * `<control dir>/engine/`, and its own exec root. No bridge means Kit
 * containers run with `--network none`.
 *
 * Which engine marsh talks to ({@linkcode engineSocket}: `DOCKER_HOST`
 * (unix:// only), else the private engine when it runs, else the default
 * socket) is decided in `engine_socket.ts`, re-exported here.
 *
 * Needs (see `engineFlags()` in `flags.ts`): `--allow-run` (dockerd, ps;
 * signals need it unscoped), `--allow-env`, `--allow-sys=uid`, read and
 * write on the control dir, the exec root and the sockets, and
 * `--allow-net=unix:` on the sockets.
 *
 * @module
 */

import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { ensureControlDir } from "../protocol/control_dir.ts";
import { DockerApi, EngineUnreachableError, type EngineVersion } from "./docker_api.ts";
import {
  EngineError,
  type EnginePaths,
  enginePaths,
  type EngineSocket,
  engineSocket,
  exists,
} from "./engine_socket.ts";

export {
  DEFAULT_SOCKET,
  ENGINE_DIR,
  EngineError,
  type EnginePaths,
  enginePaths,
  type EngineSocket,
  engineSocket,
  parseDockerHost,
  type SocketSource,
} from "./engine_socket.ts";

/** How long `dockerd` has to answer after it is started. */
export const START_TIMEOUT_MS = 60_000;
/** How long it has to exit after SIGTERM (it gives containers 15 s) before SIGKILL. */
export const STOP_TIMEOUT_MS = 30_000;
/** `sockaddr_un.sun_path` holds 108 bytes, the final NUL included. */
const MAX_SOCKET_PATH = 107;
const POLL_MS = 100;
const PROGRESS_EVERY_MS = 2_000;

const dec = new TextDecoder();

/** A process as ps(1) sees it (Deno reads /proc only with --allow-all). */
async function processArgs(pid: number): Promise<string | null> {
  let out: Deno.CommandOutput;
  try {
    out = await new Deno.Command("ps", {
      args: ["-ww", "-o", "stat=,args=", "-p", String(pid)],
      stdout: "piped",
      stderr: "null",
    }).output();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new EngineError("ps is not installed: run `apt-get install -y procps` (as root)", 2, {
        cause: error,
      });
    }
    throw error;
  }
  if (!out.success) return null;
  const m = /^\s*(\S+)\s+(.*)$/.exec(dec.decode(out.stdout).trim());
  if (!m || m[1]!.startsWith("Z")) return null;
  return m[2]!;
}

/** Live processes whose command line names `needle`. */
async function processesNaming(needle: string): Promise<number[]> {
  const out = await new Deno.Command("ps", {
    args: ["-ww", "-eo", "pid=,stat=,args="],
    stdout: "piped",
    stderr: "null",
  }).output();
  const found: number[] = [];
  for (const line of dec.decode(out.stdout).split("\n")) {
    const m = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m || m[2]!.startsWith("Z") || !m[3]!.includes(needle) || m[3]!.startsWith("ps ")) continue;
    found.push(Number(m[1]));
  }
  return found;
}

function readPid(pidfile: string): number | null {
  let text: string;
  try {
    text = Deno.readTextFileSync(pidfile);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const pid = Number(text.trim());
  return Number.isSafeInteger(pid) && pid > 0 ? pid : null;
}

function removeIfPresent(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    // Already gone.
  }
}

/** The pid of this control dir's dockerd when it runs; a stale pidfile reads as null. */
async function ourDockerd(p: EnginePaths): Promise<number | null> {
  const pid = readPid(p.pidfile);
  if (pid === null) return null;
  const args = await processArgs(pid);
  // The pid may have been reused since a crash: only a dockerd naming our pidfile is ours.
  return args !== null && args.includes(`--pidfile=${p.pidfile}`) ? pid : null;
}

function signal(pid: number, sig: Deno.Signal): void {
  try {
    Deno.kill(pid, sig);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    // It exited meanwhile.
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Waits until `pid` no longer runs (or is a zombie). */
async function waitGone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if ((await processArgs(pid)) === null) return true;
    if (Date.now() >= deadline) return false;
    await sleep(POLL_MS);
  }
}

/** Holds `p.lock` (flock) for the duration of `body`. */
async function locked<T>(p: EnginePaths, body: () => Promise<T>): Promise<T> {
  ensureControlDir(p.home);
  Deno.mkdirSync(p.dir, { recursive: true, mode: 0o700 });
  using file = Deno.openSync(p.lock, { read: true, write: true, create: true, mode: 0o600 });
  await file.lock(true);
  try {
    return await body();
  } finally {
    await file.unlock();
  }
}

/** The last `lines` lines of the engine's log, for error messages. */
export function logTail(p: EnginePaths, lines = 15): string {
  try {
    const text = Deno.readTextFileSync(p.log).trimEnd().split("\n");
    return text.slice(-lines).join("\n");
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "(no log)";
    throw error;
  }
}

/** The arguments marsh starts dockerd with. */
export function dockerdArgs(p: EnginePaths): string[] {
  return [
    `--host=unix://${p.socket}`,
    `--data-root=${p.dataRoot}`,
    `--exec-root=${p.execRoot}`,
    `--pidfile=${p.pidfile}`,
    // Our own (empty) config file: a system /etc/docker/daemon.json must not clash with these flags.
    `--config-file=${p.config}`,
    "--storage-driver=vfs",
    "--iptables=false",
    "--bridge=none",
  ];
}

/** What `startEngine` found or did. */
export interface StartResult {
  /** False when an engine of this control dir was already answering. */
  readonly started: boolean;
  readonly pid: number;
  readonly socket: string;
  readonly version: EngineVersion;
}

/** Options of {@linkcode startEngine}. */
export interface StartOptions {
  readonly timeoutMs?: number;
  /** Called every couple of seconds while dockerd is not answering yet. */
  readonly onProgress?: (line: string) => void;
}

async function answers(api: DockerApi): Promise<boolean> {
  try {
    await api.ping();
    return true;
  } catch (error) {
    if (error instanceof EngineUnreachableError) return false;
    throw error;
  }
}

/**
 * Starts control dir `home`'s private engine unless it answers already, and
 * waits until it answers `/_ping`. Safe to call concurrently: callers queue
 * on a lock file and the later ones find the engine running.
 *
 * @throws {EngineError} when dockerd is not installed, we are not root, or
 *   it does not answer in time (the message carries the log's tail)
 */
export async function startEngine(home: string, opts: StartOptions = {}): Promise<StartResult> {
  const p = enginePaths(home);
  if (new TextEncoder().encode(p.socket).length > MAX_SOCKET_PATH) {
    throw new EngineError(
      `the engine socket ${p.socket} is longer than ${MAX_SOCKET_PATH} bytes, the limit of a Unix socket path; set MARSH_HOME to a shorter directory`,
    );
  }
  const api = new DockerApi(p.socket);
  return await locked(p, async () => {
    const running = await ourDockerd(p);
    if (running !== null) {
      await waitAnswering(p, api, running, null, opts);
      return { started: false, pid: running, socket: p.socket, version: await api.version() };
    }
    if (Deno.uid() !== 0) {
      throw new EngineError(
        "a private engine runs dockerd, which needs root: run `marsh engine start` as root, or point DOCKER_HOST at an engine you can use",
      );
    }
    const dockerd = await findDockerd();
    // A pidfile or socket left by a dockerd that died: dockerd refuses to start over its pidfile.
    removeIfPresent(p.pidfile);
    removeIfPresent(p.socket);
    Deno.writeTextFileSync(p.config, "{}\n", { mode: 0o600 });
    const child = spawnDockerd(dockerd, p);
    const pid = await waitAnswering(p, api, child.pid, child.exited, opts);
    return { started: true, pid, socket: p.socket, version: await api.version() };
  });
}

/** Where dockerd may be when PATH (a non-login root shell's, say) lacks the sbin directories. */
const DOCKERD_CANDIDATES = [
  "dockerd",
  "/usr/sbin/dockerd",
  "/usr/bin/dockerd",
  "/usr/local/sbin/dockerd",
  "/usr/local/bin/dockerd",
];

/** The standard directories, appended to dockerd's PATH: it looks up containerd, runc and docker-init there. */
const SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/**
 * The dockerd to run: the first candidate that answers `--version`.
 *
 * @throws {EngineError} with the fix when the host has none
 */
async function findDockerd(): Promise<string> {
  for (const cmd of DOCKERD_CANDIDATES) {
    try {
      const out = await new Deno.Command(cmd, {
        args: ["--version"],
        stdout: "null",
        stderr: "null",
      }).output();
      if (out.success) return cmd;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Not here; try the next place.
    }
  }
  throw new EngineError("dockerd is not installed: run `apt-get install -y docker.io` (as root)");
}

/** Starts dockerd in its own session, its output appended to the log. */
function spawnDockerd(dockerd: string, p: EnginePaths): { pid: number; exited: Promise<string> } {
  const fd = openSync(p.log, "a", 0o600);
  let pid: number | undefined;
  let exited: Promise<string>;
  try {
    const path = Deno.env.get("PATH");
    const child = spawn(dockerd, dockerdArgs(p), {
      detached: true,
      env: { ...Deno.env.toObject(), PATH: path ? `${path}:${SYSTEM_PATH}` : SYSTEM_PATH },
      stdio: ["ignore", fd, fd],
      cwd: p.dir,
    });
    exited = new Promise<string>((resolve) => {
      child.on(
        "exit",
        (code, sig) => resolve(sig ? `was killed by ${sig}` : `exited with status ${code}`),
      );
      child.on("error", (error) => resolve(`could not be started: ${error.message}`));
    });
    child.unref();
    pid = child.pid;
  } finally {
    closeSync(fd);
  }
  if (pid === undefined) throw new EngineError(`dockerd could not be started; see ${p.log}`);
  return { pid, exited };
}

/**
 * Polls the socket until it answers. A dockerd that exits, or that does
 * not answer in time (then it is stopped), is an error carrying the log.
 */
async function waitAnswering(
  p: EnginePaths,
  api: DockerApi,
  pid: number,
  exited: Promise<string> | null,
  opts: StartOptions,
): Promise<number> {
  const started = Date.now();
  const timeout = opts.timeoutMs ?? START_TIMEOUT_MS;
  let exit: string | undefined;
  exited?.then((why) => exit = why);
  let nextProgress = started + PROGRESS_EVERY_MS;
  for (;;) {
    if (await answers(api)) return pid;
    if (exit !== undefined) {
      throw new EngineError(
        `dockerd ${exit} before answering; the end of ${p.log}:\n${logTail(p)}`,
      );
    }
    if (exited === null && (await processArgs(pid)) === null) {
      throw new EngineError(
        `dockerd (pid ${pid}) exited before answering; the end of ${p.log}:\n${logTail(p)}`,
      );
    }
    const now = Date.now();
    if (now - started >= timeout) {
      await terminate(p, pid);
      throw new EngineError(
        `dockerd did not answer on ${p.socket} within ${
          Math.round(timeout / 1000)
        } s and was stopped; the end of ${p.log}:\n${logTail(p)}`,
      );
    }
    if (now >= nextProgress) {
      opts.onProgress?.(
        `waiting for dockerd (pid ${pid}) to answer (${Math.round((now - started) / 1000)} s)`,
      );
      nextProgress = now + PROGRESS_EVERY_MS;
    }
    await sleep(POLL_MS);
  }
}

/**
 * SIGTERM, a wait, then SIGKILL; then the engine's containerd (it names
 * the exec root) gets the same. Removes the pidfile and socket a killed
 * dockerd leaves behind.
 *
 * @returns whether it had to be killed
 * @throws {EngineError} (status 1) when a process survives SIGKILL
 */
async function terminate(
  p: EnginePaths,
  pid: number,
  timeoutMs = STOP_TIMEOUT_MS,
): Promise<boolean> {
  signal(pid, "SIGTERM");
  let killed = false;
  if (!(await waitGone(pid, timeoutMs))) {
    killed = true;
    signal(pid, "SIGKILL");
    if (!(await waitGone(pid, 5_000))) {
      throw new EngineError(`dockerd (pid ${pid}) is still running after SIGKILL`, 1);
    }
  }
  // dockerd stops its containerd on the way out; make sure of it.
  const deadline = Date.now() + 5_000;
  for (;;) {
    const left = await processesNaming(`${p.execRoot}/containerd/containerd.toml`);
    if (left.length === 0) break;
    if (Date.now() >= deadline) {
      for (const other of left) signal(other, "SIGKILL");
      killed = true;
      await sleep(POLL_MS);
      if ((await processesNaming(`${p.execRoot}/containerd/containerd.toml`)).length > 0) {
        throw new EngineError(
          `the engine's containerd (${left.join(", ")}) is still running after SIGKILL`,
          1,
        );
      }
      break;
    }
    await sleep(POLL_MS);
  }
  removeIfPresent(p.pidfile);
  removeIfPresent(p.socket);
  return killed;
}

/** What `stopEngine` found or did. */
export interface StopResult {
  /** False when no engine of this control dir was running. */
  readonly stopped: boolean;
  readonly pid: number | null;
  /** True when SIGTERM was not enough. */
  readonly killed: boolean;
  /** Leftovers it cleaned or could not clean, one line each. */
  readonly notes: readonly string[];
}

/**
 * Stops control dir `home`'s private engine: SIGTERM, up to
 * {@linkcode STOP_TIMEOUT_MS}, then SIGKILL; checks that dockerd and its
 * containerd are gone; removes the pidfile, socket and exec root. Stopping
 * a stopped engine does nothing (a stale pidfile is removed).
 *
 * @throws {EngineError} (status 1) when a process survives SIGKILL
 */
export async function stopEngine(
  home: string,
  opts: { timeoutMs?: number } = {},
): Promise<StopResult> {
  const p = enginePaths(home);
  if (!exists(p.dir)) return { stopped: false, pid: null, killed: false, notes: [] };
  return await locked(p, async () => {
    const notes: string[] = [];
    const pid = await ourDockerd(p);
    if (pid === null) {
      if (exists(p.pidfile)) notes.push(`removed a stale pidfile (${p.pidfile})`);
      removeIfPresent(p.pidfile);
      removeIfPresent(p.socket);
      return { stopped: false, pid: null, killed: false, notes };
    }
    const killed = await terminate(p, pid, opts.timeoutMs);
    try {
      Deno.removeSync(p.execRoot, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) {
        notes.push(`could not remove the exec root ${p.execRoot}: ${(error as Error).message}`);
      }
    }
    return { stopped: true, pid, killed, notes };
  });
}

/** Everything `marsh engine status` shows. */
export interface EngineStatus {
  readonly socket: EngineSocket;
  readonly reachable: boolean;
  readonly version: EngineVersion | null;
  /** Why it is not reachable. */
  readonly error: string | null;
  readonly private: {
    readonly running: boolean;
    readonly pid: number | null;
    readonly socket: string;
    readonly log: string;
    readonly dataRoot: string;
    readonly execRoot: string;
  };
}

/**
 * Which engine marsh would use, whether it answers, and the state of the
 * control dir's private engine. Starts nothing.
 *
 * @throws {EngineError} when `DOCKER_HOST` is not a unix:// address
 */
export async function engineStatus(
  home: string,
  env: { get(name: string): string | undefined },
): Promise<EngineStatus> {
  const p = enginePaths(home);
  const socket = engineSocket(env, home);
  const pid = exists(p.pidfile) ? await ourDockerd(p) : null;
  const api = new DockerApi(socket.path);
  let version: EngineVersion | null = null;
  let error: string | null = null;
  try {
    version = await api.version();
  } catch (e) {
    if (!(e instanceof EngineUnreachableError)) throw e;
    error = e.message;
  }
  return {
    socket,
    reachable: version !== null,
    version,
    error,
    private: {
      running: pid !== null,
      pid,
      socket: p.socket,
      log: p.log,
      dataRoot: p.dataRoot,
      execRoot: p.execRoot,
    },
  };
}
