/**
 * Tree comparison: walks an old and a new tree side by side through no-follow
 * descriptors and yields each changed path with both sides' bytes, one at a
 * time, so memory holds at most one file pair.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { FileChange, GitMode, Side } from "../../patch/change.ts";
import {
  compareNames,
  ctimeAtLeast,
  type Dir,
  type InvalidEntry,
  sameMtime,
  type Stat,
  TooLargeError,
} from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { OldTree, type StatIndex } from "./old_tree.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { passInvalid } from "../fd/non_utf8.ts";
import { GIT_NAME, GITIGNORE, isGitName, MAX_GITIGNORE_BYTES } from "../layers/snapshot.ts";

/** docs/engine.md "Capture and verification": 32 MiB per file. */
export const MAX_FILE_BYTES = 32 * 1024 * 1024;
/** docs/engine.md "Capture and verification": 256 MiB of changed bytes per capture. */
export const MAX_CHANGED_BYTES = 256 * 1024 * 1024;

/**
 * Which names of one directory of the new tree can differ from the old tree:
 * a map from each such name to the candidates below it (`null` for an entry
 * that is not a directory), or `"all"` to compare the whole directory. An
 * overlay fork answers with its upper layer: a name absent from it is the
 * old tree's by construction.
 */
export type CandidateDir = "all" | ReadonlyMap<string, CandidateDir | null>;

/** How to compare two trees. */
export interface CompareOptions {
  readonly old: Dir;
  /** The old tree's stats, recorded when it was made; without it the old tree is walked. */
  readonly oldIndex?: StatIndex;
  readonly new: Dir;
  /**
   * Same-size, same-mtime files are compared byte for byte when their ctime is
   * at or after this time. `null` compares every same-size pair (two unrelated trees).
   */
  readonly readyNs: bigint | null;
  /**
   * A `.git` entry below the root of the new tree: `"skip"` it (marsh diff) or
   * reject the whole result (capture verification). The root `.git` is always skipped.
   */
  readonly nestedGit: "skip" | "reject";
  /** Rules for paths only the new tree has, or `null` to admit them all. */
  readonly newIgnore: IgnoreScope | null;
  /**
   * The `.gitignore` files the snapshot read in the source but left out (they
   * ignore themselves: `.pytest_cache/.gitignore` saying `*`), by directory.
   * The source still has them and Git reads them there, so each applies to
   * its directory of the new tree unless the new tree has a `.gitignore` of
   * its own there (what the branch wrote is what the source would then hold).
   */
  readonly prunedIgnores?: ReadonlyMap<string, Uint8Array>;
  /**
   * Restricts the comparison to these names (the root's), recursing into a
   * directory both sides have only with its own candidates. Both sides are
   * still read through `old` and `new`, so every other rule applies
   * unchanged. Absent: `"all"`.
   */
  readonly candidates?: CandidateDir;
  readonly maxFileBytes?: number;
  readonly maxChangedBytes?: number;
}

/** Counters a comparison keeps while it runs. */
export interface CompareStats {
  changedBytes: number;
  skippedIgnored: number;
  skippedSpecial: number;
}

type Kind = "file" | "symlink" | "dir" | "other";

function kindOf(st: Stat | null): Kind | null {
  if (st === null) return null;
  if (st.kind === "file" || st.kind === "symlink" || st.kind === "dir") return st.kind;
  return "other";
}

function gitMode(st: Stat): GitMode {
  if (st.kind === "symlink") return 0o120000;
  return (st.perm & 0o100) !== 0 ? 0o100755 : 0o100644;
}

/**
 * Compares two trees and yields each changed path in name order. Throws
 * {@linkcode RejectedError} for `capture limit` and (with `nestedGit: "reject"`)
 * for a nested `.git`.
 */
export function* compareTrees(opts: CompareOptions, stats?: CompareStats): Generator<FileChange> {
  const ctx: Ctx = {
    opts,
    ready: opts.readyNs === null ? null : {
      sec: Number(opts.readyNs / 1_000_000_000n),
      nsec: Number(opts.readyNs % 1_000_000_000n),
    },
    stats: stats ?? { changedBytes: 0, skippedIgnored: 0, skippedSpecial: 0 },
    maxFile: opts.maxFileBytes ?? MAX_FILE_BYTES,
    maxTotal: opts.maxChangedBytes ?? MAX_CHANGED_BYTES,
  };
  const scope = opts.newIgnore ? opts.newIgnore.enter("", newGitignore(ctx, opts.new, "")) : null;
  using old = opts.oldIndex ? OldTree.indexed(opts.old, opts.oldIndex) : OldTree.live(opts.old);
  yield* compareDir(ctx, old, opts.new, "", scope, opts.candidates ?? "all");
}

interface Ctx {
  readonly opts: CompareOptions;
  /** `readyNs` split for number comparisons. */
  readonly ready: { sec: number; nsec: number } | null;
  readonly stats: CompareStats;
  readonly maxFile: number;
  readonly maxTotal: number;
}

function* compareDir(
  ctx: Ctx,
  oldDir: OldTree,
  newDir: Dir,
  rel: string,
  scope: IgnoreScope | null,
  candidates: CandidateDir,
): Generator<FileChange> {
  const names = new Set<string>();
  if (candidates === "all") {
    for (const name of oldDir.names()) names.add(name);
    const listing = newDir.listing();
    for (const e of listing.entries) names.add(e.name);
    // Never in the old tree (a snapshot holds none): new paths, which the rules decide.
    passOverInvalid(ctx, newDir, rel, listing.invalid, scope);
  } else {
    for (const name of candidates.keys()) names.add(name);
  }
  for (const name of [...names].sort(compareNames)) {
    const path = rel === "" ? name : `${rel}/${name}`;
    if (isGitName(name)) {
      // The root's own `.git` is the fork's gitfile, verified on its own.
      const own = rel === "" && name === GIT_NAME;
      if (!own && ctx.opts.nestedGit === "reject" && newDir.statAt(name) !== null) {
        throw new RejectedError(`nested .git at ${path}`);
      }
      continue;
    }
    const o = oldDir.stat(name);
    let n = newDir.statAt(name);
    if (kindOf(n) === "other") {
      ctx.stats.skippedSpecial++;
      n = null;
    }
    const ok = kindOf(o), nk = kindOf(n);
    if (ok === null && nk === null) continue;
    if (ok === null) {
      yield* added(ctx, newDir, name, path, n!, scope);
      continue;
    }
    if (nk === null) {
      yield* deleted(ctx, oldDir, name, path, o!);
      continue;
    }
    if (ok === "dir" && nk === "dir") {
      using od = oldDir.child(name);
      using nd = newDir.openDir(name);
      const childScope = scope ? scope.enter(path, newGitignore(ctx, nd, path)) : null;
      // A name listed without a subtree (not a directory where it was listed) is compared whole.
      const below = candidates === "all" ? "all" : candidates.get(name) ?? "all";
      yield* compareDir(ctx, od, nd, path, childScope, below);
      continue;
    }
    if (ok === "dir" || nk === "dir") {
      // A directory became a file or the reverse: Git sees deletions and additions.
      yield* deleted(ctx, oldDir, name, path, o!);
      // The path was in the snapshot, so the new side is compared whatever the ignore rules say.
      yield* added(ctx, newDir, name, path, n!, scope, true);
      continue;
    }
    const change = compareLeaf(ctx, oldDir, newDir, name, path, o!, n!);
    if (change) yield change;
  }
}

/**
 * The `.gitignore` whose rules apply in `dir` (at `rel`) of the new tree: its
 * own, else the one the snapshot left out there. One over the bound is the
 * branch's doing, so it rejects the result rather than failing the capture.
 */
function newGitignore(ctx: Ctx, dir: Dir, rel: string): Uint8Array | null {
  try {
    const st = dir.statAt(GITIGNORE);
    if (st === null) return ctx.opts.prunedIgnores?.get(rel) ?? null;
    // A symlinked or special `.gitignore` counts as absent, as in `readGitignore`.
    return st.kind === "file" ? dir.readFile(GITIGNORE, MAX_GITIGNORE_BYTES) : null;
  } catch (error) {
    if (!(error instanceof TooLargeError)) throw error;
    const path = rel === "" ? ".gitignore" : `${rel}/.gitignore`;
    throw new RejectedError(`ignore file too large: ${path}`, { cause: error });
  }
}

function readSide(ctx: Ctx, dir: Dir, name: string, path: string, st: Stat): Side {
  if (st.kind === "symlink") return { mode: 0o120000, bytes: dir.readlink(name) };
  if (st.size > ctx.maxFile) throw limit(path, st.size, ctx.maxFile);
  try {
    return { mode: gitMode(st), bytes: dir.readFile(name, ctx.maxFile) };
  } catch (error) {
    if (error instanceof TooLargeError) throw limit(path, error.size, ctx.maxFile, error);
    throw error;
  }
}

function limit(path: string, size: number, max: number, cause?: unknown): RejectedError {
  return new RejectedError("capture limit", {
    cause: cause ?? new Error(`${path} has ${size} bytes, over the ${max}-byte limit`),
  });
}

function count(ctx: Ctx, bytes: number): void {
  ctx.stats.changedBytes += bytes;
  if (ctx.stats.changedBytes > ctx.maxTotal) {
    throw new RejectedError("capture limit", {
      cause: new Error(`over ${ctx.maxTotal} changed bytes`),
    });
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function compareLeaf(
  ctx: Ctx,
  oldDir: OldTree,
  newDir: Dir,
  name: string,
  path: string,
  o: Stat,
  n: Stat,
): FileChange | null {
  // A symlink's size is its target's length: the same shortcut holds for it.
  if (o.kind === n.kind && (o.kind === "file" || o.kind === "symlink")) {
    const modeSame = gitMode(o) === gitMode(n);
    if (o.size === n.size && modeSame) {
      const ready = ctx.ready;
      const touched = ready === null || !sameMtime(n, o) ||
        ctimeAtLeast(n, ready.sec, ready.nsec);
      if (!touched) return null;
    }
  }
  const oldSide = readSide(ctx, oldDir.dir(), name, path, o);
  const newSide = readSide(ctx, newDir, name, path, n);
  if (oldSide.mode === newSide.mode && sameBytes(oldSide.bytes, newSide.bytes)) return null;
  count(ctx, newSide.bytes.length);
  return { path, old: oldSide, new: newSide };
}

function* deleted(
  ctx: Ctx,
  dir: OldTree,
  name: string,
  path: string,
  st: Stat,
): Generator<FileChange> {
  if (st.kind !== "dir") {
    const side = readSide(ctx, dir.dir(), name, path, st);
    count(ctx, side.bytes.length);
    yield { path, old: side, new: null };
    return;
  }
  using child = dir.child(name);
  for (const cname of child.names().sort(compareNames)) {
    const cst = child.stat(cname);
    if (cst === null || kindOf(cst) === "other") continue;
    yield* deleted(ctx, child, cname, `${path}/${cname}`, cst);
  }
}

function* added(
  ctx: Ctx,
  dir: Dir,
  name: string,
  path: string,
  st: Stat,
  scope: IgnoreScope | null,
  inSnapshot = false,
): Generator<FileChange> {
  const isDir = st.kind === "dir";
  if (!inSnapshot && scope?.isIgnored(path, isDir)) {
    ctx.stats.skippedIgnored++;
    if (isDir && ctx.opts.nestedGit === "reject") {
      using child = dir.openDir(name);
      findNestedGit(child, path);
    }
    return;
  }
  if (!isDir) {
    const side = readSide(ctx, dir, name, path, st);
    count(ctx, side.bytes.length);
    yield { path, old: null, new: side };
    return;
  }
  using child = dir.openDir(name);
  const childScope = scope ? scope.enter(path, newGitignore(ctx, child, path)) : null;
  const listing = child.listing();
  passOverInvalid(ctx, child, path, listing.invalid, childScope);
  for (const e of listing.entries.sort((a, b) => compareNames(a.name, b.name))) {
    const cpath = `${path}/${e.name}`;
    if (isGitName(e.name)) {
      if (ctx.opts.nestedGit === "reject") throw new RejectedError(`nested .git at ${cpath}`);
      continue;
    }
    const cst = child.statAt(e.name);
    if (cst === null) continue;
    if (kindOf(cst) === "other") {
      ctx.stats.skippedSpecial++;
      continue;
    }
    yield* added(ctx, child, e.name, cpath, cst, childScope);
  }
}

/**
 * Counts the names that are not UTF-8 the rules exclude (and special files)
 * as skipped, searching an excluded directory for a nested `.git` as
 * {@linkcode added} does. @throws {InvalidNameError} for any other
 */
function passOverInvalid(
  ctx: Ctx,
  dir: Dir,
  rel: string,
  invalid: readonly InvalidEntry[],
  scope: IgnoreScope | null,
): void {
  for (const e of passInvalid(dir, rel, invalid, scope)) {
    if (e.why === "special") {
      ctx.stats.skippedSpecial++;
      continue;
    }
    ctx.stats.skippedIgnored++;
    if (e.kind === "dir" && ctx.opts.nestedGit === "reject") {
      using child = dir.openDirRaw(e.raw);
      findNestedGit(child, e.shownPath);
    }
  }
}

/** Walks a directory that capture skips (ignored), only to find a nested `.git`. */
function findNestedGit(dir: Dir, rel: string): void {
  const { entries, invalid } = dir.listing();
  for (const e of entries) {
    const path = `${rel}/${e.name}`;
    if (isGitName(e.name)) throw new RejectedError(`nested .git at ${path}`);
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    if (kind === "dir") {
      using child = dir.openDir(e.name);
      findNestedGit(child, path);
    }
  }
  // Below an ignored directory every name is ignored, UTF-8 or not: only a `.git` matters.
  for (const e of invalid) {
    if ((e.kind ?? dir.statAtRaw(e.raw)?.kind) !== "dir") continue;
    using child = dir.openDirRaw(e.raw);
    findNestedGit(child, `${rel}/${e.shown}`);
  }
}
