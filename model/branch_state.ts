/**
 * A branch's journaled state and the one table of its transitions
 * (docs/architecture.md, "The state machines"): `pending -> running ->
 * captured | rejected | failed | cancelled | uncertain`, or `pending ->
 * cancelled | failed` for a branch that never starts; an ended branch may
 * then be `discarded` by its split's creator (`marsh discard`, its fork
 * removed, its record kept). The journal refuses a
 * move the table does not allow; the daemon names each move by its event
 * and takes the states it may start from here. Pure: no I/O.
 *
 * @module
 */

/** Branch states (docs/architecture.md, "The state machines"). */
export const BRANCH_STATES = [
  "pending",
  "running",
  "captured",
  "rejected",
  "failed",
  "cancelled",
  "uncertain",
  "discarded",
] as const;
/** A branch's state. */
export type BranchState = typeof BRANCH_STATES[number];

/** Returns whether `x` is a branch state string. */
export function isBranchState(x: unknown): x is BranchState {
  return typeof x === "string" && (BRANCH_STATES as readonly string[]).includes(x);
}

/**
 * What moves a branch. Before it starts: `start` (its attempt is launched),
 * `skip` (cancelled before it started), `refuse` (it cannot start: no slot,
 * no engine, no `/run/marsh`). After: `capture` (its work captured),
 * `reject` (capture refused it), `fail`, `stop` (cancelled while it ran),
 * `lose` (its end is unknown: processes or a container may remain).
 * `restart`: a daemon restart's recovery. `discard`: its split's creator
 * dropped it after it ended (a running branch is stopped first).
 */
export const BRANCH_EVENTS = [
  "start",
  "skip",
  "refuse",
  "capture",
  "reject",
  "fail",
  "stop",
  "lose",
  "restart",
  "discard",
] as const;
/** An event that moves a branch. */
export type BranchEvent = typeof BRANCH_EVENTS[number];

/**
 * THE transition table: from each state, the events it accepts and the
 * state each leads to. A state absent from a row refuses that event.
 */
export const BRANCH_TRANSITIONS: {
  readonly [S in BranchState]: { readonly [E in BranchEvent]?: BranchState };
} = {
  pending: { start: "running", skip: "cancelled", refuse: "failed", restart: "cancelled" },
  running: {
    capture: "captured",
    reject: "rejected",
    fail: "failed",
    stop: "cancelled",
    lose: "uncertain",
    restart: "uncertain",
  },
  captured: { discard: "discarded" },
  rejected: { discard: "discarded" },
  failed: { discard: "discarded" },
  cancelled: { discard: "discarded" },
  uncertain: { discard: "discarded" },
  discarded: {},
};

/** A move named by its event: the states it starts from and the one it ends in. */
export interface BranchMove {
  readonly from: readonly BranchState[];
  readonly to: BranchState;
}

/**
 * The move `event` makes, read from {@linkcode BRANCH_TRANSITIONS}.
 *
 * @throws {TypeError} when the table gives the event no row or two targets.
 */
export function branchMove(event: BranchEvent): BranchMove {
  const from: BranchState[] = [];
  const to = new Set<BranchState>();
  for (const s of BRANCH_STATES) {
    const target = BRANCH_TRANSITIONS[s][event];
    if (target === undefined) continue;
    from.push(s);
    to.add(target);
  }
  if (from.length === 0 || to.size !== 1) {
    throw new TypeError(`The branch transition table gives "${event}" no single target`);
  }
  return { from, to: [...to][0]! };
}

/** Whether the table lets a branch move from `from` to `to` (by any event). */
export function branchMayMove(from: BranchState, to: BranchState): boolean {
  return Object.values(BRANCH_TRANSITIONS[from]).includes(to);
}

/** The event that ends a running branch in `state` (what its settlement decided). */
export function endEvent(state: "captured" | "rejected" | "failed" | "cancelled"): BranchEvent {
  return ({ captured: "capture", rejected: "reject", failed: "fail", cancelled: "stop" } as const)[
    state
  ];
}
