import assert from "node:assert/strict";
import { Journal, RESTART_REASON } from "./journal.ts";
import type { RecoveryReport } from "./records.ts";
import { DENO, killAfterWrite } from "./_crash.ts";
import {
  CRASH_MS,
  freshPath,
  sampleBranch,
  sampleCapability,
  sampleSplit,
  scratchDir,
  writeMidRunScenario,
} from "./_testing.ts";

const dir = scratchDir("recovery");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir], run: [DENO] };

const EXPECTED: RecoveryReport = {
  atMs: CRASH_MS,
  splits: [
    { id: "w", from: "await", to: "kept" },
    { id: "r", from: "run", to: "uncertain" },
    { id: "n", from: "run", to: "uncertain" },
  ],
  branches: [
    { split: "r", label: "a", from: "running", to: "uncertain", fork: "/p/.marsh/split/r/a" },
    { split: "r", label: "b", from: "pending", to: "cancelled", fork: "/p/.marsh/split/r/b" },
    { split: "n", label: "x", from: "running", to: "uncertain", fork: "/p/.marsh/split/n/x" },
  ],
  revokedCapabilities: ["cap-w", "cap-r", "cap-r-a", "cap-n"],
  jobs: [],
};

Deno.test({
  name:
    "restart after kill -9 mid-run: uncertain, untrusted, kept, cancelled, revoked, nothing else",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("mid-run", path, dir);

  using j = Journal.open(path);
  // What the crash left, to compare against below.
  const before = new Map(
    j.listSplits().map((s) => [s.id, { split: s, branches: j.branches(s.id) }]),
  );
  const capsBefore = ["cap-r", "cap-r-a", "cap-r-c", "cap-n", "cap-w"].map((id) =>
    j.getCapability(id)!
  );

  assert.deepEqual(j.recoverAfterRestart(CRASH_MS), EXPECTED);

  const split = (id: string) => j.getSplit(id)!;
  const branch = (s: string, l: string) => j.getBranch(s, l)!;
  const was = (id: string) => before.get(id)!;

  assert.deepEqual(split("r"), { ...was("r").split, state: "uncertain", reason: RESTART_REASON });
  assert.deepEqual(split("n"), { ...was("n").split, state: "uncertain", reason: RESTART_REASON });
  assert.deepEqual(split("w"), { ...was("w").split, state: "kept", reason: RESTART_REASON });
  for (const id of ["k", "j", "x", "u"]) assert.deepEqual(split(id), was(id).split);

  const launched = { state: "running", startedMs: 1_100, attempt: "att" } as const;
  assert.deepEqual(
    branch("r", "a"),
    sampleBranch("r", "a", 0, {
      ...launched,
      mechanism: "cgroup",
      state: "uncertain",
      trust: "untrusted",
    }),
  );
  assert.deepEqual(
    branch("r", "b"),
    sampleBranch("r", "b", 1, {
      state: "cancelled",
      status: "cancelled",
      code: 130,
      finishedMs: CRASH_MS,
    }),
  );
  assert.equal(branch("n", "x").state, "uncertain");
  assert.equal(branch("n", "x").trust, "untrusted");
  assert.equal(branch("n", "x").jobId, "job-1");
  // Captured branches, in any split, are untouched.
  for (const id of ["r", "w", "k", "j", "x", "u"]) {
    const label = id === "r" ? "c" : "a";
    assert.deepEqual(branch(id, label), was(id).branches.find((b) => b.label === label));
  }

  assert.deepEqual(j.liveCapabilities(), []);
  for (const cap of capsBefore) {
    assert.deepEqual(
      j.getCapability(cap.id),
      cap.state === "live" ? { ...cap, state: "revoked", revokedMs: CRASH_MS } : cap,
    );
  }
  assert.deepEqual(j.counts(), { active: 0, awaiting: 0, kept: 2 });

  // Nothing was deleted: every record is still there.
  assert.deepEqual(j.listSplits().map((s) => s.id).sort(), [...before.keys()].sort());
  for (const [id, { branches }] of before) {
    assert.deepEqual(j.branches(id).map((b) => b.label), branches.map((b) => b.label));
  }
});

Deno.test({ name: "recovery a second time changes nothing", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  writeMidRunScenario(j);
  j.recoverAfterRestart(CRASH_MS);
  const snapshot = () => j.listSplits().map((s) => ({ s, b: j.branches(s.id) }));
  const after = snapshot();
  assert.deepEqual(j.recoverAfterRestart(CRASH_MS + 1), {
    atMs: CRASH_MS + 1,
    splits: [],
    branches: [],
    revokedCapabilities: [],
    jobs: [],
  });
  assert.deepEqual(snapshot(), after);
});

Deno.test({
  name: "an unlaunched branch stays cancelled: the CAS refuses to start it",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  j.createSplit(sampleSplit("s"));
  j.addBranches("s", [sampleBranch("s", "b", 0)]);
  j.createCapability(sampleCapability("cap-s", "s", null));
  j.recoverAfterRestart(CRASH_MS);
  assert.equal(j.transitionBranch("s", "b", ["pending"], "running"), false);
  assert.equal(j.transitionSplit("s", ["run"], "await"), false);
  assert.equal(j.getBranch("s", "b")?.state, "cancelled");
});

Deno.test({ name: "recovery is one transaction: a failure changes nothing", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  writeMidRunScenario(j);
  const before = j.listSplits();
  assert.throws(() =>
    j.immediate(() => {
      j.recoverAfterRestart(CRASH_MS);
      throw new Error("power cut");
    }), /power cut/);
  assert.deepEqual(j.listSplits(), before);
  assert.equal(j.liveCapabilities().length, 4);
});
