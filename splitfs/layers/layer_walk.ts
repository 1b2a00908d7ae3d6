/**
 * The walk of a layered snapshot (docs/engine.md, "The layered snapshot
 * store"): the live tree compared with the previous snapshot's index,
 * entry by entry, so that only what changed is read and written into the
 * new layer, with whiteouts for what went. See `layers.ts` for what is read
 * and what is skipped.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { compareNames, type Dir, type InvalidEntry, type Stat } from "../fd/dir.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import {
  F_LMNSEC,
  F_LMSEC,
  F_MODE,
  type IndexNode,
  isZero,
  KIND_DIR,
  KIND_FILE,
  kindOf,
  type LayerIndex,
  NO_OID,
  STRIDE,
} from "./layer_index.ts";
import { Builder, hasName, kindCode, record, sameLive, sameOid, treeOf } from "./layer_records.ts";
import { DATA } from "./layer_seal.ts";
import { newId } from "./layers_dir.ts";
import {
  discardSpill,
  LayerOut,
  OutDir,
  readLink,
  readStable,
  writeEntry,
  type Written,
} from "./layer_write.ts";
import { passInvalid } from "../fd/non_utf8.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";
import {
  GITIGNORE,
  isGitName,
  type Progress,
  readGitignore,
  type SnapshotStats,
} from "./snapshot.ts";
import { blobId, EMPTY_TREE_HEX, hexOf } from "../git/tree_id.ts";

/** How to take one layered snapshot. */
export interface LayerSnapshotOptions {
  /** The live tree: the project root, or a fork for a nested split. Borrowed. */
  readonly source: Dir;
  /** The root ignore scope, or `null` to admit ignored entries (non-Git project, `--with-ignored`). */
  readonly ignore: IgnoreScope | null;
  /**
   * Identifies the tree-wide inputs `ignore` was built from (see
   * `ignoreKeyOf` in `layers.ts`). Entries recorded by the previous snapshot are
   * not re-tested against the rules unless this key or a `.gitignore` above
   * them changed; without a key every entry is re-tested every time.
   */
  readonly ignoreKey?: string;
  /** Top-level names never admitted (`.marsh`). */
  readonly skipTop: ReadonlySet<string>;
  /** The chain (`tracked`, `with-ignored`): each has its own head and stack. */
  readonly chain: string;
  readonly progress?: Progress;
  /** The deepest stack a chain may reach before a snapshot rebases onto a full copy. Default 32. */
  readonly maxDepth?: number;
}

/** What a layered snapshot took. */
export interface SnapshotCounts extends SnapshotStats {
  /** Whether this snapshot copied the whole tree into a new bottom layer. */
  readonly full: boolean;
  /** Files and symlinks written into the new layer (0 when no layer was made). */
  readonly copied: number;
  readonly whiteouts: number;
  /** Files and symlinks whose recorded stat matched, so they were not read. */
  readonly reused: number;
}

/** The walk's phase (see `phase_times.ts`): reading and hashing changed files and symlinks. */
export const PHASE_READ = "layer walk: read and hash";
/** The walk's phase: writing them into the new layer (with the directories made for them). */
export const PHASE_WRITE = "layer walk: write";

/** What a walk found and wrote. */
export interface WalkResult {
  /** The new layer's id, or `null` when nothing had to be written. */
  readonly layer: string | null;
  readonly index: LayerIndex;
  readonly rootId: string;
  readonly stats: SnapshotCounts;
  readonly written: Written;
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

interface Counts extends SnapshotStats {
  full: boolean;
  copied: number;
  whiteouts: number;
  reused: number;
}

interface Ctx {
  readonly source: Dir;
  readonly skipTop: ReadonlySet<string>;
  /** Re-test every entry against the rules (the tree-wide inputs changed or are unknown). */
  readonly evalAll: boolean;
  /** The previous snapshot's start: entries touched at or after it are re-read. */
  readonly racySec: number;
  readonly racyNsec: number;
  readonly out: LayerOut;
  readonly stats: Counts;
  readonly written: Written;
  readonly progress: Progress | undefined;
  /** `.gitignore` files read but not admitted, by directory (see `takeSnapshot`). */
  readonly prunedIgnores: Map<string, Uint8Array>;
}

/** A directory's ignore scope, entered (and its `.gitignore` read) only when first needed. */
class ScopeFrame {
  #scope: IgnoreScope | null = null;
  #bytes: Uint8Array | null | undefined;

  constructor(
    readonly rules: IgnoreScope,
    readonly parent: ScopeFrame | null,
    readonly rel: string,
    readonly dir: Dir,
  ) {}

  /** The `.gitignore` bytes, when the walk read them already. */
  setBytes(bytes: Uint8Array | null): void {
    this.#bytes = bytes;
  }

  get(): IgnoreScope {
    if (this.#scope === null) {
      const bytes = this.#bytes !== undefined ? this.#bytes : readGitignore(this.dir);
      this.#scope = this.parent
        ? this.parent.get().enter(this.rel, bytes)
        : this.rules.enter("", bytes);
    }
    return this.#scope;
  }
}

/**
 * Walks `opts.source` against `prev` (the head's index, or `null` for a
 * full copy) into a new layer under `layers`. The layer directory is made
 * only when something is written; it is removed when the walk fails.
 */
export function walkLayer(
  layers: Dir,
  opts: LayerSnapshotOptions,
  prev: LayerIndex | null,
  ignoreKey: string | null,
  start: { sec: number; nsec: number },
): WalkResult {
  for (;;) {
    const id = newId();
    if (layers.statAt(id) !== null) continue;
    const out = new LayerOut(layers, id);
    try {
      return walkTree(opts, prev, ignoreKey, start, out);
    } catch (error) {
      out.discard();
      throw error;
    }
  }
}

function walkTree(
  opts: LayerSnapshotOptions,
  prev: LayerIndex | null,
  ignoreKey: string | null,
  start: { sec: number; nsec: number },
  out: LayerOut,
): WalkResult {
  const stats: Counts = {
    files: 0,
    dirs: 0,
    symlinks: 0,
    bytes: 0,
    prunedIgnored: 0,
    prunedSpecial: 0,
    prunedGit: 0,
    strategy: "readwrite",
    full: prev === null,
    copied: 0,
    whiteouts: 0,
    reused: 0,
  };
  const written: Written = { files: 0, dirs: 0, symlinks: 0, whiteouts: 0, bytes: 0 };
  const ctx: Ctx = {
    source: opts.source,
    skipTop: opts.skipTop,
    evalAll: ignoreKey === null || prev?.ignoreKey !== ignoreKey,
    racySec: prev?.startSec ?? 0,
    racyNsec: prev?.startNsec ?? 0,
    out,
    stats,
    written,
    progress: opts.progress,
    prunedIgnores: new Map(),
  };
  const rootSt = opts.source.stat();
  const rootMode = KIND_DIR * 0x10000 + rootSt.perm;
  const rootSame = prev !== null && sameLive(prev.rootStat, 0, rootSt, rootMode);
  const data = new OutDir(out, DATA, rootSt.perm);
  // A new layer always has its root; a changed root mode alone is a change.
  if (prev === null || (prev.rootStat[F_MODE] as number) !== rootMode) {
    data.get();
    written.dirs++;
  }
  const scope = opts.ignore ? new ScopeFrame(opts.ignore, null, "", opts.source) : null;
  let r: DirResult;
  try {
    r = walkDir(
      ctx,
      opts.source,
      "",
      prev?.root ?? null,
      prev?.rootTree ?? null,
      rootSame && !isRacy(ctx, rootSt),
      false,
      scope,
      data,
    );
    data.finish();
  } finally {
    data.close();
    out.close();
  }
  const wrote = written.files + written.symlinks + written.dirs + written.whiteouts > 0;
  // A spill of a file that turned out unchanged may have made the layer directory.
  if (!wrote) out.discard();
  opts.progress?.(stats);
  const index: LayerIndex = {
    root: r.node,
    rootStat: Float64Array.from(record(rootSt, rootMode, rootSt.mtimeSec, rootSt.mtimeNsec)),
    rootTree: r.tree,
    startSec: start.sec,
    startNsec: start.nsec,
    ignoreKey: ignoreKey ?? "unknown",
  };
  return {
    layer: wrote ? out.id : null,
    index,
    rootId: r.tree ? hexOf(r.tree) : EMPTY_TREE_HEX,
    stats,
    written,
    prunedIgnores: ctx.prunedIgnores,
  };
}

function isRacy(ctx: Ctx, s: Stat): boolean {
  const sec = ctx.racySec, nsec = ctx.racyNsec;
  return s.mtimeSec > sec || (s.mtimeSec === sec && s.mtimeNsec >= nsec) ||
    s.ctimeSec > sec || (s.ctimeSec === sec && s.ctimeNsec >= nsec);
}

interface DirResult {
  /** The directory's node: `prev` itself when nothing in it changed. */
  readonly node: IndexNode;
  readonly tree: Uint8Array | null;
}

/**
 * The names of a directory that may be admitted, in name order; those that
 * are not UTF-8 go to `invalid`, for the rules to pass over or refuse.
 */
function listNames(ctx: Ctx, src: Dir, rel: string, invalid: InvalidEntry[]): string[] {
  const names: string[] = [];
  const listing = src.listing();
  invalid.push(...listing.invalid);
  for (const e of listing.entries) {
    if (rel === "" && ctx.skipTop.has(e.name)) continue;
    if (isGitName(e.name)) {
      ctx.stats.prunedGit++;
      continue;
    }
    names.push(e.name);
  }
  return names.sort(compareNames);
}

/**
 * The blob id of the `.gitignore` whose rules apply in this directory (or
 * `null`), and its bytes when they had to be read.
 */
function gitignoreOf(
  ctx: Ctx,
  src: Dir,
  prev: IndexNode | null,
  listed: readonly string[] | null,
): { oid: Uint8Array | null; bytes?: Uint8Array | null } {
  let pi = -1;
  if (prev) {
    for (let i = 0; i < prev.names.length; i++) {
      const c = compareNames(prev.names[i] as string, ".gitignore");
      if (c === 0) pi = i;
      if (c >= 0) break;
    }
  }
  const present = listed ? listed.includes(".gitignore") : pi >= 0 || prev?.gitignore != null;
  if (!present) return { oid: null, bytes: null };
  const s = src.statAt(".gitignore");
  if (s === null || s.kind !== "file") return { oid: null, bytes: null };
  if (
    prev && pi >= 0 && sameLive(prev.st, pi * STRIDE, s, KIND_FILE * 0x10000 + s.perm) &&
    !isRacy(ctx, s)
  ) {
    return { oid: prev.oids.subarray(pi * 20, pi * 20 + 20) };
  }
  const bytes = readGitignore(src);
  return { oid: bytes === null ? null : blobId(bytes), bytes };
}

function walkDir(
  ctx: Ctx,
  src: Dir,
  rel: string,
  prev: IndexNode | null,
  prevTree: Uint8Array | null,
  canSkip: boolean,
  parentEvalAll: boolean,
  scope: ScopeFrame | null,
  out: OutDir,
): DirResult {
  let evalAll = prev === null || ctx.evalAll || parentEvalAll;
  // An unchanged directory stat means an unchanged set of names: no listing needed.
  const invalid: InvalidEntry[] = [];
  let listed = canSkip && !evalAll ? null : listNames(ctx, src, rel, invalid);
  let gitignore: Uint8Array | null = null;
  let gitignoreBytes: Uint8Array | null | undefined;
  if (scope) {
    const gi = gitignoreOf(ctx, src, prev, listed);
    gitignore = gi.oid === null ? null : gi.oid.slice();
    gitignoreBytes = gi.bytes;
    if (gi.bytes !== undefined) scope.setBytes(gi.bytes);
    if (!sameOid(gi.oid, prev?.gitignore ?? null)) {
      // This directory's rules changed: every entry below is tested again.
      evalAll = true;
      listed ??= listNames(ctx, src, rel, invalid);
    }
  }
  if (invalid.length > 0) {
    for (const e of passInvalid(src, rel, invalid, scope?.get() ?? null)) {
      if (e.why === "ignored") ctx.stats.prunedIgnored++;
      else ctx.stats.prunedSpecial++;
    }
  }
  const w: WalkDirState = { ctx, src, rel, prev, scope, out, evalAll, treeDirty: prev === null };
  const built = listed === null ? walkKnown(w, prev as IndexNode) : walkListed(w, listed);
  const node = built === null ? prev as IndexNode : built.build(gitignore);
  if (gitignore !== null && !hasName(node, GITIGNORE)) {
    // Git reads it in the source although the snapshot leaves it out (it ignores itself).
    const bytes = gitignoreBytes !== undefined ? gitignoreBytes : readGitignore(src);
    if (bytes !== null) ctx.prunedIgnores.set(rel, bytes);
  }
  if (built === null) return { node, tree: prevTree };
  return { node, tree: w.treeDirty ? treeOf(node) : prevTree };
}

/**
 * Visits the previous node's names (the listing is known unchanged). The new
 * node is started only at the first difference; `null` means none.
 */
function walkKnown(w: WalkDirState, prev: IndexNode): Builder | null {
  let b: Builder | null = null;
  for (let k = 0; k < prev.names.length; k++) {
    const r = visit(w, prev.names[k] as string, k);
    if (r === SAME) {
      b?.pushFrom(prev, k);
      continue;
    }
    if (b === null) {
      b = new Builder();
      for (let t = 0; t < k; t++) b.pushFrom(prev, t);
    }
    if (r !== GONE) b.push(r.name, r.rec, r.oid, r.kid);
  }
  return b;
}

/** Merges the sorted listing with the previous node's names; names only the latter has are gone. */
function walkListed(w: WalkDirState, listed: readonly string[]): Builder {
  const prev = w.prev;
  const pNames = prev?.names ?? [];
  const b = new Builder();
  let i = 0, j = 0;
  while (i < listed.length || j < pNames.length) {
    const c = i >= listed.length
      ? 1
      : j >= pNames.length
      ? -1
      : compareNames(listed[i] as string, pNames[j] as string);
    if (c > 0) {
      whiteout(w, pNames[j++] as string);
      continue;
    }
    const pi = c === 0 ? j++ : -1;
    const r = visit(w, listed[i++] as string, pi);
    if (r === SAME) b.pushFrom(prev as IndexNode, pi);
    else if (r !== GONE) b.push(r.name, r.rec, r.oid, r.kid);
  }
  return b;
}

interface WalkDirState {
  readonly ctx: Ctx;
  readonly src: Dir;
  readonly rel: string;
  readonly prev: IndexNode | null;
  readonly scope: ScopeFrame | null;
  readonly out: OutDir;
  readonly evalAll: boolean;
  /** Whether the tree id must be recomputed. */
  treeDirty: boolean;
}

/** The entry is unchanged: keep the previous record. */
const SAME = 0;
/** The entry is not in the new view. */
const GONE = 1;
type Visit = typeof SAME | typeof GONE | {
  readonly name: string;
  readonly rec: ArrayLike<number>;
  readonly oid: Uint8Array;
  readonly kid: IndexNode | null;
};

function whiteout(w: WalkDirState, name: string): void {
  w.out.get().mknodWhiteout(name);
  w.ctx.stats.whiteouts++;
  w.ctx.written.whiteouts++;
  w.treeDirty = true;
}

/** An entry that vanished or is no longer admitted: a whiteout when the old view had it. */
function gone(w: WalkDirState, name: string, pi: number): Visit {
  if (pi >= 0) whiteout(w, name);
  return GONE;
}

/** Compares one live entry (at index `pi` of the previous node, or -1) and copies what changed. */
function visit(w: WalkDirState, name: string, pi: number): Visit {
  const { ctx, src, prev } = w;
  const path = w.rel === "" ? name : `${w.rel}/${name}`;
  if (w.rel === "" && ctx.skipTop.has(name)) return gone(w, name, pi);
  const s = src.statAt(name);
  if (s === null) return gone(w, name, pi);
  if (s.kind !== "file" && s.kind !== "dir" && s.kind !== "symlink") {
    ctx.stats.prunedSpecial++;
    return gone(w, name, pi);
  }
  const o = pi * STRIDE;
  const pst = prev?.st;
  const pMode = pi >= 0 ? (pst as Float64Array)[o + F_MODE] as number : -1;
  const pKind = pi >= 0 ? kindOf(pMode) : 0;
  const isDir = s.kind === "dir";
  if (w.scope && (w.evalAll || pi < 0 || (pKind === KIND_DIR) !== isDir)) {
    if (w.scope.get().isIgnored(path, isDir)) {
      ctx.stats.prunedIgnored++;
      return gone(w, name, pi);
    }
  }
  const mode = kindCode(s.kind) * 0x10000 + s.perm;
  const same = pi >= 0 && sameLive(pst as Float64Array, o, s, mode);
  if (isDir) return visitDir(w, name, path, pi, s, mode, same, pKind === KIND_DIR);
  if (same && !isRacy(ctx, s)) {
    ctx.stats.reused++;
    count(ctx, s);
    return SAME;
  }
  const readStart = phaseStart();
  const read = s.kind === "file" ? readStable(ctx.out, src, name, path) : readLink(src, name, path);
  phaseEnd(PHASE_READ, readStart);
  if (read === null) return gone(w, name, pi);
  const after = read.st;
  const afterMode = kindCode(after.kind) * 0x10000 + after.perm;
  const pOid = pi >= 0 ? (prev as IndexNode).oids.subarray(pi * 20, pi * 20 + 20) : null;
  count(ctx, after);
  if (pi >= 0 && kindOf(afterMode) === pKind && sameOid(read.oid, pOid)) {
    // The same content: keep the layer's copy (and its mtime) unless its bits differ.
    const bitsSame = after.kind === "symlink" || (pMode & 0o777) === (after.perm & 0o777);
    if (bitsSame) {
      discardSpill(ctx.out, read);
      if (sameLive(pst as Float64Array, o, after, afterMode)) return SAME;
      const p = pst as Float64Array;
      return {
        name,
        rec: record(after, afterMode, p[o + F_LMSEC] as number, p[o + F_LMNSEC] as number),
        oid: read.oid,
        kid: null,
      };
    }
    if ((pMode & 0o100) !== (after.perm & 0o100)) w.treeDirty = true;
  } else {
    w.treeDirty = true;
  }
  const writeStart = phaseStart();
  writeEntry(ctx.out, w.out, name, read, ctx.written);
  phaseEnd(PHASE_WRITE, writeStart);
  ctx.stats.copied++;
  ctx.progress?.(ctx.stats);
  return {
    name,
    rec: record(after, afterMode, after.mtimeSec, after.mtimeNsec),
    oid: read.oid,
    kid: null,
  };
}

function count(ctx: Ctx, s: Stat): void {
  if (s.kind === "file") {
    ctx.stats.files++;
    ctx.stats.bytes += s.size;
  } else {
    ctx.stats.symlinks++;
  }
}

function visitDir(
  w: WalkDirState,
  name: string,
  path: string,
  pi: number,
  s: Stat,
  mode: number,
  same: boolean,
  wasDir: boolean,
): Visit {
  const { ctx, prev } = w;
  ctx.stats.dirs++;
  using child = w.src.openDir(name);
  const childOut = new OutDir(w.out, name, s.perm);
  try {
    const pMode = pi >= 0 ? (prev as IndexNode).st[pi * STRIDE + F_MODE] as number : -1;
    if (!wasDir || (pMode & 0o7777) !== s.perm) {
      // A new directory, or new permission bits: the layer must carry it even if empty.
      childOut.get();
      ctx.written.dirs++;
    }
    if (!wasDir) w.treeDirty = true;
    const pKid = wasDir ? (prev as IndexNode).kids[pi] ?? null : null;
    const pTree = wasDir ? (prev as IndexNode).oids.subarray(pi * 20, pi * 20 + 20) : null;
    const r = walkDir(
      ctx,
      child,
      path,
      pKid,
      pTree === null || isZero(pTree) ? null : pTree,
      same && !isRacy(ctx, s),
      w.evalAll,
      w.scope ? new ScopeFrame(w.scope.rules, w.scope, path, child) : null,
      childOut,
    );
    childOut.finish();
    const oid = r.tree ?? NO_OID;
    if (wasDir && !sameOid(oid, pTree)) w.treeDirty = true;
    if (same && r.node === pKid) return SAME;
    return { name, rec: record(s, mode, s.mtimeSec, s.mtimeNsec), oid, kid: r.node };
  } finally {
    childOut.close();
  }
}
