/**
 * The engine entrypoints' flags as the CLI needs them: the sockets `marsh
 * engine` may reach, and `engineFlags` with the exec root filled in. The
 * flags themselves are built in the entrypoint registry
 * (`protocol/entrypoints.ts`); the CLI itself gets no network: what needs
 * the Docker socket runs in these children.
 *
 * @module
 */

import { engineFlags as registryEngineFlags } from "../protocol/entrypoints.ts";
import { DEFAULT_SOCKET, EngineError, enginePaths, engineSocket } from "./engine_socket.ts";

export { kitBuildFlags, kitCheckFlags } from "../protocol/entrypoints.ts";

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
 * `docker/engine_main.ts`'s flags for control dir `home` and `sockets`
 * (`engineFlags` of `protocol/entrypoints.ts`, which says why each grant).
 *
 * @throws {TypeError} when a path is not absolute or holds a comma
 */
export function engineFlags(home: string, sockets: readonly string[]): string[] {
  if (!home.startsWith("/") || home.includes(",")) {
    throw new TypeError(`control dir must be an absolute path without commas: ${home}`);
  }
  return registryEngineFlags(home, enginePaths(home).execRoot, sockets);
}
