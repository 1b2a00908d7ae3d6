/**
 * Finding the project a split is taken of (spec 000 §2, §8): the nearest
 * ancestor of the caller's real cwd (the cwd included) that has a `.git`
 * entry, else the cwd itself.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir, type EntryKind } from "./dir.ts";
import { SnapshotError } from "./errors.ts";
import { GITFILE_ROOT_REFUSAL } from "./git_source.ts";
import { MARSH_DIR } from "./layout.ts";
import { GIT_NAME } from "./snapshot.ts";

/** A located project. */
export interface ProjectLocation {
  /** The project root: absolute and canonical. */
  readonly root: string;
  /** The caller's cwd relative to `root`, `/`-separated; `""` at the root. */
  readonly cwd: string;
  /** Whether the root has a `.git` directory. */
  readonly git: boolean;
}

/**
 * Locates the project of an absolute cwd. A `.git` entry of any kind ends
 * the walk; one that is not a directory (a gitfile above all) is refused,
 * as `create` refuses it.
 *
 * @throws {SnapshotError} for `/` as a root, a cwd inside a `.marsh`
 *   directory, or a root whose `.git` is not a directory
 * @throws {FsError} when the cwd cannot be resolved
 */
export function locateProject(cwd: string): ProjectLocation {
  if (!cwd.startsWith("/")) throw new SnapshotError(`cwd is not an absolute path: ${cwd}`);
  const real = Dir.realPath(cwd);
  const kind = Dir.statAbsolute(real)?.kind;
  if (kind !== "dir") throw new SnapshotError(`cwd is not a directory: ${real}`);
  const parts = real.split("/").filter((p) => p !== "");
  // A fork (its gitfile would be found first) or the state itself: splitting
  // from there would snapshot marsh's own state, or a branch's view of it.
  if (parts.includes(MARSH_DIR)) {
    throw new SnapshotError(`cannot split from inside .marsh/: ${real}`);
  }
  let depth = parts.length;
  let gitKind: EntryKind | undefined;
  for (; depth >= 0; depth--) {
    const dir = "/" + parts.slice(0, depth).join("/");
    gitKind = Dir.statAbsolute(dir === "/" ? `/${GIT_NAME}` : `${dir}/${GIT_NAME}`)?.kind;
    if (gitKind !== undefined) break;
  }
  if (depth < 0) depth = parts.length;
  const root = "/" + parts.slice(0, depth).join("/");
  if (root === "/") {
    throw new SnapshotError(
      "cannot use / as the project root: run marsh split in a project directory",
    );
  }
  if (gitKind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
  if (gitKind !== undefined && gitKind !== "dir") {
    throw new SnapshotError(`project root .git is a ${gitKind}, not a directory: ${root}/.git`);
  }
  return { root, cwd: parts.slice(depth).join("/"), git: gitKind === "dir" };
}
