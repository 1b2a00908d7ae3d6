/**
 * Unit tests of the resolution verbs (`merge`, `promote`, `choose`, `undo`,
 * `resolutions`, and the recovery at start) through fakes of their links:
 * `FakeService` (`daemon/_fakes.ts`) stands for the split-filesystem
 * service's resolution frames (`protocol/splitfs_resolve.ts`), and the
 * planner and discard functions here stand for the `--git` planner
 * (`daemon/git_planner.ts`) and `marsh discard`, all built by other parts
 * of the project and tested for real there. The journal is real (SQLite in
 * a temp dir).
 */

import assert from "node:assert/strict";
import { Journal } from "../journal/journal.ts";
import type { BranchRecord, Creator, SplitRecord } from "../journal/records.ts";
import type { MergePlan, PlanEntry, Signature } from "../model/resolution_plan.ts";
import type { ResolveClientFrame } from "../protocol/daemon_resolve.ts";
import type { SplitfsRequest } from "../protocol/splitfs.ts";
import type { MergeInputsReply } from "../protocol/splitfs_resolve.ts";
import { FakeConn, FakeService } from "./_fakes.ts";
import type { Authority } from "./conn.ts";
import { Log } from "./log.ts";
import { RequestError } from "./request_error.ts";
import { Resolutions } from "./resolutions.ts";

const permissions: Deno.PermissionOptions = { read: true, write: true };

const ROOT = "/work/project";
const file = (b: string): Extract<Signature, { kind: "file" }> => ({
  kind: "file",
  mode: 0o644,
  blob: b.repeat(40),
});
const take = (path: string): PlanEntry => ({
  op: "take",
  path,
  before: file("1"),
  after: file("2"),
  bytes: "store",
});
const conflict = (path: string): PlanEntry => ({
  op: "conflict",
  path,
  base: file("1"),
  source: file("3"),
  branch: file("2"),
  reason: "both sides changed it",
});
const plan = (scope: MergePlan["scope"], ...entries: PlanEntry[]): MergePlan => ({
  scope,
  trees: { base: "a".repeat(40), source: "b".repeat(40), branch: "c".repeat(40), result: null },
  entries,
});
/**
 * Inputs Git must merge (the path changed on both sides), so the planner is
 * asked; a one-sided patch is planned without it (`model/resolution_one_sided.ts`).
 */
const INPUTS: MergeInputsReply = {
  v: 1,
  t: "merge-inputs",
  objects: "/store/objects",
  paths: [{
    path: "src/a.ts",
    base: { kind: "file", mode: 0o644, blob: "a".repeat(40) },
    source: { kind: "file", mode: 0o644, blob: "b".repeat(40) },
    branch: { kind: "file", mode: 0o644, blob: "c".repeat(40) },
  }],
};

interface World extends Disposable {
  readonly journal: Journal;
  readonly service: FakeService;
  readonly resolutions: Resolutions;
  /** What the planner was given, and what it answers. */
  readonly planner: { inputs: MergeInputsReply[]; plan: MergePlan | Error };
  readonly discards: { split: string; labels: readonly string[]; reason: string; who: Creator }[];
  readonly opened: string[];
  discardFails: boolean;
}

function world(): World {
  const home = Deno.makeTempDirSync({ prefix: "marsh-resolutions-" });
  const journal = Journal.open(`${home}/journal.db`);
  const log = new Log(`${home}/marshd.log`);
  const service = new FakeService(ROOT);
  const planner: World["planner"] = { inputs: [], plan: plan("git", take("src/a.ts")) };
  const discards: World["discards"] = [];
  const opened: string[] = [];
  let clock = 10_000;
  const w: World = {
    journal,
    service,
    planner,
    discards,
    opened,
    discardFails: false,
    resolutions: new Resolutions({
      journal,
      splitfs: service,
      log,
      open: (s) => {
        opened.push(s.id);
        return Promise.resolve();
      },
      planner: (inputs) => {
        planner.inputs.push(inputs);
        return planner.plan instanceof Error
          ? Promise.reject(planner.plan)
          : Promise.resolve(planner.plan);
      },
      discard: (split, labels, reason, who) => {
        if (w.discardFails) return Promise.reject(new Error("branch b's container is still there"));
        discards.push({ split, labels, reason, who });
        return Promise.resolve();
      },
      // compare --test runs real tests in tests/acceptance_compare_run_test.ts; none here.
      runTests: () => Promise.reject(new Error("no test runs in this fake")),
      now: () => clock++,
    }),
    [Symbol.dispose]() {
      journal.close();
      log.close();
      Deno.removeSync(home, { recursive: true });
    },
  };
  return w;
}

function split(id: string, over: Partial<SplitRecord> = {}): SplitRecord {
  return {
    id,
    creator: { kind: "host" },
    session: "host",
    parent: null,
    depth: 1,
    root: ROOT,
    dir: `${ROOT}/.marsh/split/${id}`,
    cwd: ".",
    cap: `cap-${id}`,
    state: "await",
    status: null,
    reason: null,
    identity: ["1", "2"],
    git: null,
    createdMs: 1_000,
    finishedMs: null,
    timing: {},
    withIgnored: false,
    rootId: null,
    ...over,
  };
}

function branch(s: string, label: string, index: number, over: Partial<BranchRecord> = {}) {
  return {
    split: s,
    label,
    index,
    kind: "shell",
    placement: "shell-vm",
    run: "true",
    state: "captured",
    status: "exited 0",
    code: 0,
    jobId: null,
    files: 1,
    trust: null,
    fork: `${ROOT}/.marsh/split/${s}/${label}`,
    forkIdentity: ["1", "3"],
    forkStrategy: "copy",
    attempt: null,
    startedMs: 1_100,
    finishedMs: 1_200,
    result: null,
    mechanism: null,
    view: null,
    viewReason: null,
    discard: null,
    ...over,
  } satisfies BranchRecord;
}

/** Split `s1` awaiting a join, with branches a and b captured and c failed. */
function seed(w: World, over: Partial<SplitRecord> = {}): void {
  w.journal.createSplit(split("s1", over));
  w.journal.addBranches("s1", [
    branch("s1", "a", 0),
    branch("s1", "b", 1),
    branch("s1", "c", 2, { state: "failed", status: "failed: capacity", code: 125 }),
  ]);
}

const HOST: Authority = { kind: "host" };

function mergeReq(over: Partial<Extract<ResolveClientFrame, { t: "resolve.merge" }>> = {}) {
  return {
    v: 1 as const,
    t: "resolve.merge" as const,
    id: "s1",
    label: "a",
    scope: "git" as const,
    dryRun: false,
    cwd: ROOT,
    ...over,
  };
}

/** Answers `apply-plan` as the service does when it applied the plan, checking it was journaled first. */
function appliesCleanly(w: World, changed = 1): void {
  w.service.on("apply-plan", (req) => {
    const r = req as Extract<SplitfsRequest, { t: "apply-plan" }>;
    assert.equal(w.journal.getResolution(r.resolution)?.state, "applying");
    return { v: 1, t: "applied", resolution: r.resolution, changed };
  });
}

async function refusal(p: Promise<unknown>, code: number, pattern: RegExp): Promise<void> {
  await assert.rejects(p, (e: unknown) => {
    assert.ok(e instanceof RequestError, String(e));
    assert.equal(e.code, code);
    assert.match(e.message, pattern);
    return true;
  });
}

Deno.test({ name: "merge --git: inputs, planner, journaled, applied", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("merge-inputs", () => INPUTS);
  appliesCleanly(w, 3);
  const o = await w.resolutions.run(HOST, mergeReq());
  assert.equal(o.outcome, "applied");
  assert.equal(o.code, 0);
  assert.deepEqual(w.service.types, ["merge-inputs", "apply-plan"]);
  assert.deepEqual(w.planner.inputs, [INPUTS]);
  assert.deepEqual(w.opened, ["s1"]);
  const apply = w.service.requests[1] as Extract<SplitfsRequest, { t: "apply-plan" }>;
  assert.equal(apply.root, ROOT);
  assert.equal(apply.id, "s1");
  const rec = w.journal.getResolution(apply.resolution)!;
  assert.equal(rec.state, "applied");
  assert.equal(rec.kind, "merge");
  assert.equal(rec.scope, "git");
  assert.equal(rec.changed, 3);
  assert.deepEqual(rec.who, { kind: "host" });
  assert.deepEqual(rec.summary, { take: 1, delete: 0, converged: 0, conflict: 0 });
  assert.equal(rec.trees.base, "a".repeat(40));
  assert.match(o.message, new RegExp(`marsh undo ${rec.id}`));
});

Deno.test({ name: "merge: a dry run and a conflict change nothing", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("merge-inputs", () => INPUTS);
  const dry = await w.resolutions.run(HOST, mergeReq({ dryRun: true }));
  assert.deepEqual([dry.outcome, dry.code], ["planned", 0]);
  assert.ok(dry.plan !== null);

  w.planner.plan = plan("git", conflict("db.sqlite"), take("src/a.ts"), conflict("z.txt"));
  const dryConflict = await w.resolutions.run(HOST, mergeReq({ dryRun: true }));
  assert.deepEqual([dryConflict.outcome, dryConflict.code], ["planned", 1]);
  const real = await w.resolutions.run(HOST, mergeReq());
  assert.deepEqual([real.outcome, real.code], ["conflict", 1]);
  assert.match(real.message, /^2 conflicting paths; nothing was changed/);
  assert.deepEqual(
    real.plan?.entries.filter((e) => e.op === "conflict").map((e) => e.path),
    ["db.sqlite", "z.txt"],
  );
  // Nothing was applied, nothing journaled.
  assert.ok(!w.service.types.includes("apply-plan"));
  assert.deepEqual(w.journal.listResolutions(), []);
});

Deno.test({ name: "merge --filesystem and --paths: the service plans", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("plan-fs", (req) => ({
    v: 1,
    t: "planned",
    plan: plan((req as { scope: MergePlan["scope"] }).scope, take("data/x.bin")),
    sourceChanges: [],
    sourceChangesMore: 0,
  }));
  appliesCleanly(w);
  const fs = await w.resolutions.run(HOST, mergeReq({ scope: "filesystem" }));
  assert.equal(fs.outcome, "applied");
  const paths = await w.resolutions.run(
    HOST,
    mergeReq({
      scope: "paths",
      paths: ["x.bin", "../data/./y", "/work/project/data/y/z"],
      cwd: `${ROOT}/data`,
    }),
  );
  assert.equal(paths.outcome, "applied");
  const asked = w.service.requests.filter((r) => r.t === "plan-fs");
  assert.deepEqual(asked.map((r) => (r as { scope: string }).scope), ["filesystem", "paths"]);
  // Relative to the project; one under another is dropped (a directory stands for its contents).
  assert.deepEqual((asked[1] as unknown as { paths: string[] }).paths, ["data/x.bin", "data/y"]);
  assert.deepEqual(w.journal.listResolutions().map((r) => r.scope), ["paths", "filesystem"]);

  await refusal(
    w.resolutions.run(
      HOST,
      mergeReq({ scope: "paths", paths: ["../../elsewhere"], cwd: `${ROOT}/data` }),
    ),
    2,
    /--paths "..\/..\/elsewhere" is outside the project \/work\/project/,
  );
  await refusal(
    w.resolutions.run(HOST, mergeReq({ scope: "paths", paths: ["."] })),
    2,
    /is the whole project: use --filesystem/,
  );
  await refusal(
    w.resolutions.run(HOST, mergeReq({ scope: "paths", paths: [".git/config"] })),
    2,
    /inside a Git directory/,
  );
  assert.equal(w.service.requests.filter((r) => r.t === "plan-fs").length, 2);
});

Deno.test({ name: "merge: the project moved on, the apply refuses", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("merge-inputs", () => INPUTS);
  w.service.on("apply-plan", () => ({
    v: 1,
    t: "apply-refused",
    message: "src/a.ts changed since the plan",
    changed: [{ path: "src/a.ts", expected: "file 0644 2222", found: "file 0644 9999" }],
  }));
  const o = await w.resolutions.run(HOST, mergeReq());
  assert.deepEqual([o.outcome, o.code], ["refused", 1]);
  assert.deepEqual(o.changed.map((c) => c.path), ["src/a.ts"]);
  // The attempt stays on record, failed, with why.
  const [rec] = w.journal.listResolutions();
  assert.equal(rec?.state, "failed");
  assert.match(rec?.message ?? "", /refused: src\/a.ts changed since the plan/);
});

Deno.test({
  name: "merge: a failed apply is settled by the service's recovery, or left for the next start",
  permissions,
}, async () => {
  using w = world();
  seed(w);
  w.service.on("merge-inputs", () => INPUTS);
  w.service.fail("apply-plan", "internal", "ENOSPC while staging src/a.ts");
  w.service.on("recover-resolutions", () => ({ v: 1, t: "recovered", resolutions: [] }));
  const rolled = await w.resolutions.run(HOST, mergeReq());
  assert.deepEqual([rolled.outcome, rolled.code], ["failed", 125]);
  assert.match(
    rolled.message,
    /ENOSPC while staging src\/a.ts; rolled back: the project is as it was/,
  );
  assert.equal(rolled.resolution?.state, "failed");

  // Past its commit point: complete.
  w.service.on(
    "recover-resolutions",
    (req) => ({
      v: 1,
      t: "recovered",
      resolutions: w.journal.listResolutions({ state: "applying" }).map((r) => ({
        id: r.id,
        state: "post" as const,
      })),
      root: (req as { root: string }).root,
    }),
  );
  const post = await w.resolutions.run(HOST, mergeReq());
  assert.deepEqual([post.outcome, post.code], ["applied", 0]);
  assert.equal(post.resolution?.state, "applied");

  // The service died: the record stays applying, and the next start settles it.
  w.service.fail(
    "recover-resolutions",
    "internal",
    "split-filesystem service exited with status 9",
  );
  const lost = await w.resolutions.run(HOST, mergeReq());
  assert.deepEqual([lost.outcome, lost.code], ["failed", 125]);
  assert.equal(lost.resolution?.state, "applying");
  assert.match(lost.message, /the next daemon start finishes it or rolls it back/);
  w.service.on("recover-resolutions", () => ({
    v: 1,
    t: "recovered",
    resolutions: [{ id: lost.resolution!.id, state: "post" }],
  }));
  assert.equal(await w.resolutions.recover(), 1);
  assert.equal(w.journal.getResolution(lost.resolution!.id)?.state, "applied");
});

Deno.test({
  name: "recovery at start: post is applied, pre or unlisted is failed",
  permissions,
}, async () => {
  using w = world();
  seed(w);
  const rec = (id: string, root: string) => ({
    id,
    split: "s1",
    label: "a",
    kind: "merge" as const,
    scope: "git" as const,
    root,
    who: { kind: "host" } as const,
    state: "applying" as const,
    createdMs: 1,
    finishedMs: null,
    undoes: null,
    undoneBy: null,
    summary: { take: 2, delete: 1, converged: 0, conflict: 0 },
    trees: { base: null, source: null, branch: null, result: null },
    changed: null,
    message: null,
  });
  w.journal.addResolution(rec("r-post", "/p1"));
  w.journal.addResolution(rec("r-pre", "/p1"));
  w.journal.addResolution(rec("r-gone", "/p2"));
  w.service.on("recover-resolutions", (req) => ({
    v: 1,
    t: "recovered",
    resolutions: (req as { root: string }).root === "/p1"
      ? [{ id: "r-post", state: "post" }, { id: "r-pre", state: "pre" }, {
        id: "older-done",
        state: "post",
      }]
      : [],
  }));
  assert.equal(await w.resolutions.recover(), 3);
  assert.deepEqual(
    w.service.requests.map((r) => (r as { root: string }).root).sort(),
    ["/p1", "/p2"],
  );
  assert.equal(w.journal.getResolution("r-post")?.state, "applied");
  assert.equal(w.journal.getResolution("r-post")?.changed, 3);
  assert.equal(w.journal.getResolution("r-pre")?.state, "failed");
  assert.equal(w.journal.getResolution("r-gone")?.state, "failed");
  // Nothing left to settle.
  assert.equal(await w.resolutions.recover(), 0);
});

Deno.test(
  { name: "only a captured branch of a finished split can be resolved", permissions },
  async () => {
    using w = world();
    seed(w);
    await refusal(w.resolutions.run(HOST, mergeReq({ id: "nope" })), 2, /no split nope/);
    await refusal(
      w.resolutions.run(HOST, mergeReq({ label: "zz" })),
      2,
      /has no branch "zz"; its branches: a, b, c/,
    );
    await refusal(
      w.resolutions.run(HOST, mergeReq({ label: "c" })),
      2,
      /branch c of split s1 is failed \(failed: capacity\): only a captured branch/,
    );
    w.journal.createSplit(split("s2", { state: "run" }));
    w.journal.addBranches("s2", [branch("s2", "a", 0, { state: "running" })]);
    await refusal(w.resolutions.run(HOST, mergeReq({ id: "s2" })), 2, /split s2 is still running/);
    w.journal.createSplit(split("s4", { state: "uncertain" }));
    w.journal.addBranches("s4", [branch("s4", "a", 0)]);
    await refusal(
      w.resolutions.run(HOST, mergeReq({ id: "s4" })),
      2,
      /split s4 is uncertain .*marsh splits rm s4/,
    );
    w.journal.createSplit(split("s3", { state: "joined" }));
    w.journal.addBranches("s3", [branch("s3", "a", 0)]);
    await refusal(
      w.resolutions.run(HOST, mergeReq({ id: "s3" })),
      2,
      /split s3 is joined: its forks are gone/,
    );
    assert.equal(w.service.requests.length, 0);
  },
);

Deno.test({
  name: "authority: only the split's creator resolves; a branch never resolves its own split",
  permissions,
}, async () => {
  using w = world();
  seed(w);
  const inBranch: Authority = { kind: "branch", split: "s1", label: "a", session: "s1/a" };
  const inJob: Authority = {
    kind: "job",
    job: "j1",
    attempt: "s1-b-1",
    split: "s1",
    label: "b",
    session: "host",
    fork: `${ROOT}/.marsh/split/s1/b`,
  };
  for (const auth of [inBranch, inJob]) {
    await refusal(
      w.resolutions.run(auth, mergeReq()),
      1,
      /may not merge split s1: only the host user \(from a shell outside its branches\) may; a branch never resolves itself or its siblings/,
    );
    await refusal(
      w.resolutions.run(auth, {
        v: 1,
        t: "resolve.promote",
        id: "s1",
        label: "b",
        retireSourceChanges: true,
        dryRun: true,
      }),
      1,
      /may not promote split s1/,
    );
  }
  assert.equal(w.service.requests.length, 0);

  // A nested split made by branch a: a resolves it (into its own fork); the host may not.
  w.journal.createSplit(
    split("n1", {
      creator: { kind: "session", id: "s1/a" },
      session: "s1/a",
      parent: { split: "s1", label: "a" },
      depth: 2,
      root: `${ROOT}/.marsh/split/s1/a`,
    }),
  );
  w.journal.addBranches("n1", [branch("n1", "x", 0)]);
  await refusal(
    w.resolutions.run(HOST, mergeReq({ id: "n1", label: "x" })),
    1,
    /the host may not merge split n1: only the branch that created it \(s1\/a\) may/,
  );
  w.service.on("merge-inputs", () => INPUTS);
  appliesCleanly(w);
  const o = await w.resolutions.run(inBranch, mergeReq({ id: "n1", label: "x" }));
  assert.equal(o.outcome, "applied");
  const asked = w.service.requests.find((r) => r.t === "apply-plan") as {
    parent?: unknown;
    root: string;
  };
  assert.deepEqual(asked.parent, { split: "s1", label: "a" });
  assert.equal(asked.root, `${ROOT}/.marsh/split/s1/a`);
  assert.deepEqual(o.resolution?.who, { kind: "session", id: "s1/a" });
  // Each sees its own resolutions; the host sees all.
  assert.equal(w.resolutions.list(inBranch).resolutions.length, 1);
  assert.equal(w.resolutions.list(inJob).resolutions.length, 0);
  assert.equal(w.resolutions.list(HOST).resolutions[0]?.who, "session:s1/a");
  // And only its creator undoes it.
  await refusal(
    w.resolutions.run(HOST, { v: 1, t: "resolve.undo", resolution: o.resolution!.id }),
    1,
    /only the branch that created it/,
  );
});

Deno.test({ name: "promote: source changes refuse unless retired", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("plan-fs", () => ({
    v: 1,
    t: "planned",
    plan: plan("promote", take("a.txt"), take("b.txt")),
    sourceChanges: ["notes.md", "src/x.ts"],
    sourceChangesMore: 0,
  }));
  appliesCleanly(w, 2);
  const req = {
    v: 1,
    t: "resolve.promote",
    id: "s1",
    label: "b",
    retireSourceChanges: false,
    dryRun: false,
  } as const;
  const refused = await w.resolutions.run(HOST, req);
  assert.deepEqual([refused.outcome, refused.code], ["refused", 1]);
  assert.deepEqual(refused.sourceChanges, ["notes.md", "src/x.ts"]);
  assert.match(
    refused.message,
    /changed 2 paths since split s1's snapshot.*--retire-source-changes/,
  );
  assert.ok(!w.service.types.includes("apply-plan"));
  assert.deepEqual(w.journal.listResolutions(), []);

  const dry = await w.resolutions.run(HOST, { ...req, dryRun: true });
  assert.deepEqual([dry.outcome, dry.code], ["planned", 1]);

  const done = await w.resolutions.run(HOST, { ...req, retireSourceChanges: true });
  assert.deepEqual([done.outcome, done.code], ["applied", 0]);
  assert.equal(done.resolution?.kind, "promote");
  assert.equal(done.resolution?.scope, "promote");
  assert.match(done.message, /retiring 2 source changes/);
  const plans = w.service.requests.filter((r) => r.t === "plan-fs") as { scope: string }[];
  assert.ok(plans.every((p) => p.scope === "promote"));
});

Deno.test(
  { name: "undo: journaled, refused twice, refused for unknown ids", permissions },
  async () => {
    using w = world();
    seed(w);
    w.service.on("merge-inputs", () => INPUTS);
    appliesCleanly(w, 1);
    const merged = await w.resolutions.run(HOST, mergeReq());
    const id = merged.resolution!.id;
    await refusal(
      w.resolutions.run(HOST, { v: 1, t: "resolve.undo", resolution: "nope" }),
      2,
      /no resolution nope/,
    );

    w.service.on("undo-resolution", (req) => {
      const r = req as Extract<SplitfsRequest, { t: "undo-resolution" }>;
      assert.equal(r.resolution, id);
      assert.equal(r.root, ROOT);
      assert.equal(w.journal.getResolution(r.by)?.state, "applying");
      return { v: 1, t: "applied", resolution: r.by, changed: 1 };
    });
    const undone = await w.resolutions.run(HOST, { v: 1, t: "resolve.undo", resolution: id });
    assert.deepEqual([undone.outcome, undone.code], ["applied", 0]);
    const u = undone.resolution!;
    assert.equal(u.kind, "undo");
    assert.equal(u.undoes, id);
    assert.equal(w.journal.getResolution(id)?.state, "undone");
    assert.equal(w.journal.getResolution(id)?.undoneBy, u.id);

    const again = await w.resolutions.run(HOST, { v: 1, t: "resolve.undo", resolution: id });
    assert.deepEqual([again.outcome, again.code], ["refused", 1]);
    assert.match(again.message, new RegExp(`already undone by ${u.id}`));

    // An undo over paths changed since: refused, listing them; the merge stays applied.
    const merged2 = await w.resolutions.run(HOST, mergeReq());
    w.service.on("undo-resolution", () => ({
      v: 1,
      t: "apply-refused",
      message: "1 path changed since the resolution",
      changed: [{ path: "src/a.ts", expected: "file", found: "absent" }],
    }));
    const refused = await w.resolutions.run(HOST, {
      v: 1,
      t: "resolve.undo",
      resolution: merged2.resolution!.id,
    });
    assert.deepEqual([refused.outcome, refused.code], ["refused", 1]);
    assert.equal(w.journal.getResolution(merged2.resolution!.id)?.state, "applied");
  },
);

Deno.test(
  { name: "choose: the winner applied, then the others discarded", permissions },
  async () => {
    using w = world();
    seed(w);
    w.service.on("merge-inputs", () => INPUTS);
    appliesCleanly(w);
    const req = {
      v: 1,
      t: "resolve.choose",
      id: "s1",
      label: "a",
      how: "git",
      retireSourceChanges: false,
      cwd: ROOT,
      reason: null,
    } as const;
    // A conflict discards nothing.
    w.planner.plan = plan("git", conflict("x"));
    const blocked = await w.resolutions.run(HOST, req);
    assert.deepEqual([blocked.outcome, blocked.code], ["conflict", 1]);
    assert.equal(w.discards.length, 0);

    w.planner.plan = plan("git", take("x"));
    const o = await w.resolutions.run(HOST, req);
    assert.deepEqual([o.outcome, o.code], ["applied", 0]);
    assert.deepEqual(o.discarded, ["b", "c"]);
    assert.equal(w.discards.length, 1);
    assert.deepEqual(w.discards[0]?.labels, ["b", "c"]);
    assert.equal(
      w.discards[0]?.reason,
      `not chosen: branch a was merged (resolution ${o.resolution!.id})`,
    );
    assert.deepEqual(w.discards[0]?.who, { kind: "host" });

    w.discardFails = true;
    const half = await w.resolutions.run(HOST, { ...req, reason: "b and c were slower" });
    assert.equal(half.code, 125);
    assert.equal(half.resolution?.state, "applied");
    assert.match(half.message, /discarding b, c failed: .*marsh discard s1 b c/);
  },
);

Deno.test({ name: "serve: the plan in pieces, then resolved", permissions }, async () => {
  using w = world();
  seed(w);
  w.service.on("merge-inputs", () => INPUTS);
  // A plan larger than one piece.
  const many = Array.from(
    { length: 3000 },
    (_, i) => take(`dir/${String(i).padStart(5, "0")}-${"x".repeat(60)}`),
  );
  w.planner.plan = plan("git", ...many);
  const conn = new FakeConn(HOST);
  await w.resolutions.serve(conn, mergeReq({ dryRun: true }));
  const pieces = conn.sent.filter((f) => f.t === "resolve.plan") as { data: string }[];
  assert.ok(pieces.length > 1, `${pieces.length} pieces`);
  const doc = JSON.parse(pieces.map((p) => p.data).join(""));
  assert.equal(doc.schema, "marsh.merge.plan/v1");
  assert.equal(doc.paths.length, 3000);
  const end = conn.sent.at(-1)!;
  assert.equal(end.t, "resolved");
  assert.equal((end as { plan: boolean }).plan, true);
  assert.equal((end as { code: number }).code, 0);
});

Deno.test({
  name: "merge --paths from a branch with the project view: its cwd is in its fork",
  permissions,
}, async () => {
  using w = world();
  seed(w);
  const fork = `${ROOT}/.marsh/split/s1/a`;
  w.journal.updateBranch("s1", "a", { view: "project" });
  w.journal.createSplit(
    split("n1", {
      creator: { kind: "session", id: "s1/a" },
      session: "s1/a",
      parent: { split: "s1", label: "a" },
      depth: 2,
      root: fork,
    }),
  );
  w.journal.addBranches("n1", [branch("n1", "x", 0)]);
  w.service.on("plan-fs", () => ({
    v: 1,
    t: "planned",
    plan: plan("paths"),
    sourceChanges: [],
    sourceChangesMore: 0,
  }));
  const inBranch: Authority = { kind: "branch", split: "s1", label: "a", session: "s1/a" };
  // The branch sees its fork at the project's path: it says /work/project/sub.
  const o = await w.resolutions.run(
    inBranch,
    mergeReq({ id: "n1", label: "x", scope: "paths", paths: ["x.txt"], cwd: `${ROOT}/sub` }),
  );
  assert.equal(o.outcome, "applied");
  const asked = w.service.requests.find((r) => r.t === "plan-fs") as unknown as {
    paths: string[];
  };
  assert.deepEqual(asked.paths, ["sub/x.txt"]);
});

Deno.test(
  { name: "serve: long lists are cut to fit one frame, the rest counted", permissions },
  async () => {
    using w = world();
    seed(w);
    w.service.on("merge-inputs", () => INPUTS);
    const long = "d/".repeat(900) + "f";
    w.service.on("apply-plan", () => ({
      v: 1,
      t: "apply-refused",
      message: "the project moved on",
      changed: Array.from({ length: 900 }, (_, i) => ({
        path: `${long}${i}`,
        expected: "file",
        found: "absent",
      })),
    }));
    const conn = new FakeConn(HOST);
    await w.resolutions.serve(conn, mergeReq());
    const end = conn.sent.at(-1) as unknown as {
      changed: unknown[];
      changedMore: number;
      code: number;
    };
    assert.equal(end.code, 1);
    assert.ok(end.changed.length > 0 && end.changed.length < 900, `${end.changed.length}`);
    assert.equal(end.changed.length + end.changedMore, 900);
    assert.ok(JSON.stringify(end).length < 600 * 1024);
  },
);
