/**
 * The Deno flags of each marsh entrypoint, one function each, and the lists
 * of variables they may read. The entrypoint registry (`entrypoints.ts`)
 * names which entry uses which and re-exports them; why each grant is there
 * is in each function's JSDoc.
 *
 * @module
 */

import { CAP_SOCKET_SLOTS, capSocketPath, SOCKET_NAME } from "./control_dir.ts";

/** Where glibc may be; the split-filesystem service may `dlopen` these and nothing else. */
export const LIBC_PATHS = [
  "/lib/x86_64-linux-gnu/libc.so.6",
  "/usr/lib/x86_64-linux-gnu/libc.so.6",
  "/lib/aarch64-linux-gnu/libc.so.6",
  "/usr/lib/aarch64-linux-gnu/libc.so.6",
  "/lib64/libc.so.6",
  "/usr/lib64/libc.so.6",
] as const;

/** Set to `1` in the worker's environment to use the subreaper fallback even where a cgroup works. */
export const FORCE_SUBREAPER_ENV = "MARSH_WORKER_FORCE_SUBREAPER";

/**
 * What the Deno runtime and the programs marsh starts need of the
 * environment, passed to every child that does not get all of it: `PATH` to
 * find programs (`perl`, `unshare`), and where Deno's cache is (`HOME`,
 * `DENO_DIR`, `XDG_CACHE_HOME`) so a child finds the npm packages its parent
 * found.
 */
export const RUNTIME_ENV = [
  "PATH",
  "HOME",
  "DENO_DIR",
  "XDG_CACHE_HOME",
  "DENO_NO_UPDATE_CHECK",
  "NO_COLOR",
  // How Deno reaches the npm registry when a child's cache lacks a package:
  // behind a TLS-inspecting proxy, without these a fetch retries for minutes.
  "DENO_CERT",
  "DENO_TLS_CA_STORE",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "NPM_CONFIG_REGISTRY",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
] as const;

/** The variables the worker may read (see {@linkcode workerFlags}). */
export const WORKER_ENV = [FORCE_SUBREAPER_ENV, "NODE_V8_COVERAGE"] as const;

/**
 * The daemon's environment, all of it: the control dir's location
 * (`controlDirPath`), the pinned Deno, the Docker engine it chooses at start
 * (`engineSocket`), its settings (`settingsFromEnv`, docs/guide.md,
 * "Settings"), and what it passes on to the worker. The CLI
 * starts it with these variables only, it may read no other, and its
 * children get their own lists from it (`passes` in `entrypoints.ts`).
 */
export const DAEMON_ENV: readonly string[] = [
  ...new Set([
    "MARSH_HOME",
    "XDG_STATE_HOME",
    "MARSH_DENO",
    "DOCKER_HOST",
    "MARSH_LEASE_MS",
    "MARSH_SPLIT_DEADLINE_MS",
    "MARSH_CANCEL_GRACE_MS",
    "MARSH_TEST_PAUSE_AT",
    "MARSH_FORKS",
    "MARSH_TREE_KIT_VMS",
    "MARSH_JOB_WALL_SECONDS",
    ...RUNTIME_ENV,
    ...WORKER_ENV,
  ]),
];

function checkPath(what: string, p: string): void {
  if (!p.startsWith("/") || p.includes(",")) {
    throw new TypeError(`${what} must be an absolute path without commas: ${p}`);
  }
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
  const sockets = [`unix:${home}/${SOCKET_NAME}`];
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
 * `client/cli_bundle_main.ts`, which `./marsh` runs when its bundle of the
 * CLI is missing or stale: read the repo and the bundle dir, write the
 * bundle dir, run the pinned Deno (`deno info`, `deno bundle`).
 */
export function cliBundleFlags(root: string, dir: string, deno: string): string[] {
  return [
    "--quiet",
    "--no-prompt",
    `--allow-read=${root},${dir}`,
    `--allow-write=${dir}`,
    `--allow-run=${deno}`,
  ];
}

/**
 * The daemon: the control dir (journal, sockets, spool, attempt files, log),
 * its own socket, the branch and job capability socket slots, the pinned Deno
 * to start its two services, `mkfifo` (a `marsh run` job's live stdio, docs/rules.md
 * "Running a registered command as a job"), and `unshare` (from `PATH`; Deno resolves it at
 * start, and one missing leaves nothing granted) to start the
 * split-filesystem service in a user and mount namespace when the daemon is
 * not root. Of the environment only {@linkcode DAEMON_ENV}, which is all it
 * is given. No FFI, no project file.
 */
export function daemonFlags(home: string, deno: string, slots: number): string[] {
  const sockets = [`unix:${home}/${SOCKET_NAME}`];
  for (let n = 0; n < slots; n++) sockets.push(`unix:${home}/b/${String(n).padStart(2, "0")}.sock`);
  for (let n = 0; n < CAP_SOCKET_SLOTS; n++) sockets.push(`unix:${capSocketPath(home, n)}`);
  return [
    "--quiet",
    "--no-prompt",
    `--allow-env=${DAEMON_ENV.join(",")}`,
    // checkOwned() compares the control dir's owner with Deno.uid(); Kit
    // containers run as the daemon's uid:gid.
    "--allow-sys=uid,gid",
    `--allow-read=${home}`,
    `--allow-write=${home}`,
    `--allow-net=${sockets.join(",")}`,
    `--allow-run=${deno},unshare,mkfifo`,
  ];
}

/**
 * The split-filesystem service: libc through FFI, nothing else. Its file
 * access goes through FFI, so it needs no `--allow-read` or `--allow-write`,
 * and the variables that locate the user's global Git excludes (`HOME`,
 * `XDG_CONFIG_HOME`) come in each request from the CLI's environment
 * (`splitfs/git/ignore_rules.ts`), so it reads none of its own.
 */
export function splitfsFlags(): string[] {
  return [
    "--no-prompt",
    "--quiet",
    `--allow-ffi=${LIBC_PATHS.join(",")}`,
  ];
}

/**
 * The git planner (`resolve/main.ts`, docs/resolution.md "Where Git runs"),
 * started by the daemon for each `--git` plan:
 *
 * - `--allow-run=git`: the merge is Git's own (`merge-tree`), run in a
 *   hardened scratch repository (`resolve/git.ts`);
 * - `--allow-env=PATH`: to find `git`; the rest of Git's environment is set
 *   by marsh, never read;
 * - read and write on `objects` (the split's `store.git/objects`: the blobs
 *   are read there, the small trees, commits and merged blobs written
 *   there) and `tmp` (its scratch repository).
 *
 * No project tree, no control dir, no network, no FFI.
 *
 * @throws {TypeError} when a path is not absolute or holds a comma
 */
export function plannerFlags(objects: string, tmp: string): string[] {
  checkPath("objects dir", objects);
  checkPath("temp dir", tmp);
  return [
    "--no-prompt",
    "--quiet",
    "--allow-run=git",
    "--allow-env=PATH",
    `--allow-read=${objects},${tmp}`,
    `--allow-write=${objects},${tmp}`,
  ];
}

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
  checkPath("control dir", controlDir);
  return [
    "--no-prompt",
    "--quiet",
    "--allow-run=perl",
    `--allow-write=${controlDir}`,
    `--allow-env=${WORKER_ENV.join(",")}`,
  ];
}

/** The list of a `--allow-NAME=a,b` flag in `flags`, or `[]`. */
function listOf(flags: readonly string[], name: string): string[] {
  const prefix = `--allow-${name}=`;
  return flags.filter((f) => f.startsWith(prefix)).flatMap((f) => f.slice(prefix.length).split(","))
    .filter((p) => p !== "");
}

/**
 * The worker once it also runs Kit containers: `workerFlags(controlDir)`
 * plus, for the engine at `socket`:
 *
 * - `--allow-net=unix:<socket>` and read and write on the socket (Deno asks
 *   all three to connect to a Unix socket);
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

/**
 * `docker/engine_main.ts` (`marsh engine start|stop|status`):
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
 * No FFI, no other file. `execRoot` is `enginePaths(home).execRoot`
 * (`docker/engine_socket.ts`), passed in so this module loads no hash.
 */
export function engineFlags(home: string, execRoot: string, sockets: readonly string[]): string[] {
  checkPath("control dir", home);
  for (const s of sockets) checkPath("socket", s);
  const paths = [home, execRoot, ...sockets];
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
 * `docker/kit_build_main.ts` (`marsh kit build`):
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
  checkPath("socket", socket);
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
 * `docker/kit_check_main.ts` (`marsh kits add`):
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
  checkPath("socket", socket);
  checkPath("control dir", controlDir);
  const reads = [socket, controlDir];
  if (home !== undefined) {
    checkPath("home", home);
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

/**
 * The in-job client, run by the host's Deno inside a Kit container through
 * the link script (`protocol/job_capability.ts`), on its capability socket
 * `socket` (`/run/marsh/cap.sock`). Inside the container the client is no
 * boundary (the job can run anything it likes there): authority is the
 * daemon's, bound to the socket. So the grants are what the CLI needs: read
 * (job.json, the cwd), env, run (`join -- CMD`), the socket. It runs a bundle,
 * so no config and no lock.
 */
export function jobClientFlags(socket: string): string[] {
  return [
    "--quiet",
    "--no-prompt",
    "--no-config",
    "--no-lock",
    "--allow-read",
    "--allow-env",
    "--allow-run",
    "--allow-sys=uid",
    `--allow-write=${socket}`,
    `--allow-net=unix:${socket}`,
  ];
}
