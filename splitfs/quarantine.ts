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

import { type AdminSpec, gitfileBytes, writeAdminDir } from "./admin.ts";
import type { Dir } from "./dir.ts";

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
  writeAdminDir(admins, label, spec, null);
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
