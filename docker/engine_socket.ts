/**
 * Which Docker engine marsh talks to, and where a control dir's private
 * engine lives: paths and the socket choice only, no engine client, so the
 * CLI reads them without loading dockerode (the engine commands' flags are
 * built from them, `flags.ts`). The engine itself is `private_engine.ts`.
 *
 * Needs read on the control dir's `engine/` for {@linkcode engineSocket}.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { ControlDirError, controlDirPath } from "../protocol/control_dir.ts";

/** The engine's folder inside the control dir. */
export const ENGINE_DIR = "engine";
/** Where a system engine listens when `DOCKER_HOST` is unset. */
export const DEFAULT_SOCKET = "/var/run/docker.sock";

/** A private engine that cannot be started, stopped or used; the message says what to do. */
export class EngineError extends Error {
  override name = "EngineError";
  /** The exit status for a CLI reporting it: 2 for setup problems, 1 for a failed stop. */
  readonly code: number;
  constructor(message: string, code = 2, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}

/** Every path of one control dir's private engine. */
export interface EnginePaths {
  readonly home: string;
  readonly dir: string;
  readonly socket: string;
  readonly pidfile: string;
  readonly log: string;
  readonly config: string;
  readonly dataRoot: string;
  /**
   * `/run/marsh-engine-<12 hex of sha256(control dir)>`. Not under the
   * control dir: dockerd and containerd bind Unix sockets inside the exec
   * root (`containerd/containerd.sock`, plugin and network sockets a few
   * levels deeper), and a socket path may not exceed 107 bytes, which a
   * control dir of ordinary depth would break. The hash keeps engines of
   * different control dirs apart.
   */
  readonly execRoot: string;
  /** Held (flock) while an engine starts or stops, so two callers do not race. */
  readonly lock: string;
}

/** The private engine's paths for control dir `home`. */
export function enginePaths(home: string): EnginePaths {
  const dir = `${home}/${ENGINE_DIR}`;
  const hash = createHash("sha256").update(home).digest("hex").slice(0, 12);
  return {
    home,
    dir,
    socket: `${dir}/docker.sock`,
    pidfile: `${dir}/dockerd.pid`,
    log: `${dir}/dockerd.log`,
    config: `${dir}/daemon.json`,
    dataRoot: `${dir}/data`,
    execRoot: `/run/marsh-engine-${hash}`,
    lock: `${dir}/engine.lock`,
  };
}

/** Where marsh's engine socket came from. */
export type SocketSource = "DOCKER_HOST" | "private" | "default";

/** The engine socket marsh uses, and why. */
export interface EngineSocket {
  readonly path: string;
  readonly source: SocketSource;
}

/**
 * The socket path of `DOCKER_HOST=unix:///path`.
 *
 * @throws {EngineError} for any other scheme, or a relative path
 */
export function parseDockerHost(value: string): string {
  const m = /^unix:\/\/(\/.*)$/.exec(value);
  if (!m) {
    throw new EngineError(
      `DOCKER_HOST=${value} is not supported: marsh talks to a local engine over a Unix socket ` +
        "only (DOCKER_HOST=unix:///path/to/docker.sock); unset DOCKER_HOST to use the private " +
        `engine (\`marsh engine start\`) or ${DEFAULT_SOCKET}`,
    );
  }
  return m[1]!;
}

/** Whether `path` exists (lstat: a dangling link counts). */
export function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * The engine marsh uses: `DOCKER_HOST` when set (unix:// only), else the
 * private engine of control dir `home` (default: the one `env` names, as
 * `controlDirPath` finds it) when its pidfile and socket exist, else
 * {@linkcode DEFAULT_SOCKET}. Whether anything answers there is the
 * caller's next question.
 *
 * Needs read on the control dir's `engine/` (to see the pidfile and socket).
 *
 * @throws {EngineError} when `DOCKER_HOST` is not a unix:// address
 */
export function engineSocket(
  env: { get(name: string): string | undefined },
  home?: string,
): EngineSocket {
  const host = env.get("DOCKER_HOST");
  if (host) return { path: parseDockerHost(host), source: "DOCKER_HOST" };
  let dir = home;
  if (dir === undefined) {
    try {
      dir = controlDirPath(env);
    } catch (error) {
      if (!(error instanceof ControlDirError)) throw error;
      // No control dir (no MARSH_HOME, no HOME): no private engine either.
    }
  }
  if (dir !== undefined) {
    const p = enginePaths(dir);
    if (exists(p.pidfile) && exists(p.socket)) return { path: p.socket, source: "private" };
  }
  return { path: DEFAULT_SOCKET, source: "default" };
}
