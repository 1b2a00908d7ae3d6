import assert from "node:assert/strict";
import type { BranchRecord } from "../journal/records.ts";
import type { Manifest, ManifestBranch } from "../protocol/manifest.ts";
import {
  branchCancelProblem,
  BranchControls,
  stoppedState,
  timeLimitProblem,
  timeLimitStatus,
} from "./branch_controls.ts";

function rec(label: string, state: BranchRecord["state"], status: string | null): BranchRecord {
  return { label, state, status } as BranchRecord;
}

function manifest(state: Manifest["state"], branches: Partial<ManifestBranch>[]): Manifest {
  return {
    id: "s1",
    state,
    branches: branches.map((b) => ({ label: "a", state: "running", files: 0, ...b })),
  } as unknown as Manifest;
}

const ev = (pid: number) => ({
  v: 1 as const,
  t: "lingering" as const,
  attempt: "x",
  since: 1000,
  processes: [{ pid, command: "sleep 1000" }],
  more: 0,
});

Deno.test(
  { name: "time limits: 1 to 3600 whole seconds, for shell branches", permissions: {} },
  () => {
    const shell = (timeLimitS?: number) => ({
      kind: "shell" as const,
      label: "a",
      script: "x",
      timeLimitS,
    });
    assert.equal(timeLimitProblem(shell()), null);
    assert.equal(timeLimitProblem(shell(1)), null);
    assert.equal(timeLimitProblem(shell(3600)), null);
    for (const bad of [0, -1, 1.5]) {
      assert.equal(
        timeLimitProblem(shell(bad)),
        `branch "a": the time limit must be a whole number of seconds from 1 to 3600, got ${bad}`,
      );
    }
    assert.equal(
      timeLimitProblem(shell(3601)),
      'branch "a": a time limit of 3601 s is longer than a split may run (3600 s)',
    );
    assert.equal(timeLimitStatus(7), "failed: time limit of 7 s reached");
    assert.equal(stoppedState(timeLimitStatus(7)), "failed");
    assert.equal(stoppedState("cancelled"), "cancelled");
  },
);

Deno.test({
  name: "a branch can be cancelled alone only while it and its split run",
  permissions: {},
}, () => {
  const branches = [
    rec("a", "running", null),
    rec("b", "pending", null),
    rec("c", "captured", "exited 0"),
  ];
  const run = { id: "s1", state: "run" };
  assert.equal(branchCancelProblem(run, branches, "a"), null);
  assert.equal(branchCancelProblem(run, branches, "b"), null);
  assert.equal(
    branchCancelProblem(run, branches, "c"),
    "branch c of split s1 has already ended: exited 0",
  );
  assert.equal(
    branchCancelProblem(run, branches, "zz"),
    'split s1 has no branch "zz"; its branches: a, b, c',
  );
  assert.equal(
    branchCancelProblem({ id: "s1", state: "kept" }, branches, "a"),
    "split s1 is not running (state kept)",
  );
});

Deno.test(
  { name: "lingering processes show on running branches until they end", permissions: {} },
  () => {
    const c = new BranchControls();
    c.lingering("s1", "a", ev(42));
    const running = manifest("run", [{ label: "a" }, { label: "b" }]);
    const shown = c.decorate(running);
    assert.deepEqual(shown.branches[0]?.lingering, {
      since_unix_ms: 1000,
      processes: [{ pid: 42, command: "sleep 1000" }],
      more: 0,
    });
    assert.equal(shown.branches[1]?.lingering, undefined);
    // Never on a settled branch or split (the manifest.json shape stays as it was).
    assert.equal(
      c.decorate(manifest("run", [{ label: "a", state: "captured" }])).branches[0]?.lingering,
      undefined,
    );
    assert.equal(c.decorate(manifest("await", [{ label: "a" }])).branches[0]?.lingering, undefined);
    c.ended("s1", "a");
    assert.equal(c.decorate(running).branches[0]?.lingering, undefined);
    c.lingering("s1", "a", ev(43));
    c.lingering("s10", "a", ev(44));
    c.forget("s1");
    assert.equal(c.decorate(running).branches[0]?.lingering, undefined);
    assert.ok(c.decorate({ ...running, id: "s10" }).branches[0]?.lingering);
  },
);

Deno.test(
  { name: "a time limit fires once, unless the branch ends first", permissions: {} },
  async () => {
    const c = new BranchControls();
    const fired: string[] = [];
    c.startLimit("s1", "a", 1, () => fired.push("a"));
    c.startLimit("s1", "b", 1, () => fired.push("b"));
    c.startLimit("s2", "c", 1, () => fired.push("c"));
    c.ended("s1", "b");
    c.forget("s2");
    await new Promise((r) => setTimeout(r, 1200));
    assert.deepEqual(fired, ["a"]);
  },
);
