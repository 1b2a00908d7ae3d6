/**
 * The daemon's journaled state changes, each named by its event: the states
 * it may start from and the one it ends in come from the one transition
 * table of `model/split_state.ts` and `model/branch_state.ts`, never from a
 * list written at the call site.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BranchPatch, SplitPatch } from "../journal/records.ts";
import { type BranchEvent, branchMove } from "../model/branch_state.ts";
import { type SplitEvent, splitMove } from "../model/split_state.ts";

/**
 * Moves split `id` by `event` (a compare-and-set: false, changing nothing,
 * when its state does not accept the event).
 *
 * @throws {Deno.errors.NotFound} for an unknown split.
 */
export function moveSplit(
  journal: Journal,
  id: string,
  event: SplitEvent,
  patch: SplitPatch = {},
): boolean {
  const { from, to } = splitMove(event);
  return journal.transitionSplit(id, from, to, patch);
}

/**
 * Moves branch `label` of split `split` by `event` (a compare-and-set, as
 * {@linkcode moveSplit}).
 *
 * @throws {Deno.errors.NotFound} for an unknown branch.
 */
export function moveBranch(
  journal: Journal,
  split: string,
  label: string,
  event: BranchEvent,
  patch: BranchPatch = {},
): boolean {
  const { from, to } = branchMove(event);
  return journal.transitionBranch(split, label, from, to, patch);
}
