/**
 * Setting aside a rejected fork's Git metadata. A fork whose admin dir failed
 * verification is kept, so its work is not lost, but a host `git -C <fork>
 * status` or an IDE must still meet nothing the branch wrote there
 * (docs/engine.md, "Capture and verification"). So the branch's admin dir is
 * renamed to `.admin/.rejected-<label>` (no label starts with `.`, and nothing
 * points there), a fresh one is written from the same spec, and a `.git` the
 * branch put at the fork's root in place of the gitfile is renamed to
 * `.git.rejected-<random>`. The fork's files are not touched; the fork then
 * reads as the caller's HEAD and index plus the branch's changes, so
 * `git -C <fork> status` and `git diff` show its work.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type AdminSpec, gitfileBytes, verifyAdmin, writeAdminDir } from "./admin.ts";
import { type Dir, InvalidNameError } from "./dir.ts";
import { RejectedError } from "./errors.ts";

/** The name under `.admin/` that a rejected fork's own admin dir is moved to. */
export function quarantinedAdminName(label: string): string {
  return `.rejected-${label}`;
}

const GIT = ".git";

/**
 * Moves a branch-made `.git` at the fork's root aside (for a project without
 * Git, any `.git` there is the branch's own repository). Returns the new
 * name, or `null` when there was none.
 */
export function quarantineRootGit(fork: Dir): string | null {
  if (fork.statAt(GIT) === null) return null;
  const name = `${GIT}.rejected-${crypto.randomUUID().slice(0, 8)}`;
  fork.rename(GIT, fork, name);
  return name;
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
  try {
    if (git.spec) quarantineAdmin(git.admins, git.label, git.fork, git.spec);
    else quarantineRootGit(git.fork);
  } catch (cause) {
    throw new RejectedError(
      `${reason}; its Git metadata could not be set aside (${
        cause instanceof Error ? cause.message : cause
      }): do not run git in ${git.path}`,
      { cause },
    );
  }
}
