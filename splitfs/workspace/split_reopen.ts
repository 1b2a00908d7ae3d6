/**
 * Reopening a split after a daemon restart (docs/engine.md, "Removal"):
 * through no-follow descriptors from the project root, each journaled
 * identity checked. What it gives is enough for removal, publish, manifest
 * and render; forking and capture are refused (its forks are untrusted).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { RefusedError, WorkspaceReplacedError } from "../errors.ts";
import { UPPER_DIR } from "../fork/overlay.ts";
import {
  type Held,
  type HeldFork,
  type Identity,
  ownObjectDirs,
  sameId,
  sameIdentity,
  upperIdentityOf,
} from "./split_held.ts";
import {
  labelProblem,
  MARSH_DIR,
  OUT_DIR,
  OVERLAY_DIR,
  SPLIT_DIR,
  splitIdProblem,
} from "../../model/layout.ts";

/** How to reopen a split after a daemon restart (docs/rules.md "Life cycle and restart"). */
export interface OpenOptions {
  /** The project root the split was created in, absolute (as journaled). */
  readonly root: string;
  readonly id: string;
  /** The split dir's `(dev, ino)` as journaled. */
  readonly identity: Identity;
  /**
   * The forks the journal knows, with their identities and strategies as
   * {@linkcode SplitWorkspace.fork} gave them; unlisted forks are not held.
   */
  readonly forks: readonly {
    readonly label: string;
    readonly identity: Identity;
    readonly strategy?: string;
  }[];
  /** Whether the project is a Git repository (for {@linkcode SplitWorkspace.objectDirs}). */
  readonly git: boolean;
}

/**
 * Opens an existing split after a daemon restart, through no-follow
 * descriptors from the root, and checks the split dir's and each listed
 * fork's `(dev, ino)`. Removal, `publish`, `manifest` and `render` work on
 * the result; forking and capture are refused (its forks are untrusted).
 * Forks gone but not listed are fine; out/ missing is reported when it is
 * needed.
 *
 * @throws {WorkspaceReplacedError} when the split dir or a listed fork is
 *   missing or not the one journaled; nothing is changed
 * @throws {RefusedError} for an invalid id or label
 */
export function openSplit(opts: OpenOptions): Held {
  const idProblem = splitIdProblem(opts.id);
  if (idProblem) throw new RefusedError(idProblem);
  const seen = new Set<string>();
  for (const f of opts.forks) {
    const problem = labelProblem(f.label);
    if (problem) throw new RefusedError(problem);
    if (seen.has(f.label)) throw new RefusedError(`duplicate label "${f.label}"`);
    seen.add(f.label);
  }
  if (!opts.root.startsWith("/")) {
    throw new RefusedError(`project root is not an absolute path: ${opts.root}`);
  }
  const dirPath = `${opts.root}/${MARSH_DIR}/${SPLIT_DIR}/${opts.id}`;
  const opened: Dir[] = [];
  const existing = (what: string, open: () => Dir): Dir => {
    let d: Dir;
    try {
      d = open();
    } catch (error) {
      if (
        (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) ||
        error instanceof SymlinkRefusedError || error instanceof WrongKindError
      ) {
        throw new WorkspaceReplacedError(`${what} is gone or replaced`, { cause: error });
      }
      throw error;
    }
    opened.push(d);
    return d;
  };
  try {
    const rootDir = existing(opts.root, () => Dir.openAbsolute(opts.root));
    const marsh = existing(`${opts.root}/${MARSH_DIR}`, () => rootDir.openDir(MARSH_DIR));
    const splits = existing(`${marsh.path}/${SPLIT_DIR}`, () => marsh.openDir(SPLIT_DIR));
    const dir = existing(dirPath, () => splits.openDir(opts.id));
    if (!sameIdentity(opts.identity, dir.stat())) {
      throw new WorkspaceReplacedError(`${dirPath} is gone or replaced`);
    }
    const forks: HeldFork[] = [];
    for (const f of opts.forks) {
      const fd = existing(`${dirPath}/${f.label}`, () => dir.openDir(f.label));
      if (f.strategy === "userns-overlay") {
        // Its mount died with the old service's namespace (the name shows the
        // bare mount point) or is still up in this one: the upper dir is what
        // the journal names either way.
        if (!sameId(f.identity, upperIdentityOf(dir, f.label))) {
          throw new WorkspaceReplacedError(
            `${dirPath}/${OVERLAY_DIR}/${f.label}/${UPPER_DIR} is gone or replaced`,
          );
        }
        forks.push({
          label: f.label,
          dir: fd,
          identity: f.identity,
          made: null,
          upper: f.identity,
        });
        continue;
      }
      if (!sameIdentity(f.identity, fd.stat())) {
        throw new WorkspaceReplacedError(`${dirPath}/${f.label} is gone or replaced`);
      }
      forks.push({ label: f.label, dir: fd, identity: f.identity, made: null });
    }
    let out: Dir | null = null;
    try {
      out = dir.openDir(OUT_DIR);
      opened.push(out);
    } catch (error) {
      // Reported as tampering by the requests that need out/; removal does not.
      if (
        !(error instanceof FsError && error.errno === E.ENOENT) &&
        !(error instanceof SymlinkRefusedError) && !(error instanceof WrongKindError)
      ) throw error;
    }
    return {
      root: opts.root,
      id: opts.id,
      dirPath,
      identity: opts.identity,
      isGit: opts.git,
      parent: null,
      objectDirs: ownObjectDirs(opts.root, dirPath, opts.git),
      rootDir,
      marsh,
      splits,
      dir,
      out,
      engine: null,
      forks: new Map(forks.map((f) => [f.label, f])),
    };
  } catch (error) {
    for (const d of opened.reverse()) d.close();
    throw error;
  }
}
