/**
 * The Deno permission flags of the two engine entrypoints, in one place so
 * the CLI that spawns them and the permission tests agree (DESIGN.md §4).
 * The CLI itself gets no network: what needs the Docker socket runs here.
 *
 * @module
 */

import { DEFAULT_SOCKET, EngineError, enginePaths, engineSocket } from "./engine_socket.ts";

function checkPath(path: string, what: string): void {
  if (!path.startsWith("/") || path.includes(",")) {
    throw new TypeError(`${what} must be an absolute path without commas: ${path}`);
  }
}

/**
 * The sockets `marsh engine status` may ask: the private engine's, the
 * default one, and `DOCKER_HOST`'s when it is a unix:// address (a bad
 * one is reported by the entrypoint, which refuses it).
 */
export function engineSockets(
  home: string,
  env: { get(name: string): string | undefined },
): string[] {
  const sockets = [enginePaths(home).socket, DEFAULT_SOCKET];
  try {
    const chosen = engineSocket(env, home).path;
    if (!sockets.includes(chosen)) sockets.push(chosen);
  } catch (error) {
    if (!(error instanceof EngineError)) throw error;
    // Not a unix:// DOCKER_HOST: nothing more to grant.
  }
  return sockets;
}

/**
 * `engine/engine_main.ts` (`marsh engine start|stop|status`):
 *
 * - `--allow-run`, unscoped: it starts dockerd and ps, and signals dockerd
 *   by pid, which Deno allows only with unscoped `--allow-run` (the CLI that
 *   spawns it holds that already; a process that may start dockerd as root
 *   holds root anyway);
 * - `--allow-env`: docker-modem enumerates the environment; the spawned
 *   dockerd inherits it;
 * - `--allow-sys=uid`: the control dir's owner check and the root check;
 * - read and write on the control dir (engine dir, log, pidfile, lock,
 *   config), the exec root (removed after a stop) and the sockets;
 * - `--allow-net=unix:` on the sockets only.
 *
 * No FFI, no other file.
 */
export function engineFlags(home: string, sockets: readonly string[]): string[] {
  checkPath(home, "control dir");
  for (const s of sockets) checkPath(s, "socket");
  const paths = [home, enginePaths(home).execRoot, ...sockets];
  return [
    "--no-prompt",
    "--quiet",
    "--allow-run",
    "--allow-env",
    "--allow-sys=uid",
    `--allow-read=${paths.join(",")}`,
    `--allow-write=${paths.join(",")}`,
    `--allow-net=${sockets.map((s) => `unix:${s}`).join(",")}`,
  ];
}

/**
 * `engine/kit_build_main.ts` (`marsh kit build`):
 *
 * - `--allow-read`, unscoped: it copies arbitrary host programs, their
 *   libraries, busybox and `--file` sources into the image;
 * - write only on the engine's socket (Deno asks read and write on a Unix
 *   socket's path to connect); the image is assembled in memory;
 * - `--allow-net=unix:` on that socket only;
 * - `--allow-env`: PATH (to find programs) and docker-modem's enumeration.
 *
 * No `--allow-run` (libraries are found by reading ELF headers, not by
 * running `ldd`), no FFI, no other write.
 */
export function kitBuildFlags(socket: string): string[] {
  checkPath(socket, "socket");
  return [
    "--no-prompt",
    "--quiet",
    "--allow-read",
    `--allow-write=${socket}`,
    `--allow-net=unix:${socket}`,
    "--allow-env",
  ];
}

/**
 * `engine/kit_check_main.ts` (`marsh kits add`):
 *
 * - read on the engine's socket, the control dir (to compare a chosen
 *   home with it) and the chosen home, when there is one;
 * - write only on the engine's socket (Deno asks read and write on a
 *   Unix socket's path to connect);
 * - `--allow-net=unix:` on that socket only;
 * - `--allow-env`: docker-modem's enumeration.
 *
 * No `--allow-run`, no FFI, no other read or write.
 */
export function kitCheckFlags(socket: string, controlDir: string, home?: string): string[] {
  checkPath(socket, "socket");
  checkPath(controlDir, "control dir");
  const reads = [socket, controlDir];
  if (home !== undefined) {
    checkPath(home, "home");
    reads.push(home);
  }
  return [
    "--no-prompt",
    "--quiet",
    `--allow-read=${reads.join(",")}`,
    `--allow-write=${socket}`,
    `--allow-net=unix:${socket}`,
    "--allow-env",
  ];
}
