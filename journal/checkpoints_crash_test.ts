import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { checkpointIdOf } from "./_checkpoint_rows.ts";
import { DIGEST, R0, R1 } from "./_checkpoint_testing.ts";
import { DENO, killAfterWrite } from "./_crash.ts";
import { freshPath, scratchDir } from "./_testing.ts";
import {
  decideRecovery,
  headVisibility,
  LIVE_OPERATION_STATES,
  type RecoveryOutcome,
  type RootDurability,
} from "../model/operation_state.ts";

const dir = scratchDir("checkpoints-crash");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir], run: [DENO] };

/**
 * Start-up recovery of `op-1` as the daemon will run it: the layer read
 * back as `root` says (by default sealed with the requested root id, what
 * the seal step leaves), the head read back from the journal, the decision
 * the model's; a bind it decides is done.
 */
function recover(
  j: Journal,
  root: RootDurability = "requested-root-durable",
): RecoveryOutcome {
  const c = j.checkpoints;
  const op = c.getOperation("op-1")!;
  const session = c.getSession(op.session)!;
  const requested = op.intent === null ? null : checkpointIdOf({
    kind: "operation",
    operation: op.id,
    parent: op.expectedHead,
    root: op.intent.root,
    changes: op.intent.changes,
  });
  const live = LIVE_OPERATION_STATES.includes(op.state);
  const outcome = decideRecovery(op.state, {
    processes: "none",
    upper: "intact",
    root: live ? root : null,
    head: requested === null ? null : headVisibility(session.head, op.expectedHead, requested),
  });
  if (outcome.action === "bind" || outcome.action === "settle") {
    const r = c.bindCheckpoint(op.id, { createdMs: 7_000 });
    assert.equal(r.kind, "bound");
    if (r.kind === "bound") assert.equal(r.checkpoint.id, requested);
  }
  return outcome;
}

function assertBound(j: Journal): void {
  const c = j.checkpoints;
  const op = c.getOperation("op-1")!;
  assert.equal(op.state, "bound");
  const head = c.getSession("s1")!.head;
  assert.equal(head, op.checkpoint);
  const cp = c.getCheckpoint(head)!;
  assert.equal(cp.root, R1);
  assert.ok(cp.kind === "operation" && cp.parentRoot === R0 && cp.changes === DIGEST);
  assert.deepEqual(c.sessionLog("s1").map((e) => e.operation?.id ?? null), ["op-1", null]);
}

Deno.test({
  name:
    "checkpoint bind killed with SIGKILL inside its transaction: nothing published; recovery binds it, twice idempotent",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("bind-open", path, dir);
  {
    using j = Journal.open(path);
    const c = j.checkpoints;
    // The intent survived; the bind left no trace: no checkpoint, head at the start.
    const op = c.getOperation("op-1")!;
    assert.equal(op.state, "sealing");
    assert.equal(op.checkpoint, null);
    assert.deepEqual(op.intent?.root, R1);
    const s = c.getSession("s1")!;
    assert.equal(s.head, s.baseCheckpoint);
    assert.equal(c.sessionLog("s1", { all: true }).length, 1);
    assert.deepEqual(recover(j), { action: "bind" });
    assertBound(j);
  }
  // The second start finds it bound and does nothing.
  using j = Journal.open(path);
  assert.deepEqual(recover(j), { action: "keep" });
  assertBound(j);
  assert.equal(j.checkpoints.sessionLog("s1", { all: true }).length, 2);
});

Deno.test({
  name:
    "checkpoint bind killed with SIGKILL right after it returned: published whole; recovery keeps it",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("bind-done", path, dir);
  assert.ok(Deno.statSync(`${path}-wal`).size > 0);
  for (let run = 0; run < 2; run++) {
    using j = Journal.open(path);
    assertBound(j);
    assert.deepEqual(recover(j), { action: "keep" });
    assert.equal(j.checkpoints.sessionLog("s1", { all: true }).length, 2);
  }
});

Deno.test({
  name:
    "killed with SIGKILL after the intent: the layer absent is sealed once more, then bound; twice idempotent",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("intent-done", path, dir);
  {
    using j = Journal.open(path);
    const s = j.checkpoints.getSession("s1")!;
    assert.equal(s.head, s.baseCheckpoint);
    assert.equal(j.checkpoints.getOperation("op-1")?.state, "sealing");
    // The seal never ran: seal the intent's exact layer once more, nothing else moves.
    assert.deepEqual(recover(j, "requested-root-absent"), { action: "reseal" });
    assert.equal(j.checkpoints.getOperation("op-1")?.state, "sealing");
    // Once sealed: bound.
    assert.deepEqual(recover(j), { action: "bind" });
    assertBound(j);
  }
  using j = Journal.open(path);
  assert.deepEqual(recover(j), { action: "keep" });
  assertBound(j);
});

Deno.test({
  name:
    "killed after the intent, the layer holding another root: recovery-required, the head untouched",
  permissions,
}, async () => {
  const path = freshPath(dir);
  await killAfterWrite("intent-done", path, dir);
  for (let run = 0; run < 2; run++) {
    using j = Journal.open(path);
    const outcome = recover(j, "conflicting-root-record");
    if (outcome.action === "require") {
      assert.equal(j.checkpoints.requireRecovery("op-1", outcome.reason, 8_000), true);
    } else {
      assert.deepEqual(outcome, { action: "keep" });
    }
    assert.equal(j.checkpoints.getOperation("op-1")?.state, "recovery-required");
    const s = j.checkpoints.getSession("s1")!;
    assert.equal(s.head, s.baseCheckpoint);
    assert.deepEqual(j.checkpoints.liveOperations(), []);
  }
});
