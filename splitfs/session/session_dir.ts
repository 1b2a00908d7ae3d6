/**
 * A checkpoint session's directory `<root>/.marsh/session/<name>/`
 * (docs/checkpoints.md "The model"): its view mount point `view/`, its pin
 * file `layers` (the stack the view shows, so `marsh gc` keeps it), and one
 * `op/<op>/` per operation in flight, each with its own pin. Opened through
 * no-follow descriptors under the project lock, as a split dir is.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { E } from "../fd/ffi.ts";
import { RefusedError } from "../errors.ts";
import { isErrno } from "../layers/layers_dir.ts";
import { LayerStore } from "../layers/layers.ts";
import { chooseForks } from "../fork/fork_choice.ts";
import type { OverlayMode } from "../fork/overlay.ts";
import { refuseForeignMounts } from "../fork/split_mounts.ts";
import { type MountInfo, readMounts } from "../fd/mountinfo.ts";
import { unmountPath } from "../fork/overlay.ts";
import { LAYERS_FILE, MARSH_DIR } from "../../model/layout.ts";
import { SESSION_DIR, sessionNameProblem, VIEW_DIR } from "../../model/checkpoint.ts";
import type { ProjectLocks } from "../project_lock.ts";

/** Under a session's directory: one directory per operation in flight. */
export const OP_DIR = "op";
/** Under `op/<op>/`: overlay's upper and work dirs, the mount point, the staged layer. */
export const UPPER = "upper", WORK = "work", MERGED = "merged", STAGED = "layer";
/** Under a session's directory: where a new view is mounted before it replaces the old. */
export const NEXT_VIEW = ".view-next";
/** The source marsh gives its overlays (`splitfs/fork/overlay.ts`). */
const OUR_SOURCE = "marsh";
const MAX_PIN = 64 * 1024;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** The project's session directory, open; close it when done. */
export class SessionPlace implements Disposable {
  #store: LayerStore | null = null;

  private constructor(
    readonly root: string,
    readonly name: string,
    /** `<root>/.marsh/session/<name>`, absolute. */
    readonly path: string,
    readonly marsh: Dir,
    readonly dir: Dir,
  ) {}

  /**
   * Opens (with `create`, makes: refused when it exists) the session dir of
   * `name` in the project at `root`, holding the project's lock.
   *
   * @throws {RefusedError} for a bad name, a root that is not canonical, a
   *   missing session (without `create`) or an existing one (with it)
   */
  static open(root: string, name: string, locks: ProjectLocks, create: boolean): SessionPlace {
    const problem = sessionNameProblem(name);
    if (problem !== null) throw new RefusedError(problem);
    const real = Dir.realPath(root);
    if (real !== root) {
      throw new RefusedError(`the project root must be canonical: ${root} is ${real}`);
    }
    using rootDir = Dir.openAbsolute(root);
    if (!create && rootDir.statAt(MARSH_DIR)?.kind !== "dir") {
      throw new RefusedError(`no session ${name} in ${root}: it has no ${MARSH_DIR} directory`);
    }
    const marsh = rootDir.ensureDir(MARSH_DIR, 0o755);
    try {
      locks.hold(marsh, root);
      using sessions = marsh.ensureDir(SESSION_DIR, 0o755);
      if (create) {
        try {
          sessions.mkdir(name, 0o755);
        } catch (error) {
          if (!isErrno(error, E.EEXIST)) throw error;
          throw new RefusedError(
            `session ${name} already has a directory in ${root}/${MARSH_DIR}/${SESSION_DIR}; close it first (session-close)`,
          );
        }
      } else if (sessions.statAt(name)?.kind !== "dir") {
        throw new RefusedError(`no session ${name} in ${root} (no directory for it)`);
      }
      const dir = sessions.openDir(name);
      return new SessionPlace(
        root,
        name,
        `${root}/${MARSH_DIR}/${SESSION_DIR}/${name}`,
        marsh,
        dir,
      );
    } catch (error) {
      marsh.close();
      throw error;
    }
  }

  /** The project's layer store, opened on first use. */
  store(): LayerStore {
    return this.#store ??= LayerStore.open(this.marsh);
  }

  /**
   * The overlay mode this project's file system allows (probed once per
   * file system).
   *
   * @throws {RefusedError} when no overlay can be mounted here
   */
  mode(): OverlayMode {
    const choice = chooseForks(this.marsh);
    if (choice.mode === null) {
      throw new RefusedError(
        `checkpoint sessions need overlay mounts, and none can be made in ${this.root}: ` +
          `${choice.reason}; they have no copy fallback (docs/checkpoints.md): run the daemon as ` +
          `root, or as a user where unshare -Urm works with MARSH_FORKS=auto (marsh status ` +
          `shows which forks this host allows)`,
      );
    }
    return choice.mode;
  }

  /** `op/<op>` under this session, absolute. */
  opPath(op: string): string {
    return `${this.path}/${OP_DIR}/${op}`;
  }

  /** Closes the descriptors; a second call does nothing. */
  close(): void {
    this.#store?.close();
    this.#store = null;
    this.dir.close();
    this.marsh.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * Replaces `dir/layers` with `layers` (one id a line, bottom first),
 * atomically: written before the mount that uses the stack, so the
 * collector never finds a mounted layer unnamed. `durable`: fsynced first,
 * for a pin that must outlive a power loss (a sealed layer not yet bound);
 * a pin of a stack only a mount uses needs no fsync, since no mount outlives
 * a power loss and the journal keeps every stack a session can show
 * (`marsh gc`'s keep list).
 */
export function writePin(dir: Dir, layers: readonly string[], durable = true): void {
  const tmp = `.${LAYERS_FILE}.tmp`;
  if (dir.statAt(tmp) !== null) dir.unlink(tmp);
  {
    using f = dir.createFile(tmp, 0o644);
    f.writeAll(enc.encode(`${layers.join("\n")}\n`));
    if (durable) f.sync();
  }
  dir.renameReplacing(tmp, dir, LAYERS_FILE);
}

/** The stack `dir/layers` pins, bottom first; empty when there is none. */
export function readPin(dir: Dir): string[] {
  const bytes = dir.readFileIfExists(LAYERS_FILE, MAX_PIN);
  return bytes === null ? [] : dec.decode(bytes).split("\n").filter((l) => l !== "");
}

/** Whether `m` is one of marsh's overlays at a session mount point under `path`. */
function isSessionOverlay(m: MountInfo, path: string): boolean {
  if (m.fsType !== "overlay" || m.source !== OUR_SOURCE) return false;
  if (m.mountPoint === `${path}/${VIEW_DIR}` || m.mountPoint === `${path}/${NEXT_VIEW}`) {
    return true;
  }
  const rest = m.mountPoint.startsWith(`${path}/${OP_DIR}/`)
    ? m.mountPoint.slice(path.length + OP_DIR.length + 2)
    : "";
  return /^[a-z0-9][a-z0-9-]{0,63}\/merged$/.test(rest);
}

/**
 * Unmounts marsh's overlays at and below `path` (a session dir, or one op
 * dir of it), deepest first, each verified gone. Anything else mounted
 * there refuses it before anything is unmounted.
 *
 * @param session the session dir `path` is in (or is)
 * @throws {MountPointError} when a mount marsh did not make is there
 * @throws {MountBusyError} when one of ours is in use
 */
export function unmountUnder(path: string, session: string, then: string): number {
  const mounts = readMounts();
  refuseForeignMounts(path, [path], then, (m) => isSessionOverlay(m, session), mounts);
  const below = mounts.filter((m) => m.mountPoint === path || m.mountPoint.startsWith(`${path}/`));
  below.sort((a, b) =>
    b.mountPoint.length - a.mountPoint.length ||
    (a.parentId === b.id ? -1 : b.parentId === a.id ? 1 : 0)
  );
  for (const m of below) unmountPath(m);
  return below.length;
}

/** Every mount at exactly `point`, from the live table. */
export function mountsAt(point: string, mounts: readonly MountInfo[] = readMounts()): MountInfo[] {
  return mounts.filter((m) => m.mountPoint === point);
}
