/**
 * The Deno permission flags of each entrypoint, in one place so the launcher,
 * the daemon and the permission tests agree (DESIGN.md §4).
 *
 * @module
 */

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
 * The CLI: no FFI, no file access of its own; it may read the environment and
 * start the pinned Deno (`deno`, an absolute path) for the services.
 * `./marsh` passes exactly these.
 */
export function cliFlags(deno: string): string[] {
  return ["--quiet", "--no-prompt", "--allow-env", `--allow-run=${deno}`];
}
