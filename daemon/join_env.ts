/**
 * The variables `marsh join -- CMD` adds to its consumer's environment
 * (docs/guide.md, "marsh join"). `SPLIT_ROOT` is where the consumer applies
 * the patches from: `git apply` run below a project's top directory skips,
 * without an error, every path outside the directory it runs in
 * (docs/guide.md, "Applying a branch's patch").
 *
 * @module
 */

import type { BranchRecord, SplitRecord } from "../journal/records.ts";
import type { Manifest } from "../protocol/manifest.ts";

/** The variables a join's consumer gets (a type, so it is a `Record<string, string>`). */
export type ConsumerEnv = {
  readonly SPLIT_ID: string;
  readonly SPLIT_DIR: string;
  readonly SPLIT_MANIFEST: string;
  /** The top of the tree the split was taken of, as its creator sees it. */
  readonly SPLIT_ROOT: string;
  /** The split's object store; root splits only (a branch's Git has its own). */
  readonly SPLIT_OBJECTS?: string;
};

/**
 * The consumer's variables for split `s` with manifest `m`. `creator` is
 * the branch record of a nested split's creator branch (null for a root
 * split, or when its record is gone).
 *
 * A root split's root is the project's. A nested split's patches apply to
 * its creator branch's fork, and its consumer runs where that branch runs:
 * a shell branch with the project view sees its fork at the project's path
 * (docs/engine.md, "Containment"); any other branch, and a Kit job (a
 * `marsh run` job that branch started included), sees it at the fork's own
 * path.
 */
export function consumerEnv(
  s: SplitRecord,
  m: Manifest,
  creator: Pick<BranchRecord, "view" | "fork"> | null,
): ConsumerEnv {
  return {
    SPLIT_ID: s.id,
    SPLIT_DIR: m.out,
    SPLIT_MANIFEST: `${m.out}/manifest.json`,
    SPLIT_ROOT: creatorRoot(s, creator),
    ...(s.depth === 1 ? { SPLIT_OBJECTS: m.objects } : {}),
  };
}

function creatorRoot(
  s: SplitRecord,
  creator: Pick<BranchRecord, "view" | "fork"> | null,
): string {
  if (s.parent === null) return s.root;
  // A Kit job (a `marsh run` job from such a branch too) sees the fork at its own path.
  if (creator?.view === "project" && s.creator.kind !== "job") return s.root;
  return creator?.fork ?? `${s.root}/.marsh/split/${s.parent.split}/${s.parent.label}`;
}
