import assert from "node:assert/strict";
import {
  SPLIT_EVENTS,
  SPLIT_STATES,
  SPLIT_TRANSITIONS,
  splitMayMove,
  splitMove,
  type SplitState,
} from "./split_state.ts";

/** Every edge the table must allow, written out once more by hand: a change to the table shows here. */
const ALLOWED: readonly (readonly [SplitState, SplitState])[] = [
  ["run", "await"],
  ["run", "cancelled"],
  ["run", "uncertain"],
  ["await", "kept"],
  ["await", "joined"],
  ["await", "cancelled"],
  ["kept", "kept"],
  ["kept", "joined"],
  ["kept", "cancelled"],
  ["joined", "kept"],
];

Deno.test("split table: every (from, to) pair is allowed or refused as written", () => {
  for (const from of SPLIT_STATES) {
    for (const to of SPLIT_STATES) {
      const expected = ALLOWED.some(([f, t]) => f === from && t === to);
      assert.equal(splitMayMove(from, to), expected, `${from} -> ${to}`);
    }
  }
});

Deno.test("split table: cancelled and uncertain are final; nothing returns to run", () => {
  assert.deepEqual(SPLIT_TRANSITIONS.cancelled, {});
  assert.deepEqual(SPLIT_TRANSITIONS.uncertain, {});
  for (const from of SPLIT_STATES) assert.equal(splitMayMove(from, "run"), false);
});

Deno.test("split moves: each event the daemon writes starts where the daemon expects", () => {
  assert.deepEqual(splitMove("finish"), { from: ["run"], to: "await" });
  assert.deepEqual(splitMove("cancel"), { from: ["run"], to: "cancelled" });
  assert.deepEqual(splitMove("setupFailed"), { from: ["run"], to: "cancelled" });
  // The lease never touches a kept or joined split.
  assert.deepEqual(splitMove("leaseExpired"), { from: ["await"], to: "kept" });
  assert.deepEqual(splitMove("keep"), { from: ["await", "kept"], to: "kept" });
  assert.deepEqual(splitMove("join"), { from: ["await", "kept"], to: "joined" });
  assert.deepEqual(splitMove("releaseFailed"), { from: ["joined"], to: "kept" });
  // marsh discard: a running split is cancelled first; a joined one was consumed.
  assert.deepEqual(splitMove("discard"), { from: ["await", "kept"], to: "cancelled" });
});

Deno.test("split moves: restart has a target per state, so it is not one move", () => {
  assert.throws(() => splitMove("restart"), TypeError);
  assert.equal(SPLIT_TRANSITIONS.run.restart, "uncertain");
  assert.equal(SPLIT_TRANSITIONS.await.restart, "kept");
  for (const e of SPLIT_EVENTS) if (e !== "restart") splitMove(e);
});
