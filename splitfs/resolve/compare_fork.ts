/**
 * The throwaway forks of `marsh compare --test` (docs/resolution.md,
 * "Comparing branches"): per captured branch, `<split>/.compare-<label>`, a
 * fork of the branch's result that a test may write, removed (and its
 * unmount verified) after the test. The branch's own fork, its upper layer
 * and its `out/` files are only ever read.
 *
 * - A branch whose fork is an overlay gets an overlay stacked on it: the
 *   branch's merged fork is its one lower dir (overlay allows two levels),
 *   so the fork costs one mount whatever the tree's size.
 * - Otherwise (a copy fork, or a kernel that refuses the stacking) the
 *   branch's fork is copied, as a copy fork copies the base.
 *
 * Either way its `.git` becomes a gitfile of its own, over a fresh admin dir
 * `.admin/.compare-<label>` (docs/engine.md, "Forks"): a test's `git status`
 * writes that index, never the branch's.
 *
 * The test's stdout and stderr are kept in `out/<label>/compare/`, replaced
 * whole by each run.
 *
 * Needs `--allow-ffi=<libc path>`, and to mount for an overlay fork.
 *
 * @module
 */

import { writeAdmin } from "../fork/admin.ts";
import { CopyForkStrategy, type Fork } from "../fork/fork.ts";
import { MountError, OverlayForkStrategy, removeOverlayFork } from "../fork/overlay.ts";
import { isSplitOverlay } from "../fork/split_mounts.ts";
import { unmountPath } from "../fork/overlay.ts";
import { readMounts } from "../fd/mountinfo.ts";
import { Dir, type FileHandle, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { RefusedError, RejectedError } from "../errors.ts";
import { adminSpecOf } from "../workspace/split_fork.ts";
import {
  checkFork,
  checkSplit,
  type Held,
  heldFork,
  madeEngine,
  outDir,
} from "../workspace/split_held.ts";
import { labelProblem, OVERLAY_DIR } from "../../model/layout.ts";

/** The prefix of a throwaway fork's name in the split dir (a label cannot start with a dot). */
export const COMPARE_PREFIX = ".compare-";
/** Under `out/<label>/`: the last test's output. */
export const COMPARE_OUT_DIR = "compare";

/** A throwaway fork made for a test: where it is and how it was made. */
export interface TestForkInfo {
  readonly label: string;
  /** `<split>/.compare-<label>`. */
  readonly path: string;
  readonly strategy: Fork["strategy"];
}

/** The name of `label`'s throwaway fork in the split dir. */
export function testForkName(label: string): string {
  return `${COMPARE_PREFIX}${label}`;
}

function checkLabel(label: string): void {
  const problem = labelProblem(label);
  if (problem) throw new RefusedError(problem);
}

/** The throwaway forks of one split this service holds. */
export class TestForks {
  readonly #held: Held;
  readonly #live = new Map<string, Omit<Fork, "readyNs">>();

  constructor(held: Held) {
    this.#held = held;
  }

  /**
   * Makes `label`'s throwaway fork. One left by a service that died is
   * removed first.
   *
   * @throws {RefusedError} for a split reopened after a restart (its forks
   *   are untrusted), a label without a fork, or a test of it still running
   * @throws {WorkspaceReplacedError} when the split dir or the branch's fork was replaced
   */
  make(label: string): TestForkInfo {
    checkLabel(label);
    const held = this.#held;
    const engine = madeEngine(held, "testing its branches");
    if (this.#live.has(label)) {
      throw new RefusedError(`a test of branch ${label} is already running`);
    }
    checkSplit(held);
    const f = heldFork(held, label);
    checkFork(held, f);
    const name = testForkName(label);
    this.#removeLeftover(name);
    let made: Omit<Fork, "readyNs"> | null = null;
    if (f.made?.mount) {
      try {
        made = new OverlayForkStrategy(f.made.mount.mode, [f.dir]).create(held.dir, f.dir, name);
      } catch (error) {
        // A kernel that refuses an overlay over an overlay: copy instead.
        if (!(error instanceof MountError)) throw error;
      }
    }
    made ??= new CopyForkStrategy().create(held.dir, f.dir, name);
    try {
      if (engine.git) {
        // The branch's gitfile names the branch's admin dir: the test gets its own.
        const st = made.dir.statAt(".git");
        if (st !== null && st.kind !== "file") {
          throw new RefusedError(`${held.dirPath}/${label}/.git is not marsh's gitfile`);
        }
        if (st !== null) made.dir.unlink(".git");
        writeAdmin(engine.admins, name, made.dir, adminSpecOf(held, engine, name));
      }
    } catch (error) {
      this.#remove(name, made);
      throw error;
    }
    this.#live.set(label, made);
    return { label, path: `${held.dirPath}/${name}`, strategy: made.strategy };
  }

  /**
   * Removes `label`'s throwaway fork and its admin dir; an overlay is
   * unmounted first and its unmount verified. Nothing there is fine.
   *
   * @throws {MountBusyError} when a process still uses it; it stays, and a
   *   later drop (or the split's removal) finishes
   */
  drop(label: string): void {
    checkLabel(label);
    const made = this.#live.get(label);
    const name = testForkName(label);
    if (made === undefined) {
      this.#removeLeftover(name);
      return;
    }
    this.#live.delete(label);
    this.#remove(name, made);
  }

  /**
   * Replaces `out/<label>/compare/stdout` and `stderr` with copies of the
   * attempt's files (absolute paths outside the project), each written to a
   * temporary name created `O_EXCL` and renamed into place.
   *
   * @throws {RejectedError} when something is planted at `out/<label>/compare`
   * @throws {FsError} when an attempt file cannot be read
   */
  publish(label: string, outputs: { readonly stdout: string; readonly stderr: string }): void {
    checkLabel(label);
    checkSplit(this.#held);
    const tampered = (cause: unknown) =>
      new RejectedError(`out/${label}/${COMPARE_OUT_DIR} was tampered with`, { cause });
    let dir: Dir;
    try {
      using branch = outDir(this.#held).openDir(label);
      dir = branch.ensureDir(COMPARE_OUT_DIR, 0o755);
    } catch (error) {
      if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
        throw tampered(error);
      }
      throw error;
    }
    using d = dir;
    for (const [name, path] of [["stdout", outputs.stdout], ["stderr", outputs.stderr]]) {
      const tmp = `.${name}.tmp`;
      if (d.statAt(tmp) !== null) d.unlink(tmp);
      const kind = d.statAt(name!)?.kind;
      if (kind !== undefined && kind !== "file") throw tampered(new Error(`${name} is a ${kind}`));
      {
        using source = Dir.openAbsoluteFile(path!);
        let file: FileHandle;
        try {
          file = d.createFile(tmp, 0o644);
        } catch (error) {
          if (error instanceof SymlinkRefusedError) throw tampered(error);
          throw error;
        }
        using _file = file;
        source.copyTo(file);
      }
      d.renameReplacing(tmp, d, name!);
    }
  }

  /** Closes every throwaway fork's descriptors (the split is being removed or released). */
  close(): void {
    for (const made of this.#live.values()) made.close();
    this.#live.clear();
  }

  #remove(name: string, made: Omit<Fork, "readyNs">): void {
    made.close();
    const held = this.#held;
    if (made.mount) removeOverlayFork(held.dir, name, made.mount);
    else held.dir.removeTree(name);
    held.engine?.admins.removeTree(name);
  }

  /** A throwaway fork left by a service that died mid-test: its mount, its dirs. */
  #removeLeftover(name: string): void {
    const held = this.#held;
    const point = `${held.dirPath}/${name}`;
    const mounts = readMounts().filter((m) => m.mountPoint === point);
    // Stacked mounts: the one on top first.
    mounts.sort((a, b) => (a.parentId === b.id ? -1 : b.parentId === a.id ? 1 : 0));
    for (const m of mounts) {
      if (!isSplitOverlay(m, held.dirPath)) {
        throw new RefusedError(
          `${point} has a mount marsh did not make (${m.fsType}): unmount it, then run the test again`,
        );
      }
      unmountPath(m);
    }
    held.dir.removeTree(name);
    using overlays = held.dir.statAt(OVERLAY_DIR) === null ? null : held.dir.openDir(OVERLAY_DIR);
    overlays?.removeTree(name);
    held.engine?.admins.removeTree(name);
  }
}
