/**
 * What one tree cancel reaches (docs/rules.md "Kit jobs", "End and
 * cancel"), and its first step in one transaction: a host split whose
 * argv branch's job made a nested split and ran a `marsh run` child, and a
 * shell branch that started a job and a split of its own.
 */

import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { jobRecord, launch, WIDE } from "./_job_tree_testing.ts";
import { freshPath, sampleBranch, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("job-tree-scope");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

/**
 * s1 (host): a (argv, job A), s (shell).
 * A made s2: n (argv, job N); A ran R (`marsh run`).
 * s made s3: m (argv, job M), and ran K (a Kit command, parent split:s1/s).
 */
function world(j: Journal): void {
  const t = j.jobTree;
  const cap = (split: string, label: string) =>
    j.createCapability({
      id: `${split}/${label}`,
      split,
      label,
      holder: "x",
      state: "live",
      createdMs: 1,
      revokedMs: null,
    });
  j.createSplit(sampleSplit("s1"));
  j.addBranches("s1", [
    sampleBranch("s1", "a", 0, {
      kind: "argv",
      run: ["fixture"],
      placement: "kit:fixture",
      jobId: "A",
    }),
    sampleBranch("s1", "s", 1),
  ]);
  cap("s1", "a");
  cap("s1", "s");
  const branchJob = (id: string, split: string, label: string, parent: string | null) => {
    const req = {
      ...launch(id, parent, "fixture"),
      branch: { split, label },
      via: "branch" as const,
      ...(parent === null ? { parent: { kind: "split" as const, split, label } } : {}),
    };
    assert.ok(t.admit(req, WIDE, { ...jobRecord(id, "fixture"), split, label }).ok);
  };
  branchJob("A", "s1", "a", null);
  j.createSplit(
    sampleSplit("s2", { creator: { kind: "job", id: "A" }, parent: { split: "s1", label: "a" } }),
  );
  j.addBranches("s2", [
    sampleBranch("s2", "n", 0, {
      kind: "argv",
      run: ["fixture"],
      placement: "kit:fixture",
      jobId: "N",
    }),
  ]);
  cap("s2", "n");
  branchJob("N", "s2", "n", "A");
  assert.ok(t.admit(launch("R", "A"), WIDE, jobRecord("R")).ok);
  j.createSplit(
    sampleSplit("s3", {
      creator: { kind: "session", id: "s1/s" },
      parent: { split: "s1", label: "s" },
    }),
  );
  j.addBranches("s3", [
    sampleBranch("s3", "m", 0, {
      kind: "argv",
      run: ["fixture"],
      placement: "kit:fixture",
      jobId: "M",
    }),
  ]);
  cap("s3", "m");
  branchJob("M", "s3", "m", null);
  const k = { ...launch("K", null), parent: { kind: "split" as const, split: "s1", label: "s" } };
  assert.ok(t.admit(k, WIDE, jobRecord("K")).ok);
}

Deno.test(
  { name: "tree scope: a split reaches every depth, jobs and splits alike", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    world(j);
    const scope = j.jobTree.scope({ kind: "split", id: "s1" });
    assert.deepEqual([...scope.splits].sort(), ["s1", "s2", "s3"]);
    assert.deepEqual([...scope.jobs].sort(), ["A", "K", "M", "N", "R"]);
    assert.deepEqual(
      scope.branches.map((b) => `${b.split}/${b.label}`).sort(),
      ["s1/a", "s1/s", "s2/n", "s3/m"],
    );
    assert.equal(scope.live, true);
  },
);

Deno.test(
  { name: "tree scope: a job's is its branch's; below counts the rest", permissions },
  () => {
    using j = Journal.open(freshPath(dir));
    world(j);
    const job = j.jobTree.scope({ kind: "job", id: "A" });
    assert.deepEqual([...job.jobs].sort(), ["A", "N", "R"]);
    assert.deepEqual(job.splits, ["s2"]);
    // N, R, s2 and s2/n: the branch s1/a is A itself.
    assert.equal(job.below, 4);
    const branch = j.jobTree.scope({ kind: "branch", split: "s1", label: "a" });
    assert.deepEqual([...branch.jobs].sort(), ["A", "N", "R"]);
    assert.equal(branch.below, 4);
    // A leaf: nothing below it.
    assert.equal(j.jobTree.scope({ kind: "job", id: "N" }).below, 0);
    assert.equal(j.jobTree.scope({ kind: "branch", split: "s3", label: "m" }).below, 0);
  },
);

Deno.test({
  name: "tree scope: the cancel's first step is one transaction: capabilities cancelling, revoked",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  world(j);
  const before = j.commits;
  const scope = j.jobTree.cancelScope({ kind: "branch", split: "s1", label: "s" }, 5);
  assert.equal(j.commits - before, 1, "one commit");
  assert.deepEqual([...scope.jobs].sort(), ["K", "M"]);
  for (const id of ["K", "M"]) assert.equal(j.jobTree.lineage(id)?.cap, "cancelling");
  for (const id of ["A", "N", "R"]) assert.equal(j.jobTree.lineage(id)?.cap, "live");
  for (const c of ["s1/s", "s3/m"]) assert.equal(j.getCapability(c)?.state, "revoked");
  for (const c of ["s1/a", "s2/n"]) assert.equal(j.getCapability(c)?.state, "live");
  // Nothing in the cancelled subtree admits a child any more.
  const refused = j.jobTree.admit(launch("X", "M"), WIDE, jobRecord("X"));
  assert.equal(refused.ok, false);
  // A second cancel changes nothing.
  assert.equal(j.jobTree.scope({ kind: "branch", split: "s1", label: "s" }).live, false);
});
