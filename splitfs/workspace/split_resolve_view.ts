/**
 * What resolving a branch reads from a split (docs/resolution.md): its
 * `store.git`, its `out/`, the branch's fork, and the source (the project
 * root, or for a nested split its creator's fork). Each is opened through
 * the descriptors held since the split was made and checked to be the one
 * made, never through a path a branch could have planted.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { StatIndex } from "../capture/old_tree.ts";
import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { checkFork, checkSplit, type Held, outDir } from "./split_held.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import { labelProblem, MARSH_DIR, SPLIT_DIR, STORE_DIR } from "../../model/layout.ts";

/** Descriptors for resolving one branch; each is this view's own, closed with it. */
export interface ResolveView extends Disposable {
  /** The split dir (`store.git` is in it). */
  readonly split: Dir;
  /** `store.git/objects`. */
  readonly objects: Dir;
  /** Its absolute path. */
  readonly objectsPath: string;
  readonly out: Dir;
  /** The branch's fork, `null` when this service holds none for the label. */
  readonly fork: Dir | null;
  /** The source: the project root, or the creator's fork of a nested split. */
  readonly source: Dir;
  /** Its absolute path, as `created` gave the root. */
  readonly sourcePath: string;
  /**
   * The snapshot's stats by directory, when this service made the split
   * (`null` after a restart): a source file with the stats the snapshot
   * recorded holds the base's bytes, as Git's stat check takes it.
   */
  readonly baseStats: StatIndex | null;
}

/**
 * Opens what resolving branch `label` reads. `parent` is the nested split's
 * creator as journaled; a split made by a branch refuses any other.
 *
 * @throws {RefusedError} for a bad label or the wrong creator
 * @throws {WorkspaceReplacedError} when the split, out/ or the fork was replaced
 */
export function openResolveView(
  held: Held,
  label: string,
  parent: SplitParent | null,
): ResolveView {
  const problem = labelProblem(label);
  if (problem) throw new RefusedError(problem);
  if (
    held.parent !== null &&
    (parent?.split !== held.parent.split || parent.label !== held.parent.label)
  ) {
    throw new RefusedError(
      `split ${held.id} was made by ${held.parent.split}/${held.parent.label}`,
    );
  }
  checkSplit(held);
  const f = held.forks.get(label) ?? null;
  if (f !== null) checkFork(held, f);
  const opened: Dir[] = [];
  const keep = (d: Dir) => {
    opened.push(d);
    return d;
  };
  try {
    const forkRel = parent ? `${parent.split}/${parent.label}` : null;
    return {
      split: keep(held.dir.dup()),
      objects: keep(held.dir.openPath(`${STORE_DIR}/objects`)),
      objectsPath: `${held.dirPath}/${STORE_DIR}/objects`,
      out: keep(outDir(held).dup()),
      fork: f === null ? null : keep(f.dir.dup()),
      source: keep(forkRel === null ? held.rootDir.dup() : held.splits.openPath(forkRel)),
      sourcePath: forkRel === null
        ? held.root
        : `${held.root}/${MARSH_DIR}/${SPLIT_DIR}/${forkRel}`,
      baseStats: held.engine?.baseIndex ?? null,
      [Symbol.dispose]() {
        for (const d of opened) d.close();
      },
    };
  } catch (error) {
    for (const d of opened) d.close();
    throw error;
  }
}
