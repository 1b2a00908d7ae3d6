/**
 * `marsh checkout`'s plan (docs/checkpoints.md, "Checkout and commit"): the
 * project's working tree becomes a checkpoint's root, path by path, through
 * the transactional applier. Like promote's plan ("the tree becomes X
 * wholesale", docs/resolution.md), but the other side is a sealed layer
 * stack read through its index, not a fork on disk.
 *
 * One walk of the project, with the same admission as a session's snapshot
 * (no `.git` at any depth, no top-level `.marsh`, no special files, ignored
 * paths only when the session took them), merged name by name with two
 * indexes: the **target** stack's (what the tree becomes) and the **base**
 * stack's (where the project's line began: the session's start, or the
 * checkpoint it last checked out). Every path where the project differs from
 * the target is a `take` or a `delete`; every path where it differs from the
 * base and which the plan would write is a project change, which checkout
 * refuses to retire unless told to.
 *
 * A file is compared by kind, permission bits `& 0o777` (the bits a layer
 * keeps) and Git blob id. Its blob id is the index's when the project file's
 * stat (kind, bits, size, mtime, ctime, inode) equals the one the index
 * recorded and is older than that snapshot's start (the snapshot's own stat
 * check, `splitfs/layers/layer_walk.ts`); otherwise it is hashed. The
 * applier's re-check hashes every path it replaces anyway.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { compareNames, type Dir, type Stat } from "../fd/dir.ts";
import { fatalUtf8 } from "../fd/file_names.ts";
import { passInvalid } from "../fd/non_utf8.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { blobId, hexOf } from "../git/tree_id.ts";
import {
  F_MODE,
  IndexNode,
  KIND_DIR,
  KIND_FILE,
  KIND_SYMLINK,
  kindOf,
  type LayerIndex,
  STRIDE,
} from "../layers/layer_index.ts";
import { kindCode, sameLive } from "../layers/layer_records.ts";
import { GITIGNORE, isGitName, MAX_GITIGNORE_BYTES } from "../layers/snapshot.ts";
import { blobIdOfFile } from "../apply/fs_extra.ts";
import { RefusedError } from "../errors.ts";
import { LazyDir, locate } from "../export/export_root.ts";
import type { StackView } from "../export/stack_view.ts";
import {
  comparePaths,
  type MergePlan,
  type PlanEntry,
  type Present,
  type Signature,
} from "../../model/resolution_plan.ts";
import { MARSH_DIR } from "../../model/layout.ts";

const enc = new TextEncoder();
/** Blob ids of a layer index are SHA-1. */
const HEX_LENGTH = 40;

/** The plan, and what the project changed since its line began. */
export interface CheckoutPlan {
  readonly plan: MergePlan;
  /** The first `maxListed` paths the project changed since the base that the plan writes, in plan order. */
  readonly projectChanges: string[];
  readonly projectChangesMore: number;
}

/** What a checkout plan is computed from. */
export interface CheckoutInputs {
  /** The project root. */
  readonly project: Dir;
  /** Where the project's line began. */
  readonly base: StackView;
  /** What the tree becomes. */
  readonly target: StackView;
  /** The root's ignore rules; `null` admits every path (`--with-ignored`, or no Git). */
  readonly ignore: IgnoreScope | null;
  /** How many project changes to list. */
  readonly maxListed: number;
}

/** One side's entry at a name: its node, position and record. */
interface Ent {
  readonly node: IndexNode;
  readonly i: number;
  readonly kind: number;
  readonly perm: number;
}

interface Ctx {
  readonly entries: PlanEntry[];
  readonly changes: string[];
  readonly baseIndex: LayerIndex;
  readonly targetIndex: LayerIndex;
}

/**
 * Plans the checkout of `inputs.target` over the project.
 *
 * @throws {RefusedError} when the tree cannot become the target as it is:
 *   a special file where the target has an entry, a directory to replace
 *   with a file that holds something the session does not cover, a symlink
 *   whose target is not UTF-8
 * @throws {InvalidNameError} for a name that is not UTF-8 the rules admit
 */
export function planCheckout(inputs: CheckoutInputs): CheckoutPlan {
  const ctx: Ctx = {
    entries: [],
    changes: [],
    baseIndex: inputs.base.index,
    targetIndex: inputs.target.index,
  };
  const scope = inputs.ignore?.enter("", gitignoreOf(inputs.project)) ?? null;
  using target = new LazyDir("", () => inputs.target.rootDir());
  walk(ctx, "", inputs.project, inputs.base.index.root, inputs.target.index.root, target, scope);
  ctx.entries.sort((a, b) => comparePaths(a.path, b.path));
  const retired = retiredBy(ctx.entries, ctx.changes).sort(comparePaths);
  const listed = retired.slice(0, inputs.maxListed);
  return {
    plan: {
      scope: "checkout",
      trees: {
        base: inputs.base.rootId,
        source: null,
        branch: inputs.target.rootId,
        result: inputs.target.rootId,
      },
      entries: ctx.entries,
    },
    projectChanges: listed,
    projectChangesMore: retired.length - listed.length,
  };
}

/**
 * The project's changes the plan would undo: those at a path it takes or
 * deletes, or below one. A change that already is the target's state
 * (the same edit made by hand) is not retired, so it does not block.
 */
function retiredBy(entries: readonly PlanEntry[], changes: readonly string[]): string[] {
  const touched = new Set(entries.map((e) => e.path));
  return changes.filter((c) => {
    for (let p = c;;) {
      if (touched.has(p)) return true;
      const at = p.lastIndexOf("/");
      if (at < 0) return false;
      p = p.slice(0, at);
    }
  });
}

/** A directory's own `.gitignore`, as a snapshot reads it (too large or not a file: none). */
function gitignoreOf(dir: Dir): Uint8Array | null {
  const st = dir.statAt(GITIGNORE);
  return st !== null && st.kind === "file" && st.size <= MAX_GITIGNORE_BYTES
    ? dir.readFile(GITIGNORE, MAX_GITIGNORE_BYTES)
    : null;
}

function join(rel: string, name: string): string {
  return rel === "" ? name : `${rel}/${name}`;
}

/** The entry `name` of `node`, or `null`. */
function find(node: IndexNode | null, name: string): Ent | null {
  if (node === null) return null;
  let lo = 0, hi = node.names.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    const c = compareNames(node.names[mid] as string, name);
    if (c === 0) {
      const mode = node.st[mid * STRIDE + F_MODE] as number;
      return { node, i: mid, kind: kindOf(mode), perm: mode & 0o7777 };
    }
    if (c < 0) lo = mid + 1;
    else hi = mid - 1;
  }
  return null;
}

function childOf(e: Ent | null): IndexNode | null {
  return e !== null && e.kind === KIND_DIR ? (e.node.kids[e.i] ?? IndexNode.empty()) : null;
}

function oidHex(e: Ent): string {
  return hexOf(e.node.oids.subarray(e.i * 20, e.i * 20 + 20));
}

function isRacy(ix: LayerIndex, s: Stat): boolean {
  const sec = ix.startSec, nsec = ix.startNsec;
  return s.mtimeSec > sec || (s.mtimeSec === sec && s.mtimeNsec >= nsec) ||
    s.ctimeSec > sec || (s.ctimeSec === sec && s.ctimeNsec >= nsec);
}

/** Whether the index recorded this very file (the snapshot's stat check). */
function recorded(e: Ent | null, ix: LayerIndex, st: Stat): boolean {
  return e !== null && e.kind === KIND_FILE &&
    sameLive(e.node.st, e.i * STRIDE, st, kindCode(st.kind) * 0x10000 + st.perm) &&
    !isRacy(ix, st);
}

/** The project's leaf `name` (a file or symlink) as a plan signature. */
function projectLeaf(
  ctx: Ctx,
  dir: Dir,
  name: string,
  st: Stat,
  base: Ent | null,
  target: Ent | null,
): Signature {
  if (st.kind === "symlink") return { kind: "symlink", target: linkTarget(dir, name) };
  if (recorded(base, ctx.baseIndex, st)) {
    return { kind: "file", mode: st.perm, blob: oidHex(base!) };
  }
  if (recorded(target, ctx.targetIndex, st)) {
    return { kind: "file", mode: st.perm, blob: oidHex(target!) };
  }
  using f = dir.openFile(name);
  return { kind: "file", mode: f.stat().perm, blob: blobIdOfFile(f, HEX_LENGTH) };
}

function linkTarget(dir: Dir, name: string): string {
  try {
    return fatalUtf8.decode(dir.readlink(name));
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
    throw new RefusedError(
      `the symlink ${dir.path}/${name} has a target that is not UTF-8, which checkout cannot ` +
        `compare or restore: point it elsewhere or remove it`,
      { cause: error },
    );
  }
}

/** A stack's leaf as a plan signature (a symlink's target read from its layer). */
function stackLeaf(e: Ent, at: LazyDir, name: string): Present {
  if (e.kind === KIND_SYMLINK) {
    const l = locate(at, name);
    return { kind: "symlink", target: linkTarget(l.dir, name) };
  }
  return { kind: "file", mode: e.perm & 0o777, blob: oidHex(e) };
}

/** Whether two leaves are the same state as a layer keeps it (file bits `& 0o777`). */
function sameLeaf(a: Signature, b: Signature): boolean {
  if (a.kind === "file" && b.kind === "file") {
    return a.blob === b.blob && (a.mode & 0o777) === (b.mode & 0o777);
  }
  if (a.kind === "symlink" && b.kind === "symlink") return a.target === b.target;
  return a.kind === b.kind;
}

type PKind = "file" | "dir" | "symlink" | "other" | null;

function pKindOf(st: Stat | null): PKind {
  if (st === null) return null;
  return st.kind === "file" || st.kind === "dir" || st.kind === "symlink" ? st.kind : "other";
}

function describeKind(k: number): string {
  return k === KIND_DIR ? "a directory" : k === KIND_SYMLINK ? "a symlink" : "a file";
}

/**
 * Walks one directory. `project` is absent below a path the project does
 * not hold as a directory; `base` and `target` are the indexes' nodes there
 * (`null`: none). Returns the first path below that the plan leaves in the
 * project which the target does not have (an ignored or special entry), or
 * `null`: a directory only the project has can go only when it is `null`.
 */
function walk(
  ctx: Ctx,
  rel: string,
  project: Dir | null,
  base: IndexNode | null,
  target: IndexNode | null,
  at: LazyDir,
  scope: IgnoreScope | null,
): string | null {
  const names = new Set<string>([...(base?.names ?? []), ...(target?.names ?? [])]);
  if (project !== null) {
    const listing = project.listing();
    for (const e of listing.entries) names.add(e.name);
    // A name that is not UTF-8 is never in a layer: passed over when ignored, else refused.
    passInvalid(project, rel, listing.invalid, scope);
  }
  let leftover: string | null = null;
  for (const name of [...names].sort(compareNames)) {
    if (isGitName(name) || (rel === "" && name === MARSH_DIR)) continue;
    const path = join(rel, name);
    const st = project?.statAt(name) ?? null;
    const pk = pKindOf(st);
    const b = find(base, name), t = find(target, name);
    if (b === null && t === null) {
      if (pk === null) continue;
      // Not in either root and not admitted: the session never covered it.
      if (pk === "other" || scope?.isIgnored(path, pk === "dir")) {
        leftover ??= path;
        continue;
      }
    }
    if (pk === "other") {
      if (t !== null) {
        throw new RefusedError(
          `the project has a ${st!.kind} at ${path}, where the checkpoint has ` +
            `${describeKind(t.kind)}; checkout cannot replace it: move it out of the project, ` +
            `then checkout again`,
        );
      }
      ctx.changes.push(path);
      leftover ??= path;
      continue;
    }
    const childScope = () =>
      pk === "dir" && scope !== null ? scope.enter(path, gitignoreOf(pDir!)) : null;
    let pDir: Dir | null = null;
    try {
      if (pk === "dir") pDir = project!.openDir(name);
      const left = visit(ctx, path, name, project, pDir, st, b, t, at, childScope);
      if (left !== null) leftover ??= left;
    } finally {
      pDir?.close();
    }
  }
  return leftover;
}

/** One name of a directory walk (see {@linkcode walk}); returns its leftover. */
function visit(
  ctx: Ctx,
  path: string,
  name: string,
  project: Dir | null,
  pDir: Dir | null,
  st: Stat | null,
  b: Ent | null,
  t: Ent | null,
  at: LazyDir,
  childScope: () => IgnoreScope | null,
): string | null {
  const pk = pKindOf(st);
  const tDir = t !== null && t.kind === KIND_DIR, bDir = b !== null && b.kind === KIND_DIR;
  if (pk === "dir") {
    if (b !== null && !bDir) ctx.changes.push(path);
    if (tDir) {
      using child = at.child(name);
      walk(ctx, path, pDir, childOf(b), childOf(t), child, childScope());
      return null;
    }
    // The target has no directory here: everything the session covers below goes.
    using none = new LazyDir(path, () => {
      throw new RefusedError(`${path} is not in the checkpoint`);
    });
    const left = walk(ctx, path, pDir, childOf(b), null, none, childScope());
    if (left !== null) {
      if (t === null) return left;
      throw new RefusedError(
        `checkout would replace the directory ${path} with ${describeKind(t.kind)}, but it ` +
          `holds ${left}, which the session does not cover: move it out of the project, then ` +
          `checkout again`,
      );
    }
    if (t === null) ctx.entries.push({ op: "delete", path, before: { kind: "dir" } });
    else takeLeaf(ctx, path, { kind: "dir" }, stackLeaf(t, at, name));
    return null;
  }
  const p: Signature = pk === null
    ? { kind: "absent" }
    : projectLeaf(ctx, project!, name, st!, b, t);
  // What the project changed since its line began.
  if (bDir) {
    if (pk === null) changedBelow(ctx, path, childOf(b)!);
    else ctx.changes.push(path);
  } else if (!sameAsBase(p, b)) {
    ctx.changes.push(path);
  }
  if (tDir) {
    ctx.entries.push({ op: "take", path, before: p, after: { kind: "dir" } });
    using child = at.child(name);
    walk(ctx, path, null, null, childOf(t), child, null);
    return null;
  }
  if (t === null) {
    if (p.kind !== "absent") ctx.entries.push({ op: "delete", path, before: p as Present });
    return null;
  }
  const after = stackLeaf(t, at, name);
  if (!sameLeaf(p, after)) takeLeaf(ctx, path, p, after);
  return null;
}

/**
 * Whether the project's leaf is the base's: a symlink is compared by the
 * blob id of its target, since the base is read from its index alone.
 */
function sameAsBase(p: Signature, b: Ent | null): boolean {
  if (b === null) return p.kind === "absent";
  if (b.kind === KIND_SYMLINK) {
    return p.kind === "symlink" && hexOf(blobId(enc.encode(p.target))) === oidHex(b);
  }
  return p.kind === "file" && p.blob === oidHex(b) && (p.mode & 0o777) === (b.perm & 0o777);
}

/** Every leaf of a base directory the project no longer has: each a project change. */
function changedBelow(ctx: Ctx, rel: string, node: IndexNode): void {
  for (let i = 0; i < node.names.length; i++) {
    const path = join(rel, node.names[i] as string);
    const mode = node.st[i * STRIDE + F_MODE] as number;
    if (kindOf(mode) === KIND_DIR) changedBelow(ctx, path, node.kids[i] ?? IndexNode.empty());
    else ctx.changes.push(path);
  }
}

function takeLeaf(ctx: Ctx, path: string, before: Signature, after: Present): void {
  ctx.entries.push(
    after.kind === "file"
      ? { op: "take", path, before, after, bytes: "branch" }
      : { op: "take", path, before, after },
  );
}

/**
 * The permission bits of each directory the plan makes, as the target's
 * index has them (a layer keeps a directory's live bits): the applier makes
 * them exactly, not with its umask.
 */
export function targetDirModes(plan: MergePlan, target: LayerIndex): Map<string, number> {
  const out = new Map<string, number>();
  for (const e of plan.entries) {
    if (e.op !== "take" || e.after.kind !== "dir") continue;
    let node: IndexNode | null = target.root;
    let found: Ent | null = null;
    for (const name of e.path.split("/")) {
      found = find(node, name);
      node = childOf(found);
    }
    if (found !== null && found.kind === KIND_DIR) out.set(e.path, found.perm);
  }
  return out;
}
