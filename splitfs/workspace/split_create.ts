/**
 * Making a split's workspace: `<root>/.marsh/split/<id>/` with its snapshot
 * (a layered base mounted read-only, or a copied one), its object store,
 * admin dirs and out/ (docs/engine.md, "On disk" and "Snapshot"). All or
 * nothing: a failure removes the partial split dir.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type CopyStrategy, Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { SnapshotError } from "../errors.ts";
import { CopyForkStrategy, type ForkStrategy } from "../fork/fork.ts";
import { GITFILE_ROOT_REFUSAL, type GitSource, readGitSource } from "../git/git_source.ts";
import { type IgnoreInputs, ignoreRulesOf, loadIgnoreInputs } from "../git/ignore_load.ts";
import { LayerStore } from "../layers/layers.ts";
import { snapshotProject } from "./project_snapshot.ts";
import { ensureObjectsLink } from "../git/objects_link.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import { chooseForks } from "../fork/fork_choice.ts";
import { mountReadOnly, OverlayForkStrategy } from "../fork/overlay.ts";
import { readRel } from "../fd/read_rel.ts";
import { GIT_NAME, type Progress, type SnapshotStats, takeSnapshot } from "../layers/snapshot.ts";
import { type Held, identityOf, type Layered, ownObjectDirs } from "./split_held.ts";
import { unmountSplit } from "../fork/split_mounts.ts";
import { openNestedSource, readNestedGit, readSharedIndexes } from "./split_source.ts";
import { ObjectStore } from "../git/store.ts";
import type { ForkPolicy } from "../../protocol/splitfs.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import {
  ADMIN_DIR,
  BASE_DIR,
  labelProblem,
  LAYERS_FILE,
  MARSH_DIR,
  OUT_DIR,
  SPLIT_DIR,
  splitIdProblem,
  STORE_DIR,
} from "../../model/layout.ts";

const enc = new TextEncoder();

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
   * A nested split (docs/rules.md "Nested splits"): the creator branch
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

/** Why a nested split's forks are what they are. */
export const NESTED_FORK_REASON =
  "a nested split's forks are copies: the project's layer chains belong to the user's tree";

/**
 * Creates `.marsh/split/<id>/` and takes the snapshot. All or nothing: on
 * failure the partial split directory is removed and the error rethrown.
 *
 * @throws {SnapshotError} for a refused root or a file that kept changing
 */
export function createSplit(opts: CreateOptions): Held {
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
      const snap = snapshotProject(
        store,
        rootDir,
        ignore,
        opts.withIgnored ?? false,
        opts.progress,
      );
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
        identities: lowers.slice(0, snap.layers.length).reverse().map((d) => identityOf(d.stat())),
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
    return {
      root,
      id: opts.id,
      dirPath,
      identity: identityOf(dir.stat()),
      isGit,
      parent: parent ? { split: parent.split, label: parent.label } : null,
      objectDirs,
      rootDir,
      marsh,
      splits,
      dir,
      out,
      engine: {
        base,
        layered,
        forkReason: choice.reason,
        admins,
        store,
        git,
        sharedIndexes,
        ignore,
        // Its own instance: the snapshot's has cached a verdict for every path of the tree.
        captureIgnore: ignore ? ignoreRulesOf(ignore) : null,
        withIgnored: opts.withIgnored ?? false,
        snapshot,
        snapshotMs,
        strategy,
        baseIndex,
        prunedIgnores,
      },
      forks: new Map(),
    };
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

function unique(list: readonly string[]): string[] {
  return [...new Set(list)];
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
