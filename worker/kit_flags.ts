/**
 * The worker's Deno flags once it also runs Kit containers (DESIGN.md §4):
 * `workerFlags` of `flags.ts`, widened by what `npm:dockerode` and
 * `runKitContainer` need and nothing more.
 *
 * @module
 */

import { workerFlags } from "./flags.ts";

function checkPath(what: string, p: string): void {
  if (!p.startsWith("/") || p.includes(",")) {
    throw new TypeError(`${what} must be an absolute path without commas: ${p}`);
  }
}

/** The list of a `--allow-NAME=a,b` flag in `flags`, or `[]`. */
function listOf(flags: readonly string[], name: string): string[] {
  const prefix = `--allow-${name}=`;
  return flags.filter((f) => f.startsWith(prefix)).flatMap((f) => f.slice(prefix.length).split(","))
    .filter((p) => p !== "");
}

/**
 * `workerFlags(controlDir)` plus, for the engine at `socket`:
 *
 * - `--allow-net=unix:<socket>` and read and write on the socket (a Unix
 *   socket needs all three, DESIGN.md §4);
 * - unscoped `--allow-env`: docker-modem enumerates the environment when
 *   it starts (it replaces the scoped `--allow-env=` of `workerFlags`);
 * - `--allow-read=<controlDir>`: the spool (`<controlDir>/spool/<id>`) is
 *   streamed into the container's stdin by the worker itself.
 *
 * Projects stay unreadable to the worker: the engine, not the worker,
 * checks which mount sources exist. No FFI, no other network.
 *
 * @throws {TypeError} when a path is not absolute or holds a comma
 */
export function kitWorkerFlags(controlDir: string, socket: string): string[] {
  checkPath("control dir", controlDir);
  checkPath("engine socket", socket);
  const base = workerFlags(controlDir);
  const read = new Set([...listOf(base, "read"), controlDir, socket]);
  const write = new Set([...listOf(base, "write"), socket]);
  const kept = base.filter((f) => !/^--allow-(env|read|write|net)(=|$)/.test(f));
  return [
    ...kept,
    `--allow-read=${[...read].join(",")}`,
    `--allow-write=${[...write].join(",")}`,
    `--allow-net=unix:${socket}`,
    "--allow-env",
  ];
}
