/**
 * What a live daemon knows of one branch it runs, as one tagged union with
 * one transition table (docs/architecture.md, "The state machines"). The
 * journaled state (`model/branch_state.ts`) is what survives a restart;
 * this phase also says how far the worker got with the attempt, which only
 * the running daemon can know. Pure: no I/O.
 *
 * @module
 */

/** An attempt of a branch: its id and its directory in the control dir. */
export interface AttemptRef {
  readonly id: string;
  readonly dir: string;
}

/** How a branch's processes (or its container's command) ended. */
export interface Exit {
  readonly code: number | null;
  readonly signal: string | null;
}

/** How a branch ended, as the journal records it. */
export type EndState = "captured" | "rejected" | "failed" | "cancelled" | "uncertain";

/**
 * What is known of an ended branch's processes: `settled` (the worker
 * confirmed the end: every process or the container is gone), `exited`
 * (they exited, the rest is unknown), `unknown` (the worker gave up or a
 * container may remain), `unlaunched` (nothing ever ran).
 */
export type EndProof = "settled" | "exited" | "unknown" | "unlaunched";

/**
 * A branch's phase. `queued`: forked, not launched. `admitted`: it holds a
 * pool slot and has an attempt directory (a Kit attempt's `/run/marsh` is
 * being made). `launching`: journaled `running`, the worker is asked.
 * `running`: the worker said its processes (or container) exist. `exited`:
 * they exited. `settling`: the worker confirmed the end; capture and
 * publication run, its output size is final. `ended`: journaled in its end
 * state.
 */
export type BranchPhase =
  | { readonly kind: "queued" }
  | { readonly kind: "admitted"; readonly attempt: AttemptRef }
  | { readonly kind: "launching"; readonly attempt: AttemptRef }
  | { readonly kind: "running"; readonly attempt: AttemptRef; readonly container: string | null }
  | {
    readonly kind: "exited";
    readonly attempt: AttemptRef;
    readonly container: string | null;
    readonly exit: Exit;
    /** The Kit's wall clock stopped the container. */
    readonly wall: boolean;
    /** The worker had said `launched` before the exit. */
    readonly started: boolean;
  }
  | {
    readonly kind: "settling";
    readonly attempt: AttemptRef;
    readonly container: string | null;
    readonly exit: Exit | null;
    readonly wall: boolean;
    /** Bytes of stdout and stderr the worker kept. */
    readonly outputBytes: number;
  }
  | {
    readonly kind: "ended";
    readonly state: EndState;
    /** The attempt, when one was launched. */
    readonly attempt: AttemptRef | null;
    readonly end: EndProof;
    /** Final output bytes, when the end was settled. */
    readonly outputBytes: number | null;
  };

/** A phase's kind. */
export type BranchPhaseKind = BranchPhase["kind"];

/** THE transition table of a live branch: from each phase, the phases it may move to. */
export const BRANCH_PHASE_TRANSITIONS: {
  readonly [K in BranchPhaseKind]: readonly BranchPhaseKind[];
} = {
  queued: ["admitted", "ended"],
  admitted: ["launching", "ended"],
  launching: ["running", "exited", "settling", "ended"],
  running: ["exited", "settling", "ended"],
  exited: ["settling", "ended"],
  settling: ["ended"],
  ended: [],
};

/** Whether the table lets a live branch move from phase `from` to phase `to`. */
export function branchPhaseMayMove(from: BranchPhaseKind, to: BranchPhaseKind): boolean {
  return BRANCH_PHASE_TRANSITIONS[from].includes(to);
}

/**
 * Returns `to` when the table allows the move from `from`.
 *
 * @throws {TypeError} naming both phases when it does not.
 */
export function nextBranchPhase(from: BranchPhase, to: BranchPhase): BranchPhase {
  if (!branchPhaseMayMove(from.kind, to.kind)) {
    throw new TypeError(`A live branch cannot move from ${from.kind} to ${to.kind}`);
  }
  return to;
}

/** The attempt a cancel must reach: one the worker was asked to launch, or null. */
export function launchedAttempt(p: BranchPhase): string | null {
  switch (p.kind) {
    case "queued":
    case "admitted":
      return null;
    default:
      return p.attempt?.id ?? null;
  }
}

/** The attempt's directory, once there is one, or null. */
export function attemptDir(p: BranchPhase): string | null {
  return p.kind === "queued" ? null : p.attempt?.dir ?? null;
}

/** The attempt's output size once it is final, or null while it may still grow. */
export function finalOutputBytes(p: BranchPhase): number | null {
  return p.kind === "settling" || p.kind === "ended" ? p.outputBytes : null;
}

/** Whether the processes of the branch were known to exist (the worker said `launched`). */
export function started(p: BranchPhase): boolean {
  return p.kind === "running" || (p.kind === "exited" && p.started);
}

/** The container of a Kit attempt, once the worker named it. */
export function containerOf(p: BranchPhase): string | null {
  return p.kind === "running" || p.kind === "exited" || p.kind === "settling" ? p.container : null;
}

/**
 * Whether a launched branch's end is unconfirmed: no exit and no settlement
 * seen. A split with such a branch is never removed (its processes may
 * still write its fork).
 */
export function endUnconfirmed(p: BranchPhase): boolean {
  return p.kind === "launching" || p.kind === "running" ||
    (p.kind === "ended" && p.end === "unknown");
}

/** What is known of the end of a branch the worker gave up on, from its phase. */
export function lostProof(p: BranchPhase): EndProof {
  return p.kind === "exited" ? "exited" : "unknown";
}
