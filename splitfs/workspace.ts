/**
 * A split's on-disk workspace: `<root>/.marsh/split/<id>/` with its base,
 * forks, admin dirs, store and out/. Holds the directory descriptors opened
 * at creation; capture and removal go through them and re-check identities
 * first, so a `git clean -xfd` mid-split removes nothing of ours by path.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type AdminSpec, SHARED_INDEX_NAME, writeAdmin } from "./admin.ts";
import {
  type CaptureResult,
  type CaptureSummary,
  captureToDir,
  FILES_FILE,
  PATCH_FILE,
} from "./capture.ts";
import type { CandidateDir } from "./compare.ts";
import { type MissingOut, missingOut, type OutExpectation } from "./out_check.ts";
import {
  type CopyStrategy,
  Dir,
  type FileHandle,
  InvalidNameError,
  type Stat,
  SymlinkRefusedError,
  WrongKindError,
} from "./dir.ts";
import { E, FsError } from "./ffi.ts";
import { RefusedError, RejectedError, SnapshotError, WorkspaceReplacedError } from "./errors.ts";
import { CopyForkStrategy, type CopyProgress, type Fork, type ForkStrategy } from "./fork.ts";
import { parseGitConfig } from "./git_config.ts";
import type { ReadFile } from "./git_reader.ts";
import {
  GITFILE_ROOT_REFUSAL,
  GitMetadataError,
  type GitSource,
  MAX_CONFIG_BYTES,
  MAX_INDEX_BYTES,
  readGitSource,
} from "./git_source.ts";
import {
  type IgnoreInputs,
  ignoreRulesOf,
  loadIgnoreInputs,
  MAX_EXCLUDES_BYTES,
} from "./ignore_load.ts";
import { exportPatchObjects, type ExportSummary, storesSha1 } from "./object_export.ts";
import { readOutFile } from "./out_read.ts";
import { readRel } from "./read_rel.ts";
import { type Emit, type RenderBranch, renderBranches } from "./render.ts";
import {
  ADMIN_DIR,
  BASE_DIR,
  labelProblem,
  LAYERS_DIR,
  LAYERS_FILE,
  MARSH_DIR,
  OUT_DIR,
  OVERLAY_DIR,
  SPLIT_DIR,
  splitIdProblem,
  STORE_DIR,
  TRASH_DIR,
} from "../model/layout.ts";
import { GIT_NAME, type Progress, type SnapshotStats, takeSnapshot } from "./snapshot.ts";
import type { ForkPolicy } from "../protocol/splitfs.ts";
import type { SplitParent } from "../protocol/splitfs_fields.ts";
import { DATA as LAYER_DATA, ignoreKeyOf, LayerStore, SEALED as LAYER_SEAL } from "./layers.ts";
import { MountPointError } from "./mount_boundary.ts";
import { isSplitOverlay, refuseForeignMounts, unmountSplit } from "./split_mounts.ts";
import {
  mountReadOnly,
  OverlayForkStrategy,
  type OverlayMode,
  probeOverlay,
  removeOverlayFork,
  UPPER_DIR,
} from "./overlay.ts";
import { ObjectStore } from "./store.ts";
import { type ForkGit, setAsideForkGit, setAsideNestedGits, verifyForkGit } from "./quarantine.ts";
import { ensureObjectsLink } from "./objects_link.ts";
import { alternateOf } from "../protocol/fork_view.ts";
import type { StatIndex } from "./old_tree.ts";

/** `(dev, ino)` of a directory marsh made. */
export type Identity = readonly [bigint, bigint];

/** How to create a split workspace. */
export interface CreateOptions {
  /** The project root, absolute. */
  readonly root: string;
  readonly id: string;
  /** The environment used to find global Git excludes (`HOME`, `XDG_CONFIG_HOME`). */
  readonly env?: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
  readonly copyStrategy?: CopyStrategy;
  readonly progress?: Progress;
  /** Snapshot ignored files too (`--with-ignored`). */
  readonly withIgnored?: boolean;
  /**
   * `auto`: a layered snapshot and overlay forks where this host can mount
   * them, else copies; `copy` (the default here): a copied base and copy forks.
   * Not consulted for a nested split (its forks are always copies).
   */
  readonly forks?: ForkPolicy;
  /**
   * A nested split (spec 000 §2, §8 ChildFromParent): the creator branch
   * whose fork `<root>/.marsh/split/<split>/<label>` is the snapshot source.
   * The new split is still `<root>/.marsh/split/<id>` (a sibling); its Git
   * metadata is read from the creator's admin dir `.admin/<label>/`.
   */
  readonly parent?: NestedParent;
  /**
   * Called with the project's `.marsh` as soon as it is open (made if new),
   * before anything is written there: the service takes the project's lock
   * here (splitfs/project_lock.ts); a throw refuses the split.
   */
  readonly onMarsh?: (marsh: Dir) => void;
}

/** The creator of a nested split, as {@linkcode CreateOptions.parent} takes it. */
export interface NestedParent extends SplitParent {
  /**
   * The creator split's {@linkcode SplitWorkspace.objectDirs} when it is
   * known (it is open in this process); by default its `store.git/objects`
   * and the user's `.git/objects`. The creator fork's own `objects` dir (its
   * branch's commits) is added either way.
   */
  readonly objectDirs?: readonly string[];
}

/** A split of the user's tree's object dirs: its store's, then the user's (a Git project). */
function ownObjectDirs(root: string, splitDir: string, isGit: boolean): string[] {
  return [`${splitDir}/${STORE_DIR}/objects`, ...(isGit ? [`${root}/.git/objects`] : [])];
}

/** Why a nested split's forks are what they are. */
export const NESTED_FORK_REASON =
  "a nested split's forks are copies: the project's layer chains belong to the user's tree";

/** How to reopen a split after a daemon restart (spec 000 §6). */
export interface OpenOptions {
  /** The project root the split was created in, absolute (as journaled). */
  readonly root: string;
  readonly id: string;
  /** The split dir's `(dev, ino)` as journaled. */
  readonly identity: Identity;
  /**
   * The forks the journal knows, with their identities and strategies as
   * {@linkcode SplitWorkspace.fork} gave them; unlisted forks are not held.
   */
  readonly forks: readonly {
    readonly label: string;
    readonly identity: Identity;
    readonly strategy?: string;
  }[];
  /** Whether the project is a Git repository (for {@linkcode SplitWorkspace.objectDirs}). */
  readonly git: boolean;
}

/** The files `publish` writes under `out/<label>/` (spec 000 §5). */
export const STATUS_FILE = "status";
export const STDOUT_FILE = "stdout";
export const STDERR_FILE = "stderr";
/** `out/manifest.json`, replaced atomically through a temporary file. */
export const MANIFEST_FILE = "manifest.json";
const MANIFEST_TMP = "manifest.json.tmp";

/** A fork plus what the journal needs to know about it. */
export interface ForkInfo {
  readonly label: string;
  readonly path: string;
  readonly strategy: Fork["strategy"];
  /**
   * What {@linkcode SplitWorkspace.open} checks: the fork root's `(dev, ino)`;
   * for `userns-overlay`, its upper dir's. That mount lives in the service's
   * user and mount namespace and dies with it, so after a restart the fork's
   * name shows the bare mount point while the upper dir holds the branch's work.
   */
  readonly identity: Identity;
}

function identityOf(st: Stat): Identity {
  return [st.dev, st.ino];
}

function sameIdentity(a: Identity, st: Stat | null): boolean {
  return st !== null && st.kind === "dir" && a[0] === st.dev && a[1] === st.ino;
}

const enc = new TextEncoder();

/** A fork whose root descriptor this workspace holds. */
interface HeldFork {
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

/** A layered base: the layers it stacks and its read-only mount. */
interface Layered {
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
interface Engine {
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
  readonly sharedIndexes: ReadonlyMap<string, Uint8Array>;
  readonly snapshot: SnapshotStats;
  readonly snapshotMs: number;
  readonly strategy: ForkStrategy;
  /** The base's stats as the snapshot made them: capture stats only the fork. */
  readonly baseIndex: StatIndex;
  /** The `.gitignore` files the snapshot read but left out, by directory: capture applies them. */
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

/** One split's workspace and the descriptors opened when it was made (or reopened). */
export class SplitWorkspace implements Disposable {
  readonly root: string;
  readonly id: string;
  readonly dirPath: string;
  readonly identity: Identity;
  /** Whether the project is a Git repository. */
  readonly isGit: boolean;
  /** A nested split's creator branch; `null` for a split of the user's tree (or reopened). */
  readonly parent: SplitParent | null;
  readonly #objectDirs: readonly string[];
  readonly #rootDir: Dir;
  readonly #marsh: Dir;
  readonly #splits: Dir;
  readonly #dir: Dir;
  /** `null` when a reopen found out/ missing or not a directory. */
  readonly #out: Dir | null;
  /** `null` for a split reopened after a restart. */
  readonly #engine: Engine | null;
  readonly #forks = new Map<string, HeldFork>();

  private constructor(init: {
    root: string;
    id: string;
    identity: Identity;
    isGit: boolean;
    rootDir: Dir;
    marsh: Dir;
    splits: Dir;
    dir: Dir;
    out: Dir | null;
    engine: Engine | null;
    parent?: SplitParent | null;
    objectDirs?: readonly string[];
  }) {
    this.root = init.root;
    this.id = init.id;
    this.dirPath = `${init.root}/${MARSH_DIR}/${SPLIT_DIR}/${init.id}`;
    this.identity = init.identity;
    this.isGit = init.isGit;
    this.parent = init.parent ?? null;
    this.#objectDirs = init.objectDirs ?? ownObjectDirs(init.root, this.dirPath, init.isGit);
    this.#rootDir = init.rootDir;
    this.#marsh = init.marsh;
    this.#splits = init.splits;
    this.#dir = init.dir;
    this.#out = init.out;
    this.#engine = init.engine;
  }

  /**
   * Creates `.marsh/split/<id>/` and takes the snapshot. All or nothing: on
   * failure the partial split directory is removed and the error rethrown.
   *
   * @throws {SnapshotError} for a refused root or a file that kept changing
   */
  static create(opts: CreateOptions): SplitWorkspace {
    const idProblem = splitIdProblem(opts.id);
    if (idProblem) throw new SnapshotError(idProblem);
    const parent = opts.parent ?? null;
    if (parent) {
      const problem = splitIdProblem(parent.split) ?? labelProblem(parent.label);
      if (problem) throw new SnapshotError(`invalid parent: ${problem}`);
      if (parent.split === opts.id) {
        throw new SnapshotError(`split ${opts.id} cannot be its own parent`);
      }
    }
    const root = Dir.realPath(opts.root);
    const rootDir = Dir.openAbsolute(root);
    const opened: Disposable[] = [rootDir];
    let splits: Dir | undefined;
    let created = false;
    // A nested split's source: the creator split's dir and its fork, held for the snapshot only.
    let nested: { parentDir: Dir; fork: Dir } | null = null;
    try {
      const gitKind = rootDir.statAt(".git")?.kind;
      if (gitKind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
      if (gitKind !== undefined && gitKind !== "dir") {
        throw new SnapshotError(`project root .git is a ${gitKind}, not a directory: ${root}/.git`);
      }
      const isGit = gitKind === "dir";
      let marsh: Dir;
      if (parent) {
        const source = openNestedSource(rootDir, root, parent);
        marsh = source.marsh;
        splits = source.splits;
        opened.push(marsh, splits);
        nested = { parentDir: source.parentDir, fork: source.fork };
        opened.push(nested.parentDir, nested.fork);
        opts.onMarsh?.(marsh);
      } else {
        marsh = rootDir.ensureDir(MARSH_DIR, 0o755);
        opened.push(marsh);
        opts.onMarsh?.(marsh);
        if (isGit && marsh.statAt(".gitignore") === null) {
          marsh.writeNewFile(".gitignore", enc.encode("*\n"));
        }
        splits = marsh.ensureDir(SPLIT_DIR, 0o755);
        opened.push(splits);
      }
      try {
        splits.mkdir(opts.id, 0o755);
        created = true;
      } catch (error) {
        if (error instanceof FsError && error.errno === E.EEXIST) {
          throw new SnapshotError(`split ${opts.id} already exists in ${root}`, { cause: error });
        }
        throw error;
      }
      const dir = splits.openDir(opts.id);
      opened.push(dir);
      // The forks' alternates name the user's objects through .marsh (protocol/fork_view.ts).
      if (isGit) ensureObjectsLink(marsh);
      const dirPath = `${root}/${MARSH_DIR}/${SPLIT_DIR}/${opts.id}`;
      let git: GitSource | null;
      let ignore: IgnoreInputs | null;
      let sharedIndexes: Map<string, Uint8Array>;
      let objectDirs: string[];
      if (parent && nested) {
        const meta = readNestedGit(rootDir, root, nested.parentDir, parent, isGit, opts.env ?? {});
        git = meta.git;
        ignore = meta.ignore;
        sharedIndexes = meta.sharedIndexes;
        const parentPath = `${root}/${MARSH_DIR}/${SPLIT_DIR}/${parent.split}`;
        const inherited = parent.objectDirs ?? ownObjectDirs(root, parentPath, isGit);
        objectDirs = unique([
          `${dirPath}/${STORE_DIR}/objects`,
          ...inherited,
          ...(meta.forkObjects ? [`${parentPath}/${ADMIN_DIR}/${parent.label}/objects`] : []),
        ]);
      } else {
        git = isGit ? readGitSource((rel, max) => readRel(rootDir, rel, max)) : null;
        ignore = git ? loadIgnoreInputs(rootDir, root, git, opts.env ?? {}) : null;
        sharedIndexes = git?.index ? readSharedIndexes(rootDir, GIT_NAME) : new Map();
        objectDirs = ownObjectDirs(root, dirPath, isGit);
      }
      dir.mkdir(BASE_DIR, 0o755);
      const t0 = performance.now();
      const rules = ignore && !opts.withIgnored ? ignoreRulesOf(ignore) : null;
      const choice = parent
        ? { mode: null, reason: NESTED_FORK_REASON }
        : opts.forks === "auto"
        ? chooseForks(marsh)
        : { mode: null, reason: "copy forks were asked for (MARSH_FORKS=copy)" };
      let base: Dir;
      let baseIndex: StatIndex;
      let prunedIgnores: ReadonlyMap<string, Uint8Array>;
      let snapshot: SnapshotStats;
      let layered: Layered | null = null;
      let strategy: ForkStrategy;
      if (choice.mode !== null) {
        using store = LayerStore.open(marsh);
        const snap = store.snapshot({
          source: rootDir,
          ignore: rules,
          skipTop: new Set([MARSH_DIR]),
          chain: opts.withIgnored ? "with-ignored" : "tracked",
          ignoreKey: ignoreKeyOf(opts.withIgnored ? null : ignore),
          progress: opts.progress,
        });
        // Recorded before anything is mounted: the collector keeps what a split dir names.
        dir.writeNewFile(LAYERS_FILE, enc.encode(`${snap.layers.join("\n")}\n`), 0o644);
        const lowers = [...snap.layers].reverse().map((id) => store.openData(id));
        opened.push(...lowers);
        if (lowers.length < 2) {
          const empty = store.emptyLayer();
          opened.push(empty);
          lowers.push(empty);
        }
        {
          using target = dir.openDir(BASE_DIR);
          mountReadOnly(choice.mode, lowers, target);
        }
        base = dir.openDir(BASE_DIR);
        baseIndex = snap.index;
        prunedIgnores = snap.prunedIgnores;
        snapshot = snap.stats;
        layered = {
          mode: choice.mode,
          layers: snap.layers,
          identities: lowers.slice(0, snap.layers.length).reverse().map((d) =>
            identityOf(d.stat())
          ),
          rootId: snap.rootId,
          copied: snap.stats.copied,
          reason: choice.reason,
          untrusted: snap.untrusted,
          lowers,
        };
        strategy = new OverlayForkStrategy(choice.mode, lowers.slice(0, snap.layers.length));
      } else {
        base = dir.openDir(BASE_DIR);
        baseIndex = new Map();
        const pruned = new Map<string, Uint8Array>();
        prunedIgnores = pruned;
        snapshot = takeSnapshot({
          index: baseIndex,
          prunedIgnores: pruned,
          source: nested?.fork ?? rootDir,
          dest: base,
          ignore: rules,
          // A fork's top-level .git is its gitfile (the creator's admin dir is read as data).
          skipTop: new Set(nested ? [MARSH_DIR, GIT_NAME] : [MARSH_DIR]),
          strategy: opts.copyStrategy,
          progress: opts.progress,
        });
        strategy = new CopyForkStrategy(opts.copyStrategy);
      }
      if (nested) {
        nested.fork.close();
        nested.parentDir.close();
        nested = null;
      }
      opened.push(base);
      const snapshotMs = performance.now() - t0;
      const store = ObjectStore.create(dir, STORE_DIR);
      opened.push(store);
      const admins = dir.ensureDir(ADMIN_DIR, 0o755);
      opened.push(admins);
      const out = dir.ensureDir(OUT_DIR, 0o755);
      opened.push(out);
      return new SplitWorkspace({
        root,
        id: opts.id,
        identity: identityOf(dir.stat()),
        isGit,
        rootDir,
        marsh,
        splits,
        dir,
        out,
        parent: parent ? { split: parent.split, label: parent.label } : null,
        objectDirs,
        engine: {
          base,
          layered,
          forkReason: choice.reason,
          admins,
          store,
          git,
          sharedIndexes,
          ignore,
          snapshot,
          snapshotMs,
          strategy,
          baseIndex,
          prunedIgnores,
        },
      });
    } catch (error) {
      // Our own descriptors first: a mount we hold open cannot be unmounted.
      for (const d of opened.reverse()) d[Symbol.dispose]();
      if (created) {
        const dirPath = `${root}/${MARSH_DIR}/${SPLIT_DIR}/${opts.id}`;
        try {
          unmountSplit(dirPath, `rm -r ${dirPath}`);
        } catch (cause) {
          throw new SnapshotError(`${error}; the partial split ${opts.id} is still mounted`, {
            cause,
          });
        }
        using marsh = Dir.openAbsolute(`${root}/${MARSH_DIR}`);
        using splitsAgain = marsh.openDir(SPLIT_DIR);
        removePartial(splitsAgain, opts.id, error);
      }
      throw error;
    }
  }

  /**
   * Opens an existing split after a daemon restart, through no-follow
   * descriptors from the root, and checks the split dir's and each listed
   * fork's `(dev, ino)`. Removal, `publish`, `manifest` and `render` work on
   * the result; forking and capture are refused (its forks are untrusted).
   * Forks gone but not listed are fine; out/ missing is reported when it is
   * needed.
   *
   * @throws {WorkspaceReplacedError} when the split dir or a listed fork is
   *   missing or not the one journaled; nothing is changed
   * @throws {RefusedError} for an invalid id or label
   */
  static open(opts: OpenOptions): SplitWorkspace {
    const idProblem = splitIdProblem(opts.id);
    if (idProblem) throw new RefusedError(idProblem);
    const seen = new Set<string>();
    for (const f of opts.forks) {
      const problem = labelProblem(f.label);
      if (problem) throw new RefusedError(problem);
      if (seen.has(f.label)) throw new RefusedError(`duplicate label "${f.label}"`);
      seen.add(f.label);
    }
    if (!opts.root.startsWith("/")) {
      throw new RefusedError(`project root is not an absolute path: ${opts.root}`);
    }
    const dirPath = `${opts.root}/${MARSH_DIR}/${SPLIT_DIR}/${opts.id}`;
    const opened: Dir[] = [];
    const existing = (what: string, open: () => Dir): Dir => {
      let d: Dir;
      try {
        d = open();
      } catch (error) {
        if (
          (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) ||
          error instanceof SymlinkRefusedError || error instanceof WrongKindError
        ) {
          throw new WorkspaceReplacedError(`${what} is gone or replaced`, { cause: error });
        }
        throw error;
      }
      opened.push(d);
      return d;
    };
    try {
      const rootDir = existing(opts.root, () => Dir.openAbsolute(opts.root));
      const marsh = existing(`${opts.root}/${MARSH_DIR}`, () => rootDir.openDir(MARSH_DIR));
      const splits = existing(`${marsh.path}/${SPLIT_DIR}`, () => marsh.openDir(SPLIT_DIR));
      const dir = existing(dirPath, () => splits.openDir(opts.id));
      if (!sameIdentity(opts.identity, dir.stat())) {
        throw new WorkspaceReplacedError(`${dirPath} is gone or replaced`);
      }
      const forks: HeldFork[] = [];
      for (const f of opts.forks) {
        const fd = existing(`${dirPath}/${f.label}`, () => dir.openDir(f.label));
        if (f.strategy === "userns-overlay") {
          // Its mount died with the old service's namespace (the name shows the
          // bare mount point) or is still up in this one: the upper dir is what
          // the journal names either way.
          if (!sameId(f.identity, upperIdentityOf(dir, f.label))) {
            throw new WorkspaceReplacedError(
              `${dirPath}/${OVERLAY_DIR}/${f.label}/${UPPER_DIR} is gone or replaced`,
            );
          }
          forks.push({
            label: f.label,
            dir: fd,
            identity: f.identity,
            made: null,
            upper: f.identity,
          });
          continue;
        }
        if (!sameIdentity(f.identity, fd.stat())) {
          throw new WorkspaceReplacedError(`${dirPath}/${f.label} is gone or replaced`);
        }
        forks.push({ label: f.label, dir: fd, identity: f.identity, made: null });
      }
      let out: Dir | null = null;
      try {
        out = dir.openDir(OUT_DIR);
        opened.push(out);
      } catch (error) {
        // Reported as tampering by the requests that need out/; removal does not.
        if (
          !(error instanceof FsError && error.errno === E.ENOENT) &&
          !(error instanceof SymlinkRefusedError) && !(error instanceof WrongKindError)
        ) throw error;
      }
      const ws = new SplitWorkspace({
        root: opts.root,
        id: opts.id,
        identity: opts.identity,
        isGit: opts.git,
        rootDir,
        marsh,
        splits,
        dir,
        out,
        engine: null,
      });
      for (const f of forks) ws.#forks.set(f.label, f);
      return ws;
    } catch (error) {
      for (const d of opened.reverse()) d.close();
      throw error;
    }
  }

  #made(what: string): Engine {
    if (this.#engine === null) {
      throw new RefusedError(
        `split ${this.id} was reopened after a restart: its forks are untrusted, so ${what} is refused`,
      );
    }
    return this.#engine;
  }

  /** The caller's Git source; `null` without Git. Only for a split created in this process. */
  get git(): GitSource | null {
    return this.#made("reading its Git source").git;
  }

  /** What the snapshot copied. Only for a split created in this process. */
  get snapshot(): SnapshotStats {
    return this.#made("reading its snapshot").snapshot;
  }

  /** The fork strategy this split's forks use, and why. Only for a split created in this process. */
  get forkChoice(): { readonly strategy: string; readonly reason: string } {
    const e = this.#made("reading its fork strategy");
    return { strategy: e.layered?.mode ?? "copy", reason: e.forkReason };
  }

  /** The layered base, or `null` for a copied one. Only for a split created in this process. */
  get layers(): Layered | null {
    return this.#made("reading its layers").layered;
  }

  /** How long the snapshot took. Only for a split created in this process. */
  get timing(): { readonly snapshotMs: number } {
    return { snapshotMs: this.#made("reading its timing").snapshotMs };
  }

  /**
   * Absolute object directories a consumer needs for `git apply --3way`, and
   * the forks' alternates: the split's store, then the user's objects; for a
   * nested split its store, then its creator's object dirs and the creator
   * fork's own `objects`. After a reopen, the store and the user's objects.
   */
  get objectDirs(): string[] {
    return [...this.#objectDirs];
  }

  /** The labels of the forks held, in creation (or reopen) order. */
  get labels(): string[] {
    return [...this.#forks.keys()];
  }

  #adminSpec(engine: Engine, label: string): AdminSpec {
    return {
      adminPath: `${this.dirPath}/${ADMIN_DIR}/${label}`,
      head: engine.git?.head ?? null,
      objectFormat: engine.git?.objectFormat ?? "sha1",
      index: engine.git?.index ?? null,
      sharedIndexes: engine.sharedIndexes,
      packedRefs: engine.git?.packedRefs ?? null,
      infoExclude: engine.ignore?.infoExclude ?? null,
      alternates: this.objectDirs.map(alternateOf),
    };
  }

  /**
   * Makes the fork `<label>` (and its Git metadata for a Git project).
   * `progress` is called after each file copied. Each fork gets its own
   * copy of the index (`writeAdmin`).
   */
  fork(label: string, opts: { progress?: CopyProgress } = {}): ForkInfo {
    const problem = labelProblem(label);
    if (problem) throw new SnapshotError(problem);
    const engine = this.#made("forking");
    if (this.#forks.has(label)) throw new SnapshotError(`duplicate label "${label}"`);
    this.#checkSplit();
    const out = this.#outDir();
    const made = engine.strategy.create(this.#dir, engine.base, label, opts.progress);
    try {
      if (engine.git) {
        writeAdmin(engine.admins, label, made.dir, this.#adminSpec(engine, label));
      }
      out.mkdir(label, 0o755);
      // A marker written after the copy: its ctime is the fork's ready time on
      // the file system's own clock, the clock that stamps the branch's writes.
      out.openDir(label).close();
      const readyNs = out.statAt(label)!.ctimeNs;
      const upper = made.mount ? upperIdentityOf(this.#dir, label) : null;
      this.#forks.set(label, {
        label,
        dir: made.dir,
        identity: made.identity,
        made: { ...made, readyNs },
        upper,
      });
    } catch (error) {
      made.close();
      if (made.mount) removeOverlayFork(this.#dir, label, made.mount);
      throw error;
    }
    const upper = this.#forks.get(label)!.upper;
    return {
      label,
      path: `${this.dirPath}/${label}`,
      strategy: made.strategy,
      identity: made.strategy === "userns-overlay" && upper ? upper : made.identity,
    };
  }

  #checkSplit(): void {
    if (!sameIdentity(this.identity, this.#splits.statAt(this.id))) {
      throw new WorkspaceReplacedError(`${this.dirPath} is gone or replaced`);
    }
    // A mounted fork keeps the split dir itself from being deleted by name;
    // out/ beside it can still go, and the held descriptor would read a ghost.
    if (
      this.#out !== null && !sameIdentity(identityOf(this.#out.stat()), this.#dir.statAt(OUT_DIR))
    ) {
      throw new WorkspaceReplacedError(`${this.dirPath}/${OUT_DIR} is gone or replaced`);
    }
  }

  /**
   * The layers under a layered base: each still sealed, its data dir the one
   * opened at snapshot. A `git clean -xfd` deletes their files through the
   * names, and the base and every fork would silently change with them.
   */
  #checkLayers(engine: Engine): void {
    const l = engine.layered;
    if (l === null) return;
    const replaced = (id: string, cause?: unknown) =>
      new WorkspaceReplacedError(
        `${this.root}/${MARSH_DIR}/${LAYERS_DIR}/${id} is gone or replaced`,
        {
          cause,
        },
      );
    for (const [i, id] of l.layers.entries()) {
      try {
        using layer = this.#marsh.openPath(`${LAYERS_DIR}/${id}`);
        if (layer.statAt(LAYER_SEAL)?.kind !== "file") throw replaced(id);
        if (!sameIdentity(l.identities[i]!, layer.statAt(LAYER_DATA))) throw replaced(id);
      } catch (error) {
        if (isGone(error)) throw replaced(id, error);
        throw error;
      }
    }
  }

  #checkFork(f: HeldFork): void {
    if (f.made?.mount) {
      // The upper layer is the branch's work: deleted by name, capture would see nothing.
      if (!sameId(f.upper ?? null, upperIdentityOf(this.#dir, f.label))) {
        throw new WorkspaceReplacedError(
          `${this.dirPath}/${OVERLAY_DIR}/${f.label} is gone or replaced`,
        );
      }
      // A branch may `umount -l` its fork: the name then shows the bare mount
      // point, while the held descriptor still reads the overlay capture needs.
      if (!sameIdentity(f.identity, f.dir.stat())) {
        throw new WorkspaceReplacedError(`${this.dirPath}/${f.label} is gone or replaced`);
      }
      return;
    }
    if (f.made === null && f.upper) {
      // A reopened userns-overlay fork: its upper dir is the one journaled.
      if (!sameId(f.upper, upperIdentityOf(this.#dir, f.label))) {
        throw new WorkspaceReplacedError(
          `${this.dirPath}/${OVERLAY_DIR}/${f.label} is gone or replaced`,
        );
      }
      if (this.#dir.statAt(f.label)?.kind !== "dir") {
        throw new WorkspaceReplacedError(`${this.dirPath}/${f.label} is gone or replaced`);
      }
      return;
    }
    if (!sameIdentity(f.identity, this.#dir.statAt(f.label))) {
      throw new WorkspaceReplacedError(`${this.dirPath}/${f.label} is gone or replaced`);
    }
  }

  #fork(label: string): HeldFork {
    const f = this.#forks.get(label);
    if (!f) throw new RefusedError(`no fork "${label}" in split ${this.id}`);
    return f;
  }

  #outDir(): Dir {
    if (this.#out === null) throw new RejectedError("out/ was tampered with");
    return this.#out;
  }

  /**
   * Verifies and captures a fork into `out/<label>/`. A fork whose Git
   * metadata fails verification is still captured, its result marked
   * `rejected` (untrusted), and that metadata is set aside so a host Git in
   * the kept fork meets nothing the branch wrote (see `setAsideForkGit` in quarantine.ts).
   *
   * @throws {WorkspaceReplacedError} when the split dir or the fork was replaced
   * @throws {RejectedError} when the tree cannot be captured (a nested `.git`,
   *   a name that is not UTF-8, a capture limit)
   * @throws {RefusedError} for a split reopened after a restart
   */
  capture(label: string, opts: { textDiffTimeoutMs?: number } = {}): CaptureResult {
    const engine = this.#made("capture");
    const held = this.#fork(label);
    const f = held.made!;
    this.#checkSplit();
    this.#checkFork(held);
    this.#checkLayers(engine);
    const git: ForkGit = {
      admins: engine.admins,
      label,
      fork: f.dir,
      spec: engine.git ? this.#adminSpec(engine, label) : null,
      path: `${this.dirPath}/${label}`,
    };
    const rejected = verifyForkGit(git, (error) => this.#shown(error, label));
    let summary: CaptureSummary;
    // Where capture looks, and so where a rejected fork's nested .git is searched for.
    let scope: CandidateDir = "all";
    try {
      using out = this.#openOut(label);
      // An overlay fork names what its branch touched: only those paths are compared.
      const candidates = f.candidates();
      if (candidates.kind === "tree") scope = candidates.tree;
      summary = captureToDir(
        {
          candidates: scope,
          old: engine.base,
          oldIndex: engine.baseIndex,
          new: f.dir,
          readyNs: f.readyNs,
          nestedGit: "reject",
          // The info/exclude marsh wrote, never one the branch changed.
          newIgnore: engine.ignore ? ignoreRulesOf(engine.ignore) : null,
          prunedIgnores: engine.prunedIgnores,
        },
        out,
        engine.store,
        opts.textDiffTimeoutMs,
      );
    } catch (error) {
      const refused = error instanceof InvalidNameError
        ? new RejectedError(
          `file name is not valid UTF-8: ${this.#shown(error, label)}${
            error.fix ? `; ${error.fix}` : ""
          }`,
          { cause: error },
        )
        : error;
      if (rejected !== null) setAsideForkGit(git, rejected);
      if (!(refused instanceof RejectedError)) throw refused;
      const reason = rejected === null ? refused.reason : `${rejected}; ${refused.reason}`;
      // The walk stopped there: a nested .git (a cloned dependency) may be kept in the fork.
      setAsideNestedGits(git, scope, reason);
      throw rejected === null ? refused : new RejectedError(reason, { cause: refused });
    }
    if (rejected !== null) setAsideForkGit(git, rejected);
    return { ...summary, rejected };
  }

  /** Where a name that is not UTF-8 was found, relative to the split dir. */
  #shown(error: InvalidNameError, label: string): string {
    // An overlay fork's candidates are listed in its upper layer: name the fork instead.
    const upper = `${OVERLAY_DIR}/${label}/${UPPER_DIR}`;
    let where = error.dir.slice(this.dirPath.length + 1);
    if (where === upper || where.startsWith(`${upper}/`)) {
      where = label + where.slice(upper.length);
    }
    return `${where}/${error.shown}`;
  }

  #openOut(label: string): Dir {
    let out: Dir;
    try {
      out = this.#outDir().openDir(label);
    } catch (cause) {
      throw new RejectedError(`out/${label} was tampered with`, { cause });
    }
    // Capture creates its results O_EXCL, so one already there (a planted
    // symlink above all) would fail it anyway; say what happened.
    for (const name of [PATCH_FILE, FILES_FILE]) {
      if (out.statAt(name) !== null) {
        out.close();
        throw new RejectedError(`out/${label} was tampered with`, {
          cause: new Error(`out/${label}/${name} existed before capture`),
        });
      }
    }
    return out;
  }

  /**
   * Writes a branch's `out/<label>/status` (the status and a newline) and
   * copies its attempt output files (absolute paths outside the project;
   * `null` for an empty file) to `out/<label>/stdout` and `stderr`, each
   * created `O_EXCL` through the held out/ descriptor and streamed, never
   * read whole. `out/<label>/` is made when the branch never had a fork. All
   * or nothing: on failure the files written here are removed.
   *
   * @throws {RejectedError} `out/<label> was tampered with` when something
   *   is planted in or at `out/<label>`
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   * @throws {FsError} when an attempt file cannot be read
   */
  publish(
    label: string,
    status: string,
    outputs: { readonly stdout: string | null; readonly stderr: string | null },
  ): void {
    const problem = labelProblem(label);
    if (problem) throw new RefusedError(problem);
    this.#checkSplit();
    const tampered = (cause: unknown) =>
      new RejectedError(`out/${label} was tampered with`, { cause });
    let dir: Dir;
    try {
      dir = this.#outDir().ensureDir(label, 0o755);
    } catch (error) {
      if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
        throw tampered(error);
      }
      throw error;
    }
    using _dir = dir;
    const names = [STATUS_FILE, STDOUT_FILE, STDERR_FILE];
    for (const name of names) {
      if (dir.statAt(name) !== null) {
        throw tampered(new Error(`out/${label}/${name} existed before publish`));
      }
    }
    // Open both sources first: a missing attempt file fails before anything is written.
    const sources: (FileHandle | null)[] = [];
    const created: string[] = [];
    try {
      for (const path of [outputs.stdout, outputs.stderr]) {
        sources.push(path === null ? null : Dir.openAbsoluteFile(path));
      }
      const create = (name: string): FileHandle => {
        try {
          const file = dir.createFile(name, 0o644);
          created.push(name);
          return file;
        } catch (error) {
          if (
            error instanceof SymlinkRefusedError ||
            (error instanceof FsError && error.errno === E.EEXIST)
          ) throw tampered(error);
          throw error;
        }
      };
      {
        using file = create(STATUS_FILE);
        file.writeAll(enc.encode(`${status}\n`));
      }
      for (const [i, name] of [STDOUT_FILE, STDERR_FILE].entries()) {
        using file = create(name);
        sources[i]?.copyTo(file);
      }
    } catch (error) {
      undoCreated(dir, created, error);
      throw error;
    } finally {
      for (const s of sources) s?.close();
    }
  }

  /**
   * The branches whose `out/<label>/` lacks a file a consumer is promised
   * (see `out_check.ts`); empty when `out/` is complete.
   *
   * @throws {RefusedError} for a label that is not one
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   */
  missingOut(expect: readonly OutExpectation[]): MissingOut[] {
    for (const e of expect) {
      const problem = labelProblem(e.label);
      if (problem) throw new RefusedError(problem);
    }
    this.#checkSplit();
    return missingOut(this.#outDir(), expect);
  }

  /**
   * Writes `out/manifest.json` atomically: `manifest.json.tmp` is created
   * `O_EXCL`, written and synced, then renamed over `manifest.json`.
   *
   * @throws {RejectedError} `out/ was tampered with` when `manifest.json` is
   *   not a regular file (a planted symlink or directory)
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   */
  writeManifest(json: string): void {
    this.#checkSplit();
    const out = this.#outDir();
    const tampered = (cause: unknown) => new RejectedError("out/ was tampered with", { cause });
    const current = out.statAt(MANIFEST_FILE);
    if (current !== null && current.kind !== "file") {
      throw tampered(new Error(`out/${MANIFEST_FILE} is a ${current.kind}`));
    }
    // A temporary file left by a crash mid-write; a directory there was planted.
    const stale = out.statAt(MANIFEST_TMP);
    if (stale !== null) {
      if (stale.kind === "dir") throw tampered(new Error(`out/${MANIFEST_TMP} is a directory`));
      out.unlink(MANIFEST_TMP);
    }
    let file: FileHandle;
    try {
      file = out.createFile(MANIFEST_TMP, 0o644);
    } catch (error) {
      if (
        error instanceof SymlinkRefusedError ||
        (error instanceof FsError && error.errno === E.EEXIST)
      ) throw tampered(error);
      throw error;
    }
    try {
      try {
        file.writeAll(enc.encode(json));
        file.sync();
      } finally {
        file.close();
      }
      out.renameReplacing(MANIFEST_TMP, out, MANIFEST_FILE);
    } catch (error) {
      undoCreated(out, [MANIFEST_TMP], error);
      throw error;
    }
  }

  /**
   * Streams the text rendering of `branches` (spec 000 §13 "Rendering") to
   * `emit`, reading each `out/<label>/diff.patch` through the held out/
   * descriptor in bounded pieces. With `terminal`, control bytes are escaped.
   *
   * @throws {RejectedError} for a tampered out/ (before anything is emitted)
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   * @returns the sum of the branches' changed paths
   */
  render(branches: readonly RenderBranch[], terminal: boolean, emit: Emit): number {
    const seen = new Set<string>();
    for (const b of branches) {
      const problem = labelProblem(b.label);
      if (problem) throw new RefusedError(problem);
      if (seen.has(b.label)) throw new RefusedError(`duplicate label "${b.label}"`);
      seen.add(b.label);
    }
    this.#checkSplit();
    return renderBranches(this.#outDir(), branches, terminal, emit);
  }

  /**
   * Streams `out/<label>/<name>` to `emit` (`splitfs/out_read.ts`).
   *
   * @throws {RefusedError} when that file does not exist
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   */
  readOut(label: string, name: "stdout" | "stderr", emit: Emit): number {
    this.#checkSplit();
    return readOutFile(this.#outDir(), label, name, emit);
  }

  /**
   * Writes the blobs the patches of `labels` name into the objects dir their
   * consumer's Git uses (docs/guide.md, "Applying a branch's patch"): the
   * project's `.git/objects`, or for a nested split (`parent`, as journaled)
   * its creator fork's `.admin/<label>/objects`. Both are opened through the
   * descriptors held since the split was made, never through a path a
   * branch could have planted. `null`: not a SHA-1 Git project, nothing to do.
   *
   * @throws {ObjectExportError} for a missing or corrupt store object
   * @throws {RejectedError} for a tampered out/
   */
  exportObjects(
    labels: readonly string[],
    parent: SplitParent | null,
  ): (ExportSummary & { readonly target: string }) | null {
    for (const label of labels) {
      const problem = labelProblem(label);
      if (problem) throw new RefusedError(problem);
    }
    if (
      this.parent !== null &&
      (parent?.split !== this.parent.split || parent.label !== this.parent.label)
    ) {
      throw new RefusedError(
        `split ${this.id} was made by ${this.parent.split}/${this.parent.label}`,
      );
    }
    this.#checkSplit();
    if (!this.isGit || !storesSha1(this.#rootDir)) return null;
    using store = this.#dir.openPath(`${STORE_DIR}/objects`);
    using target = parent
      ? this.#splits.openPath(`${parent.split}/${ADMIN_DIR}/${parent.label}/objects`)
      : this.#rootDir.openPath(`${GIT_NAME}/objects`);
    const summary = exportPatchObjects(this.#outDir(), labels, store, target);
    return { ...summary, target: target.path };
  }

  /** The command that finishes a removal this split's refused. */
  get #finishWith(): string {
    return `marsh splits rm ${this.id}`;
  }

  /**
   * Removes the whole split: identity checks, then a rename into
   * `.marsh/.trash` through descriptors, then deletion there. Forks never
   * made (a branch that failed before its fork) need nothing; out/ stays
   * readable until the rename. marsh's own mounts are unmounted first, each
   * verified; any other mount in the split refuses the removal before
   * anything changes (docs/engine.md "Removal").
   *
   * @throws {WorkspaceReplacedError} and removes nothing when an identity differs
   * @throws {MountPointError} and removes nothing when a mount marsh did not make is there
   */
  remove(): void {
    this.#checkSplit();
    for (const f of this.#forks.values()) this.#checkFork(f);
    // Checked before anything is let go, so a refusal leaves the split as it was.
    refuseForeignMounts(
      this.dirPath,
      [this.dirPath],
      this.#finishWith,
      (m) => isSplitOverlay(m, this.dirPath),
    );
    // The trash is opened before anything is let go: a planted one refuses the
    // removal while the forks are still held and mounted.
    using trash = this.#marsh.ensureDir(TRASH_DIR, 0o700);
    // Mounts go first, and are verified gone, before anything is deleted; our
    // own descriptors on them would keep them busy.
    for (const f of this.#forks.values()) closeFork(f);
    this.#forks.clear();
    this.#engine?.base.close();
    unmountSplit(this.dirPath, this.#finishWith);
    const name = `${this.id}-${crypto.randomUUID().slice(0, 8)}`;
    this.#splits.rename(this.id, trash, name);
    try {
      this.#dir.clear();
    } catch (error) {
      // Only a mount made after the check above: the rest stays in the trash.
      if (error instanceof MountPointError) throw error.withFix(`rm -r ${trash.path}/${name}`);
      throw error;
    }
    trash.rmdir(name);
    this.close();
  }

  /** Closes every descriptor; a second call does nothing. */
  close(): void {
    for (const f of this.#forks.values()) closeFork(f);
    this.#forks.clear();
    const e = this.#engine;
    e?.store.close();
    for (const d of e?.layered?.lowers ?? []) d.close();
    for (const d of [this.#out, e?.admins, e?.base, this.#dir, this.#splits, this.#marsh]) {
      d?.close();
    }
    this.#rootDir.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

function isGone(error: unknown): boolean {
  return (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) ||
    error instanceof SymlinkRefusedError || error instanceof WrongKindError;
}

/** Both known and equal. */
function sameId(a: Identity | null, b: Identity | null): boolean {
  return a !== null && b !== null && a[0] === b[0] && a[1] === b[1];
}

/** `(dev, ino)` of a fork's overlay upper dir under `split`, or `null` when it is gone. */
function upperIdentityOf(split: Dir, label: string): Identity | null {
  try {
    using upper = split.openPath(`${OVERLAY_DIR}/${label}/${UPPER_DIR}`);
    return identityOf(upper.stat());
  } catch (error) {
    if (isGone(error)) return null;
    throw error;
  }
}

function closeFork(f: HeldFork): void {
  if (f.made) f.made.close();
  else f.dir.close();
}

/** Overlay availability per file system (`st_dev`), probed once per process. */
const forkChoices = new Map<bigint, { mode: OverlayMode | null; reason: string }>();

/** Whether splits under `marsh` can use overlay forks, probed with a real tiny mount there. */
function chooseForks(marsh: Dir): { mode: OverlayMode | null; reason: string } {
  const dev = marsh.stat().dev;
  let choice = forkChoices.get(dev);
  if (choice === undefined) {
    choice = probeOverlay(marsh);
    forkChoices.set(dev, choice);
  }
  return choice;
}

/** The fork strategy new splits would use under `path` (an existing directory), and why. */
export function probeForks(path: string): { strategy: string; reason: string } {
  using dir = Dir.openAbsolute(path);
  const choice = chooseForks(dir);
  return { strategy: choice.mode ?? "copy", reason: choice.reason };
}

/**
 * `marsh gc`: deletes the project's layers that no split dir names (kept
 * splits included) and no chain head stacks. Every split dir on disk holds
 * the list of its layers from before its base was mounted, so a mounted
 * layer is always referenced.
 *
 * @throws {RefusedError} when `root` has no `.marsh` directory (no split
 *   was ever taken there: most likely not the project the caller meant)
 */
export function collectLayers(
  root: string,
  dryRun: boolean,
): { root: string; removed: string[]; bytes: number; kept: number } {
  using rootDir = Dir.openAbsolute(root);
  if (rootDir.statAt(MARSH_DIR)?.kind !== "dir") {
    throw new RefusedError(
      `no marsh project at ${root}: it has no ${MARSH_DIR} directory; run marsh gc in a project where marsh split ran`,
    );
  }
  using marsh = rootDir.openDir(MARSH_DIR);
  if (marsh.statAt(LAYERS_DIR)?.kind !== "dir") return { root, removed: [], bytes: 0, kept: 0 };
  using store = LayerStore.open(marsh);
  const referenced = new Set<string>();
  if (marsh.statAt(SPLIT_DIR)?.kind === "dir") {
    using splits = marsh.openDir(SPLIT_DIR);
    for (const e of splits.entries()) {
      if (splits.statAt(e.name)?.kind !== "dir") continue;
      using split = splits.openDir(e.name);
      const list = split.readFileIfExists(LAYERS_FILE, 64 * 1024);
      if (list === null) continue;
      for (const id of new TextDecoder().decode(list).split("\n")) if (id) referenced.add(id);
    }
  }
  const total = store.list().length;
  const r = store.collect(referenced, dryRun);
  return { root, removed: r.removed, bytes: r.bytes, kept: total - r.removed.length };
}

/**
 * A split index (`core.splitIndex`) keeps most entries in
 * `.git/sharedindex.<id>`; the fork's Git cannot read its index without them.
 * They are read as data under the index's own bound, from the Git dir at
 * `rel` under `from` (`.git`, or a creator fork's admin dir).
 */
function readSharedIndexes(from: Dir, rel: string): Map<string, Uint8Array> {
  const found = new Map<string, Uint8Array>();
  using gitDir = from.openPath(rel);
  let total = 0;
  for (const e of gitDir.entries()) {
    if (!SHARED_INDEX_NAME.test(e.name)) continue;
    const bytes = gitDir.readFile(e.name, MAX_INDEX_BYTES - total);
    total += bytes.length;
    found.set(e.name, bytes);
  }
  return found;
}

function unique(list: readonly string[]): string[] {
  return [...new Set(list)];
}

/** The creator split's directories a nested split needs, opened no-follow from the root. */
function openNestedSource(
  rootDir: Dir,
  root: string,
  parent: SplitParent,
): { marsh: Dir; splits: Dir; parentDir: Dir; fork: Dir } {
  const forkRel = `${MARSH_DIR}/${SPLIT_DIR}/${parent.split}/${parent.label}`;
  const got: Dir[] = [];
  try {
    let cur = rootDir;
    for (const name of forkRel.split("/")) {
      cur = cur.openDir(name);
      got.push(cur);
    }
    const [marsh, splits, parentDir, fork] = got as [Dir, Dir, Dir, Dir];
    return { marsh, splits, parentDir, fork };
  } catch (error) {
    for (const d of got.reverse()) d.close();
    if (isGone(error)) {
      throw new SnapshotError(
        `the creator branch's fork is missing or not a directory: ${root}/${forkRel}`,
        { cause: error },
      );
    }
    throw error;
  }
}

/**
 * A nested split's Git metadata, read as data from its creator fork's admin
 * dir `<parent split>/.admin/<label>/` (HEAD names `refs/heads/marsh-split`,
 * which a commit in the fork moves; the index is the fork's own). Ignore
 * inputs: the creator fork's `info/exclude` and the global excludes as the
 * user's own `.git/config` and global config locate them.
 */
function readNestedGit(
  rootDir: Dir,
  root: string,
  parentDir: Dir,
  parent: SplitParent,
  isGit: boolean,
  env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string },
): {
  git: GitSource | null;
  ignore: IgnoreInputs | null;
  sharedIndexes: Map<string, Uint8Array>;
  forkObjects: boolean;
} {
  const none = { git: null, ignore: null, sharedIndexes: new Map(), forkObjects: false };
  if (!isGit) return none;
  const adminRel = `${ADMIN_DIR}/${parent.label}`;
  const read: ReadFile = (rel, max) => {
    // readGitSource reads only `.git/...`: the admin dir is the fork's `.git`.
    if (!rel.startsWith(`${GIT_NAME}/`)) throw new Error(`not a Git dir path: ${rel}`);
    return readRel(parentDir, `${adminRel}/${rel.slice(GIT_NAME.length + 1)}`, max);
  };
  let git: GitSource | null;
  try {
    git = readGitSource(read);
  } catch (error) {
    if (error instanceof GitMetadataError) {
      throw new GitMetadataError(
        error.path,
        `${error.message} (in the creator fork's Git dir ${adminRel})`,
        { cause: error },
      );
    }
    throw error;
  }
  if (git === null) return none;
  const userConfigBytes = readRel(rootDir, `${GIT_NAME}/config`, MAX_CONFIG_BYTES);
  const ignore = loadIgnoreInputs(
    rootDir,
    root,
    { config: userConfigBytes === null ? null : parseGitConfig(userConfigBytes) },
    env,
    readRel(parentDir, `${adminRel}/info/exclude`, MAX_EXCLUDES_BYTES),
  );
  const sharedIndexes = git.index ? readSharedIndexes(parentDir, adminRel) : new Map();
  let forkObjects = false;
  {
    using admin = parentDir.openPath(adminRel);
    forkObjects = admin.statAt("objects")?.kind === "dir";
  }
  return { git, ignore, sharedIndexes, forkObjects };
}

/** Removes files this request created before it failed; a failure to do so is reported with the original. */
function undoCreated(dir: Dir, names: readonly string[], original: unknown): void {
  for (const name of names) {
    try {
      if (dir.statAt(name)?.kind === "file") dir.unlink(name);
    } catch (error) {
      throw new Error(`${original}; ${dir.path}/${name} could not be removed: ${error}`, {
        cause: original,
      });
    }
  }
}

function removePartial(splits: Dir, id: string, original: unknown): void {
  try {
    splits.removeTree(id);
  } catch (error) {
    throw new SnapshotError(`${original}; the partial split ${id} could not be removed: ${error}`, {
      cause: original,
    });
  }
}
