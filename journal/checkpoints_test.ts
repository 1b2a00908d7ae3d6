import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { Journal } from "./journal.ts";
import { freshPath, scratchDir } from "./_testing.ts";
import {
  DIGEST,
  drained,
  EMPTY,
  PROJECT,
  R0,
  R1,
  R2,
  sealing,
  startSession,
} from "./_checkpoint_testing.ts";

const dir = scratchDir("checkpoints");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

function count(path: string, table: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    return Number(db.prepare(`SELECT count(*) AS n FROM ${table}`).get()!.n);
  } finally {
    db.close();
  }
}

Deno.test(
  { name: "checkpoints: a session starts at its snapshot's checkpoint", permissions },
  () => {
    const path = freshPath(dir);
    using j = Journal.open(path);
    const c = j.checkpoints;
    const s = startSession(c);
    assert.equal(s.head, s.baseCheckpoint);
    assert.equal(s.baseRoot, R0);
    assert.equal(s.view, `${PROJECT}/.marsh/session/fix/view`);
    assert.equal(s.state, "open");
    assert.match(s.head, /^[0-9a-f]{64}$/);
    const start = c.getCheckpoint(s.head)!;
    assert.equal(start.kind, "start");
    assert.deepEqual(start.layers, ["l0"]);
    assert.equal(start.root, R0);
    assert.deepEqual(c.findSession(PROJECT, "fix"), s);
    assert.deepEqual(c.getSession("s1"), s);

    // Refused without a trace: a taken name, a bad name, a bad root.
    assert.throws(() => startSession(c, "s2", "fix"), Deno.errors.AlreadyExists);
    assert.throws(() => startSession(c, "s1", "other"), Deno.errors.AlreadyExists);
    assert.throws(() => startSession(c, "s2", "../x"), /invalid session name/);
    assert.throws(
      () =>
        c.createSession({
          id: "s3",
          project: PROJECT,
          name: "b",
          withIgnored: false,
          start: { root: "x", layers: ["l0"] },
          createdMs: 1,
        }),
      TypeError,
    );
    assert.equal(count(path, "sessions"), 1);
    assert.equal(count(path, "checkpoints"), 1);

    // A removed session's name is free again; its history stays.
    assert.equal(c.removeSession("s1", 5_000), true);
    assert.equal(c.removeSession("s1", 5_001), false);
    assert.equal(c.findSession(PROJECT, "fix"), null);
    const again = startSession(c, "s2", "fix");
    assert.notEqual(again.head, s.head);
    assert.deepEqual(c.listSessions().map((x) => x.id), ["s2"]);
    assert.deepEqual(c.listSessions({ all: true }).map((x) => x.id), ["s1", "s2"]);
    assert.deepEqual(c.listSessions({ project: "/elsewhere" }), []);
    assert.equal(c.getCheckpoint(s.head)?.id, s.head);
  },
);

Deno.test({
  name: "checkpoints: record, launch, drain, intent, bind — the head moves once, with the layer",
  permissions,
}, () => {
  const path = freshPath(dir);
  using j = Journal.open(path);
  const c = j.checkpoints;
  const s = startSession(c);
  // A command that exits 1 after changing files is still sealed: exit and disposition apart.
  drained(c, "s1", "op-1", 1);
  assert.equal(c.getOperation("op-1")?.state, "drained");
  assert.equal(c.recordIntent("op-1", { root: R1, layer: "l1", changes: DIGEST }, 3_000), true);
  // One intent only.
  assert.equal(c.recordIntent("op-1", { root: R2, layer: "l2", changes: DIGEST }, 3_001), false);
  const r = c.bindCheckpoint("op-1", { createdMs: 4_000 });
  assert.equal(r.kind, "bound");
  if (r.kind !== "bound") return;
  assert.equal(r.repeated, false);
  const cp = r.checkpoint;
  assert.equal(cp.kind, "operation");
  if (cp.kind !== "operation") return;
  assert.equal(cp.parent, s.head);
  assert.equal(cp.parentRoot, R0);
  assert.equal(cp.root, R1);
  assert.deepEqual(cp.layers, ["l0", "l1"]);
  assert.deepEqual(cp.delta, { kind: "layer", layer: "l1" });
  assert.equal(cp.changes, DIGEST);
  assert.equal(cp.operation, "op-1");
  assert.equal(c.getSession("s1")?.head, cp.id);
  const op = c.getOperation("op-1")!;
  assert.equal(op.state, "bound");
  assert.deepEqual(op.execution, { kind: "exited", code: 1 });
  assert.deepEqual(op.disposition, { kind: "sealed", root: R1, layer: "l1" });
  assert.equal(op.checkpoint, cp.id);
  assert.deepEqual(op.argv, ["bash", "-c", "echo op-1 > f"]);
  assert.deepEqual(op.intent, { root: R1, layer: "l1", changes: DIGEST, recordedMs: 3_000 });

  // The same operation id again: its first record and checkpoint, nothing new.
  const again = c.bindCheckpoint("op-1", { createdMs: 9_000 });
  assert.deepEqual(again, { ...r, repeated: true });
  const rec = c.recordOperation({
    id: "op-1",
    session: "s1",
    expectedHead: cp.id,
    argv: ["bash", "-c", "echo op-1 > f"],
    cwd: ".",
    createdMs: 9_000,
  });
  assert.deepEqual(rec, { kind: "repeated", operation: op });
  assert.throws(
    () =>
      c.recordOperation({
        id: "op-1",
        session: "s1",
        expectedHead: cp.id,
        argv: ["rm", "-rf", "."],
        cwd: ".",
        createdMs: 9_000,
      }),
    Deno.errors.AlreadyExists,
  );
  assert.equal(count(path, "checkpoints"), 2);
  assert.equal(count(path, "operations"), 1);
});

Deno.test({
  name: "checkpoints: no change is one bind with the same root and stack, no intent",
  permissions,
}, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  const s = startSession(c);
  drained(c, "s1", "op-1");
  // An intent for the root it already has is refused: no change has no intent.
  assert.throws(
    () => c.recordIntent("op-1", { root: R0, layer: "l1", changes: DIGEST }, 3_000),
    /changed nothing/,
  );
  assert.throws(() => c.bindCheckpoint("op-1", { createdMs: 4_000 }), /no intent/);
  const r = c.bindCheckpoint("op-1", { createdMs: 4_000, noChange: { changes: EMPTY } });
  assert.equal(r.kind, "bound");
  if (r.kind !== "bound" || r.checkpoint.kind !== "operation") return assert.fail("not bound");
  assert.equal(r.checkpoint.root, R0);
  assert.deepEqual(r.checkpoint.layers, ["l0"]);
  assert.deepEqual(r.checkpoint.delta, { kind: "no-change" });
  assert.notEqual(r.checkpoint.id, s.head);
  assert.deepEqual(c.getOperation("op-1")?.disposition, { kind: "no-change", root: R0 });
  assert.equal(c.getOperation("op-1")?.intent, null);

  // A sealing operation is bound with its layer, never as no change.
  sealing(c, "s1", "op-2", R1);
  assert.throws(
    () => c.bindCheckpoint("op-2", { createdMs: 5_000, noChange: { changes: EMPTY } }),
    /has an intent/,
  );
});

Deno.test({
  name: "checkpoints: a stale head fails exactly, publishes nothing and is never rebased",
  permissions,
}, () => {
  const path = freshPath(dir);
  using j = Journal.open(path);
  const c = j.checkpoints;
  const s = startSession(c);
  // Two writers read the same head; the first wins.
  const h0 = s.head;
  sealing(c, "s1", "op-a", R1);
  const won = c.bindCheckpoint("op-a", { createdMs: 3_000 });
  assert.equal(won.kind, "bound");
  const h1 = c.getSession("s1")!.head;
  const late = c.recordOperation({
    id: "op-b",
    session: "s1",
    expectedHead: h0,
    argv: ["true"],
    cwd: "src",
    createdMs: 3_100,
  });
  assert.deepEqual(late, { kind: "stale", expected: h0, current: h1 });
  assert.equal(c.getOperation("op-b"), null);

  // The head moves under a running operation (a rollback): its bind is stale.
  sealing(c, "s1", "op-c", R2);
  assert.equal(c.rollback("s1", h0, h1).kind, "moved");
  const stale = c.bindCheckpoint("op-c", { createdMs: 4_000 });
  assert.equal(stale.kind, "stale");
  if (stale.kind !== "stale") return;
  assert.equal(stale.expected, h1);
  assert.equal(stale.current, h0);
  assert.equal(stale.repeated, false);
  const op = c.getOperation("op-c")!;
  assert.equal(op.state, "stale");
  assert.equal(op.checkpoint, null);
  assert.equal(op.seenHead, h0);
  assert.ok(op.reason?.includes(h0) && op.reason.includes(h1), op.reason ?? "");
  assert.equal(c.getSession("s1")?.head, h0);
  assert.equal(count(path, "checkpoints"), 2);
  // Asked again, the same answer.
  const again = c.bindCheckpoint("op-c", { createdMs: 5_000 });
  assert.deepEqual(again, { ...stale, repeated: true });
});

Deno.test({ name: "checkpoints: one live operation per session", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  const s = startSession(c);
  const other = startSession(c, "s2", "other");
  drained(c, "s1", "op-1");
  const next = { session: "s1", expectedHead: s.head, argv: ["true"], cwd: ".", createdMs: 1 };
  assert.throws(() => c.recordOperation({ ...next, id: "op-2" }), Deno.errors.Busy);
  assert.throws(() => c.removeSession("s1", 1), Deno.errors.Busy);
  // Another session is independent.
  assert.equal(
    c.recordOperation({ ...next, session: "s2", expectedHead: other.head, id: "op-3" }).kind,
    "recorded",
  );
  assert.deepEqual(c.liveOperations().map((o) => [o.id, o.state]), [
    ["op-3", "recorded"],
    ["op-1", "drained"],
  ]);
  assert.equal(c.discardOperation("op-1", 3_000), true);
  assert.deepEqual(c.liveOperations().map((o) => o.id), ["op-3"]);
  assert.deepEqual(c.getOperation("op-1")?.disposition, { kind: "discarded" });
  assert.equal(c.getSession("s1")?.head, s.head);
  assert.equal(c.recordOperation({ ...next, id: "op-2" }).kind, "recorded");
  assert.throws(() => c.recordOperation({ ...next, id: "op-9", cwd: "../x" }), TypeError);
  assert.throws(() => c.recordOperation({ ...next, id: "op-9", argv: [] }), TypeError);
  assert.throws(() => c.recordOperation({ ...next, id: "Op 9" }), TypeError);
  assert.throws(
    () => c.recordOperation({ ...next, id: "op-9", session: "nope" }),
    Deno.errors.NotFound,
  );
});

Deno.test({ name: "checkpoints: moves follow the operation table only", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  const s = startSession(c);
  const rec = (id: string) =>
    c.recordOperation({
      id,
      session: "s1",
      expectedHead: s.head,
      argv: ["x"],
      cwd: ".",
      createdMs: 1,
    });
  rec("op-1");
  assert.equal(c.drainOperation("op-1", { kind: "cancelled" }, 2), false);
  assert.throws(
    () => c.bindCheckpoint("op-1", { createdMs: 2 }),
    /is recorded: it cannot be bound/,
  );
  // It could not start: failed, the outcome failed-to-start.
  assert.equal(c.failOperation("op-1", "no such file: x", 3), true);
  const failed = c.getOperation("op-1")!;
  assert.equal(failed.state, "failed");
  assert.deepEqual(failed.execution, { kind: "failed-to-start", reason: "no such file: x" });
  assert.equal(c.launchOperation("op-1", 4), false);

  rec("op-2");
  assert.equal(c.launchOperation("op-2", 5), true);
  assert.equal(c.launchOperation("op-2", 5), false);
  assert.equal(c.escapeOperation("op-2", "a process outlived the drain", 6), true);
  assert.equal(c.abandonOperation("op-2", "x", 7), false);
  assert.equal(c.requireRecovery("op-2", "a writer may remain", 8), true);
  assert.equal(c.abandonOperation("op-2", "given up", 9), true);
  const op = c.getOperation("op-2")!;
  assert.equal(op.state, "abandoned");
  assert.equal(op.reason, "given up");
  assert.equal(op.execution, null);
  assert.throws(() => c.launchOperation("nope", 1), Deno.errors.NotFound);

  // A signal and a timeout are kept as such; a drained command started.
  rec("op-3");
  c.launchOperation("op-3", 10);
  assert.throws(
    () => c.drainOperation("op-3", { kind: "failed-to-start", reason: "x" }, 11),
    TypeError,
  );
  assert.equal(c.drainOperation("op-3", { kind: "signaled", signal: "SIGKILL" }, 11), true);
  assert.deepEqual(c.getOperation("op-3")?.execution, { kind: "signaled", signal: "SIGKILL" });
});

Deno.test({
  name: "checkpoints: rollback is a head CAS; the future stays in the log --all",
  permissions,
}, () => {
  const path = freshPath(dir);
  using j = Journal.open(path);
  const c = j.checkpoints;
  const s = startSession(c);
  sealing(c, "s1", "op-1", R1);
  c.bindCheckpoint("op-1", { createdMs: 3_000 });
  sealing(c, "s1", "op-2", R2);
  c.bindCheckpoint("op-2", { createdMs: 4_000 });
  const h2 = c.getSession("s1")!.head;
  const line = c.sessionLog("s1");
  assert.deepEqual(line.map((e) => e.operation?.id ?? null), ["op-2", "op-1", null]);
  assert.ok(line.every((e) => e.onHead));
  const h1 = line[1]!.checkpoint.id;

  const before = count(path, "checkpoints");
  assert.deepEqual(c.rollback("s1", h1, s.head), { kind: "stale", expected: s.head, current: h2 });
  const moved = c.rollback("s1", h1, h2);
  assert.equal(moved.kind, "moved");
  assert.equal(c.getSession("s1")?.head, h1);
  assert.equal(count(path, "checkpoints"), before);
  assert.deepEqual(c.sessionLog("s1").map((e) => e.operation?.id ?? null), ["op-1", null]);
  const all = c.sessionLog("s1", { all: true });
  assert.deepEqual(
    all.map((e) => [e.operation?.id ?? null, e.onHead]),
    [["op-1", true], [null, true], ["op-2", false]],
  );
  // Forward again to the abandoned future; and to where it is (no change).
  assert.equal(c.rollback("s1", h2, h1).kind, "moved");
  assert.equal(c.rollback("s1", h2, h2).kind, "moved");
  assert.equal(c.getSession("s1")?.head, h2);

  // Outside its history: another session's checkpoint that is not an ancestor.
  const t = startSession(c, "s2", "other");
  assert.throws(() => c.rollback("s1", t.head, h2), Deno.errors.NotFound);
  assert.throws(() => c.rollback("s1", "f".repeat(64), h2), Deno.errors.NotFound);
  assert.equal(c.getSession("s1")?.head, h2);
});

Deno.test({
  name: "checkpoints: a fork is one row at an existing checkpoint; advancing it moves no other",
  permissions,
}, () => {
  const path = freshPath(dir);
  using j = Journal.open(path);
  const c = j.checkpoints;
  c.createSession({
    id: "s1",
    project: PROJECT,
    name: "fix",
    withIgnored: true,
    start: { root: R0, layers: ["l0"] },
    createdMs: 1_000,
  });
  sealing(c, "s1", "op-1", R1);
  c.bindCheckpoint("op-1", { createdMs: 3_000 });
  const h1 = c.getSession("s1")!.head;
  const before = count(path, "checkpoints");
  const f = c.forkSession({ id: "s2", name: "try", from: h1, createdMs: 5_000 });
  assert.equal(count(path, "checkpoints"), before);
  assert.equal(f.head, h1);
  assert.equal(f.baseCheckpoint, h1);
  assert.equal(f.baseRoot, R1);
  assert.equal(f.withIgnored, true);
  assert.equal(f.view, `${PROJECT}/.marsh/session/try/view`);
  assert.throws(
    () => c.forkSession({ id: "s3", name: "try", from: h1, createdMs: 5_000 }),
    Deno.errors.AlreadyExists,
  );
  assert.throws(
    () => c.forkSession({ id: "s3", name: "x", from: "f".repeat(64), createdMs: 5_000 }),
    Deno.errors.NotFound,
  );

  // Both advance from the same checkpoint at once: neither sees the other.
  sealing(c, "s1", "op-a", R2);
  sealing(c, "s2", "op-b", R2);
  const a = c.bindCheckpoint("op-a", { createdMs: 6_000 });
  const b = c.bindCheckpoint("op-b", { createdMs: 6_000 });
  assert.ok(a.kind === "bound" && b.kind === "bound");
  // Same files, same root id; different checkpoints.
  assert.equal(a.checkpoint.root, b.checkpoint.root);
  assert.notEqual(a.checkpoint.id, b.checkpoint.id);
  assert.equal(c.getSession("s1")?.head, a.checkpoint.id);
  assert.equal(c.getSession("s2")?.head, b.checkpoint.id);
  // The fork's log runs back through the session it came from.
  assert.deepEqual(c.sessionLog("s2").map((e) => e.operation?.id ?? null), ["op-b", "op-1", null]);
  // Its own earlier line is its history too: it may roll back to the fork point.
  assert.equal(c.rollback("s2", h1, b.checkpoint.id).kind, "moved");
  assert.equal(c.getSession("s1")?.head, a.checkpoint.id);
});

Deno.test({ name: "checkpoints: SQLite refuses what the model forbids", permissions }, () => {
  const path = freshPath(dir);
  let head: string;
  {
    using j = Journal.open(path);
    head = startSession(j.checkpoints).head;
    drained(j.checkpoints, "s1", "op-1");
  }
  const db = new DatabaseSync(path);
  try {
    db.exec("PRAGMA foreign_keys = ON");
    const set = (sql: string) => db.prepare(`UPDATE operations SET ${sql} WHERE id = 'op-1'`).run();
    // Bound without a checkpoint; no change to another root; sealing without intent.
    assert.throws(() => set("state = 'bound'"), /CHECK/);
    assert.throws(
      () => set(`state = 'bound', disposition = 'no-change', result_root = '${R1}'`),
      /CHECK|FOREIGN/,
    );
    assert.throws(() => set("state = 'sealing'"), /CHECK/);
    assert.throws(() => set("state = 'stale'"), /CHECK/);
    assert.throws(() => set("exec_kind = 'exited', exec_code = NULL"), /CHECK/);
    assert.throws(
      () =>
        set(
          `intent_root = '${R0}', intent_layer = 'l', intent_changes = '${DIGEST}', intent_ms = 1`,
        ),
      /CHECK/,
    );
    // Two live operations in one session.
    assert.throws(
      () =>
        db.prepare(
          `INSERT INTO operations (id, session, expected_head, base_root, argv, cwd, state, created_ms)
           VALUES ('op-2', 's1', :h, :r, '["x"]', '.', 'recorded', 1)`,
        ).run({ h: head, r: R0 }),
      /UNIQUE/,
    );
    // A checkpoint that adds a layer but keeps the root.
    assert.throws(
      () =>
        db.prepare(
          `INSERT INTO checkpoints (id, session, project, kind, parent, parent_root, root_id, layers,
             layer, operation, changes, created_ms)
           VALUES (:id, 's1', '/work/p', 'operation', :h, :r, :r, '["l0","l1"]', 'l1', 'op-1', :d, 1)`,
        ).run({ id: "c".repeat(64), h: head, r: R0, d: DIGEST }),
      /CHECK/,
    );
  } finally {
    db.close();
  }
  using j = Journal.open(path);
  assert.equal(j.checkpoints.getOperation("op-1")?.state, "drained");
});
