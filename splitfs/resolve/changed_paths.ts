/**
 * The paths one tree changed relative to a split's base, with both sides'
 * signatures (docs/resolution.md, "The filesystem scopes' planner"): the
 * input of the `--filesystem`, `--paths` and promote plans.
 *
 * It walks as capture does (`splitfs/capture/compare.ts`): only the
 * candidates an overlay fork's upper dir lists, or the whole tree for a copy
 * fork or the source; the base's stats from the snapshot's index; a path
 * only the other tree has is admitted unless the ignore rules exclude it
 * (the split did not cover it). Unlike capture it compares what a plan
 * compares (full permission bits, directories made and removed, content by
 * blob id hashed as it is read, no size limit) and writes nothing.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { CandidateDir } from "../capture/compare.ts";
import { OldTree, type StatIndex } from "../capture/old_tree.ts";
import { compareNames, type Dir, type Stat } from "../fd/dir.ts";
import { fatalUtf8 } from "../fd/file_names.ts";
import { passInvalid } from "../fd/non_utf8.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { GITIGNORE, isGitName, MAX_GITIGNORE_BYTES } from "../layers/snapshot.ts";
import { blobIdOfFile } from "../apply/fs_extra.ts";
import {
  ABSENT,
  comparePaths,
  sameSignature,
  type Signature,
} from "../../model/resolution_plan.ts";
import { MARSH_DIR } from "../../model/layout.ts";
import { RefusedError } from "../errors.ts";

/** One changed path: what the base holds there, and what the other tree holds. */
export interface ChangedPath {
  readonly path: string;
  readonly base: Signature;
  readonly other: Signature;
}

/** What to compare. */
export interface ChangedOptions {
  readonly base: Dir;
  /** The base's stats as the snapshot recorded them; without it the base is walked. */
  readonly baseIndex?: StatIndex;
  /** The fork, or the source. */
  readonly other: Dir;
  /** Where the other tree can differ (an overlay fork's upper dir), or `"all"`. */
  readonly candidates: CandidateDir;
  /** The rules for paths only the other tree has; `null` admits them all (`--with-ignored`). */
  readonly ignore: IgnoreScope | null;
  /** The `.gitignore` files the snapshot left out, by directory (a fork has none of its own there). */
  readonly prunedIgnores?: ReadonlyMap<string, Uint8Array>;
  /**
   * A fork's ready time: a same-size, same-mtime, same-mode file whose ctime
   * is before it was not touched (a branch cannot set ctime). `null`: equal
   * size, mtime and mode are taken as unchanged, as Git's stat check does.
   */
  readonly readyNs: bigint | null;
}

/** The blob ids of a split's store are SHA-1 (`splitfs/git/store.ts`). */
export const HEX_LENGTH = 40;

type Kind = "file" | "symlink" | "dir";

function kindOf(st: Stat | null): Kind | null {
  return st !== null && (st.kind === "file" || st.kind === "symlink" || st.kind === "dir")
    ? st.kind
    : null;
}

/**
 * A path's signature as `dir`'s entry `name` with stat `st`. A file is
 * hashed through a no-follow descriptor; its mode is the open file's.
 *
 * @throws {RefusedError} for a symlink whose target is not UTF-8
 */
export function signatureAt(dir: Dir, name: string, st: Stat): Signature {
  switch (kindOf(st)) {
    case "dir":
      return { kind: "dir" };
    case "symlink": {
      const raw = dir.readlink(name);
      try {
        return { kind: "symlink", target: fatalUtf8.decode(raw) };
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;
        throw new RefusedError(
          `the symlink ${dir.path}/${name} has a target that is not UTF-8, which no plan can ` +
            `hold: point it elsewhere or remove it`,
          { cause: error },
        );
      }
    }
    case "file": {
      using f = dir.openFile(name);
      return { kind: "file", mode: f.stat().perm, blob: blobIdOfFile(f, HEX_LENGTH) };
    }
    default:
      return ABSENT;
  }
}

interface Ctx {
  readonly opts: ChangedOptions;
  readonly out: ChangedPath[];
  readonly ready: bigint | null;
}

/**
 * Every path where `other` differs from the base, in plan order. A
 * directory made, removed or replaced by a file (or the reverse) is listed
 * itself and with every entry below it; a directory on both sides is not
 * listed. `.git` at any depth and the top `.marsh` are never listed.
 *
 * @throws {InvalidNameError} for a name that is not UTF-8 the rules admit
 */
export function changedPaths(opts: ChangedOptions): ChangedPath[] {
  const ctx: Ctx = { opts, out: [], ready: opts.readyNs };
  const scope = opts.ignore ? opts.ignore.enter("", gitignoreOf(ctx, opts.other, "")) : null;
  using old = opts.baseIndex ? OldTree.indexed(opts.base, opts.baseIndex) : OldTree.live(opts.base);
  walk(ctx, old, opts.other, "", scope, opts.candidates);
  // Walked in name order per directory; a plan sorts whole paths (`a-b` before `a/c`).
  return ctx.out.sort((a, b) => comparePaths(a.path, b.path));
}

/** The `.gitignore` whose rules apply in `dir` at `rel`: its own, else the one the snapshot left out. */
function gitignoreOf(ctx: Ctx, dir: Dir, rel: string): Uint8Array | null {
  const st = dir.statAt(GITIGNORE);
  if (st === null) return ctx.opts.prunedIgnores?.get(rel) ?? null;
  // Too large or not a file: no rules of its own, as the snapshot reads it.
  return st.kind === "file" && st.size <= MAX_GITIGNORE_BYTES
    ? dir.readFile(GITIGNORE, MAX_GITIGNORE_BYTES)
    : null;
}

function walk(
  ctx: Ctx,
  old: OldTree | null,
  other: Dir | null,
  rel: string,
  scope: IgnoreScope | null,
  candidates: CandidateDir,
): void {
  const names = new Set<string>();
  if (candidates === "all") {
    for (const name of old?.names() ?? []) names.add(name);
    if (other) {
      const listing = other.listing();
      for (const e of listing.entries) names.add(e.name);
      // Never in a base: admitted only if the rules exclude them, as capture does.
      passInvalid(other, rel, listing.invalid, scope);
    }
  } else {
    for (const name of candidates.keys()) names.add(name);
  }
  for (const name of [...names].sort(compareNames)) {
    if (isGitName(name) || (rel === "" && name === MARSH_DIR)) continue;
    const path = rel === "" ? name : `${rel}/${name}`;
    const o = old?.stat(name) ?? null;
    const n = other?.statAt(name) ?? null;
    const ok = kindOf(o), nk = kindOf(n);
    if (ok === null && nk === null) continue;
    if (ok === null && scope?.isIgnored(path, nk === "dir")) continue;
    if (ok === "dir" && nk === "dir") {
      using od = old!.child(name);
      using nd = other!.openDir(name);
      const below = candidates === "all" ? "all" : candidates.get(name) ?? "all";
      walk(ctx, od, nd, path, scope?.enter(path, gitignoreOf(ctx, nd, path)) ?? null, below);
      continue;
    }
    if (ok !== null && ok === nk && unchanged(ctx, o!, n!)) continue;
    const baseSig = ok === null ? ABSENT : signatureAt(old!.dir(), name, o!);
    const otherSig = nk === null ? ABSENT : signatureAt(other!, name, n!);
    if (sameSignature(baseSig, otherSig)) continue;
    ctx.out.push({ path, base: baseSig, other: otherSig });
    // A directory on one side only: everything below it changed with it.
    if (ok === "dir") {
      using od = old!.child(name);
      walk(ctx, od, null, path, null, "all");
    }
    if (nk === "dir") {
      using nd = other!.openDir(name);
      walk(ctx, null, nd, path, scope?.enter(path, gitignoreOf(ctx, nd, path)) ?? null, "all");
    }
  }
}

/** A leaf the stats show untouched (see {@linkcode ChangedOptions.readyNs}). */
function unchanged(ctx: Ctx, o: Stat, n: Stat): boolean {
  if (o.kind === "dir" || o.size !== n.size || o.perm !== n.perm || o.mtimeNs !== n.mtimeNs) {
    return false;
  }
  return ctx.ready === null || n.ctimeNs < ctx.ready;
}
