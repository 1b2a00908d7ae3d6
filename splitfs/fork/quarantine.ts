/**
 * Setting aside a rejected fork's Git metadata. A fork whose admin dir failed
 * verification is kept, so its work is not lost, but a host `git -C <fork>
 * status` or an IDE must still meet nothing the branch wrote there
 * (docs/engine.md, "Capture and verification"). So the branch's admin dir is
 * renamed to `.admin/.rejected-<label>` (no label starts with `.`, and nothing
 * points there), a fresh one is written from the same spec, and a `.git` the
 * branch put at the fork's root in place of the gitfile is renamed to
 * `.git.rejected-<random>`, and so is every nested `.git` (a cloned
 * dependency's), in its own directory, so Git run there meets none of its
 * config. The fork's other files are not touched; the fork then reads as the
 * caller's HEAD and index plus the branch's changes, so `git -C <fork>
 * status` and `git diff` show its work.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type AdminSpec, gitfileBytes, verifyAdmin, writeAdminDir } from "./admin.ts";
import type { CandidateDir } from "../capture/compare.ts";
import { type Dir, type EntryKind, InvalidNameError } from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { mountOfFd } from "../fd/mount_boundary.ts";
import { GIT_NAME, isGitName } from "../layers/snapshot.ts";

/** The name under `.admin/` that a rejected fork's own admin dir is moved to. */
export function quarantinedAdminName(label: string): string {
  return `.rejected-${label}`;
}

const GIT = GIT_NAME;

/** The name a set-aside `name` gets in its directory: `<name>.rejected-<random>`. */
function asideName(name: string): string {
  return `${name}.rejected-${crypto.randomUUID().slice(0, 8)}`;
}

/**
 * Moves a branch-made `.git` at the fork's root aside (for a project without
 * Git, any `.git` there is the branch's own repository). Returns the new
 * name, or `null` when there was none.
 */
export function quarantineRootGit(fork: Dir): string | null {
  if (fork.statAt(GIT) === null) return null;
  const name = asideName(GIT);
  fork.rename(GIT, fork, name);
  return name;
}

/** Most nested `.git` entries set aside in one fork; past it the set-aside fails, loudly. */
export const MAX_NESTED_GITS = 1024;

/**
 * Moves every nested `.git` of a rejected fork aside, each renamed
 * `<name>.rejected-<random>` in its own directory: Git run in that directory,
 * or an IDE scanning for repositories, then meets no config the branch wrote
 * (docs/engine.md "Capture and verification"). Names Git treats as `.git`
 * (`.GIT`, `git~1`) go too. It searches where capture does: `scope` (an
 * overlay fork's upper-dir candidates) or the whole fork. The root's own
 * `.git` is the fork's gitfile, set aside by {@linkcode quarantineAdmin}. A
 * directory on another mount is neither entered nor written.
 *
 * @returns the fork-relative paths set aside, in the order found
 * @throws {Error} past {@linkcode MAX_NESTED_GITS}
 * @throws {FsError} when a rename fails (a mount on the `.git`, say)
 */
export function quarantineNestedGits(fork: Dir, scope: CandidateDir): string[] {
  const walk: NestedWalk = { mount: mountOfFd(fork.fd, fork.path).id, moved: [] };
  walkNested(fork, "", scope, walk);
  return walk.moved;
}

interface NestedWalk {
  readonly mount: number;
  readonly moved: string[];
}

function walkNested(dir: Dir, rel: string, scope: CandidateDir, walk: NestedWalk): void {
  const at = (name: string) => rel === "" ? name : `${rel}/${name}`;
  const kinds = new Map<string, EntryKind | undefined>();
  if (scope === "all") {
    const listed = dir.listing();
    for (const e of listed.entries) kinds.set(e.name, e.kind);
    // A directory named in other bytes is searched too (opened by its bytes): a
    // nested repository there would obey its config as well.
    for (const e of listed.invalid) {
      if ((e.kind ?? dir.statAtRaw(e.raw)?.kind) !== "dir") continue;
      using child = dir.openDirRaw(e.raw);
      if (mountOfFd(child.fd, child.path).id !== walk.mount) continue;
      walkNested(child, at(e.shown), "all", walk);
    }
  } else {
    for (const name of scope.keys()) kinds.set(name, undefined);
  }
  for (const [name, listedKind] of kinds) {
    const path = at(name);
    if (isGitName(name)) {
      if ((rel === "" && name === GIT) || dir.statAt(name) === null) continue;
      if (walk.moved.length >= MAX_NESTED_GITS) {
        throw new Error(`more than ${MAX_NESTED_GITS} nested .git entries`);
      }
      dir.rename(name, dir, asideName(name));
      walk.moved.push(path);
      continue;
    }
    if ((listedKind ?? dir.statAt(name)?.kind) !== "dir") continue;
    using child = dir.openDir(name);
    if (mountOfFd(child.fd, child.path).id !== walk.mount) continue;
    // As capture: a name listed without a subtree is searched whole.
    walkNested(child, path, scope === "all" ? "all" : scope.get(name) ?? "all", walk);
  }
}

/**
 * Replaces a rejected fork's admin dir by a fresh one written from `spec`
 * (with a private index copy) and makes `<fork>/.git` the gitfile again, the
 * branch's own versions of both set aside, never deleted.
 */
export function quarantineAdmin(admins: Dir, label: string, fork: Dir, spec: AdminSpec): void {
  if (admins.statAt(label) !== null) admins.rename(label, admins, quarantinedAdminName(label));
  writeAdminDir(admins, label, spec);
  const want = gitfileBytes(spec);
  const st = fork.statAt(GIT);
  if (st?.kind === "file" && st.size === want.length) {
    const got = fork.readFile(GIT, want.length);
    if (got.every((b, i) => b === want[i])) return;
  }
  if (st?.kind === "dir") quarantineRootGit(fork);
  else if (st !== null) fork.unlink(GIT);
  fork.writeNewFile(GIT, want, 0o644);
}

/** A fork's Git metadata: where it is and what it must be. */
export interface ForkGit {
  /** `<split>/.admin/`. */
  readonly admins: Dir;
  readonly label: string;
  readonly fork: Dir;
  /** What marsh wrote, or `null` in a project without Git (the fork has no metadata). */
  readonly spec: AdminSpec | null;
  /** The fork's path, for messages. */
  readonly path: string;
}

/**
 * Why a fork's Git metadata is not trusted, or `null` when it verifies.
 * `shown` says where a name that is not UTF-8 was found.
 */
export function verifyForkGit(
  git: ForkGit,
  shown: (error: InvalidNameError) => string,
): string | null {
  try {
    if (git.spec) verifyAdmin(git.admins, git.label, git.fork, git.spec);
    // Without Git in the project any .git at the fork root is the branch's
    // own (`git init`), with a config a host `git -C <fork>` would obey.
    else if (git.fork.statAt(GIT) !== null) return `nested .git at ${GIT}`;
    return null;
  } catch (error) {
    if (error instanceof RejectedError) return error.reason;
    // Git allows any bytes in a name; a ref named so is nothing we can check.
    if (error instanceof InvalidNameError) return `file name is not valid UTF-8: ${shown(error)}`;
    throw error;
  }
}

/**
 * Sets a rejected fork's Git metadata aside ({@linkcode quarantineAdmin},
 * or {@linkcode quarantineRootGit} without Git).
 *
 * @throws {RejectedError} keeping `reason` and saying what failed, so the
 *   status warns not to run Git in the fork
 */
export function setAsideForkGit(git: ForkGit, reason: string): void {
  setAside(git, reason, () => {
    if (git.spec) quarantineAdmin(git.admins, git.label, git.fork, git.spec);
    else quarantineRootGit(git.fork);
  });
}

/**
 * Sets a rejected fork's nested `.git` entries aside
 * ({@linkcode quarantineNestedGits}).
 *
 * @throws {RejectedError} as {@linkcode setAsideForkGit}
 */
export function setAsideNestedGits(git: ForkGit, scope: CandidateDir, reason: string): void {
  setAside(git, reason, () => quarantineNestedGits(git.fork, scope));
}

function setAside(git: ForkGit, reason: string, aside: () => unknown): void {
  try {
    aside();
  } catch (cause) {
    throw new RejectedError(
      `${reason}; its Git metadata could not be set aside (${
        cause instanceof Error ? cause.message : cause
      }): do not run git in ${git.path}`,
      { cause },
    );
  }
}
