/**
 * An operation's journaled state and the one table of its transitions
 * (docs/checkpoints.md, "The operation's states"), and the decision that
 * start-up recovery takes for an operation that was not final
 * (docs/checkpoints.md, "Recovery"). The journal refuses a move the table
 * does not allow. Pure: no I/O.
 *
 * @module
 */

/** Operation states (docs/checkpoints.md, "The operation's states"). */
export const OPERATION_STATES = [
  "recorded",
  "launched",
  "drained",
  "sealing",
  "bound",
  "discarded",
  "stale",
  "failed",
  "escaped",
  "recovery-required",
  "abandoned",
] as const;
/** An operation's state. */
export type OperationState = typeof OPERATION_STATES[number];

/** Returns whether `x` is an operation state string. */
export function isOperationState(x: unknown): x is OperationState {
  return typeof x === "string" && (OPERATION_STATES as readonly string[]).includes(x);
}

/**
 * The states in which an operation is live: at most one per session
 * (a second is refused), and the ones start-up recovery settles.
 */
export const LIVE_OPERATION_STATES: readonly OperationState[] = [
  "recorded",
  "launched",
  "drained",
  "sealing",
];

/**
 * What moves an operation: `launch` (its process started), `drain` (its
 * whole tree is gone), `intend` (the checkpoint intent is journaled),
 * `bind` (checkpoint bound and head moved, with or without a layer),
 * `discard` (its upper dir dropped by policy), `stale` (the head moved
 * before the bind), `fail` (it could not start, or capture or the seal
 * failed), `escape` (a writer may outlive it), `require` (only a person
 * can settle it), `resume` (recovery re-established what sealing needs),
 * `abandon` (given up by hand).
 */
export const OPERATION_EVENTS = [
  "launch",
  "drain",
  "intend",
  "bind",
  "discard",
  "stale",
  "fail",
  "escape",
  "require",
  "resume",
  "abandon",
] as const;
/** An event that moves an operation. */
export type OperationEvent = typeof OPERATION_EVENTS[number];

/**
 * THE transition table: from each state, the events it accepts and the
 * state each leads to. A state absent from a row refuses that event.
 */
export const OPERATION_TRANSITIONS: {
  readonly [S in OperationState]: { readonly [E in OperationEvent]?: OperationState };
} = {
  recorded: { launch: "launched", fail: "failed", require: "recovery-required" },
  launched: { drain: "drained", escape: "escaped", require: "recovery-required" },
  drained: {
    intend: "sealing",
    bind: "bound",
    discard: "discarded",
    stale: "stale",
    fail: "failed",
    require: "recovery-required",
  },
  sealing: { bind: "bound", stale: "stale", fail: "failed", require: "recovery-required" },
  bound: {},
  discarded: {},
  stale: {},
  failed: { require: "recovery-required" },
  escaped: { require: "recovery-required" },
  "recovery-required": { resume: "sealing", abandon: "abandoned" },
  abandoned: {},
};

/** A move named by its event: the states it starts from and the one it ends in. */
export interface OperationMove {
  readonly from: readonly OperationState[];
  readonly to: OperationState;
}

/**
 * The move `event` makes, read from {@linkcode OPERATION_TRANSITIONS}.
 *
 * @throws {TypeError} when the table gives the event no row or two targets.
 */
export function operationMove(event: OperationEvent): OperationMove {
  const from: OperationState[] = [];
  const to = new Set<OperationState>();
  for (const s of OPERATION_STATES) {
    const target = OPERATION_TRANSITIONS[s][event];
    if (target === undefined) continue;
    from.push(s);
    to.add(target);
  }
  if (from.length === 0 || to.size !== 1) {
    throw new TypeError(`The operation transition table gives "${event}" no single target`);
  }
  return { from, to: [...to][0]! };
}

/** Whether the table lets an operation move from `from` to `to` (by any event). */
export function operationMayMove(from: OperationState, to: OperationState): boolean {
  return Object.values(OPERATION_TRANSITIONS[from]).includes(to);
}

/** Whether `state` accepts no event at all. */
export function isFinalOperationState(state: OperationState): boolean {
  return Object.keys(OPERATION_TRANSITIONS[state]).length === 0;
}

/** The root's durability, read back by the intent's exact layer and root id. */
export const ROOT_DURABILITY = [
  "requested-root-durable",
  "requested-root-absent",
  "conflicting-root-record",
  "ambiguous-root-durability",
] as const;
/** One of {@linkcode ROOT_DURABILITY}. */
export type RootDurability = typeof ROOT_DURABILITY[number];

/** The head, read back against the expected and the requested checkpoint. */
export const HEAD_VISIBILITY = [
  "requested-visible",
  "prior-visible",
  "different-visible",
  "ambiguous",
] as const;
/** One of {@linkcode HEAD_VISIBILITY}. */
export type HeadVisibility = typeof HEAD_VISIBILITY[number];

/**
 * Which checkpoint the head shows: the requested one, the prior (expected)
 * one, another, or unknown (`current` null: it could not be read).
 */
export function headVisibility(
  current: string | null,
  prior: string,
  requested: string,
): HeadVisibility {
  if (current === null) return "ambiguous";
  if (current === requested) return "requested-visible";
  return current === prior ? "prior-visible" : "different-visible";
}

/** What the disk (and the journal's head) shows of one operation at start-up. */
export interface RecoveryEvidence {
  /** Its process tree: gone, still there, or unprovable. */
  readonly processes: "none" | "present" | "unknown";
  /** Its private upper dir. */
  readonly upper: "intact" | "absent" | "unknown";
  /** The requested root, read back; needed in `sealing`. */
  readonly root: RootDurability | null;
  /** The session's head, read back; needed in `sealing`. */
  readonly head: HeadVisibility | null;
}

/**
 * What recovery does with one operation. `keep`: nothing (it is final, or
 * waits for a person). `bind`: the bind transaction now. `capture`:
 * capture its drained upper dir again. `reseal`: seal the intent's exact
 * layer once more. The others move it by the event of the same name
 * (`settle` is a `bind` already visible). Never: run the command again.
 */
export type RecoveryOutcome =
  | { readonly action: "keep" }
  | { readonly action: "bind" }
  | { readonly action: "settle" }
  | { readonly action: "capture" }
  | { readonly action: "reseal" }
  | { readonly action: "stale" }
  | { readonly action: "fail"; readonly reason: string }
  | { readonly action: "escape"; readonly reason: string }
  | { readonly action: "require"; readonly reason: string };

/** The event a recovery outcome moves the operation by, or null when it stays where it is. */
export function recoveryEvent(outcome: RecoveryOutcome): OperationEvent | null {
  switch (outcome.action) {
    case "keep":
    case "capture":
    case "reseal":
      return null;
    case "bind":
    case "settle":
      return "bind";
    case "stale":
    case "fail":
    case "escape":
    case "require":
      return outcome.action;
  }
}

/**
 * The recovery decision (docs/checkpoints.md, "Recovery"): each authority
 * read back on its own (the root by the intent's layer and root id, the
 * head from the journal), nothing inferred from the parent or from time.
 *
 * @throws {TypeError} for a `sealing` operation without root and head evidence.
 */
export function decideRecovery(state: OperationState, e: RecoveryEvidence): RecoveryOutcome {
  switch (state) {
    case "recorded":
      return e.processes === "none"
        ? { action: "fail", reason: "the daemon stopped before the launch was confirmed" }
        : { action: "require", reason: "the daemon stopped while the command may have started" };
    case "launched":
      return e.processes === "none"
        ? { action: "require", reason: "the daemon stopped before the command's end was seen" }
        : { action: "escape", reason: "processes of the operation may still run" };
    case "drained":
      if (e.processes !== "none") {
        return { action: "require", reason: "a process appeared after the drain" };
      }
      if (e.upper === "intact") return { action: "capture" };
      return e.upper === "absent"
        ? { action: "fail", reason: "its changes are gone" }
        : { action: "require", reason: "its changes cannot be read" };
    case "sealing":
      return decideSealing(e);
    default:
      return { action: "keep" };
  }
}

function decideSealing(e: RecoveryEvidence): RecoveryOutcome {
  if (e.root === null || e.head === null) {
    throw new TypeError("Recovery of a sealing operation needs the root and the head read back");
  }
  if (e.head === "ambiguous") return { action: "require", reason: "the head cannot be read" };
  switch (e.root) {
    case "requested-root-durable":
      if (e.head === "requested-visible") return { action: "settle" };
      return e.head === "prior-visible" ? { action: "bind" } : { action: "stale" };
    case "requested-root-absent":
      if (e.head === "requested-visible") {
        return { action: "require", reason: "the head names a root that is not sealed" };
      }
      if (e.head === "prior-visible" && e.upper === "intact" && e.processes === "none") {
        return { action: "reseal" };
      }
      return { action: "fail", reason: "the layer was never sealed; the head did not move" };
    case "conflicting-root-record":
      return { action: "require", reason: "the requested layer holds another root" };
    case "ambiguous-root-durability":
      return { action: "require", reason: "the requested layer cannot be read back" };
  }
}
