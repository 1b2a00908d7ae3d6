/**
 * Snapshot (docs/engine.md "Snapshot"): copy the admitted entries of a source tree into
 * a split's `base/` through no-follow descriptors, pruning ignored entries,
 * special files and nested `.git` entries.
 *
 * On these machines there is no reflink, so copying everything and pruning
 * afterwards (as the macOS clone does) would copy `node_modules` only to
 * delete it; the walk decides admission before copying instead, which gives
 * the same base.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import {
  compareNames,
  type CopyStrategy,
  type Dir,
  sameMtime,
  type Stat,
  withPerm,
} from "../fd/dir.ts";
import { SnapshotError } from "../errors.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { passInvalid } from "../fd/non_utf8.ts";

/** The name Git uses for its metadata; pruned at every depth. */
export const GIT_NAME = ".git";
/**
 * Names Git treats as its metadata directory, or refuses to check out as one:
 * `.git` in any case, and the NTFS look-alikes `core.protectNTFS` guards
 * against (`.git` or `git~1` followed only by spaces and dots). None of them
 * can travel in a patch, and each could be a repository to a host `git`.
 */
export function isGitName(name: string): boolean {
  for (const segment of name.split("\\")) {
    const lower = segment.toLowerCase();
    for (const stem of [".git", "git~1"]) {
      if (lower.startsWith(stem) && /^[ .]*$/.test(lower.slice(stem.length))) return true;
    }
  }
  return false;
}

/** Files copied per snapshot before a copy is trusted: one copy plus three re-copies. */
export const COPY_ATTEMPTS = 4;

/** What a snapshot walk saw, for the manifest and the progress line. */
export interface SnapshotStats {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
  prunedIgnored: number;
  prunedSpecial: number;
  prunedGit: number;
  /** The weakest copy strategy any file needed. */
  strategy: CopyStrategy;
}

/** Reports progress after each file copied, and once at the end. */
export type Progress = (stats: Readonly<SnapshotStats>) => void;

/** How to take one snapshot. */
export interface SnapshotOptions {
  /** The source tree: the project root, or a creator's fork for a nested split. */
  readonly source: Dir;
  /** The empty `base/` directory to fill. */
  readonly dest: Dir;
  /** The root ignore scope, or `null` to admit ignored entries (non-Git sources). */
  readonly ignore: IgnoreScope | null;
  /** Top-level names that never enter a snapshot (`.marsh`). */
  readonly skipTop: ReadonlySet<string>;
  readonly strategy?: CopyStrategy;
  readonly progress?: Progress;
  /** Filled with the stats of what was admitted, as the copy has them (capture's old side). */
  readonly index?: StatIndex;
  /**
   * Filled with the `.gitignore` files the rules read but left out of the
   * snapshot (a `.pytest_cache/.gitignore` saying `*` ignores itself), by
   * directory (`""` for the root): capture applies them as Git would in the
   * source tree, which still has them.
   */
  readonly prunedIgnores?: Map<string, Uint8Array>;
}

const STRATEGY_RANK: Record<CopyStrategy, number> = {
  reflink: 0,
  copy_file_range: 1,
  readwrite: 2,
};

/** The name of a directory's own ignore file. */
export const GITIGNORE = ".gitignore";
/** The largest `.gitignore` read. */
export const MAX_GITIGNORE_BYTES = 16 * 1024 * 1024;

/** Reads a directory's `.gitignore` as data; a symlinked or special one counts as absent. */
export function readGitignore(dir: Dir): Uint8Array | null {
  const st = dir.statAt(GITIGNORE);
  if (st === null || st.kind !== "file") return null;
  return dir.readFile(GITIGNORE, MAX_GITIGNORE_BYTES);
}

/**
 * Copies the admitted tree. Throws {@linkcode SnapshotError} with
 * `file kept changing: <path>` when a file changes during three re-copies.
 */
export function takeSnapshot(opts: SnapshotOptions): SnapshotStats {
  const stats: SnapshotStats = {
    files: 0,
    dirs: 0,
    symlinks: 0,
    bytes: 0,
    prunedIgnored: 0,
    prunedSpecial: 0,
    prunedGit: 0,
    strategy: opts.strategy ?? "reflink",
  };
  const gitignore = opts.ignore ? readGitignore(opts.source) : null;
  const scope = opts.ignore ? opts.ignore.enter("", gitignore) : null;
  copyDir(opts, opts.source, opts.dest, "", scope, gitignore, stats);
  opts.progress?.(stats);
  return stats;
}

function copyDir(
  opts: SnapshotOptions,
  src: Dir,
  dst: Dir,
  rel: string,
  scope: IgnoreScope | null,
  gitignore: Uint8Array | null,
  stats: SnapshotStats,
): void {
  const here = new Map<string, Stat>();
  opts.index?.set(rel, here);
  const { entries, invalid } = src.listing();
  for (const e of passInvalid(src, rel, invalid, scope)) {
    if (e.why === "ignored") stats.prunedIgnored++;
    else stats.prunedSpecial++;
  }
  for (const entry of entries.sort((a, b) => compareNames(a.name, b.name))) {
    const name = entry.name;
    const path = rel === "" ? name : `${rel}/${name}`;
    if (rel === "" && opts.skipTop.has(name)) continue;
    if (isGitName(name)) {
      stats.prunedGit++;
      continue;
    }
    const st = src.statAt(name);
    if (st === null) continue; // removed while we walked: not part of the snapshot
    if (st.kind !== "file" && st.kind !== "dir" && st.kind !== "symlink") {
      stats.prunedSpecial++;
      continue;
    }
    if (scope?.isIgnored(path, st.kind === "dir")) {
      stats.prunedIgnored++;
      if (name === GITIGNORE && gitignore !== null) opts.prunedIgnores?.set(rel, gitignore);
      continue;
    }
    if (st.kind === "dir") {
      dst.mkdir(name, 0o700);
      using srcChild = src.openDir(name);
      using dstChild = dst.openDir(name);
      const childIgnore = scope ? readGitignore(srcChild) : null;
      const childScope = scope ? scope.enter(path, childIgnore) : null;
      copyDir(opts, srcChild, dstChild, path, childScope, childIgnore, stats);
      // Permissions last, so a read-only source directory can still be filled.
      const perm = srcChild.stat().perm;
      dstChild.chmod(perm);
      here.set(name, withPerm(st, perm));
      stats.dirs++;
    } else if (st.kind === "symlink") {
      dst.symlink(src.readlink(name), name);
      dst.setMtime(name, st.mtimeNs);
      here.set(name, st);
      stats.symlinks++;
    } else {
      const after = copyStable(src, dst, name, path, stats, opts.progress);
      // The copy keeps size, mtime and the permission bits (not set-id bits).
      here.set(name, withPerm(after, after.perm & 0o777));
    }
  }
}

function sameFile(a: Stat, b: Stat): boolean {
  return a.size === b.size && sameMtime(a, b) && a.perm === b.perm &&
    a.ctimeSec === b.ctimeSec && a.ctimeNsec === b.ctimeNsec;
}

function copyStable(
  src: Dir,
  dst: Dir,
  name: string,
  path: string,
  stats: SnapshotStats,
  progress: Progress | undefined,
): Stat {
  for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
    const r = src.copyFileTo(name, dst, name, stats.strategy);
    if (STRATEGY_RANK[r.strategy] > STRATEGY_RANK[stats.strategy]) stats.strategy = r.strategy;
    if (sameFile(r.before, r.after)) {
      stats.files++;
      stats.bytes += r.after.size;
      progress?.(stats);
      return r.after;
    }
    dst.unlink(name);
  }
  throw new SnapshotError(`file kept changing: ${path}`);
}
