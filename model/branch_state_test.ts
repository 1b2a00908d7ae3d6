import assert from "node:assert/strict";
import {
  BRANCH_EVENTS,
  BRANCH_STATES,
  BRANCH_TRANSITIONS,
  branchMayMove,
  branchMove,
  type BranchState,
  endEvent,
} from "./branch_state.ts";

/** Every edge the table must allow, written out once more by hand: a change to the table shows here. */
const ALLOWED: readonly (readonly [BranchState, BranchState])[] = [
  ["pending", "running"],
  ["pending", "cancelled"],
  ["pending", "failed"],
  ["running", "captured"],
  ["running", "rejected"],
  ["running", "failed"],
  ["running", "cancelled"],
  ["running", "uncertain"],
  ["captured", "discarded"],
  ["rejected", "discarded"],
  ["failed", "discarded"],
  ["cancelled", "discarded"],
  ["uncertain", "discarded"],
];

Deno.test("branch table: every (from, to) pair is allowed or refused as written", () => {
  for (const from of BRANCH_STATES) {
    for (const to of BRANCH_STATES) {
      const expected = ALLOWED.some(([f, t]) => f === from && t === to);
      assert.equal(branchMayMove(from, to), expected, `${from} -> ${to}`);
    }
  }
});

Deno.test("branch table: the five ends lead only to discarded, which is final", () => {
  for (const s of ["captured", "rejected", "failed", "cancelled", "uncertain"] as const) {
    assert.deepEqual(BRANCH_TRANSITIONS[s], { discard: "discarded" });
  }
  assert.deepEqual(BRANCH_TRANSITIONS.discarded, {});
  for (const to of BRANCH_STATES) assert.equal(branchMayMove("discarded", to), false, to);
});

Deno.test("branch moves: discard starts from every end, never from pending or running", () => {
  assert.deepEqual(branchMove("discard"), {
    from: ["captured", "rejected", "failed", "cancelled", "uncertain"],
    to: "discarded",
  });
});

Deno.test("branch moves: before the start from pending, after it from running", () => {
  for (const e of ["start", "skip", "refuse"] as const) {
    assert.deepEqual(branchMove(e).from, ["pending"], e);
  }
  for (const e of ["capture", "reject", "fail", "stop", "lose"] as const) {
    assert.deepEqual(branchMove(e).from, ["running"], e);
  }
  assert.equal(branchMove("skip").to, "cancelled");
  assert.equal(branchMove("refuse").to, "failed");
  assert.equal(branchMove("lose").to, "uncertain");
  assert.throws(() => branchMove("restart"), TypeError);
  for (const e of BRANCH_EVENTS) if (e !== "restart") branchMove(e);
});

Deno.test("branch moves: a settlement's state names the event that reaches it", () => {
  for (const s of ["captured", "rejected", "failed", "cancelled"] as const) {
    assert.equal(branchMove(endEvent(s)).to, s);
  }
});
