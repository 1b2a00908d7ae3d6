/**
 * The Deno permission flags of each entrypoint, in one place so the launcher,
 * the daemon and the permission tests agree (DESIGN.md §4).
 *
 * @module
 */

import { CAP_SOCKET_SLOTS, capSocketPath } from "./control_dir.ts";

/** Where glibc may be; the split-filesystem service may `dlopen` these and nothing else. */
export const LIBC_PATHS = [
  "/lib/x86_64-linux-gnu/libc.so.6",
  "/usr/lib/x86_64-linux-gnu/libc.so.6",
  "/lib/aarch64-linux-gnu/libc.so.6",
  "/usr/lib/aarch64-linux-gnu/libc.so.6",
  "/lib64/libc.so.6",
  "/usr/lib64/libc.so.6",
] as const;

/**
 * The split-filesystem service: libc through FFI, and the two variables that
 * locate the user's global Git excludes. Its file access goes through FFI, so
 * it needs no `--allow-read` or `--allow-write`.
 */
export function splitfsFlags(): string[] {
  return [
    "--no-prompt",
    "--quiet",
    `--allow-ffi=${LIBC_PATHS.join(",")}`,
    "--allow-env=HOME,XDG_CONFIG_HOME",
  ];
}

/**
 * The CLI: no FFI and no read of project files. It reads the environment,
 * reads and writes the control dir (`home`), connects to the daemon's socket
 * (and to `MARSH_SOCK` inside a shell branch), and runs programs: the pinned
 * Deno (for `marsh diff` and to start the daemon) and `join -- CMD`'s command,
 * which can be anything, so `--allow-run` is unscoped. `./marsh` passes exactly
 * these.
 */
export function cliFlags(home: string, branchSocket?: string): string[] {
  const sockets = [`unix:${home}/marshd.sock`];
  const paths = [home];
  if (branchSocket) {
    sockets.push(`unix:${branchSocket}`);
    // Deno wants read and write on a Unix socket's path to connect, and
    // checkOwned() looks at its owner and mode first.
    paths.push(branchSocket);
  }
  return [
    "--quiet",
    "--no-prompt",
    "--allow-env",
    // checkOwned() compares the control dir's owner with Deno.uid().
    "--allow-sys=uid",
    "--allow-run",
    `--allow-read=${paths.join(",")}`,
    `--allow-write=${paths.join(",")}`,
    `--allow-net=${sockets.join(",")}`,
  ];
}

/**
 * The daemon: the control dir (journal, sockets, spool, attempt files, log),
 * its own socket, the branch and job capability socket slots, the pinned Deno to start its
 * two services, and `unshare` (from `PATH`; Deno resolves it at start, and
 * one missing leaves nothing granted) to start the split-filesystem service
 * in a user and mount namespace when the daemon is not root. No FFI, no
 * project file.
 */
export function daemonFlags(home: string, deno: string, slots: number): string[] {
  const sockets = [`unix:${home}/marshd.sock`];
  for (let n = 0; n < slots; n++) sockets.push(`unix:${home}/b/${String(n).padStart(2, "0")}.sock`);
  for (let n = 0; n < CAP_SOCKET_SLOTS; n++) sockets.push(`unix:${capSocketPath(home, n)}`);
  return [
    "--quiet",
    "--no-prompt",
    "--allow-env",
    // checkOwned() compares the control dir's owner with Deno.uid(); Kit
    // containers run as the daemon's uid:gid.
    "--allow-sys=uid,gid",
    `--allow-read=${home}`,
    `--allow-write=${home}`,
    `--allow-net=${sockets.join(",")}`,
    `--allow-run=${deno},unshare`,
  ];
}
