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

import { type AdminSpec, SHARED_INDEX_NAME, verifyAdmin, writeAdmin } from "./admin.ts";
import { type CaptureSummary, captureToDir, FILES_FILE, PATCH_FILE } from "./capture.ts";
import { type CopyStrategy, Dir, InvalidNameError, type Stat } from "./dir.ts";
import { E, FsError } from "./ffi.ts";
import { RejectedError, SnapshotError, WorkspaceReplacedError } from "./errors.ts";
import { CopyForkStrategy, type Fork, type ForkStrategy } from "./fork.ts";
import {
  GITFILE_ROOT_REFUSAL,
  type GitSource,
  MAX_INDEX_BYTES,
  readGitSource,
} from "./git_source.ts";
import { type IgnoreInputs, ignoreRulesOf, loadIgnoreInputs } from "./ignore_load.ts";
import { readRel } from "./read_rel.ts";
import {
  ADMIN_DIR,
  BASE_DIR,
  labelProblem,
  MARSH_DIR,
  OUT_DIR,
  SPLIT_DIR,
  splitIdProblem,
  STORE_DIR,
  TRASH_DIR,
} from "./layout.ts";
import { GIT_NAME, type Progress, type SnapshotStats, takeSnapshot } from "./snapshot.ts";
import { ObjectStore } from "./store.ts";

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
}

/** A fork plus what the journal needs to know about it. */
export interface ForkInfo {
  readonly label: string;
  readonly path: string;
  readonly strategy: Fork["strategy"];
  readonly identity: Identity;
}

function identityOf(st: Stat): Identity {
  return [st.dev, st.ino];
}

function sameIdentity(a: Identity, st: Stat | null): boolean {
  return st !== null && st.kind === "dir" && a[0] === st.dev && a[1] === st.ino;
}

const enc = new TextEncoder();

/** One split's workspace and the descriptors opened when it was made. */
export class SplitWorkspace implements Disposable {
  readonly root: string;
  readonly id: string;
  readonly dirPath: string;
  readonly identity: Identity;
  readonly git: GitSource | null;
  readonly snapshot: SnapshotStats;
  readonly timing: { snapshotMs: number };
  readonly #rootDir: Dir;
  readonly #marsh: Dir;
  readonly #splits: Dir;
  readonly #dir: Dir;
  readonly #base: Dir;
  readonly #admins: Dir;
  readonly #out: Dir;
  readonly #store: ObjectStore;
  readonly #ignore: IgnoreInputs | null;
  readonly #sharedIndexes: ReadonlyMap<string, Uint8Array>;
  readonly #forks = new Map<string, Fork>();
  readonly #strategy: ForkStrategy;

  private constructor(init: {
    root: string;
    id: string;
    rootDir: Dir;
    marsh: Dir;
    splits: Dir;
    dir: Dir;
    base: Dir;
    admins: Dir;
    out: Dir;
    store: ObjectStore;
    git: GitSource | null;
    sharedIndexes: ReadonlyMap<string, Uint8Array>;
    ignore: IgnoreInputs | null;
    snapshot: SnapshotStats;
    snapshotMs: number;
    strategy: ForkStrategy;
  }) {
    this.root = init.root;
    this.id = init.id;
    this.dirPath = `${init.root}/${MARSH_DIR}/${SPLIT_DIR}/${init.id}`;
    this.#rootDir = init.rootDir;
    this.#marsh = init.marsh;
    this.#splits = init.splits;
    this.#dir = init.dir;
    this.identity = identityOf(init.dir.stat());
    this.#base = init.base;
    this.#admins = init.admins;
    this.#out = init.out;
    this.#store = init.store;
    this.git = init.git;
    this.#ignore = init.ignore;
    this.#sharedIndexes = init.sharedIndexes;
    this.snapshot = init.snapshot;
    this.timing = { snapshotMs: init.snapshotMs };
    this.#strategy = init.strategy;
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
    const root = Dir.realPath(opts.root);
    const rootDir = Dir.openAbsolute(root);
    const opened: Disposable[] = [rootDir];
    let splits: Dir | undefined;
    let created = false;
    try {
      const gitKind = rootDir.statAt(".git")?.kind;
      if (gitKind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
      if (gitKind !== undefined && gitKind !== "dir") {
        throw new SnapshotError(`project root .git is a ${gitKind}, not a directory: ${root}/.git`);
      }
      const isGit = gitKind === "dir";
      const marsh = rootDir.ensureDir(MARSH_DIR, 0o755);
      opened.push(marsh);
      if (isGit && marsh.statAt(".gitignore") === null) {
        marsh.writeNewFile(".gitignore", enc.encode("*\n"));
      }
      splits = marsh.ensureDir(SPLIT_DIR, 0o755);
      opened.push(splits);
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
      const git = isGit ? readGitSource((rel, max) => readRel(rootDir, rel, max)) : null;
      const ignore = git ? loadIgnoreInputs(rootDir, root, git, opts.env ?? {}) : null;
      const sharedIndexes = git?.index ? readSharedIndexes(rootDir) : new Map();
      dir.mkdir(BASE_DIR, 0o755);
      const base = dir.openDir(BASE_DIR);
      opened.push(base);
      const t0 = performance.now();
      const snapshot = takeSnapshot({
        source: rootDir,
        dest: base,
        ignore: ignore ? ignoreRulesOf(ignore) : null,
        skipTop: new Set([MARSH_DIR]),
        strategy: opts.copyStrategy,
        progress: opts.progress,
      });
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
        rootDir,
        marsh,
        splits,
        dir,
        base,
        admins,
        out,
        store,
        git,
        sharedIndexes,
        ignore,
        snapshot,
        snapshotMs,
        strategy: new CopyForkStrategy(opts.copyStrategy),
      });
    } catch (error) {
      if (splits && created) removePartial(splits, opts.id, error);
      for (const d of opened.reverse()) d[Symbol.dispose]();
      throw error;
    }
  }

  /** Absolute object directories a consumer needs for `git apply --3way`. */
  get objectDirs(): string[] {
    const dirs = [`${this.dirPath}/${STORE_DIR}/objects`];
    if (this.git) dirs.push(`${this.root}/.git/objects`);
    return dirs;
  }

  /** The labels forked so far, in creation order. */
  get labels(): string[] {
    return [...this.#forks.keys()];
  }

  #adminSpec(label: string): AdminSpec {
    return {
      adminPath: `${this.dirPath}/${ADMIN_DIR}/${label}`,
      head: this.git?.head ?? null,
      objectFormat: this.git?.objectFormat ?? "sha1",
      index: this.git?.index ?? null,
      sharedIndexes: this.#sharedIndexes,
      packedRefs: this.git?.packedRefs ?? null,
      infoExclude: this.#ignore?.infoExclude ?? null,
      alternates: this.objectDirs,
    };
  }

  /** Makes the fork `<label>` (and its Git metadata for a Git project). */
  fork(label: string): ForkInfo {
    const problem = labelProblem(label);
    if (problem) throw new SnapshotError(problem);
    if (this.#forks.has(label)) throw new SnapshotError(`duplicate label "${label}"`);
    this.#checkSplit();
    const made = this.#strategy.create(this.#dir, this.#base, label);
    try {
      if (this.git) writeAdmin(this.#admins, label, made.dir, this.#adminSpec(label));
      this.#out.mkdir(label, 0o755);
      // A marker written after the copy: its ctime is the fork's ready time on
      // the file system's own clock, the clock that stamps the branch's writes.
      this.#out.openDir(label).close();
      const readyNs = this.#out.statAt(label)!.ctimeNs;
      this.#forks.set(label, { ...made, readyNs });
    } catch (error) {
      made.dir.close();
      throw error;
    }
    return {
      label,
      path: `${this.dirPath}/${label}`,
      strategy: made.strategy,
      identity: made.identity,
    };
  }

  #checkSplit(): void {
    if (!sameIdentity(this.identity, this.#splits.statAt(this.id))) {
      throw new WorkspaceReplacedError(`${this.dirPath} is gone or replaced`);
    }
  }

  #fork(label: string): Fork {
    const f = this.#forks.get(label);
    if (!f) throw new Error(`no fork "${label}" in split ${this.id}`);
    return f;
  }

  /**
   * Verifies and captures a fork into `out/<label>/`.
   *
   * @throws {WorkspaceReplacedError} when the split dir or the fork was replaced
   * @throws {RejectedError} when verification fails or a capture limit is crossed
   */
  capture(label: string, opts: { textDiffTimeoutMs?: number } = {}): CaptureSummary {
    const f = this.#fork(label);
    this.#checkSplit();
    if (!sameIdentity(f.identity, this.#dir.statAt(label))) {
      throw new WorkspaceReplacedError(`${this.dirPath}/${label} is gone or replaced`);
    }
    try {
      if (this.git) verifyAdmin(this.#admins, label, f.dir, this.#adminSpec(label));
      // Without Git in the project any .git at the fork root is the branch's
      // own (`git init`), with a config a host `git -C <fork>` would obey.
      else if (f.dir.statAt(GIT_NAME) !== null) {
        throw new RejectedError(`nested .git at ${GIT_NAME}`);
      }
      using out = this.#openOut(label);
      const candidates = f.candidates();
      if (candidates.kind !== "all") throw new Error("only whole-tree capture is implemented");
      return captureToDir(
        {
          old: this.#base,
          new: f.dir,
          readyNs: f.readyNs,
          nestedGit: "reject",
          newIgnore: this.#ignore
            ? ignoreRulesOf(this.#ignore, readInfoExclude(this.#admins, label))
            : null,
        },
        out,
        this.#store,
        opts.textDiffTimeoutMs,
      );
    } catch (error) {
      // Git allows any bytes in a name; a patch path here cannot carry them.
      if (error instanceof InvalidNameError) {
        const where = error.dir.slice(this.dirPath.length + 1);
        throw new RejectedError(`file name is not valid UTF-8: ${where}/${error.shown}`, {
          cause: error,
        });
      }
      throw error;
    }
  }

  #openOut(label: string): Dir {
    let out: Dir;
    try {
      out = this.#out.openDir(label);
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

  /** Removes a rejected fork's tree and admin dir (its out/ stays for the status). */
  removeFork(label: string): void {
    const f = this.#fork(label);
    this.#checkSplit();
    if (!sameIdentity(f.identity, this.#dir.statAt(label))) {
      throw new WorkspaceReplacedError(`${this.dirPath}/${label} is gone or replaced`);
    }
    f.dir.clear();
    this.#dir.rmdir(label);
    this.#admins.removeTree(label);
    f.dir.close();
    this.#forks.delete(label);
  }

  /**
   * Removes the whole split: identity checks, then a rename into
   * `.marsh/.trash` through descriptors, then deletion there.
   *
   * @throws {WorkspaceReplacedError} and removes nothing when an identity differs
   */
  remove(): void {
    this.#checkSplit();
    for (const f of this.#forks.values()) {
      if (!sameIdentity(f.identity, this.#dir.statAt(f.label))) {
        throw new WorkspaceReplacedError(`${this.dirPath}/${f.label} is gone or replaced`);
      }
    }
    using trash = this.#marsh.ensureDir(TRASH_DIR, 0o700);
    const name = `${this.id}-${crypto.randomUUID().slice(0, 8)}`;
    this.#splits.rename(this.id, trash, name);
    this.#dir.clear();
    trash.rmdir(name);
    this.close();
  }

  /** Closes every descriptor; a second call does nothing. */
  close(): void {
    for (const f of this.#forks.values()) f.dir.close();
    this.#forks.clear();
    this.#store.close();
    for (const d of [this.#out, this.#admins, this.#base, this.#dir, this.#splits, this.#marsh]) {
      d.close();
    }
    this.#rootDir.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * A split index (`core.splitIndex`) keeps most entries in
 * `.git/sharedindex.<id>`; the fork's Git cannot read its index without them.
 * They are read as data under the index's own bound.
 */
function readSharedIndexes(root: Dir): Map<string, Uint8Array> {
  const found = new Map<string, Uint8Array>();
  using gitDir = root.openDir(".git");
  let total = 0;
  for (const e of gitDir.entries()) {
    if (!SHARED_INDEX_NAME.test(e.name)) continue;
    const bytes = gitDir.readFile(e.name, MAX_INDEX_BYTES - total);
    total += bytes.length;
    found.set(e.name, bytes);
  }
  return found;
}

function readInfoExclude(admins: Dir, label: string): Uint8Array | null {
  // The fork's own info/exclude, which verification has just checked is ours.
  return readRel(admins, `${label}/info/exclude`, 16 * 1024 * 1024);
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
