/**
 * What a live daemon knows of one split it runs or holds, as one tagged
 * union with one transition table (docs/architecture.md, "The state
 * machines"). The journaled state (`model/split_state.ts`) is what
 * survives a restart; the phase says whether a cancel is under way and
 * whether the daemon still runs the split or only holds it. Pure: no I/O.
 *
 * @module
 */

/**
 * A live split's phase. `running`: its branches run. `cancelling`: a
 * cancel was asked (the first reason wins) and its branches are being
 * stopped. `held`: it settled (`await` or `kept`): the lease runs, a join or
 * a removal may take it. `ended`: this daemon forgot it (cancelled, setup
 * failed, joined or removed).
 */
export type SplitPhase =
  | { readonly kind: "running" }
  | { readonly kind: "cancelling"; readonly reason: string }
  | { readonly kind: "held" }
  | { readonly kind: "ended" };

/** A phase's kind. */
export type SplitPhaseKind = SplitPhase["kind"];

/** THE transition table of a live split: from each phase, the phases it may move to. */
export const SPLIT_PHASE_TRANSITIONS: {
  readonly [K in SplitPhaseKind]: readonly SplitPhaseKind[];
} = {
  running: ["cancelling", "held", "ended"],
  cancelling: ["ended"],
  held: ["ended"],
  ended: [],
};

/** Whether the table lets a live split move from phase `from` to phase `to`. */
export function splitPhaseMayMove(from: SplitPhaseKind, to: SplitPhaseKind): boolean {
  return SPLIT_PHASE_TRANSITIONS[from].includes(to);
}

/**
 * Returns `to` when the table allows the move from `from`.
 *
 * @throws {TypeError} naming both phases when it does not.
 */
export function nextSplitPhase(from: SplitPhase, to: SplitPhase): SplitPhase {
  if (!splitPhaseMayMove(from.kind, to.kind)) {
    throw new TypeError(`A live split cannot move from ${from.kind} to ${to.kind}`);
  }
  return to;
}

/** Why the split is being cancelled, or null. */
export function cancelReason(p: SplitPhase): string | null {
  return p.kind === "cancelling" ? p.reason : null;
}
