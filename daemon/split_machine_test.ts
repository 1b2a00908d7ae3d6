/**
 * Unit tests of the split state machine through fakes of its links
 * (`daemon/_fakes.ts`): the split-filesystem service, the worker, the branch
 * sockets and the client connection are fakes; the journal, the pool and the
 * attempt directories are real (a temp control dir). The fakes stand in
 * for the links only here: what the links themselves do is tested for real
 * in `tests/acceptance_*_test.ts`, `splitfs/` and `worker/`.
 */

import assert from "node:assert/strict";
import { FakeConn } from "./_fakes.ts";
import { accepted, request, shell, until, world } from "./_machine_world.ts";

const permissions: Deno.PermissionOptions = { read: true, write: true, env: true };

Deno.test({
  name: "machine: create -> run -> settle -> await -> join, every record in order",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a"), shell("b")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 2, "both launches");
  assert.deepEqual(w.journal.branches(id).map((b) => b.state), ["running", "running"]);
  assert.equal(w.pool.inUse("host"), 2);
  for (const label of ["a", "b"]) {
    const ev = w.worker.shellOf(label);
    ev.launched(4242, "cgroup");
    ev.exited(label === "a" ? 0 : 3, null);
    ev.settled();
  }
  await done;
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "await");
  assert.equal(s.status, 3, "the first nonzero branch's status");
  assert.deepEqual(
    w.journal.branches(id).map((b) => [b.label, b.state, b.status, b.mechanism]),
    [["a", "captured", "exited 0", "cgroup"], ["b", "captured", "exited 3", "cgroup"]],
  );
  assert.equal(w.pool.inUse("host"), 0, "settled branches free their slots");
  assert.equal(w.sockets.closed.length, 2, "each branch's socket closed at its end");
  assert.equal(conn.frame("split.done")?.code, 3);
  // Captured before published, published before the split's manifest.
  const t = w.service.types;
  assert.deepEqual(t.slice(0, 4), ["locate", "create", "fork", "fork"]);
  assert.ok(t.lastIndexOf("capture") < t.lastIndexOf("publish"));
  assert.ok(t.lastIndexOf("publish") < t.indexOf("manifest"));
  assert.ok(w.worker.cancels.length === 0);

  const joiner = new FakeConn();
  joiner.push({ v: 1, t: "join.release", consumerStatus: 0 });
  await w.splits.join(joiner, {
    v: 1,
    t: "split.join",
    id,
    keep: false,
    consumer: true,
    terminal: false,
  });
  assert.equal(w.journal.getSplit(id)?.state, "joined");
  assert.equal(joiner.frame("join.released")?.removed, true);
  assert.equal(w.service.types.at(-1), "remove");
  await w.splits.stop();
});

Deno.test({
  name: "machine: a join that is not released keeps the split; the lease never touches it",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 1, "the launch");
  const ev = w.worker.shellOf("a");
  ev.launched(1, "subreaper");
  ev.exited(0, null);
  ev.settled();
  await done;
  const joiner = new FakeConn();
  joiner.end();
  await w.splits.join(joiner, {
    v: 1,
    t: "split.join",
    id,
    keep: false,
    consumer: false,
    terminal: false,
  });
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "kept");
  assert.equal(s.reason, "the join did not release it");
  await w.splits.stop();
});

Deno.test({
  name: "machine: cancel while a branch is queued: it never launches, the split is removed",
  permissions,
}, async () => {
  using w = world();
  // The second fork waits: branch a is forked (queued) when the cancel comes.
  const forkB = Promise.withResolvers<void>();
  let forks = 0;
  w.service.on("fork", async (req) => {
    if (++forks === 2) await forkB.promise;
    return w.service.defaultReply(req);
  });
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a"), shell("b")]));
  const id = await accepted(conn);
  await until(() => forks === 2, "the second fork");
  assert.equal(w.splits.cancel(id, "unit-test cancel"), true);
  assert.equal(w.splits.cancel(id, "a second reason"), true, "a second cancel keeps the first");
  forkB.resolve();
  await done;
  assert.equal(w.worker.shell.size, 0, "nothing launched");
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "cancelled");
  assert.equal(s.status, 130);
  assert.equal(s.reason, "unit-test cancel");
  assert.deepEqual(
    w.journal.branches(id).map((b) => [b.state, b.status, b.code]),
    [["cancelled", "cancelled", 130], ["cancelled", "cancelled", 130]],
  );
  assert.ok(w.service.types.includes("remove"), "every end confirmed: removed");
  assert.equal(conn.frame("split.done")?.code, 130);
  assert.equal(w.splits.cancel(id, "after the end"), false);
});

Deno.test({
  name: "machine: cancel while running: the worker is told, the branch ends cancelled uncaptured",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 1, "the launch");
  const ev = w.worker.shellOf("a");
  ev.launched(7, "cgroup");
  assert.equal(w.splits.cancel(id, "cancelled by the creator"), true);
  assert.deepEqual(w.worker.cancels, [...w.worker.shell.keys()]);
  ev.exited(null, "SIGINT");
  ev.settled();
  await done;
  assert.equal(w.journal.getSplit(id)?.state, "cancelled");
  const b = w.journal.branches(id)[0]!;
  assert.deepEqual([b.state, b.status, b.code], ["cancelled", "cancelled", 130]);
  assert.equal(w.service.types.includes("capture"), false, "a cancelled branch is not captured");
  assert.ok(w.service.types.includes("remove"));
  assert.equal(w.pool.inUse("host"), 0);
});

Deno.test({
  name: "machine: a creator's Ctrl-C during the spool cancels before the snapshot",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")], true));
  const id = await accepted(conn);
  conn.push({ v: 1, t: "split.cancel" });
  await done;
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "cancelled");
  assert.equal(s.reason, "cancelled by the creator");
  assert.equal(w.journal.branches(id)[0]?.state, "cancelled");
  assert.equal(w.service.types.includes("create"), false, "no snapshot");
  assert.deepEqual([...Deno.readDirSync(`${w.home}/spool`)], [], "the spool is gone");
});

Deno.test({
  name: "machine: a setup failure cancels the split with status 2 and tells the creator",
  permissions,
}, async () => {
  using w = world();
  w.service.fail("create", "input", "no space left on device");
  const conn = new FakeConn();
  await w.splits.create(conn, request([shell("a"), shell("b")]));
  const id = conn.frame("split.accepted")!.id;
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "cancelled");
  assert.equal(s.status, 2);
  assert.equal(s.reason, "setup failed: no space left on device");
  assert.deepEqual(w.journal.branches(id).map((b) => b.state), ["cancelled", "cancelled"]);
  assert.deepEqual(conn.frame("error"), {
    v: 1,
    t: "error",
    code: 2,
    message: "no space left on device",
  });
  assert.equal(w.worker.shell.size, 0);
  assert.equal(w.journal.getCapability(s.cap)?.state, "revoked");
});

Deno.test({
  name: "machine: the worker gives up after launched: uncertain, untrusted, its slot held",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 1, "the launch");
  const ev = w.worker.shellOf("a");
  ev.launched(9, "cgroup");
  ev.error("the supervisor died");
  await done;
  const b = w.journal.branches(id)[0]!;
  assert.deepEqual([b.state, b.trust, b.status, b.code], [
    "uncertain",
    "untrusted",
    "failed: the supervisor died",
    125,
  ]);
  assert.equal(w.pool.inUse("host"), 1, "processes may live: the slot stays held");
  assert.equal(w.journal.getSplit(id)?.state, "await");
  await w.splits.stop();
});

Deno.test({
  name: "machine: the worker gives up before launched: failed, its slot freed",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 1, "the launch");
  w.worker.shellOf("a").error("cannot start the supervisor");
  await done;
  const b = w.journal.branches(id)[0]!;
  assert.deepEqual([b.state, b.trust, b.code], ["failed", null, 125]);
  assert.equal(w.pool.inUse("host"), 0);
  await w.splits.stop();
});

Deno.test({
  name: "machine: a cancelled split whose branch's end is unconfirmed is kept, not removed",
  permissions,
}, async () => {
  using w = world();
  const conn = new FakeConn();
  const done = w.splits.create(conn, request([shell("a")]));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === 1, "the launch");
  const ev = w.worker.shellOf("a");
  ev.launched(9, "cgroup");
  w.splits.cancel(id, "unit-test cancel");
  ev.error("the supervisor died");
  await done;
  assert.equal(w.journal.getSplit(id)?.state, "cancelled");
  assert.equal(w.journal.branches(id)[0]?.state, "uncertain");
  assert.equal(w.service.types.includes("remove"), false);
  assert.match(
    conn.frame("split.done")?.message ?? "",
    /kept because these branches' ends are unconfirmed: a$/,
  );
});

Deno.test({
  name: "machine: a Kit branch's container that may remain leaves it uncertain, slot held",
  // The job runs as the forks' owner: its user is read at launch.
  permissions: { ...permissions, sys: ["uid", "gid"] },
}, async () => {
  using w = world("/fake/docker.sock");
  w.journal.addKit({
    name: "fixture",
    image: "marsh-kit/fixture:1",
    imageId: `sha256:${"0".repeat(64)}`,
    entrypoint: null,
    network: "none",
    env: [],
    wallS: 60,
    home: `${w.home}/kit-home`,
    createdMs: 1,
  });
  const conn = new FakeConn();
  const done = w.splits.create(
    conn,
    request([{ kind: "argv", label: "k", argv: ["fixture", "run"] }]),
  );
  const id = await accepted(conn);
  await until(() => w.worker.kit.size === 1, "the Kit launch");
  const b0 = w.journal.branches(id)[0]!;
  assert.equal(w.journal.getJob(b0.jobId!)?.cleanup, "live", "journaled before the worker runs it");
  const ev = w.worker.kitOf("k");
  ev.launched("c0ffee");
  ev.unreaped("c0ffee", "the container was not removed");
  await done;
  const b = w.journal.branches(id)[0]!;
  assert.deepEqual([b.state, b.trust, b.code], ["uncertain", "untrusted", 125]);
  const job = w.journal.getJob(b.jobId!)!;
  assert.deepEqual([job.state, job.cleanup, job.container], ["uncertain", "uncertain", "c0ffee"]);
  assert.equal(w.pool.inUse("host"), 1);
  await w.splits.stop();
});

Deno.test({
  name: "machine: a Kit branch costs one commit per effect: 5 before its launch, 4 to awaiting, " +
    "2 in the release",
  // The job runs as the forks' owner: its user is read at launch.
  permissions: { ...permissions, sys: ["uid", "gid"] },
}, async () => {
  // Each commit waits for its fsync: records with no effect between them share
  // one (docs/rules.md, "States and records": recorded before each effect).
  using w = world("/fake/docker.sock");
  w.journal.addKit({
    name: "fixture",
    image: "marsh-kit/fixture:1",
    imageId: `sha256:${"0".repeat(64)}`,
    entrypoint: null,
    network: "none",
    env: [],
    wallS: 60,
    home: `${w.home}/kit-home`,
    createdMs: 1,
  });
  const conn = new FakeConn();
  const before = w.journal.commits;
  const done = w.splits.create(
    conn,
    request([{ kind: "argv", label: "k", argv: ["fixture", "run"] }]),
  );
  const id = await accepted(conn);
  await until(() => w.worker.kit.size === 1, "the Kit launch");
  // The records, the snapshot's, the fork's, the job's admission (its record), the launch's.
  assert.equal(w.journal.commits - before, 5, "commits from the request to the launch");
  const b0 = w.journal.branches(id)[0]!;
  assert.deepEqual(
    [b0.state, b0.forkStrategy !== null, w.journal.getJob(b0.jobId!)?.cleanup],
    ["running", true, "live"],
    "the fork and the launch are journaled before the worker runs it",
  );
  assert.equal(w.journal.getCapability(`${id}/k`)?.state, "live");
  const launched = w.journal.commits;
  const ev = w.worker.kitOf("k");
  ev.launched("c0ffee");
  ev.exited(0, null, false);
  ev.settled();
  await done;
  // The container's id; the revoke before the capture; the branch's end; the split's.
  assert.equal(w.journal.commits - launched, 4, "commits from the launch to awaiting");
  const b = w.journal.branches(id)[0]!;
  assert.deepEqual([b.state, b.status], ["captured", "exited 0"]);
  assert.equal(w.journal.getJob(b.jobId!)?.cleanup, "removed");

  const joiner = new FakeConn();
  joiner.push({ v: 1, t: "join.release", consumerStatus: null });
  const joining = w.journal.commits;
  const asked = w.service.types.length;
  await w.splits.join(joiner, {
    v: 1,
    t: "split.join",
    id,
    keep: false,
    consumer: false,
    terminal: false,
  });
  // The state before the removal; what the removal left after it.
  assert.equal(w.journal.commits - joining, 2, "commits in the join");
  // out/ was complete: checked once, not again after publishing nothing.
  assert.deepEqual(w.service.types.slice(asked), [
    "out-check",
    "manifest",
    "render",
    "remove",
  ]);
  assert.equal(w.journal.getSplit(id)?.state, "joined");
  assert.equal(w.journal.getSplit(id)?.identity, null);
  assert.equal(w.journal.getCapability(`${id}/cap`)?.state, "revoked");
  assert.equal(joiner.frame("join.released")?.removed, true);
  await w.splits.stop();
});
