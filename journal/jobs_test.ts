import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import type { JobRecord } from "./records.ts";
import { CRASH_MS, freshPath, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("jobs");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function job(id: string, over: Partial<JobRecord> = {}): JobRecord {
  return {
    id,
    kit: "fixture",
    args: ["fixture", "sh", "-c", "true"],
    split: "s",
    label: id,
    session: "host",
    state: "queued",
    cleanup: "none",
    attempt: null,
    container: null,
    status: null,
    code: null,
    createdMs: 1_000,
    startedMs: null,
    finishedMs: null,
    ...over,
  };
}

Deno.test({ name: "jobs: add, read, update, list by kit, split and cleanup", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  j.createSplit(sampleSplit("s", { state: "kept" }));
  j.addJob(job("a"));
  j.addJob(job("b", { kit: "other", createdMs: 2_000 }));
  assert.throws(() => j.addJob(job("a")), Deno.errors.AlreadyExists);
  assert.deepEqual(j.getJob("a"), job("a"));
  assert.equal(j.getJob("nope"), null);
  j.updateJob("a", { state: "running", cleanup: "live", attempt: "s-a-1", startedMs: 1_500 });
  j.updateJob("a", { container: "c".repeat(64) });
  assert.deepEqual(j.getJob("a"), {
    ...job("a"),
    state: "running",
    cleanup: "live",
    attempt: "s-a-1",
    container: "c".repeat(64),
    startedMs: 1_500,
  });
  assert.throws(() => j.updateJob("nope", { state: "failed" }), Deno.errors.NotFound);
  assert.throws(() => j.updateJob("a", { kit: "x" } as never), TypeError);
  assert.deepEqual(j.listJobs().map((x) => x.id), ["b", "a"]);
  assert.deepEqual(j.listJobs({ kit: "fixture" }).map((x) => x.id), ["a"]);
  assert.deepEqual(j.listJobs({ cleanups: ["live", "uncertain"] }).map((x) => x.id), ["a"]);
  assert.deepEqual(j.listJobs({ cleanups: [] }), []);
  assert.deepEqual(j.listJobs({ split: "s" }).length, 2);
  assert.deepEqual(j.listJobs({ creatorSession: "x" }), []);
  // Jobs are lineage: they outlive the split's record.
  j.deleteSplit("s");
  assert.equal(j.listJobs().length, 2);
});

Deno.test({
  name: "restart: queued jobs are cancelled; launched ones uncertain with their slot held",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  j.createSplit(sampleSplit("s"));
  j.addJob(job("q"));
  j.addJob(job("r", { state: "running", cleanup: "live", container: "d".repeat(64) }));
  j.addJob(job("n", { state: "running", cleanup: "live" }));
  j.addJob(job("f", { state: "finished", cleanup: "removed", status: "exited 0", code: 0 }));
  const report = j.recoverAfterRestart(CRASH_MS);
  assert.deepEqual(report.jobs, [
    { id: "q", kit: "fixture", split: "s", label: "q", to: "cancelled", container: null },
    { id: "r", kit: "fixture", split: "s", label: "r", to: "uncertain", container: "d".repeat(64) },
    { id: "n", kit: "fixture", split: "s", label: "n", to: "uncertain", container: null },
  ]);
  assert.deepEqual(
    j.listJobs().map((x) => [x.id, x.state, x.cleanup, x.status]).sort(),
    [
      ["f", "finished", "removed", "exited 0"],
      ["n", "uncertain", "uncertain", null],
      ["q", "cancelled", "none", "cancelled"],
      ["r", "uncertain", "uncertain", null],
    ],
  );
  assert.deepEqual(j.recoverAfterRestart(CRASH_MS + 1).jobs, []);
});
