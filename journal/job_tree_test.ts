/**
 * The job tree in the journal (docs/rules.md, "Admission"): admission and
 * its record in one transaction, refusals recorded only as counts, the
 * cancel of a tree, and a spawn racing a cancel 1,000 times from two
 * processes with no orphan.
 */

import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { jobRecord, launch, WIDE } from "./_job_tree_testing.ts";
import { freshPath, sampleBranch, sampleSplit, scratchDir } from "./_testing.ts";
import { DEFAULT_ADMISSION_CONFIG } from "../model/job_admission.ts";
import { processesText } from "../model/job_lineage.ts";
import { buildForest } from "../model/job_forest.ts";
import { formatJobsText, jobsDocument } from "../model/job_listing.ts";

const dir = scratchDir("job-tree");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

Deno.test(
  { name: "job tree: a root and its child are recorded with their lineage", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    const t = j.jobTree;
    assert.equal(t.admit(launch("r", null, "claude"), WIDE, jobRecord("r", "claude")).ok, true);
    const d = t.admit(launch("c", "r"), WIDE, jobRecord("c"));
    assert.ok(d.ok);
    assert.deepEqual(t.lineage("c"), {
      id: "c",
      parent: "job:r",
      parentJob: "r",
      root: "r",
      depth: 2,
      spawn: ["claude", "codex", "fixture"],
      kitRef: "kit-codex",
      branch: false,
      deadlineMs: 1_000 + 3_600_000,
      parentDeadline: true,
      cap: "live",
      fanout: null,
      consumes: null,
    });
    assert.equal(t.lineage("r")!.parent, "session:sess");
    assert.deepEqual(t.children("r"), ["c"]);
    assert.equal(t.launches("r"), 2);
    assert.deepEqual(t.counts(), { admitted: 2, refused: 0 });
    // The job record itself is the ordinary one.
    assert.equal(j.getJob("c")!.state, "queued");
    assert.equal(t.lineage("nope"), null);
  },
);

Deno.test({ name: "job tree: a refusal records no job, only the counts", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const t = j.jobTree;
  t.admit(launch("r", null), WIDE, jobRecord("r"));
  for (let i = 0; i < 4; i++) assert.ok(t.admit(launch(`c${i}`, "r"), WIDE, jobRecord(`c${i}`)).ok);
  const d = t.admit(launch("c4", "r"), WIDE, jobRecord("c4"));
  assert.deepEqual([d.ok, !d.ok && d.message], [false, "fan-out limit 4"]);
  assert.equal(j.getJob("c4"), null);
  assert.equal(t.launches("r"), 6, "the refused launch counts toward the tree's total");
  assert.deepEqual(t.counts(), { admitted: 5, refused: 1 });
  j.updateJob("c3", { state: "uncertain", cleanup: "uncertain" });
  assert.deepEqual(t.processes(), { running: 4, refused: 1, held: 1 });
  assert.equal(processesText(t.processes()), "processes: 4 running, 1 refused, 1 held");
  assert.throws(() => t.admit(launch("x", "r"), WIDE, jobRecord("y")), TypeError);
  // A known id is refused and rolls the counters back with it.
  j.updateJob("c0", { state: "finished", cleanup: "removed" });
  assert.throws(() => t.admit(launch("c1", "r"), WIDE, jobRecord("c1")), Deno.errors.AlreadyExists);
  assert.deepEqual(t.counts(), { admitted: 5, refused: 1 });
});

Deno.test({
  name: "job tree: the pool counts every job and running shell branch in the daemon",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const t = j.jobTree;
  // A job from before the job tree (no lineage) holds its slot, and so does a running shell branch.
  j.createSplit(sampleSplit("s"));
  j.addJob({ ...jobRecord("old"), split: "s", label: "a", state: "running", cleanup: "live" });
  j.addBranches("s", [sampleBranch("s", "b", 0, { state: "running" })]);
  for (let i = 0; i < 6; i++) {
    assert.ok(
      t.admit(launch(`r${i}`, null), DEFAULT_ADMISSION_CONFIG, jobRecord(`r${i}`)).ok,
      `r${i}`,
    );
  }
  const full = t.admit(launch("r6", null), DEFAULT_ADMISSION_CONFIG, jobRecord("r6"));
  assert.deepEqual([full.ok, !full.ok && full.message], [false, "capacity: 8 jobs"]);
  // A job whose deletion is verified frees its slot.
  j.updateJob("r0", { state: "finished", cleanup: "removed" });
  assert.ok(t.admit(launch("r6", null), DEFAULT_ADMISSION_CONFIG, jobRecord("r6")).ok);
});

Deno.test({
  name: "job tree: a cancel marks the subtree; its jobs start nothing more",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const t = j.jobTree;
  t.admit(launch("r", null, "claude"), WIDE, jobRecord("r", "claude"));
  t.admit(launch("c", "r"), WIDE, jobRecord("c"));
  t.admit(launch("g", "c", "fixture"), WIDE, jobRecord("g", "fixture"));
  t.admit(launch("o", null), WIDE, jobRecord("o"));
  assert.deepEqual(t.cancelTree("c").sort(), ["c", "g"]);
  assert.deepEqual(["r", "c", "g", "o"].map((id) => t.lineage(id)!.cap), [
    "live",
    "cancelling",
    "cancelling",
    "live",
  ]);
  const d = t.admit(launch("x", "g", "claude"), WIDE, jobRecord("x", "claude"));
  assert.deepEqual([d.ok, !d.ok && d.limit], [false, "capability"]);
  t.revoke("g");
  assert.equal(t.lineage("g")!.cap, "revoked");
  assert.ok(t.admit(launch("y", "r"), WIDE, jobRecord("y")).ok, "the rest of the tree goes on");
});

Deno.test({
  name: "job tree: a restart revokes every job's capability; nothing new starts under one",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const t = j.jobTree;
  t.admit(launch("r", null, "claude"), WIDE, jobRecord("r", "claude"));
  t.admit(launch("c", "r"), WIDE, jobRecord("c"));
  j.updateJob("r", { state: "running", cleanup: "live" });
  t.cancelTree("c");
  j.recoverAfterRestart(5_000);
  assert.deepEqual([t.lineage("r")!.cap, t.lineage("c")!.cap], ["revoked", "revoked"]);
  const d = t.admit(launch("x", "r"), WIDE, jobRecord("x"));
  assert.deepEqual([d.ok, !d.ok && d.limit], [false, "capability"]);
  // The uncertain root still holds its slot; the cancelled queued child does not.
  const full = t.admit(launch("n", null), { ...WIDE, pool: 1 }, jobRecord("n"));
  assert.deepEqual([full.ok, !full.ok && full.message], [
    false,
    "capacity: 1 jobs (1 held by uncertain jobs on Kit claude: run marsh workers reset claude)",
  ]);
});

Deno.test({
  name: "job tree: marsh jobs renders the journal's jobs with their lineage",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const t = j.jobTree;
  j.createSplit(sampleSplit("5p1i7000aaaa"));
  j.addJob({
    ...jobRecord("old0000000"),
    split: "5p1i7000aaaa",
    label: "a",
    createdMs: 500,
    args: ["fixture", "make", "test"],
    kit: "fixture",
  });
  t.admit(launch("r1234567890", null, "claude"), WIDE, {
    ...jobRecord("r1234567890", "claude"),
    args: ["claude", "-p", "fix it"],
  });
  t.admit(launch("c1234567890", "r1234567890"), WIDE, {
    ...jobRecord("c1234567890"),
    createdMs: 2_000,
    args: ["codex", "exec", "x".repeat(300)],
  });
  j.updateJob("r1234567890", { state: "running", cleanup: "live", startedMs: 1_500 });
  const listed = t.listed();
  assert.equal(listed.find((l) => l.id === "c1234567890")!.args[1]!.length, 200);
  assert.deepEqual(listed.find((l) => l.id === "old0000000")!.lineage, {
    parent: "split:5p1i7000aaaa/a",
    root: "old0000000",
    depth: 1,
    spawn: [],
    split: "5p1i7000aaaa",
    label: "a",
  });
  assert.equal(
    formatJobsText(buildForest(listed, []), { kind: "all" }, 62_000),
    [
      "ID        STARTED  STATE    EXIT  RUN    PARENT    COMMAND",
      "r1234567  1m ago   running  -     1m00s  -         claude -p 'fix it'",
      `c1234567  1m ago   queued   -     -      r1234567  codex exec ${"x".repeat(52)}…`,
      "old00000  1m ago   queued   -     -      5p1i7000  fixture make test",
      "",
    ].join("\n"),
  );
  const doc = jobsDocument(buildForest(listed, [])) as {
    jobs: { job_id: string; lineage: unknown }[];
  };
  assert.deepEqual(doc.jobs[1]!.lineage, {
    parent: "job:r1234567890",
    root: "r1234567890",
    depth: 2,
    spawn: ["claude", "codex", "fixture"],
    deadline_unix_ms: 1_000 + 3_600_000,
    parent_deadline: true,
  });
});

const RACER = new URL("./testdata/job_tree_racer.ts", import.meta.url);

/** Runs one side of the race in a worker; resolves with what it posted. */
function racer(
  mode: "spawn" | "cancel",
  path: string,
  n: number,
  barrier: Int32Array,
): Promise<{ admitted?: number; error?: string }> {
  const worker = new Worker(RACER, { type: "module" });
  const { promise, resolve } = Promise.withResolvers<{ admitted?: number; error?: string }>();
  worker.onmessage = (e) => {
    resolve(e.data);
    worker.terminate();
  };
  worker.onerror = (e) => {
    e.preventDefault();
    resolve({ error: e.message });
    worker.terminate();
  };
  worker.postMessage({ mode, path, n, barrier });
  return promise;
}

Deno.test({
  name: "job tree: spawn races cancel 1,000 times on two connections; no child is left live",
  // The worker loads its modules from the repository.
  permissions: { read: [dir, new URL("../", import.meta.url).pathname], write: [dir] },
}, async () => {
  const path = freshPath(dir);
  const n = 1000;
  {
    using j = Journal.open(path);
    j.immediate(() => {
      for (let i = 0; i < n; i++) {
        assert.ok(j.jobTree.admit(launch(`p${i}`, null), WIDE, jobRecord(`p${i}`)).ok);
      }
    });
  }
  const barrier = new Int32Array(new SharedArrayBuffer(4));
  const [spawn, cancel] = await Promise.all([
    racer("spawn", path, n, barrier),
    racer("cancel", path, n, barrier),
  ]);
  assert.equal(spawn.error, undefined, spawn.error);
  assert.equal(cancel.error, undefined, cancel.error);
  console.log(
    `race: ${spawn.admitted} children admitted before their parent's cancel, ${
      n - spawn.admitted!
    } refused after it`,
  );
  using j = Journal.open(path);
  let admitted = 0;
  for (let i = 0; i < n; i++) {
    assert.equal(j.jobTree.lineage(`p${i}`)!.cap, "cancelling", `p${i}`);
    const child = j.jobTree.lineage(`c${i}`);
    if (child === null) continue;
    admitted++;
    // Admitted before the cancel took the lock: the cancel found it.
    assert.equal(child.cap, "cancelling", `c${i} is an orphan: live under a cancelled parent`);
  }
  assert.equal(admitted, spawn.admitted);
  assert.deepEqual(j.jobTree.counts(), { admitted: n + admitted, refused: n - admitted });
});
