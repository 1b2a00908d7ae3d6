/**
 * A split's on-disk workspace: `<root>/.marsh/split/<id>/` with its base,
 * forks, admin dirs, store and out/. Holds the directory descriptors opened
 * at creation; capture and removal go through them and re-check identities
 * first, so a `git clean -xfd` mid-split removes nothing of ours by path.
 *
 * This class is the one API; each request is a module named for what it
 * does: creation (`split_create.ts`), reopening after a restart
 * (`split_reopen.ts`), forking (`split_fork.ts`), capture
 * (`split_capture.ts`), out/ writes (`out_write.ts`), removal
 * (`split_removal.ts`), all on what the split holds (`split_held.ts`).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { CaptureResult } from "../capture/capture.ts";
import type { PhaseClock } from "../capture/capture_phases.ts";
import { RefusedError } from "../errors.ts";
import type { CopyProgress } from "../fork/fork.ts";
import type { GitSource } from "../git/git_source.ts";
import { exportPatchObjects, type ExportSummary, storesSha1 } from "../git/object_export.ts";
import { type MissingOut, missingOut, type OutExpectation } from "../capture/out_check.ts";
import { readOutFile } from "../capture/out_read.ts";
import { branchStats } from "../resolve/branch_stats.ts";
import type { BranchStats } from "../../protocol/splitfs_compare.ts";
import { publish, writeManifest } from "./out_write.ts";
import { type Emit, type RenderBranch, renderBranches } from "../capture/render.ts";
import { GIT_NAME, type SnapshotStats } from "../layers/snapshot.ts";
import { captureFork } from "./split_capture.ts";
import { type CreateOptions, createSplit } from "./split_create.ts";
import { type ForkInfo, makeFork } from "./split_fork.ts";
import {
  checkSplit,
  type Held,
  type Identity,
  type Layered,
  madeEngine,
  outDir,
} from "./split_held.ts";
import { closeHeld, removeSplit } from "./split_removal.ts";
import { dropFork } from "./fork_drop.ts";
import { type OpenOptions, openSplit } from "./split_reopen.ts";
import { planFs } from "../resolve/plan_fs.ts";
import { TestForks } from "../resolve/compare_fork.ts";
import type { PlanFsRequest, PlannedReply } from "../../protocol/splitfs_resolve.ts";
import { openResolveView, type ResolveView } from "./split_resolve_view.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import { ADMIN_DIR, labelProblem, STORE_DIR } from "../../model/layout.ts";

export type { CreateOptions, NestedParent } from "./split_create.ts";
export { NESTED_FORK_REASON } from "./split_create.ts";
export type { ForkInfo } from "./split_fork.ts";
export type { Identity } from "./split_held.ts";
export type { OpenOptions } from "./split_reopen.ts";
export type { ResolveView } from "./split_resolve_view.ts";

/** One split's workspace and the descriptors opened when it was made (or reopened). */
export class SplitWorkspace implements Disposable {
  readonly #held: Held;
  /** The throwaway forks of `marsh compare --test` (`splitfs/resolve/compare_fork.ts`). */
  readonly tests: TestForks;

  private constructor(held: Held) {
    this.#held = held;
    this.tests = new TestForks(held);
  }

  /** The project root, absolute and real. */
  get root(): string {
    return this.#held.root;
  }

  /** The split's id, its directory's name under `.marsh/split/`. */
  get id(): string {
    return this.#held.id;
  }

  /** `<root>/.marsh/split/<id>`. */
  get dirPath(): string {
    return this.#held.dirPath;
  }

  /** The split dir's `(dev, ino)`. */
  get identity(): Identity {
    return this.#held.identity;
  }

  /** Whether the project is a Git repository. */
  get isGit(): boolean {
    return this.#held.isGit;
  }

  /** A nested split's creator branch; `null` for a split of the user's tree (or reopened). */
  get parent(): SplitParent | null {
    return this.#held.parent;
  }

  /**
   * Creates `.marsh/split/<id>/` and takes the snapshot. All or nothing: on
   * failure the partial split directory is removed and the error rethrown.
   *
   * @throws {SnapshotError} for a refused root or a file that kept changing
   */
  static create(opts: CreateOptions): SplitWorkspace {
    return new SplitWorkspace(createSplit(opts));
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
    return new SplitWorkspace(openSplit(opts));
  }

  /** The caller's Git source; `null` without Git. Only for a split created in this process. */
  get git(): GitSource | null {
    return madeEngine(this.#held, "reading its Git source").git;
  }

  /** What the snapshot copied. Only for a split created in this process. */
  get snapshot(): SnapshotStats {
    return madeEngine(this.#held, "reading its snapshot").snapshot;
  }

  /** The fork strategy this split's forks use, and why. Only for a split created in this process. */
  get forkChoice(): { readonly strategy: string; readonly reason: string } {
    const e = madeEngine(this.#held, "reading its fork strategy");
    return { strategy: e.layered?.mode ?? "copy", reason: e.forkReason };
  }

  /** The layered base, or `null` for a copied one. Only for a split created in this process. */
  get layers(): Layered | null {
    return madeEngine(this.#held, "reading its layers").layered;
  }

  /** How long the snapshot took. Only for a split created in this process. */
  get timing(): { readonly snapshotMs: number } {
    return { snapshotMs: madeEngine(this.#held, "reading its timing").snapshotMs };
  }

  /**
   * Absolute object directories a consumer needs for `git apply --3way`, and
   * the forks' alternates: the split's store, then the user's objects; for a
   * nested split its store, then its creator's object dirs and the creator
   * fork's own `objects`. After a reopen, the store and the user's objects.
   */
  get objectDirs(): string[] {
    return [...this.#held.objectDirs];
  }

  /** The labels of the forks held, in creation (or reopen) order. */
  get labels(): string[] {
    return [...this.#held.forks.keys()];
  }

  /**
   * Makes the fork `<label>` (and its Git metadata for a Git project).
   * `progress` is called after each file copied. Each fork gets its own
   * copy of the index (`writeAdmin`).
   */
  fork(label: string, opts: { progress?: CopyProgress } = {}): ForkInfo {
    return makeFork(this.#held, label, opts);
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
  capture(
    label: string,
    opts: { textDiffTimeoutMs?: number; clock?: PhaseClock } = {},
  ): CaptureResult {
    return captureFork(this.#held, label, opts);
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
    publish(this.#held, label, status, outputs);
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
    checkSplit(this.#held);
    return missingOut(outDir(this.#held), expect);
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
    writeManifest(this.#held, json);
  }

  /**
   * Streams the text rendering of `branches` (docs/engine.md "Publish, manifest and render") to
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
    checkSplit(this.#held);
    return renderBranches(outDir(this.#held), branches, terminal, emit);
  }

  /**
   * Streams `out/<label>/<name>` to `emit` (`splitfs/capture/out_read.ts`).
   *
   * @throws {RefusedError} when that file does not exist
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   */
  readOut(label: string, name: "stdout" | "stderr", emit: Emit): number {
    checkSplit(this.#held);
    return readOutFile(outDir(this.#held), label, name, emit);
  }

  /**
   * Counts the patches of `labels` (`splitfs/resolve/branch_stats.ts`).
   *
   * @throws {RefusedError} for an invalid label or a malformed files list
   * @throws {WorkspaceReplacedError} when the split dir was replaced
   */
  branchStats(labels: readonly string[]): BranchStats[] {
    checkSplit(this.#held);
    return branchStats(outDir(this.#held), labels);
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
    checkSplit(this.#held);
    if (!this.isGit || !storesSha1(this.#held.rootDir)) return null;
    using store = this.#held.dir.openPath(`${STORE_DIR}/objects`);
    using target = parent
      ? this.#held.splits.openPath(`${parent.split}/${ADMIN_DIR}/${parent.label}/objects`)
      : this.#held.rootDir.openPath(`${GIT_NAME}/objects`);
    const summary = exportPatchObjects(outDir(this.#held), labels, store, target);
    return { ...summary, target: target.path };
  }

  /**
   * The `--filesystem`, `--paths` or promote plan of a branch, computed
   * without changing anything (splitfs/resolve/plan_fs.ts).
   *
   * @throws {RefusedError} for a branch that cannot be planned, saying why
   */
  planFs(req: PlanFsRequest): PlannedReply {
    return planFs(this.#held, req);
  }

  /**
   * What resolving branch `label` reads: the store, out/, its fork and the
   * source (`split_resolve_view.ts`); close it when done.
   *
   * @throws {RefusedError} for a bad label or the wrong creator
   * @throws {WorkspaceReplacedError} when the split, out/ or the fork was replaced
   */
  resolveView(label: string, parent: SplitParent | null): ResolveView {
    return openResolveView(this.#held, label, parent);
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
    // Its mounts are unmounted with the split's own; our descriptors would keep them busy.
    this.tests.close();
    removeSplit(this.#held);
  }

  /**
   * Removes one fork, keeping the split, its other forks and `out/<label>/`
   * (`marsh discard ID LABEL`, `splitfs/workspace/fork_drop.ts`).
   *
   * @throws {WorkspaceReplacedError} and removes nothing when an identity differs
   * @throws {MountPointError} and removes nothing when a mount marsh did not make is there
   */
  dropFork(label: string): void {
    dropFork(this.#held, label);
  }

  /** Closes every descriptor; a second call does nothing. */
  close(): void {
    this.tests.close();
    closeHeld(this.#held);
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
