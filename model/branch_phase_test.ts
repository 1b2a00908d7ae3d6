import assert from "node:assert/strict";
import {
  BRANCH_PHASE_TRANSITIONS,
  type BranchPhase,
  type BranchPhaseKind,
  branchPhaseMayMove,
  endUnconfirmed,
  finalOutputBytes,
  launchedAttempt,
  nextBranchPhase,
  started,
} from "./branch_phase.ts";

const KINDS = Object.keys(BRANCH_PHASE_TRANSITIONS) as BranchPhaseKind[];

/** Every move the table must allow, written out once more by hand: a change to the table shows here. */
const ALLOWED: readonly (readonly [BranchPhaseKind, BranchPhaseKind])[] = [
  ["queued", "admitted"],
  ["queued", "ended"],
  ["admitted", "launching"],
  ["admitted", "ended"],
  ["launching", "running"],
  ["launching", "exited"],
  ["launching", "settling"],
  ["launching", "ended"],
  ["running", "exited"],
  ["running", "settling"],
  ["running", "ended"],
  ["exited", "settling"],
  ["exited", "ended"],
  ["settling", "ended"],
];

const attempt = { id: "s-a-0000", dir: "/c/attempts/s-a-0000" };
const exit = { code: 0, signal: null };
const SAMPLE: { readonly [K in BranchPhaseKind]: Extract<BranchPhase, { kind: K }> } = {
  queued: { kind: "queued" },
  admitted: { kind: "admitted", attempt },
  launching: { kind: "launching", attempt },
  running: { kind: "running", attempt, container: null },
  exited: { kind: "exited", attempt, container: null, exit, wall: false, started: true },
  settling: { kind: "settling", attempt, container: null, exit, wall: false, outputBytes: 5 },
  ended: { kind: "ended", state: "captured", attempt, end: "settled", outputBytes: 5 },
};

Deno.test("branch phases: every (from, to) pair is allowed or refused as written", () => {
  for (const from of KINDS) {
    for (const to of KINDS) {
      const expected = ALLOWED.some(([f, t]) => f === from && t === to);
      assert.equal(branchPhaseMayMove(from, to), expected, `${from} -> ${to}`);
      if (expected) assert.equal(nextBranchPhase(SAMPLE[from], SAMPLE[to]), SAMPLE[to]);
      else assert.throws(() => nextBranchPhase(SAMPLE[from], SAMPLE[to]), TypeError);
    }
  }
});

Deno.test("branch phases: a cancel reaches only an attempt the worker was asked to launch", () => {
  assert.equal(launchedAttempt(SAMPLE.queued), null);
  assert.equal(launchedAttempt(SAMPLE.admitted), null, "a Kit attempt still making /run/marsh");
  for (const k of ["launching", "running", "exited", "settling", "ended"] as const) {
    assert.equal(launchedAttempt(SAMPLE[k]), attempt.id, k);
  }
  const unlaunched: BranchPhase = {
    kind: "ended",
    state: "cancelled",
    attempt: null,
    end: "unlaunched",
    outputBytes: null,
  };
  assert.equal(launchedAttempt(unlaunched), null);
});

Deno.test("branch phases: an end is unconfirmed with neither an exit nor a settlement", () => {
  const unconfirmed = KINDS.filter((k) => endUnconfirmed(SAMPLE[k]));
  assert.deepEqual(unconfirmed, ["launching", "running"]);
  const lost: BranchPhase = {
    ...SAMPLE.ended,
    state: "uncertain",
    end: "unknown",
    outputBytes: null,
  };
  assert.equal(endUnconfirmed(lost), true);
  assert.equal(endUnconfirmed({ ...lost, end: "exited" }), false);
});

Deno.test("branch phases: output is final from settling on; started only after launched", () => {
  assert.deepEqual(KINDS.map((k) => finalOutputBytes(SAMPLE[k])), [
    null,
    null,
    null,
    null,
    null,
    5,
    5,
  ]);
  assert.deepEqual(KINDS.filter((k) => started(SAMPLE[k])), ["running", "exited"]);
  assert.equal(started({ ...SAMPLE.exited, started: false }), false);
});
