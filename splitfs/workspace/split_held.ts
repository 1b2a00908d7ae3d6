/**
 * What a split workspace holds (the directory descriptors opened when it was
 * made or reopened, its forks, and for a split made in this process what
 * forking and capture need) and the identity re-checks every request makes
 * through them first, so a `git clean -xfd` mid-split is noticed and nothing
 * of ours is touched by path (docs/engine.md, "Removal").
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, Stat } from "../fd/dir.ts";
import { SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { RefusedError, RejectedError, WorkspaceReplacedError } from "../errors.ts";
import type { Fork, ForkStrategy } from "../fork/fork.ts";
import type { GitSource } from "../git/git_source.ts";
import type { IgnoreInputs } from "../git/ignore_load.ts";
import type { IgnoreRules } from "../git/ignore_rules.ts";
import { DATA as LAYER_DATA, SEALED as LAYER_SEAL } from "../layers/layers.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import { type OverlayMode, UPPER_DIR } from "../fork/overlay.ts";
import type { SnapshotStats } from "../layers/snapshot.ts";
import type { ObjectStore } from "../git/store.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import { LAYERS_DIR, MARSH_DIR, OUT_DIR, OVERLAY_DIR, STORE_DIR } from "../../model/layout.ts";

/** `(dev, ino)` of a directory marsh made. */
export type Identity = readonly [bigint, bigint];

/** The identity of what `st` describes. */
export function identityOf(st: Stat): Identity {
  return [st.dev, st.ino];
}

/** Whether `st` is a directory with identity `a`. */
export function sameIdentity(a: Identity, st: Stat | null): boolean {
  return st !== null && st.kind === "dir" && a[0] === st.dev && a[1] === st.ino;
}

/** Both known and equal. */
export function sameId(a: Identity | null, b: Identity | null): boolean {
  return a !== null && b !== null && a[0] === b[0] && a[1] === b[1];
}

/** Whether opening a directory failed because it is gone or is no longer a directory. */
export function isGone(error: unknown): boolean {
  return (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) ||
    error instanceof SymlinkRefusedError || error instanceof WrongKindError;
}

/** `(dev, ino)` of a fork's overlay upper dir under `split`, or `null` when it is gone. */
export function upperIdentityOf(split: Dir, label: string): Identity | null {
  try {
    using upper = split.openPath(`${OVERLAY_DIR}/${label}/${UPPER_DIR}`);
    return identityOf(upper.stat());
  } catch (error) {
    if (isGone(error)) return null;
    throw error;
  }
}

/** A split of the user's tree's object dirs: its store's, then the user's (a Git project). */
export function ownObjectDirs(root: string, splitDir: string, isGit: boolean): string[] {
  return [`${splitDir}/${STORE_DIR}/objects`, ...(isGit ? [`${root}/.git/objects`] : [])];
}

/** A fork whose root descriptor this workspace holds. */
export interface HeldFork {
  readonly label: string;
  readonly dir: Dir;
  readonly identity: Identity;
  /** The fork as made in this process; `null` after a reopen (untrusted, never captured). */
  readonly made: Fork | null;
  /**
   * An overlay fork's upper dir identity; `null` for a copy fork, and after
   * a reopen for all but a `userns-overlay` fork (journaled by its upper dir).
   */
  readonly upper?: Identity | null;
}

/** Closes a held fork's descriptors (a fork made here closes its mount's too). */
export function closeFork(f: HeldFork): void {
  if (f.made) f.made.close();
  else f.dir.close();
}

/** A layered base: the layers it stacks and its read-only mount. */
export interface Layered {
  readonly mode: OverlayMode;
  readonly layers: readonly string[];
  /** `(dev, ino)` of each layer's data dir as opened, bottom first: re-checked before capture. */
  readonly identities: readonly Identity[];
  /** The lower dirs the mounts were made from, top first; held for new forks, closed with the split. */
  readonly lowers: readonly Dir[];
  readonly rootId: string;
  /** Files written into a new layer by this snapshot. */
  readonly copied: number;
  readonly reason: string;
  /** Why the chain's previous stack was not reused (see `LayerSnapshot.untrusted`). */
  readonly untrusted: string | null;
}

/** What only a split created in this process holds: what forking and capture need. */
export interface Engine {
  /** The base: a copied tree, or the read-only overlay mount of the layers. */
  readonly base: Dir;
  /** `null` for a copied base. */
  readonly layered: Layered | null;
  /** Why the fork strategy is what it is (for the created reply and `marsh status`). */
  readonly forkReason: string;
  readonly admins: Dir;
  readonly store: ObjectStore;
  readonly git: GitSource | null;
  readonly ignore: IgnoreInputs | null;
  /**
   * The tree-wide rules capture applies to new paths, compiled once from
   * `ignore` (the info/exclude marsh wrote, never one a branch changed).
   */
  readonly captureIgnore: IgnoreRules | null;
  /** Whether the snapshot took ignored files too (`--with-ignored`): the split covers them. */
  readonly withIgnored: boolean;
  readonly sharedIndexes: ReadonlyMap<string, Uint8Array>;
  readonly snapshot: SnapshotStats;
  readonly snapshotMs: number;
  readonly strategy: ForkStrategy;
  /** The base's stats as the snapshot made them: capture stats only the fork. */
  readonly baseIndex: StatIndex;
  /** The `.gitignore` files the snapshot read but left out, by directory: capture applies them. */
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

/** One split's descriptors and forks, as made or reopened; the workspace's requests work on it. */
export interface Held {
  readonly root: string;
  readonly id: string;
  /** `<root>/.marsh/split/<id>`. */
  readonly dirPath: string;
  readonly identity: Identity;
  /** Whether the project is a Git repository. */
  readonly isGit: boolean;
  /** A nested split's creator branch; `null` for a split of the user's tree (or reopened). */
  readonly parent: SplitParent | null;
  /** The object dirs a consumer needs, and the forks' alternates (`SplitWorkspace.objectDirs`). */
  readonly objectDirs: readonly string[];
  readonly rootDir: Dir;
  readonly marsh: Dir;
  readonly splits: Dir;
  readonly dir: Dir;
  /** `null` when a reopen found out/ missing or not a directory. */
  readonly out: Dir | null;
  /** `null` for a split reopened after a restart. */
  readonly engine: Engine | null;
  /** The forks held, in creation (or reopen) order. */
  readonly forks: Map<string, HeldFork>;
}

/**
 * The engine of a split made in this process.
 *
 * @throws {RefusedError} for a split reopened after a restart: `what` is refused
 */
export function madeEngine(held: Held, what: string): Engine {
  if (held.engine === null) {
    throw new RefusedError(
      `split ${held.id} was reopened after a restart: its forks are untrusted, so ${what} is refused`,
    );
  }
  return held.engine;
}

/**
 * The held out/ descriptor.
 *
 * @throws {RejectedError} when a reopen found none
 */
export function outDir(held: Held): Dir {
  if (held.out === null) throw new RejectedError("out/ was tampered with");
  return held.out;
}

/**
 * The held fork `label`.
 *
 * @throws {RefusedError} when this split has none
 */
export function heldFork(held: Held, label: string): HeldFork {
  const f = held.forks.get(label);
  if (!f) throw new RefusedError(`no fork "${label}" in split ${held.id}`);
  return f;
}

/**
 * The split dir under its name is the one made, and so is out/.
 *
 * @throws {WorkspaceReplacedError} otherwise
 */
export function checkSplit(held: Held): void {
  if (!sameIdentity(held.identity, held.splits.statAt(held.id))) {
    throw new WorkspaceReplacedError(`${held.dirPath} is gone or replaced`);
  }
  // A mounted fork keeps the split dir itself from being deleted by name;
  // out/ beside it can still go, and the held descriptor would read a ghost.
  if (
    held.out !== null && !sameIdentity(identityOf(held.out.stat()), held.dir.statAt(OUT_DIR))
  ) {
    throw new WorkspaceReplacedError(`${held.dirPath}/${OUT_DIR} is gone or replaced`);
  }
}

/**
 * The layers under a layered base: each still sealed, its data dir the one
 * opened at snapshot. A `git clean -xfd` deletes their files through the
 * names, and the base and every fork would silently change with them.
 *
 * @throws {WorkspaceReplacedError} otherwise
 */
export function checkLayers(held: Held, engine: Engine): void {
  const l = engine.layered;
  if (l === null) return;
  const replaced = (id: string, cause?: unknown) =>
    new WorkspaceReplacedError(
      `${held.root}/${MARSH_DIR}/${LAYERS_DIR}/${id} is gone or replaced`,
      { cause },
    );
  for (const [i, id] of l.layers.entries()) {
    try {
      using layer = held.marsh.openPath(`${LAYERS_DIR}/${id}`);
      if (layer.statAt(LAYER_SEAL)?.kind !== "file") throw replaced(id);
      if (!sameIdentity(l.identities[i]!, layer.statAt(LAYER_DATA))) throw replaced(id);
    } catch (error) {
      if (isGone(error)) throw replaced(id, error);
      throw error;
    }
  }
}

/**
 * The fork `f` is the one made (or journaled): its root, and an overlay
 * fork's upper dir, which holds the branch's work.
 *
 * @throws {WorkspaceReplacedError} otherwise
 */
export function checkFork(held: Held, f: HeldFork): void {
  const replaced = (rel: string) => new WorkspaceReplacedError(`${rel} is gone or replaced`);
  if (f.made?.mount) {
    // The upper layer is the branch's work: deleted by name, capture would see nothing.
    if (!sameId(f.upper ?? null, upperIdentityOf(held.dir, f.label))) {
      throw replaced(`${held.dirPath}/${OVERLAY_DIR}/${f.label}`);
    }
    // A branch may `umount -l` its fork: the name then shows the bare mount
    // point, while the held descriptor still reads the overlay capture needs.
    if (!sameIdentity(f.identity, f.dir.stat())) {
      throw replaced(`${held.dirPath}/${f.label}`);
    }
    return;
  }
  if (f.made === null && f.upper) {
    // A reopened userns-overlay fork: its upper dir is the one journaled.
    if (!sameId(f.upper, upperIdentityOf(held.dir, f.label))) {
      throw replaced(`${held.dirPath}/${OVERLAY_DIR}/${f.label}`);
    }
    if (held.dir.statAt(f.label)?.kind !== "dir") {
      throw replaced(`${held.dirPath}/${f.label}`);
    }
    return;
  }
  if (!sameIdentity(f.identity, held.dir.statAt(f.label))) {
    throw replaced(`${held.dirPath}/${f.label}`);
  }
}
