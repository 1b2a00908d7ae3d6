/**
 * What a filesystem-scope or promote plan is computed from
 * (docs/resolution.md, "The filesystem scopes' planner"): the split's base,
 * the branch's fork and where it may differ, the source (the project root,
 * or a nested split's creator fork), and the rules that say which paths the
 * split covered. Each is re-checked and opened through the descriptors the
 * split holds, as capture does.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { CandidateDir } from "../capture/compare.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import { FILES_FILE } from "../capture/capture.ts";
import type { Dir } from "../fd/dir.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { RefusedError } from "../errors.ts";
import {
  checkFork,
  checkLayers,
  checkSplit,
  type Held,
  isGone,
  madeEngine,
  outDir,
} from "../workspace/split_held.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";

/** The trees a plan compares, open; dispose to close what was opened here. */
export interface PlanInputs extends Disposable {
  readonly base: Dir;
  readonly baseIndex: StatIndex;
  /** The snapshot's root tree id, where the base is layered. */
  readonly baseTree: string | null;
  readonly branch: Dir;
  /** Where the branch can differ from the base: its overlay upper dir's entries, or `"all"`. */
  readonly candidates: CandidateDir;
  /** The fork's ready time (see `ChangedOptions.readyNs`). */
  readonly readyNs: bigint;
  readonly source: Dir;
  /** The rules for paths the base does not hold; `null` when the split took ignored files too. */
  readonly ignore: IgnoreScope | null;
  readonly prunedIgnores: ReadonlyMap<string, Uint8Array>;
}

/**
 * Opens the inputs of a plan of branch `label`, after the identity checks
 * capture makes.
 *
 * @throws {RefusedError} when the split was reopened after a restart, the
 *   branch has no fork or was not captured, or `parent` is not the split's creator
 * @throws {WorkspaceReplacedError} when the split, its layers or the fork were replaced
 */
export function openPlanInputs(
  held: Held,
  label: string,
  parent: SplitParent | null,
): PlanInputs {
  const engine = madeEngine(held, "planning its resolution");
  if (held.parent?.split !== parent?.split || held.parent?.label !== parent?.label) {
    const made = held.parent ? `${held.parent.split}/${held.parent.label}` : "the project itself";
    throw new RefusedError(
      `split ${held.id} was made by ${made}: resolve it from there (the source is its creator)`,
    );
  }
  const fork = held.forks.get(label);
  if (!fork || fork.made === null) {
    throw new RefusedError(
      `branch ${label} of split ${held.id} has no fork to resolve: it never started, or its ` +
        `fork was removed; see marsh splits ${held.id}`,
    );
  }
  checkSplit(held);
  checkFork(held, fork);
  checkLayers(held, engine);
  if (!captured(held, label)) {
    throw new RefusedError(
      `branch ${label} of split ${held.id} has no captured result: it is still running (wait ` +
        `until it has finished; marsh splits ${held.id} shows it), or its result was rejected`,
    );
  }
  const made = fork.made;
  const found = made.candidates();
  const source = held.parent
    ? held.splits.openPath(`${held.parent.split}/${held.parent.label}`)
    : held.rootDir.dup();
  const layered = engine.layered;
  return {
    base: engine.base,
    baseIndex: engine.baseIndex,
    baseTree: layered && /^[0-9a-f]{40}$/.test(layered.rootId) ? layered.rootId : null,
    branch: fork.dir,
    candidates: found.kind === "tree" ? found.tree : "all",
    readyNs: made.readyNs,
    source,
    ignore: engine.withIgnored ? null : engine.captureIgnore,
    prunedIgnores: engine.prunedIgnores,
    [Symbol.dispose]: () => source.close(),
  };
}

/** Whether capture wrote `out/<label>/files` (it always does once a capture succeeded). */
function captured(held: Held, label: string): boolean {
  try {
    using out = outDir(held).openDir(label);
    return out.statAt(FILES_FILE)?.kind === "file";
  } catch (error) {
    if (isGone(error)) return false;
    throw error;
  }
}
