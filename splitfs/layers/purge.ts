/**
 * `marsh gc --all`, the store's part: once the daemon has removed every
 * split of a project, everything else marsh keeps in `<root>/.marsh` goes
 * too — every snapshot layer (chain heads' stacks included), the heads, the
 * empty layer, the trash, the `git-objects` link, `.gitignore`, the empty
 * `split/`, the lock — and then `.marsh` itself (docs/guide.md
 * "Housekeeping").
 *
 * What marsh did not make is never deleted: an entry of `.marsh` it does
 * not know stays (and keeps `.marsh`), and a directory left in `split/` (a
 * split the daemon no longer knows: its workspace was replaced, say)
 * refuses the whole purge. Removal stops at mount points, as every removal
 * does (docs/engine.md "Removal").
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { compareNames, Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { E, FsError } from "../fd/ffi.ts";
import { LayerStore } from "./layers.ts";
import {
  LAYERS_DIR,
  MARSH_DIR,
  PROJECT_LOCK_FILE,
  SPLIT_DIR,
  TRASH_DIR,
} from "../../model/layout.ts";
import { MountPointError } from "../fd/mount_boundary.ts";
import { GIT_OBJECTS_LINK } from "../../protocol/fork_view.ts";
import type { ProjectLocks } from "../project_lock.ts";
import { SESSION_DIR } from "../../model/checkpoint.ts";

/** `.marsh/.gitignore` (`*`): keeps the state out of Git. */
const GITIGNORE = ".gitignore";
/** Every name marsh makes in `.marsh`. */
const OURS = new Set([
  GITIGNORE,
  PROJECT_LOCK_FILE,
  SPLIT_DIR,
  LAYERS_DIR,
  TRASH_DIR,
  GIT_OBJECTS_LINK,
  SESSION_DIR,
]);
/** The command a refusal's fix ends with. */
const AGAIN = "marsh gc --all";

/** What {@linkcode purgeProject} removed (or would). */
export interface PurgeResult {
  /** Layer ids removed, sorted. */
  readonly layers: string[];
  /** Bytes of their files. */
  readonly bytes: number;
  /** `.marsh` is gone (or was never there); with `dryRun`, would be. */
  readonly gone: boolean;
  /** Entries of `.marsh` marsh did not make, left in place. */
  readonly left: string[];
  /** Why not everything went (a mount point inside), or null. */
  readonly problem: string | null;
}

/**
 * Removes everything marsh stored in `<root>/.marsh`. `known` names the
 * split dirs the caller will have removed by then (a dry run's splits);
 * any other entry of `split/` refuses the purge before anything is deleted.
 * The project's lock is taken first (another daemon's project is refused)
 * and deleted last.
 *
 * @throws {RefusedError} for a split dir nobody knows, or `.marsh` that is not a directory
 * @throws {ProjectLockedError} when another daemon holds the project
 */
export function purgeProject(
  root: string,
  locks: ProjectLocks,
  opts: { readonly known: ReadonlySet<string>; readonly dryRun: boolean },
): PurgeResult {
  using rootDir = Dir.openAbsolute(root);
  const st = rootDir.statAt(MARSH_DIR);
  if (st === null) return { layers: [], bytes: 0, gone: true, left: [], problem: null };
  if (st.kind !== "dir") {
    throw new RefusedError(
      `${root}/${MARSH_DIR} is a ${st.kind}, not marsh's directory: nothing was removed; look at it and remove it yourself`,
    );
  }
  using marsh = rootDir.openDir(MARSH_DIR);
  locks.hold(marsh, root);
  refuseUnknownSplits(marsh, root, opts.known);
  refuseSessions(marsh, root);
  const left = marsh.entries().map((e) => e.name).filter((n) => !OURS.has(n)).sort(compareNames);
  const { layers, bytes, problem } = removeLayers(marsh, opts.dryRun);
  if (opts.dryRun || problem !== null) {
    return { layers, bytes, gone: problem === null && left.length === 0, left, problem };
  }
  try {
    marsh.removeTree(LAYERS_DIR);
    marsh.removeTree(TRASH_DIR);
  } catch (error) {
    if (!(error instanceof MountPointError)) throw error;
    return { layers, bytes, gone: false, left, problem: error.withFix(AGAIN).message };
  }
  if (marsh.statAt(SPLIT_DIR)?.kind === "dir") marsh.rmdir(SPLIT_DIR);
  if (marsh.statAt(SESSION_DIR)?.kind === "dir") marsh.rmdir(SESSION_DIR);
  if (marsh.statAt(GIT_OBJECTS_LINK)?.kind === "symlink") marsh.unlink(GIT_OBJECTS_LINK);
  if (marsh.statAt(GITIGNORE)?.kind === "file") marsh.unlink(GITIGNORE);
  locks.removeHeld(marsh, root);
  // Names marsh knows but found as something else (a directory called lock) stay too.
  const still = marsh.entries().map((e) => e.name).sort(compareNames);
  if (still.length > 0) return { layers, bytes, gone: false, left: still, problem: null };
  try {
    rootDir.rmdir(MARSH_DIR);
  } catch (error) {
    // Something made an entry meanwhile (a split started): it stays, and so does `.marsh`.
    if (!(error instanceof FsError && error.errno === E.ENOTEMPTY)) throw error;
    return { layers, bytes, gone: false, left: marsh.entries().map((e) => e.name), problem: null };
  }
  return { layers, bytes, gone: true, left: [], problem: null };
}

function refuseUnknownSplits(marsh: Dir, root: string, known: ReadonlySet<string>): void {
  if (marsh.statAt(SPLIT_DIR)?.kind !== "dir") return;
  using splits = marsh.openDir(SPLIT_DIR);
  const unknown = splits.entries().map((e) => e.name).filter((n) => !known.has(n))
    .sort(compareNames);
  if (unknown.length === 0) return;
  const paths = unknown.map((n) => `${root}/${MARSH_DIR}/${SPLIT_DIR}/${n}`).join(", ");
  throw new RefusedError(
    `${paths} ${
      unknown.length === 1 ? "is not a split" : "are not splits"
    } this daemon knows (a split whose directory was replaced leaves one): nothing else was removed; look at ${
      unknown.length === 1 ? "it" : "them"
    }, remove ${
      unknown.length === 1 ? "it" : "them"
    } yourself (unmount what is mounted there first), then run ${AGAIN} again`,
  );
}

/**
 * A checkpoint session's view and operations stack layers this purge would
 * delete from under them: the daemon closes its sessions first, and any
 * session dir left refuses the purge before anything is deleted.
 */
function refuseSessions(marsh: Dir, root: string): void {
  if (marsh.statAt(SESSION_DIR)?.kind !== "dir") return;
  using sessions = marsh.openDir(SESSION_DIR);
  const names = sessions.entries().map((e) => e.name).sort(compareNames);
  if (names.length === 0) return;
  throw new RefusedError(
    `checkpoint session${names.length === 1 ? "" : "s"} ${names.join(", ")} ${
      names.length === 1 ? "is" : "are"
    } still in ${root}/${MARSH_DIR}/${SESSION_DIR}, and ${
      names.length === 1 ? "its" : "their"
    } view stacks layers this would delete: nothing was removed; remove ${
      names.length === 1 ? "it" : "them"
    } (marsh session rm NAME), then run ${AGAIN} again`,
  );
}

/** Every layer, the chain heads' too; a mount inside one stops only that one. */
function removeLayers(
  marsh: Dir,
  dryRun: boolean,
): { layers: string[]; bytes: number; problem: string | null } {
  if (marsh.statAt(LAYERS_DIR)?.kind !== "dir") return { layers: [], bytes: 0, problem: null };
  using store = LayerStore.open(marsh);
  const sizes = new Map(store.list().map((l) => [l.id, l.bytes]));
  const before = new Set(store.list().map((l) => l.id));
  try {
    const r = store.collect(new Set(), dryRun, false);
    return { layers: r.removed, bytes: r.bytes, problem: null };
  } catch (error) {
    if (!(error instanceof MountPointError)) throw error;
    // The others went: say which, from what is left in the store and what
    // stayed in the trash (`layer-<id>-...`, named in the error).
    const after = new Set(store.list().map((l) => l.id));
    const stuck = (id: string) => error.tree.includes(`/${TRASH_DIR}/layer-${id}-`);
    const layers = [...before].filter((id) => !after.has(id) && !stuck(id)).sort(compareNames);
    const bytes = layers.reduce((n, id) => n + (sizes.get(id) ?? 0), 0);
    return { layers, bytes, problem: error.withFix(AGAIN).message };
  }
}
