import assert from "node:assert/strict";
import {
  decideRecovery,
  HEAD_VISIBILITY,
  headVisibility,
  isFinalOperationState,
  isOperationState,
  LIVE_OPERATION_STATES,
  OPERATION_EVENTS,
  OPERATION_STATES,
  OPERATION_TRANSITIONS,
  operationMayMove,
  operationMove,
  type OperationState,
  recoveryEvent,
  type RecoveryEvidence,
  ROOT_DURABILITY,
} from "./operation_state.ts";

/** Every edge the table must allow, written out once more by hand: a change to the table shows here. */
const ALLOWED: readonly (readonly [OperationState, OperationState])[] = [
  ["recorded", "launched"],
  ["recorded", "failed"],
  ["recorded", "recovery-required"],
  ["launched", "drained"],
  ["launched", "escaped"],
  ["launched", "recovery-required"],
  ["drained", "sealing"],
  ["drained", "bound"],
  ["drained", "discarded"],
  ["drained", "stale"],
  ["drained", "failed"],
  ["drained", "recovery-required"],
  ["sealing", "bound"],
  ["sealing", "stale"],
  ["sealing", "failed"],
  ["sealing", "recovery-required"],
  ["failed", "recovery-required"],
  ["escaped", "recovery-required"],
  ["recovery-required", "sealing"],
  ["recovery-required", "abandoned"],
];

Deno.test("operation table: every (from, to) pair is allowed or refused as written", () => {
  let pairs = 0;
  for (const from of OPERATION_STATES) {
    for (const to of OPERATION_STATES) {
      const expected = ALLOWED.some(([f, t]) => f === from && t === to);
      assert.equal(operationMayMove(from, to), expected, `${from} -> ${to}`);
      pairs++;
    }
  }
  assert.equal(pairs, OPERATION_STATES.length ** 2);
});

Deno.test("operation table: bound, discarded, stale and abandoned are final; nothing returns to recorded or launched", () => {
  const finals = OPERATION_STATES.filter(isFinalOperationState);
  assert.deepEqual(finals, ["bound", "discarded", "stale", "abandoned"]);
  for (const from of OPERATION_STATES) {
    assert.equal(operationMayMove(from, "recorded"), false, from);
    // Only a recorded operation is launched: nothing is ever run twice.
    assert.equal(operationMayMove(from, "launched"), from === "recorded", from);
  }
  // A bound operation has a checkpoint only when it passed drained (no change) or sealing.
  assert.deepEqual(operationMove("bind").from, ["drained", "sealing"]);
});

Deno.test("operation moves: each event starts where the daemon expects", () => {
  assert.deepEqual(operationMove("launch"), { from: ["recorded"], to: "launched" });
  assert.deepEqual(operationMove("drain"), { from: ["launched"], to: "drained" });
  assert.deepEqual(operationMove("intend"), { from: ["drained"], to: "sealing" });
  assert.deepEqual(operationMove("discard"), { from: ["drained"], to: "discarded" });
  assert.deepEqual(operationMove("stale"), { from: ["drained", "sealing"], to: "stale" });
  assert.deepEqual(operationMove("fail"), {
    from: ["recorded", "drained", "sealing"],
    to: "failed",
  });
  assert.deepEqual(operationMove("escape"), { from: ["launched"], to: "escaped" });
  assert.deepEqual(operationMove("require").from, [
    "recorded",
    "launched",
    "drained",
    "sealing",
    "failed",
    "escaped",
  ]);
  assert.deepEqual(operationMove("resume"), { from: ["recovery-required"], to: "sealing" });
  assert.deepEqual(operationMove("abandon"), { from: ["recovery-required"], to: "abandoned" });
  for (const e of OPERATION_EVENTS) operationMove(e);
  for (const s of LIVE_OPERATION_STATES) assert.ok(isOperationState(s));
  assert.equal(isOperationState("sealed"), false);
  assert.equal(Object.keys(OPERATION_TRANSITIONS).length, OPERATION_STATES.length);
});

Deno.test("head visibility: the head read back against the prior and the requested checkpoint", () => {
  assert.equal(headVisibility("b", "a", "b"), "requested-visible");
  assert.equal(headVisibility("a", "a", "b"), "prior-visible");
  assert.equal(headVisibility("c", "a", "b"), "different-visible");
  assert.equal(headVisibility(null, "a", "b"), "ambiguous");
});

/**
 * Every (state, evidence) pair: 11 × 3 × 3 × 4 × 4 cases, few enough to
 * check exhaustively rather than by sampling, so a wrong row cannot hide.
 */
function* everyCase(): Generator<[OperationState, RecoveryEvidence]> {
  for (const s of OPERATION_STATES) {
    for (const processes of ["none", "present", "unknown"] as const) {
      for (const upper of ["intact", "absent", "unknown"] as const) {
        for (const root of ROOT_DURABILITY) {
          for (const head of HEAD_VISIBILITY) yield [s, { processes, upper, root, head }];
        }
      }
    }
  }
}

/** Checks `check` on every case of {@linkcode everyCase}. */
function forEveryCase(check: (s: OperationState, e: RecoveryEvidence) => void): void {
  let n = 0;
  for (const [s, e] of everyCase()) {
    check(s, e);
    n++;
  }
  assert.equal(
    n,
    OPERATION_STATES.length * 3 * 3 * ROOT_DURABILITY.length * HEAD_VISIBILITY.length,
  );
}

Deno.test("recovery: every decision is a move the table allows, and never a launch", () => {
  forEveryCase((s, e) => {
    const event = recoveryEvent(decideRecovery(s, e));
    if (event === null) return;
    assert.notEqual(event, "launch");
    const to = OPERATION_TRANSITIONS[s][event];
    assert.ok(to !== undefined, `${s} refuses ${event}`);
  });
});

Deno.test("recovery: idempotent — run again on what it left, it keeps or repeats the same step", () => {
  forEveryCase((s, e) => {
    const first = decideRecovery(s, e);
    const event = recoveryEvent(first);
    if (event === null) {
      // capture, reseal and keep leave the state: a second run decides the same.
      assert.deepEqual(decideRecovery(s, e), first);
      return;
    }
    const next = OPERATION_TRANSITIONS[s][event]!;
    assert.deepEqual(decideRecovery(next, e), { action: "keep" }, `${s} -${event}-> ${next}`);
  });
});

Deno.test("recovery: binds only a durable requested root over the prior head", () => {
  forEveryCase((s, e) => {
    const action = decideRecovery(s, e).action;
    if (action === "bind") {
      assert.equal(s, "sealing");
      assert.equal(e.root, "requested-root-durable");
      assert.equal(e.head, "prior-visible");
    }
    if (action === "settle") {
      assert.equal(e.root, "requested-root-durable");
      assert.equal(e.head, "requested-visible");
    }
    // Without the drain proved, nothing of its files is used.
    if (action === "capture" || action === "reseal") {
      assert.equal(e.processes, "none");
      assert.equal(e.upper, "intact");
    }
    // A conflicting or unreadable root, or an unreadable head, is never settled by guess.
    if (
      s === "sealing" &&
      (e.root === "conflicting-root-record" || e.root === "ambiguous-root-durability" ||
        e.head === "ambiguous")
    ) {
      assert.equal(action, "require");
    }
  });
});

Deno.test("recovery: the sealing table row by row", () => {
  const seal = (root: RecoveryEvidence["root"], head: RecoveryEvidence["head"], upper = "intact") =>
    decideRecovery("sealing", {
      processes: "none",
      upper: upper as RecoveryEvidence["upper"],
      root,
      head,
    }).action;
  assert.equal(seal("requested-root-durable", "prior-visible"), "bind");
  assert.equal(seal("requested-root-durable", "different-visible"), "stale");
  assert.equal(seal("requested-root-durable", "requested-visible"), "settle");
  assert.equal(seal("requested-root-absent", "prior-visible"), "reseal");
  assert.equal(seal("requested-root-absent", "prior-visible", "absent"), "fail");
  assert.equal(seal("requested-root-absent", "different-visible"), "fail");
  assert.equal(seal("requested-root-absent", "requested-visible"), "require");
  assert.equal(seal("conflicting-root-record", "prior-visible"), "require");
  assert.equal(seal("ambiguous-root-durability", "prior-visible"), "require");
  assert.equal(seal("requested-root-durable", "ambiguous"), "require");
  assert.throws(
    () => decideRecovery("sealing", { processes: "none", upper: "intact", root: null, head: null }),
    TypeError,
  );
});

Deno.test("recovery: before sealing, by what the processes and the upper dir show", () => {
  const none = { root: null, head: null } as const;
  const d = (s: OperationState, processes: RecoveryEvidence["processes"], upper = "intact") =>
    decideRecovery(s, { processes, upper: upper as RecoveryEvidence["upper"], ...none }).action;
  assert.equal(d("recorded", "none"), "fail");
  assert.equal(d("recorded", "unknown"), "require");
  assert.equal(d("launched", "none"), "require");
  assert.equal(d("launched", "present"), "escape");
  assert.equal(d("launched", "unknown"), "escape");
  assert.equal(d("drained", "none"), "capture");
  assert.equal(d("drained", "none", "absent"), "fail");
  assert.equal(d("drained", "none", "unknown"), "require");
  assert.equal(d("drained", "present"), "require");
  for (
    const s of ["bound", "discarded", "stale", "failed", "escaped", "recovery-required"] as const
  ) {
    assert.equal(d(s, "present", "unknown"), "keep", s);
  }
});
