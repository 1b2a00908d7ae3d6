import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import { JournalCorruptError } from "./errors.ts";
import type { BranchRecord, SplitRecord } from "./records.ts";
import { freshPath, sampleBranch, sampleCapability, sampleSplit, scratchDir } from "./_testing.ts";

const dir = scratchDir("records");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function open(): Journal {
  return Journal.open(freshPath(dir));
}

Deno.test({ name: "a split round-trips with every field set", permissions }, () => {
  using j = open();
  const rec: SplitRecord = sampleSplit("s1", {
    creator: { kind: "job", id: "job-7" },
    session: "sess-1",
    parent: { split: "s0", label: "fix" },
    depth: 2,
    cwd: "sub/dir",
    status: 3,
    reason: "workspace replaced",
    identity: ["2049", "18446744073709551615"],
    git: { head: "a".repeat(40), objects: ["/p/.git/objects", "/p/.marsh/split/s1/store.git"] },
    finishedMs: 2_000,
    timing: { snapshot: 12, "capture:a": 3.5 },
  });
  j.createSplit(rec);
  assert.deepEqual(j.getSplit("s1"), rec);
  assert.equal(j.getSplit("missing"), null);

  for (const creator of [{ kind: "host" }, { kind: "session", id: "sess-9" }] as const) {
    const other = sampleSplit(`s-${creator.kind}`, { creator });
    j.createSplit(other);
    assert.deepEqual(j.getSplit(other.id), other);
  }
});

Deno.test({ name: "a duplicate split is refused and changes nothing", permissions }, () => {
  using j = open();
  j.createSplit(sampleSplit("s1", { cwd: "first" }));
  assert.throws(
    () => j.createSplit(sampleSplit("s1", { cwd: "second" })),
    (e) => e instanceof Deno.errors.AlreadyExists && /Split already exists: "s1"/.test(e.message),
  );
  assert.equal(j.getSplit("s1")?.cwd, "first");
});

Deno.test({ name: "updateSplit changes only the fields given", permissions }, () => {
  using j = open();
  const rec = sampleSplit("s1");
  j.createSplit(rec);
  j.updateSplit("s1", { identity: ["1", "2"], git: { head: null, objects: [] } });
  j.updateSplit("s1", { timing: { snapshot: 5 }, status: undefined });
  j.updateSplit("s1", { status: 0, finishedMs: 9_000 });
  assert.deepEqual(j.getSplit("s1"), {
    ...rec,
    identity: ["1", "2"],
    git: { head: null, objects: [] },
    timing: { snapshot: 5 },
    status: 0,
    finishedMs: 9_000,
  });
  j.updateSplit("s1", { identity: null, git: null, status: null });
  const after = j.getSplit("s1");
  assert.equal(after?.identity, null);
  assert.equal(after?.git, null);
  assert.equal(after?.status, null);

  j.recordTiming("s1", { run: 40, "capture:a": 2 });
  j.recordTiming("s1", { run: 41 });
  assert.deepEqual(j.getSplit("s1")?.timing, { snapshot: 5, run: 41, "capture:a": 2 });

  assert.throws(() => j.updateSplit("nope", { status: 1 }), Deno.errors.NotFound);
  // Immutable fields and the state are refused even through a cast.
  for (const field of ["state", "id", "creator", "cwd", "depth", "cap"]) {
    assert.throws(
      () => j.updateSplit("s1", { [field]: "x" } as never),
      (e) => e instanceof TypeError && e.message === `Not a mutable split field: "${field}"`,
    );
  }
  assert.throws(() => j.updateSplit("s1", { identity: ["1", "-2"] }), TypeError);
  assert.equal(j.getSplit("s1")?.state, "run");
});

Deno.test({
  name: "a move the transition table (model/) does not allow is refused before any write",
  permissions,
}, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  j.addBranches("s1", [sampleBranch("s1", "a", 0)]);
  // The state matches "from", so only the table can refuse these.
  assert.throws(() => j.transitionSplit("s1", ["run"], "joined"), TypeError);
  assert.throws(() => j.transitionSplit("s1", ["run", "joined"], "cancelled"), TypeError);
  assert.throws(() => j.transitionBranch("s1", "a", ["pending"], "captured"), TypeError);
  assert.throws(() => j.transitionBranch("s1", "a", ["pending"], "uncertain"), TypeError);
  assert.equal(j.getSplit("s1")?.state, "run");
  assert.equal(j.getBranch("s1", "a")?.state, "pending");
});

Deno.test({ name: "transitionSplit is a compare-and-set", permissions }, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  assert.equal(j.transitionSplit("s1", ["await"], "kept", { reason: "x" }), false);
  assert.deepEqual(j.getSplit("s1"), sampleSplit("s1"), "a refused transition changes nothing");

  assert.equal(j.transitionSplit("s1", ["run"], "await", { finishedMs: 5_000 }), true);
  assert.equal(j.getSplit("s1")?.state, "await");
  assert.equal(j.getSplit("s1")?.finishedMs, 5_000);
  // The same transition twice: the second one loses.
  assert.equal(j.transitionSplit("s1", ["run"], "await"), false);
  assert.equal(j.transitionSplit("s1", ["await", "kept"], "joined", { status: 0 }), true);
  assert.equal(j.getSplit("s1")?.status, 0);

  assert.throws(() => j.transitionSplit("nope", ["run"], "await"), Deno.errors.NotFound);
  assert.throws(() => j.transitionSplit("s1", [], "await"), TypeError);
  assert.throws(() => j.transitionSplit("s1", ["joined"], "frozen" as never), TypeError);
  assert.throws(() => j.transitionSplit("s1", ["frozen" as never], "kept"), TypeError);
  assert.equal(j.getSplit("s1")?.state, "joined");
});

Deno.test({ name: "branches round-trip and keep declaration order", permissions }, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  const full: BranchRecord = sampleBranch("s1", "review", 2, {
    kind: "argv",
    placement: "kit:codex",
    run: ["codex", "exec", "review this diff", ""],
    state: "captured",
    status: "exited 0",
    code: 0,
    jobId: "job-3",
    files: 2,
    trust: "untrusted",
    forkIdentity: ["2049", "77"],
    forkStrategy: "copy_file_range",
    attempt: "att-1",
    startedMs: 1_100,
    finishedMs: 1_900,
    result: "sha256:" + "0".repeat(64),
    mechanism: "cgroup",
    view: "project",
    viewReason: "root: a private mount namespace",
    discard: null,
  });
  // Declared out of insertion order on purpose: order comes from `index`.
  j.addBranches("s1", [
    sampleBranch("s1", "z-last-label", 0),
    full,
    sampleBranch("s1", "a-first-label", 1, { run: "make test && echo 'ok'" }),
  ]);
  assert.deepEqual(j.branches("s1").map((b) => b.label), [
    "z-last-label",
    "a-first-label",
    "review",
  ]);
  assert.deepEqual(j.getBranch("s1", "review"), full);
  assert.deepEqual(j.getBranch("s1", "a-first-label")?.run, "make test && echo 'ok'");
  assert.equal(j.getBranch("s1", "missing"), null);
  assert.deepEqual(j.branches("other"), []);
});

Deno.test({ name: "addBranches is all or nothing", permissions }, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  j.addBranches("s1", [sampleBranch("s1", "a", 0)]);
  assert.throws(
    () => j.addBranches("s1", [sampleBranch("s1", "b", 1), sampleBranch("s1", "a", 2)]),
    Deno.errors.AlreadyExists,
  );
  assert.throws(
    () => j.addBranches("s1", [sampleBranch("s1", "c", 1), sampleBranch("s1", "d", 1)]),
    Deno.errors.AlreadyExists,
  );
  assert.deepEqual(j.branches("s1").map((b) => b.label), ["a"]);
  assert.throws(() => j.addBranches("nope", [sampleBranch("nope", "a", 0)]), Deno.errors.NotFound);
  assert.throws(() => j.addBranches("s1", [sampleBranch("s2", "x", 5)]), TypeError);
  assert.throws(
    () => j.addBranches("s1", [sampleBranch("s1", "x", 5, { kind: "argv", run: "one string" })]),
    TypeError,
  );
  assert.throws(
    () => j.addBranches("s1", [sampleBranch("s1", "x", 5, { kind: "argv", run: [] })]),
    TypeError,
  );
  assert.throws(
    () => j.addBranches("s1", [sampleBranch("s1", "x", 5, { placement: "kit:" as never })]),
    TypeError,
  );
  assert.deepEqual(j.branches("s1").map((b) => b.label), ["a"]);
});

Deno.test({ name: "updateBranch and transitionBranch", permissions }, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  j.addBranches("s1", [sampleBranch("s1", "a", 0)]);

  j.updateBranch("s1", "a", { forkIdentity: ["3", "4"], forkStrategy: "copy" });
  assert.equal(
    j.transitionBranch("s1", "a", ["pending"], "running", {
      startedMs: 1_200,
      attempt: "att-9",
      mechanism: "subreaper",
    }),
    true,
  );
  assert.equal(j.transitionBranch("s1", "a", ["pending"], "running"), false);
  assert.equal(
    j.transitionBranch("s1", "a", ["running"], "captured", {
      status: "exited 3",
      code: 3,
      files: 4,
      finishedMs: 1_300,
      result: "r",
    }),
    true,
  );
  assert.deepEqual(
    j.getBranch("s1", "a"),
    sampleBranch("s1", "a", 0, {
      state: "captured",
      forkIdentity: ["3", "4"],
      forkStrategy: "copy",
      startedMs: 1_200,
      attempt: "att-9",
      mechanism: "subreaper",
      status: "exited 3",
      code: 3,
      files: 4,
      finishedMs: 1_300,
      result: "r",
    }),
  );
  assert.throws(() => j.updateBranch("s1", "zz", { files: 1 }), Deno.errors.NotFound);
  assert.throws(() => j.transitionBranch("s1", "zz", ["pending"], "running"), Deno.errors.NotFound);
  for (const field of ["state", "label", "run", "placement", "kind", "index", "fork"]) {
    assert.throws(
      () => j.updateBranch("s1", "a", { [field]: "x" } as never),
      (e) => e instanceof TypeError && e.message === `Not a mutable branch field: "${field}"`,
    );
  }
  assert.throws(() => j.updateBranch("s1", "a", { files: -1 }), TypeError);
  assert.throws(() => j.updateBranch("s1", "a", { mechanism: "chroot" as never }), TypeError);
});

Deno.test(
  { name: "capabilities: create, revoke, revoke a split and its subtree", permissions },
  () => {
    using j = open();
    j.createSplit(sampleSplit("p"));
    j.addBranches("p", [sampleBranch("p", "a", 0)]);
    j.createSplit(
      sampleSplit("c", { parent: { split: "p", label: "a" }, depth: 2, createdMs: 1_001 }),
    );
    j.createSplit(
      sampleSplit("g", { parent: { split: "c", label: "x" }, depth: 3, createdMs: 1_002 }),
    );
    j.createSplit(sampleSplit("other", { createdMs: 1_003 }));
    j.createCapability(sampleCapability("cap-p", "p", null, { createdMs: 1 }));
    j.createCapability(sampleCapability("cap-p-a", "p", "a", { createdMs: 2 }));
    j.createCapability(sampleCapability("cap-c", "c", null, { createdMs: 3 }));
    j.createCapability(sampleCapability("cap-g", "g", null, { createdMs: 4 }));
    j.createCapability(sampleCapability("cap-o", "other", null, { createdMs: 5 }));

    assert.deepEqual(
      j.getCapability("cap-p-a"),
      sampleCapability("cap-p-a", "p", "a", { createdMs: 2 }),
    );
    assert.throws(
      () => j.createCapability(sampleCapability("cap-p", "p", null)),
      Deno.errors.AlreadyExists,
    );
    assert.throws(
      () => j.createCapability(sampleCapability("x", "nope", null)),
      Deno.errors.NotFound,
    );
    assert.throws(() => j.createCapability(sampleCapability("x", "p", "zz")), Deno.errors.NotFound);
    assert.throws(
      () => j.createCapability(sampleCapability("x", "p", null, { state: "revoked" })),
      TypeError,
    );

    assert.equal(j.revokeCapability("cap-o", 50), true);
    assert.equal(j.revokeCapability("cap-o", 60), false);
    assert.equal(j.getCapability("cap-o")?.revokedMs, 50);
    assert.throws(() => j.revokeCapability("nope"), Deno.errors.NotFound);

    assert.deepEqual(j.revokeCapabilitiesOfSplit("c", 70), ["cap-c"]);
    assert.deepEqual(j.liveCapabilities().map((c) => c.id), ["cap-p", "cap-p-a", "cap-g"]);
    assert.deepEqual(j.revokeCapabilitiesOfSplit("p", 80, { subtree: true }), [
      "cap-p",
      "cap-p-a",
      "cap-g",
    ]);
    assert.deepEqual(j.liveCapabilities(), []);
    assert.deepEqual(j.getCapability("cap-g"), {
      ...sampleCapability("cap-g", "g", null, { createdMs: 4 }),
      state: "revoked",
      revokedMs: 80,
    });
  },
);

Deno.test({ name: "listSplits filters and sorts newest first; counts", permissions }, () => {
  using j = open();
  const job = { kind: "job", id: "j1" } as const;
  const session = { kind: "session", id: "s1" } as const;
  j.createSplit(sampleSplit("a", { createdMs: 10, state: "run" }));
  j.createSplit(sampleSplit("b", { createdMs: 30, state: "await", creator: job }));
  j.createSplit(sampleSplit("c", { createdMs: 20, state: "kept", creator: session }));
  j.createSplit(sampleSplit("d", { createdMs: 20, state: "kept", creator: job }));
  j.createSplit(
    sampleSplit("e", { createdMs: 40, state: "joined", parent: { split: "a", label: "x" } }),
  );
  j.createSplit(sampleSplit("f", { createdMs: 5, state: "run", creator: job }));

  const ids = (xs: SplitRecord[]) => xs.map((s) => s.id);
  // Equal creation times fall back to insertion order, newest first.
  assert.deepEqual(ids(j.listSplits()), ["e", "b", "d", "c", "a", "f"]);
  assert.deepEqual(ids(j.listSplits({ creator: job })), ["b", "d", "f"]);
  assert.deepEqual(ids(j.listSplits({ creator: { kind: "job", id: "j2" } })), []);
  assert.deepEqual(ids(j.listSplits({ creator: { kind: "host" } })), ["e", "a"]);
  assert.deepEqual(ids(j.listSplits({ states: ["kept", "run"] })), ["d", "c", "a", "f"]);
  assert.deepEqual(ids(j.listSplits({ states: [] })), []);
  assert.deepEqual(ids(j.listSplits({ creator: job, states: ["run"] })), ["f"]);
  assert.deepEqual(ids(j.listSplits({ parent: "a" })), ["e"]);
  assert.deepEqual(ids(j.listSplits({ limit: 2 })), ["e", "b"]);
  assert.throws(() => j.listSplits({ states: ["frozen" as never] }), TypeError);

  assert.deepEqual(j.counts(), { active: 2, awaiting: 1, kept: 2 });
});

Deno.test({
  name: "deleteSplit removes a settled split with its branches and capabilities",
  permissions,
}, () => {
  using j = open();
  j.createSplit(sampleSplit("s1"));
  j.addBranches("s1", [sampleBranch("s1", "a", 0)]);
  j.createCapability(sampleCapability("cap-s1", "s1", null));
  j.createCapability(sampleCapability("cap-s1-a", "s1", "a"));
  j.createSplit(sampleSplit("child", { parent: { split: "s1", label: "a" }, depth: 2 }));

  assert.throws(
    () => j.deleteSplit("s1"),
    (e) =>
      e instanceof Deno.errors.Busy &&
      e.message === `Cannot delete split "s1": it is in state "run"`,
  );
  assert.ok(j.transitionSplit("s1", ["run"], "cancelled", { reason: "cancelled", status: 130 }));
  assert.throws(
    () => j.deleteSplit("s1"),
    (e) =>
      e instanceof Deno.errors.Busy &&
      e.message === `Cannot delete split "s1": its capability "cap-s1" is live`,
  );
  j.revokeCapabilitiesOfSplit("s1", 5);
  assert.equal(j.deleteSplit("s1"), true);
  // Awaiting, kept, joined and uncertain splits may all be removed by the operator.
  for (const state of ["await", "kept", "joined", "uncertain"] as const) {
    j.createSplit(sampleSplit(state, { state }));
    assert.equal(j.deleteSplit(state), true);
  }
  assert.equal(j.getSplit("s1"), null);
  assert.deepEqual(j.branches("s1"), []);
  assert.equal(j.getCapability("cap-s1-a"), null);
  assert.equal(j.deleteSplit("s1"), false);
  // A child keeps its parent's id.
  assert.deepEqual(j.getSplit("child")?.parent, { split: "s1", label: "a" });
});

Deno.test({ name: "transactions commit, roll back and nest", permissions }, () => {
  using j = open();
  j.immediate(() => {
    j.createSplit(sampleSplit("s1"));
    j.addBranches("s1", [sampleBranch("s1", "a", 0)]);
  });
  assert.equal(j.branches("s1").length, 1);

  assert.throws(() =>
    j.immediate(() => {
      j.createSplit(sampleSplit("s2"));
      throw new Error("boom");
    }), /boom/);
  assert.equal(j.getSplit("s2"), null);

  // An inner failure rolls back only the inner savepoint.
  j.transaction(() => {
    j.createSplit(sampleSplit("s3"));
    assert.throws(() =>
      j.immediate(() => {
        j.createSplit(sampleSplit("s4"));
        throw new Error("inner");
      }), /inner/);
  });
  assert.notEqual(j.getSplit("s3"), null);
  assert.equal(j.getSplit("s4"), null);

  assert.throws(
    () => j.immediate(() => Promise.resolve(1)),
    (e) => e instanceof TypeError && /synchronous/.test(e.message),
  );
  // A failed operation inside a transaction leaves the rest of it alone.
  j.immediate(() => {
    j.createSplit(sampleSplit("s5"));
    assert.throws(() => j.createSplit(sampleSplit("s5")), Deno.errors.AlreadyExists);
  });
  assert.notEqual(j.getSplit("s5"), null);
});

Deno.test({
  name: "a row with an unknown state or malformed field is an error, never coerced",
  permissions,
}, () => {
  const path = freshPath(dir);
  {
    using j = Journal.open(path);
    j.createSplit(sampleSplit("s1"));
    j.addBranches("s1", [sampleBranch("s1", "a", 0)]);
    j.createCapability(sampleCapability("c1", "s1", null));
    j.createSplit(sampleSplit("s2"));
  }
  {
    // Simulates a file written by something else: SQLite's CHECKs are off for this connection.
    const raw = new DatabaseSync(path);
    raw.exec("PRAGMA ignore_check_constraints = ON");
    raw.exec("UPDATE splits SET state = 'frozen' WHERE id = 's1'");
    raw.exec("UPDATE branches SET state = 'paused' WHERE label = 'a'");
    raw.exec("UPDATE capabilities SET state = 'zombie'");
    raw.exec(`UPDATE splits SET timing = '{"run": "fast"}' WHERE id = 's2'`);
    raw.close();
  }
  using j = Journal.open(path);
  assert.throws(
    () => j.getSplit("s1"),
    (e) =>
      e instanceof JournalCorruptError &&
      e.message ===
        `Journal row cannot be read: split "s1" column "state" holds "frozen": unknown split state`,
  );
  assert.throws(() => j.listSplits(), JournalCorruptError);
  assert.throws(
    () => j.branches("s1"),
    (e) =>
      e instanceof JournalCorruptError &&
      /branch "s1\/a" column "state" holds "paused"/.test(e.message),
  );
  assert.throws(() => j.getCapability("c1"), /capability "c1" column "state" holds "zombie"/);
  assert.throws(() => j.getSplit("s2"), /column "timing" .*"run" is not a number/);
});

Deno.test({ name: "a closed journal refuses calls; close is idempotent", permissions }, () => {
  const j = open();
  j.close();
  j.close();
  assert.equal(j.closed, true);
  assert.throws(() => j.getSplit("x"), Deno.errors.BadResource);
  assert.throws(() => j.createSplit(sampleSplit("x")), Deno.errors.BadResource);
  assert.throws(() => j.counts(), Deno.errors.BadResource);
});
