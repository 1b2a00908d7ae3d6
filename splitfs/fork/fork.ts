/**
 * Forks: a private copy of a split's frozen base per branch (docs/rules.md "Snapshot and forks"),
 * behind one interface: the copy strategies here, and overlay mounts
 * (`overlay.ts`: O(1) fork, capture from the upper layer).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { CandidateDir } from "../capture/compare.ts";
import type { CopyStrategy, Dir } from "../fd/dir.ts";
import type { MountRecord, OverlayMode } from "./mount_record.ts";

/** How a fork was made, recorded per branch in the manifest. */
export type ForkStrategyName = "reflink" | "copy_file_range" | "copy" | OverlayMode;

/**
 * Which paths capture must look at. A copy fork cannot tell, so it answers
 * "everything"; an overlay fork answers with the tree of its upper layer's
 * entries, for `CompareOptions.candidates`.
 */
export type ChangeCandidates =
  | { readonly kind: "all" }
  | { readonly kind: "tree"; readonly tree: CandidateDir };

/** A fork that exists on disk. */
export interface Fork {
  readonly label: string;
  readonly strategy: ForkStrategyName;
  /** The fork's root, opened when it was made; capture and removal use this fd. */
  readonly dir: Dir;
  /** `(dev, ino)` of the fork root, journaled and re-checked before capture and removal. */
  readonly identity: readonly [bigint, bigint];
  /**
   * A file-system time taken after the fork was complete: any file whose
   * ctime is at or after it was touched by the branch (a branch cannot set ctime).
   */
  readonly readyNs: bigint;
  /** An overlay fork's mount, as the journal records it; absent for a copy. */
  readonly mount?: MountRecord;
  /** Reads what capture must compare now (an overlay fork walks its upper layer). */
  candidates(): ChangeCandidates;
  /**
   * Closes `dir` and whatever else the fork holds (an overlay fork's upper
   * dir). Unmounting an overlay fork needs this first. A second call does nothing.
   */
  close(): void;
}

/** Files and bytes copied so far, reported while a tree is copied. */
export type CopyProgress = (copied: Readonly<{ files: number; bytes: number }>) => void;

/** Makes forks of a base. */
export interface ForkStrategy {
  /**
   * Creates `split/<label>` as a fork of `base`. The caller stamps `readyNs`
   * afterwards. `progress` is called after each file copied.
   */
  create(split: Dir, base: Dir, label: string, progress?: CopyProgress): Omit<Fork, "readyNs">;
}

const RANK: Record<CopyStrategy, number> = { reflink: 0, copy_file_range: 1, readwrite: 2 };
const NAME: Record<CopyStrategy, ForkStrategyName> = {
  reflink: "reflink",
  copy_file_range: "copy_file_range",
  readwrite: "copy",
};

/**
 * The copy strategies: reflink where the file system shares extents, else
 * `copy_file_range`, else read/write. Records the weakest one any file needed.
 */
export class CopyForkStrategy implements ForkStrategy {
  constructor(readonly preferred: CopyStrategy = "reflink") {}

  create(split: Dir, base: Dir, label: string, progress?: CopyProgress): Omit<Fork, "readyNs"> {
    split.mkdir(label, 0o700);
    const dir = split.openDir(label);
    try {
      const used: CopyState = { strategy: this.preferred, files: 0, bytes: 0, progress };
      copyTree(base, dir, used);
      dir.chmod(base.stat().perm);
      const st = dir.stat();
      return {
        label,
        strategy: NAME[used.strategy],
        dir,
        identity: [st.dev, st.ino],
        candidates: () => ({ kind: "all" }),
        close: () => dir.close(),
      };
    } catch (error) {
      dir.close();
      throw error;
    }
  }
}

interface CopyState {
  strategy: CopyStrategy;
  files: number;
  bytes: number;
  readonly progress: CopyProgress | undefined;
}

function copyTree(src: Dir, dst: Dir, used: CopyState): void {
  for (const entry of src.entries()) {
    const name = entry.name;
    const kind = entry.kind ?? src.statAt(name)?.kind;
    if (kind === "dir") {
      dst.mkdir(name, 0o700);
      using s = src.openDir(name);
      using d = dst.openDir(name);
      copyTree(s, d, used);
      d.chmod(s.stat().perm);
    } else if (kind === "symlink") {
      dst.symlink(src.readlink(name), name);
      const st = src.statAt(name);
      if (st) dst.setMtime(name, st.mtimeNs);
    } else if (kind === "file") {
      const r = src.copyFileTo(name, dst, name, used.strategy);
      if (RANK[r.strategy] > RANK[used.strategy]) used.strategy = r.strategy;
      used.files++;
      used.bytes += r.after.size;
      used.progress?.(used);
    }
    // The base holds only files, directories and symlinks (snapshot pruned the rest).
  }
}
