/**
 * The control dir (docs/architecture.md "Where state lives"): `$MARSH_HOME`, else
 * `$XDG_STATE_HOME/marsh`, else `~/.local/state/marsh`; mode 0700, owned by
 * the caller. Where the daemon's socket, journal, log and per-attempt files
 * live. The CLI and the daemon agree on it through this module.
 *
 * Needs `--allow-env` and read/write on the control dir.
 *
 * @module
 */

/** Names inside the control dir. */
export const SOCKET_NAME = "marshd.sock";
export const JOURNAL_NAME = "journal.db";
export const LOG_NAME = "marshd.log";
export const PID_NAME = "marshd.pid";
/** The daemon's children by pid and start time, for the next daemon (daemon/children.ts). */
export const CHILDREN_NAME = "children.json";
/** Held (flock) by the one daemon of a control dir for as long as it runs. */
export const LOCK_NAME = "marshd.lock";
/**
 * This daemon's key for `job.json`'s environment digests, hex, mode 0600
 * (`daemon/env_key.ts`); made anew at each start, never bound into a container.
 */
export const ENV_KEY_NAME = "env.key";
export const ATTEMPTS_DIR = "attempts";
export const SPOOL_DIR = "spool";
export const BRANCH_SOCKETS_DIR = "b";

/**
 * Branch sockets are pre-named slots: Deno scopes `--allow-net=unix:` to
 * exact paths, so the daemon is granted this many and no more. The host pool
 * admits 8 shell branches at once; nested splits are argv-only.
 */
export const BRANCH_SOCKET_SLOTS = 16;

/** A control dir that is unsafe to use: wrong owner, wrong mode, a symlink. */
export class ControlDirError extends Error {
  override name = "ControlDirError";
}

/** The control dir's path from the environment. */
export function controlDirPath(env: { get(name: string): string | undefined } = Deno.env): string {
  const explicit = env.get("MARSH_HOME");
  if (explicit) return explicit;
  const state = env.get("XDG_STATE_HOME");
  if (state) return `${state}/marsh`;
  const home = env.get("HOME");
  if (!home) {
    throw new ControlDirError("cannot locate the control dir: set MARSH_HOME or HOME");
  }
  return `${home}/.local/state/marsh`;
}

/**
 * Job capability sockets (`/run/marsh/cap.sock` of each Kit attempt) are
 * pre-named slots too, in their own dir. A slot frees when its job ends; a
 * container that may outlive that keeps the old socket's inode bound (a bind
 * pins the inode, not the path), so a reuse of the path never reaches it.
 */
export const CAP_SOCKETS_DIR = "c";
export const CAP_SOCKET_SLOTS = 16;

/** The path of capability socket slot `n`. */
export function capSocketPath(home: string, n: number): string {
  return `${home}/${CAP_SOCKETS_DIR}/${String(n).padStart(2, "0")}.sock`;
}

/** The path of branch socket slot `n`. */
export function branchSocketPath(home: string, n: number): string {
  return `${home}/${BRANCH_SOCKETS_DIR}/${String(n).padStart(2, "0")}.sock`;
}

/**
 * Creates the control dir 0700 when absent, and refuses one that another
 * user owns, that others can reach, or that is a symlink.
 *
 * @throws {ControlDirError} with the fix in the message
 */
export function ensureControlDir(path: string): void {
  if (!path.startsWith("/")) {
    throw new ControlDirError(`the control dir must be an absolute path: ${path}`);
  }
  let st: Deno.FileInfo;
  try {
    st = Deno.lstatSync(path);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    Deno.mkdirSync(path, { recursive: true, mode: 0o700 });
    Deno.chmodSync(path, 0o700);
    st = Deno.lstatSync(path);
  }
  checkOwned(path, st, "control dir", true);
}

/** Refuses a path that is a symlink, not owned by us, or reachable by others. */
export function checkOwned(path: string, st: Deno.FileInfo, what: string, dir: boolean): void {
  if (st.isSymlink) {
    throw new ControlDirError(`the ${what} is a symlink: ${path}; remove it or set MARSH_HOME`);
  }
  if (dir && !st.isDirectory) {
    throw new ControlDirError(
      `the ${what} is not a directory: ${path}; remove it or set MARSH_HOME`,
    );
  }
  const uid = Deno.uid();
  if (uid !== null && st.uid !== uid) {
    throw new ControlDirError(
      `the ${what} ${path} is owned by uid ${st.uid}, not by you (uid ${uid}); set MARSH_HOME to a directory of your own`,
    );
  }
  const mode = (st.mode ?? 0) & 0o777;
  if (dir && mode !== 0o700) {
    throw new ControlDirError(
      `the ${what} ${path} has mode ${
        mode.toString(8).padStart(4, "0")
      }, not 0700; run: chmod 700 ${path}`,
    );
  }
  if (!dir && (mode & 0o077) !== 0) {
    throw new ControlDirError(
      `the ${what} ${path} has mode ${
        mode.toString(8).padStart(4, "0")
      }; others may reach it. Stop the daemon and remove it`,
    );
  }
}
