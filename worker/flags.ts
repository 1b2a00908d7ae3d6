/**
 * The worker's Deno permission flags, in one place so the daemon that
 * spawns it and the permission tests agree (DESIGN.md §4).
 *
 * @module
 */

/** Set to `1` in the worker's environment to use the subreaper fallback even where a cgroup works. */
export const FORCE_SUBREAPER_ENV = "MARSH_WORKER_FORCE_SUBREAPER";

/**
 * The flags for `deno run … worker/main.ts`:
 *
 * - `--allow-run=perl`: each attempt's supervisor (`worker/supervisor.pl`)
 *   is the only program the worker starts; `bash`, the cgroup files and
 *   `/proc` are the supervisor's business, and Deno refuses `/proc` and
 *   `/sys` to anything short of `--allow-all` anyway;
 * - `--allow-write=<controlDir>`: the attempts' stdout and stderr files,
 *   created `O_EXCL` in per-attempt directories the daemon made there;
 * - `--allow-env=` the force switch above, and `NODE_V8_COVERAGE`, which
 *   `node:child_process` reads when it spawns.
 *
 * No read access (the spool, the fork and the cgroup are opened by the
 * supervisor), no network, no FFI.
 */
export function workerFlags(controlDir: string): string[] {
  if (!controlDir.startsWith("/") || controlDir.includes(",")) {
    throw new TypeError(`control dir must be an absolute path without commas: ${controlDir}`);
  }
  return [
    "--no-prompt",
    "--quiet",
    "--allow-run=perl",
    `--allow-write=${controlDir}`,
    `--allow-env=${FORCE_SUBREAPER_ENV},NODE_V8_COVERAGE`,
  ];
}
