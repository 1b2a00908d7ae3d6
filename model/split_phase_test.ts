import assert from "node:assert/strict";
import {
  cancelReason,
  nextSplitPhase,
  SPLIT_PHASE_TRANSITIONS,
  type SplitPhase,
  type SplitPhaseKind,
  splitPhaseMayMove,
} from "./split_phase.ts";

const KINDS = Object.keys(SPLIT_PHASE_TRANSITIONS) as SplitPhaseKind[];

/** Every move the table must allow, written out once more by hand: a change to the table shows here. */
const ALLOWED: readonly (readonly [SplitPhaseKind, SplitPhaseKind])[] = [
  ["running", "cancelling"],
  ["running", "held"],
  ["running", "ended"],
  ["cancelling", "ended"],
  ["held", "ended"],
];

const SAMPLE: { readonly [K in SplitPhaseKind]: Extract<SplitPhase, { kind: K }> } = {
  running: { kind: "running" },
  cancelling: { kind: "cancelling", reason: "cancelled by the creator" },
  held: { kind: "held" },
  ended: { kind: "ended" },
};

Deno.test("split phases: every (from, to) pair is allowed or refused as written", () => {
  for (const from of KINDS) {
    for (const to of KINDS) {
      const expected = ALLOWED.some(([f, t]) => f === from && t === to);
      assert.equal(splitPhaseMayMove(from, to), expected, `${from} -> ${to}`);
      if (expected) assert.equal(nextSplitPhase(SAMPLE[from], SAMPLE[to]), SAMPLE[to]);
      else assert.throws(() => nextSplitPhase(SAMPLE[from], SAMPLE[to]), TypeError);
    }
  }
});

Deno.test("split phases: a cancelling split keeps its first reason; a settled one is never cancelled", () => {
  assert.equal(cancelReason(SAMPLE.cancelling), "cancelled by the creator");
  assert.equal(cancelReason(SAMPLE.running), null);
  // The first reason wins: cancelling does not move to cancelling again.
  assert.equal(splitPhaseMayMove("cancelling", "cancelling"), false);
  assert.equal(splitPhaseMayMove("held", "cancelling"), false);
});
