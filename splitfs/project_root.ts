/**
 * Finding the project a split is taken of (docs/rules.md "Snapshot and forks"): the nearest
 * ancestor of the caller's real cwd (the cwd included) that has a `.git`
 * entry, else the cwd itself. A Git directory met on the way up first (a
 * bare repository, or the inside of a worktree's `.git`) is refused: it has
 * no tree to split. A nested split's cwd lies in its creator branch's fork
 * instead, and its project is the one holding that fork.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { SplitParent } from "../protocol/splitfs_fields.ts";
import { Dir, type EntryKind, SymlinkRefusedError, WrongKindError } from "./fd/dir.ts";
import { SnapshotError } from "./errors.ts";
import { E, FsError } from "./fd/ffi.ts";
import { GITFILE_ROOT_REFUSAL } from "./git/git_source.ts";
import { labelProblem, MARSH_DIR, SPLIT_DIR, splitIdProblem } from "../model/layout.ts";
import { GIT_NAME } from "./layers/snapshot.ts";

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
 * With `parent` (a nested split) the cwd must lie inside the fork
 * `<root>/.marsh/split/<parent.split>/<parent.label>`: the result's `root`
 * is the original project root and its `cwd` is relative to the fork.
 *
 * @throws {SnapshotError} for `/` as a root, a cwd inside a `.marsh`
 *   directory (outside the named fork, with `parent`), a root whose `.git`
 *   is not a directory, or a cwd in a bare repository or a `.git` directory
 *   ({@linkcode isGitDirectory})
 * @throws {FsError} when the cwd cannot be resolved
 */
export function locateProject(cwd: string, parent?: SplitParent): ProjectLocation {
  if (!cwd.startsWith("/")) throw new SnapshotError(`cwd is not an absolute path: ${cwd}`);
  const real = Dir.realPath(cwd);
  const kind = Dir.statAbsolute(real)?.kind;
  if (kind !== "dir") throw new SnapshotError(`cwd is not a directory: ${real}`);
  const parts = real.split("/").filter((p) => p !== "");
  if (parent) return locateInFork(real, parts, parent);
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
    // Git's own discovery order: a directory that is itself a repository
    // (bare, or a worktree's `.git`) ends the walk too; it has no tree to split.
    if (isGitDirectory(dir)) throw new SnapshotError(gitDirectoryRefusal(dir, parts[depth - 1]));
  }
  if (depth < 0) depth = parts.length;
  const root = "/" + parts.slice(0, depth).join("/");
  if (root === "/") {
    throw new SnapshotError(
      "cannot use / as the project root: run marsh split in a project directory",
    );
  }
  checkRootGit(root, gitKind);
  return { root, cwd: parts.slice(depth).join("/"), git: gitKind === "dir" };
}

/** `HEAD` holds `ref: refs/...` or an object id (SHA-1 or SHA-256), as Git's `validate_headref` wants. */
const HEAD_CONTENT = /^(ref:[ \t]*refs\/|[0-9a-f]{40}(?:[0-9a-f]{24})?[ \t\r\n]*$)/;
/** More than any `HEAD` Git writes; a bigger file is not one. */
const MAX_HEAD_BYTES = 4096;

/**
 * Whether `path` is a Git directory by Git's own test (`is_git_directory`):
 * a `HEAD` file with a ref or an object id (or a symlink into `refs/`), and
 * `objects/` and `refs/` directories. A plain directory that merely has
 * entries so named is not one: its `HEAD` says nothing Git would read.
 */
export function isGitDirectory(path: string): boolean {
  let dir: Dir;
  try {
    dir = Dir.openAbsolute(path);
  } catch (error) {
    // An ancestor the caller may not open cannot be inspected: not a repository to Git either.
    if (error instanceof FsError && error.errno === E.EACCES) return false;
    throw error;
  }
  try {
    if (dir.statAt("objects")?.kind !== "dir" || dir.statAt("refs")?.kind !== "dir") return false;
    const head = dir.statAt("HEAD");
    if (head?.kind === "symlink") {
      return new TextDecoder().decode(dir.readlink("HEAD")).startsWith("refs/");
    }
    if (head?.kind !== "file" || head.size > MAX_HEAD_BYTES) return false;
    const text = new TextDecoder().decode(dir.readFile("HEAD", MAX_HEAD_BYTES));
    return HEAD_CONTENT.test(text);
  } finally {
    dir.close();
  }
}

/** Why a Git directory on the way up from the cwd cannot be split. */
function gitDirectoryRefusal(dir: string, name: string | undefined): string {
  if (name === GIT_NAME) {
    return `cannot split from inside a Git directory: ${dir}; run marsh split in its worktree ${
      dir.slice(0, -GIT_NAME.length - 1) || "/"
    }`;
  }
  return `cannot split a bare Git repository: ${dir}; run marsh split in a worktree of it (git worktree add, or git clone)`;
}

/** Refuses a root whose `.git` is a gitfile or anything else but a directory. */
function checkRootGit(root: string, gitKind: EntryKind | undefined): void {
  if (gitKind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
  if (gitKind !== undefined && gitKind !== "dir") {
    throw new SnapshotError(`project root .git is a ${gitKind}, not a directory: ${root}/.git`);
  }
}

/**
 * A nested split's location: `real` (canonical) must be the fork of
 * `parent` or below it. The root is what precedes the first `.marsh`
 * component, so a `.marsh/split/...` a branch made inside its own fork is
 * only ever fork content. The fork is then reopened from the root through
 * no-follow descriptors, and the cwd from the fork, and the cwd reached so
 * must be the directory the real path names.
 */
function locateInFork(real: string, parts: string[], parent: SplitParent): ProjectLocation {
  const problem = splitIdProblem(parent.split) ?? labelProblem(parent.label);
  if (problem) throw new SnapshotError(`invalid parent: ${problem}`);
  const forkRel = `${MARSH_DIR}/${SPLIT_DIR}/${parent.split}/${parent.label}`;
  const outside = () =>
    new SnapshotError(`cwd is not inside the fork ${forkRel} of its creator branch: ${real}`);
  const at = parts.indexOf(MARSH_DIR);
  if (
    at < 0 || parts[at + 1] !== SPLIT_DIR || parts[at + 2] !== parent.split ||
    parts[at + 3] !== parent.label
  ) throw outside();
  const root = "/" + parts.slice(0, at).join("/");
  if (root === "/") {
    throw new SnapshotError(
      "cannot use / as the project root: run marsh split in a project directory",
    );
  }
  const rel = parts.slice(at + 4).join("/");
  const gitKind = Dir.statAbsolute(`${root}/${GIT_NAME}`)?.kind;
  checkRootGit(root, gitKind);
  try {
    using rootDir = Dir.openAbsolute(root);
    using fork = rootDir.openPath(forkRel);
    using here = fork.openPath(rel);
    const st = here.stat();
    const want = Dir.statAbsolute(real);
    if (want === null || want.dev !== st.dev || want.ino !== st.ino) throw outside();
  } catch (error) {
    if (
      error instanceof SymlinkRefusedError || error instanceof WrongKindError ||
      (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR))
    ) throw new SnapshotError(`${outside().message} (${error.message})`, { cause: error });
    throw error;
  }
  return { root, cwd: rel, git: gitKind === "dir" };
}
