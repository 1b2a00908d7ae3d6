/**
 * What `marsh jobs` answers each caller, over a real journal
 * (docs/rules.md "Lineage"): a Kit job sees only its own subtree in every
 * form, `--all` and `--json` included; a shell branch its session's trees;
 * `marsh jobs show` resolves a prefix among what the caller may see.
 */

import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import type { JobRecord } from "../journal/records.ts";
import { freshPath, sampleBranch, sampleSplit, scratchDir } from "../journal/_testing.ts";
import type { Authority } from "./conn.ts";
import { jobsOutput, listedSplits } from "./jobs_view.ts";
import { RequestError } from "./request_error.ts";

const dir = scratchDir("jobs-view");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };
const NOW = 1_700_000_000_000;

function job(id: string, split: string, label: string, over: Partial<JobRecord> = {}): JobRecord {
  return {
    id,
    kit: "fixture",
    args: ["fixture", "true"],
    split,
    label,
    session: "host",
    state: "finished",
    cleanup: "removed",
    attempt: null,
    container: null,
    status: "exited 0",
    code: 0,
    createdMs: NOW - 60_000,
    startedMs: NOW - 59_000,
    finishedMs: NOW - 50_000,
    ...over,
  };
}

/**
 * A host split `top` (argv branch a: job `jobaaaa1`, shell branch s), job
 * a's own split `nest` (job `jobnnnn1`), and a split `mine` a shell
 * branch's session `top/s` made, with its job `jobmmmm1`.
 */
function fill(j: Journal): void {
  j.createSplit(sampleSplit("top", { state: "joined", status: 0, createdMs: NOW - 70_000 }));
  j.addBranches("top", [
    sampleBranch("top", "a", 0, {
      kind: "argv",
      placement: "kit:fixture",
      run: ["fixture", "true"],
      jobId: "jobaaaa1",
    }),
    sampleBranch("top", "s", 1, { state: "captured", code: 0, run: "make\ntest" }),
  ]);
  j.addJob(job("jobaaaa1", "top", "a", { createdMs: NOW - 69_000 }));
  j.createSplit(sampleSplit("nest", {
    creator: { kind: "job", id: "jobaaaa1" },
    parent: { split: "top", label: "a" },
    depth: 2,
    state: "joined",
    status: 0,
    createdMs: NOW - 65_000,
  }));
  j.addBranches("nest", [
    sampleBranch("nest", "n", 0, {
      kind: "argv",
      placement: "kit:fixture",
      run: ["fixture", "true"],
      jobId: "jobnnnn1",
    }),
  ]);
  j.addJob(job("jobnnnn1", "nest", "n", { createdMs: NOW - 64_000 }));
  j.createSplit(sampleSplit("mine", {
    creator: { kind: "session", id: "top/s" },
    session: "top/s",
    parent: { split: "top", label: "s" },
    depth: 2,
    state: "joined",
    status: 0,
    createdMs: NOW - 62_000,
  }));
  j.addBranches("mine", [
    sampleBranch("mine", "m", 0, {
      kind: "argv",
      placement: "kit:fixture",
      run: ["fixture", "true"],
      jobId: "jobmmmm1",
    }),
  ]);
  j.addJob(job("jobmmmm1", "mine", "m", { session: "top/s", createdMs: NOW - 61_000 }));
}

const JOB_A: Authority = {
  kind: "job",
  job: "jobaaaa1",
  attempt: "att",
  split: "top",
  label: "a",
  session: "host",
  fork: "/p/.marsh/split/top/a",
};

function ids(json: string): string[] {
  return (JSON.parse(json) as { jobs: { job_id: string }[] }).jobs.map((j) => j.job_id);
}

Deno.test({
  name: "jobs view: a Kit job sees only its own subtree, --all and --json included",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  fill(j);
  for (const all of [false, true]) {
    assert.deepEqual(
      ids(jobsOutput(j, JOB_A, { view: "list", all, json: true }, NOW)),
      ["jobaaaa1", "jobnnnn1"],
    );
    assert.equal(
      jobsOutput(j, JOB_A, { view: "tree", all, json: false }, NOW),
      [
        "ID        STARTED  STATE     EXIT  RUN   COMMAND",
        "jobaaaa1  1m ago   finished  0     9.0s  fixture true",
        "nest      1m ago   joined    0     -     └─ split (n)",
        "jobnnnn1  1m ago   finished  0     9.0s     └─ n: fixture true",
        "",
      ].join("\n"),
    );
  }
  const tree = JSON.parse(jobsOutput(j, JOB_A, { view: "tree", all: true, json: true }, NOW));
  assert.deepEqual(tree.jobs.map((n: { job_id: string }) => n.job_id), ["jobaaaa1"]);
  // Outside its subtree a job is unknown, whichever its id.
  assert.throws(
    () => jobsOutput(j, JOB_A, { view: "show", all: false, json: false, job: "jobmmmm1" }, NOW),
    (e) =>
      e instanceof RequestError && e.code === 2 &&
      e.message === "unknown job jobmmmm1 (see marsh jobs --all)",
  );
  assert.match(
    jobsOutput(j, JOB_A, { view: "show", all: false, json: false, job: "jobnnnn1" }, NOW),
    /^job: {7}jobnnnn1\n/,
  );
});

Deno.test({
  name: "jobs view: a session's trees wherever they hang; the host's; show resolves prefixes",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  fill(j);
  const branch: Authority = { kind: "branch", split: "top", label: "s", session: "top/s" };
  assert.equal(
    jobsOutput(j, branch, { view: "tree", all: false, json: false }, NOW),
    [
      "ID        STARTED  STATE     EXIT  RUN   COMMAND",
      "mine      1m ago   joined    0     -     split (m)",
      "jobmmmm1  1m ago   finished  0     9.0s  └─ m: fixture true",
      "",
    ].join("\n"),
  );
  // --all and --json: every tree.
  assert.deepEqual(
    ids(jobsOutput(j, branch, { view: "list", all: false, json: true }, NOW)),
    ["jobaaaa1", "jobnnnn1", "jobmmmm1"],
  );
  const host: Authority = { kind: "host" };
  assert.equal(
    jobsOutput(j, host, { view: "tree", all: false, json: false }, NOW),
    [
      "ID        STARTED  STATE     EXIT  RUN   COMMAND",
      "top       1m ago   joined    0     -     split (a, s)",
      "jobaaaa1  1m ago   finished  0     9.0s  ├─ a: fixture true",
      "nest      1m ago   joined    0     -     │  └─ split (n)",
      "jobnnnn1  1m ago   finished  0     9.0s  │     └─ n: fixture true",
      "top/s     1m ago   finished  0     -     └─ s: make; test",
      "mine      1m ago   joined    0     -        └─ split (m)",
      "jobmmmm1  1m ago   finished  0     9.0s        └─ m: fixture true",
      "",
    ].join("\n"),
  );
  assert.match(
    jobsOutput(j, host, { view: "show", all: false, json: false, job: "JOBAAAA1" }, NOW),
    /^children: {2}jobnnnn1\n/m,
  );
  for (
    const [given, message] of [
      ["jobaaaa", `invalid job "jobaaaa": give its id, or at least 8 of its leading characters`],
      ["job-aaaa1", `invalid job "job-aaaa1"`],
      ["zzzzzzzz", "unknown job zzzzzzzz (see marsh jobs --all)"],
    ]
  ) {
    assert.throws(
      () => jobsOutput(j, host, { view: "show", all: false, json: false, job: given }, NOW),
      (e) => e instanceof RequestError && e.code === 2 && e.message.startsWith(message!),
    );
  }
  // Branches in declaration order, an argv branch's argv as one shell line.
  assert.deepEqual(
    listedSplits(j).find((s) => s.id === "top")!.branches.map((b) => [b.label, b.command]),
    [["a", "fixture true"], ["s", "make\ntest"]],
  );
});
