/**
 * A split's journaled state and the one table of its transitions
 * (docs/architecture.md, "The state machines"): `run -> await -> joined |
 * kept`, `run -> cancelled`, and what a daemon restart settles. The journal
 * refuses a move the table does not allow; the daemon names each move by
 * its event and takes the states it may start from here. Pure: no I/O.
 *
 * @module
 */

/** Split states (docs/architecture.md, "The state machines"). */
export const SPLIT_STATES = ["run", "await", "joined", "kept", "cancelled", "uncertain"] as const;
/** A split's state. */
export type SplitState = typeof SPLIT_STATES[number];

/** Returns whether `x` is a split state string. */
export function isSplitState(x: unknown): x is SplitState {
  return typeof x === "string" && (SPLIT_STATES as readonly string[]).includes(x);
}

/**
 * What moves a split: `finish` (every branch settled), `cancel` (a cancel,
 * the deadline, a dropped creator), `setupFailed` (the snapshot or a fork
 * failed), `leaseExpired` (not joined in time), `keep` (a join that did not
 * remove it), `join` (the join removes it), `releaseFailed` (the removal at
 * the join failed), `restart` (a daemon restart's recovery), `discard`
 * (`marsh discard` of an awaiting or kept split: its directory is removed,
 * its record stays, every branch `discarded`; a running split is cancelled
 * first, and a cancelled or uncertain one keeps its state).
 */
export const SPLIT_EVENTS = [
  "finish",
  "cancel",
  "setupFailed",
  "leaseExpired",
  "keep",
  "join",
  "releaseFailed",
  "restart",
  "discard",
] as const;
/** An event that moves a split. */
export type SplitEvent = typeof SPLIT_EVENTS[number];

/**
 * THE transition table: from each state, the events it accepts and the
 * state each leads to. A state absent from a row refuses that event.
 */
export const SPLIT_TRANSITIONS: {
  readonly [S in SplitState]: { readonly [E in SplitEvent]?: SplitState };
} = {
  run: { finish: "await", cancel: "cancelled", setupFailed: "cancelled", restart: "uncertain" },
  await: {
    leaseExpired: "kept",
    keep: "kept",
    join: "joined",
    restart: "kept",
    discard: "cancelled",
  },
  kept: { keep: "kept", join: "joined", discard: "cancelled" },
  joined: { releaseFailed: "kept" },
  cancelled: {},
  uncertain: {},
};

/** A move named by its event: the states it starts from and the one it ends in. */
export interface SplitMove {
  readonly from: readonly SplitState[];
  readonly to: SplitState;
}

/**
 * The move `event` makes, read from {@linkcode SPLIT_TRANSITIONS}.
 *
 * @throws {TypeError} when the table gives the event no row or two targets.
 */
export function splitMove(event: SplitEvent): SplitMove {
  const from: SplitState[] = [];
  const to = new Set<SplitState>();
  for (const s of SPLIT_STATES) {
    const target = SPLIT_TRANSITIONS[s][event];
    if (target === undefined) continue;
    from.push(s);
    to.add(target);
  }
  if (from.length === 0 || to.size !== 1) {
    throw new TypeError(`The split transition table gives "${event}" no single target`);
  }
  return { from, to: [...to][0]! };
}

/** Whether the table lets a split move from `from` to `to` (by any event). */
export function splitMayMove(from: SplitState, to: SplitState): boolean {
  return Object.values(SPLIT_TRANSITIONS[from]).includes(to);
}
