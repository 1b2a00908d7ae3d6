/**
 * `marsh discard` through the split state machine over fakes of its links
 * (`daemon/_machine_world.ts`): the journal and the pool are real. What the
 * service does with `drop-fork` and `remove` is tested for real in
 * `tests/acceptance_discard_test.ts`.
 */

import assert from "node:assert/strict";
import { sampleBranch, sampleSplit } from "../journal/_testing.ts";
import type { DiscardRequest } from "../protocol/daemon_discard.ts";
import { FakeConn } from "./_fakes.ts";
import { accepted, request, shell, until, type World, world } from "./_machine_world.ts";
import { RequestError } from "./request_error.ts";

const permissions: Deno.PermissionOptions = { read: true, write: true, env: true };
const host = { kind: "host" } as const;

function discard(id: string, labels: string[] = [], reason: string | null = null): DiscardRequest {
  return { v: 1, t: "split.discard", id, labels, reason };
}

/** Starts a split of shell branches `labels`, each launched and running. */
async function running(w: World, labels: string[]) {
  const conn = new FakeConn();
  const done = w.splits.create(conn, request(labels.map((l) => shell(l))));
  const id = await accepted(conn);
  await until(() => w.worker.shell.size === labels.length, "every launch");
  for (const l of labels) w.worker.shellOf(l).launched(4242, "cgroup");
  return { conn, done, id };
}

function end(w: World, label: string, code: number): void {
  const ev = w.worker.shellOf(label);
  ev.exited(code, null);
  ev.settled();
}

async function refusal(p: Promise<unknown>): Promise<RequestError> {
  const error = await p.then(() => null, (e) => e);
  assert.ok(error instanceof RequestError, `expected a refusal, got ${error}`);
  return error;
}

Deno.test({
  name: "discard: a running branch is stopped, journaled discarded, then its fork dropped",
  permissions,
}, async () => {
  using w = world();
  const { conn, done, id } = await running(w, ["a", "b"]);
  // At the drop, the journal already says discarded (recorded before the effect).
  const atDrop: string[] = [];
  w.service.on("drop-fork", (req) => {
    atDrop.push(w.journal.getBranch(id, (req as { label: string }).label)!.state);
    return w.service.defaultReply(req);
  });
  const asked = w.splits.discard(host, discard(id, ["a"], "too slow"));
  await until(() => w.worker.cancels.length === 1, "the stop");
  assert.ok(w.worker.cancels[0]!.includes("-a-"), "only a is stopped");
  assert.ok(!w.service.types.includes("drop-fork"), "nothing is dropped before a settles");
  end(w, "a", 130);
  const r = await asked;
  assert.deepEqual(atDrop, ["discarded"]);
  assert.equal(r.scope, "branches");
  assert.equal(r.by, "host");
  assert.deepEqual(r.branches, [
    { label: "a", after: "cancelled", status: "cancelled", stopped: true, already: false },
  ]);
  const a = w.journal.getBranch(id, "a")!;
  assert.equal(a.state, "discarded");
  assert.equal(a.discard?.after, "cancelled");
  assert.equal(a.discard?.reason, "too slow");
  assert.deepEqual(a.discard?.by, host);
  assert.equal(a.forkIdentity, null, "the fork is gone");
  assert.equal(w.journal.getBranch(id, "b")!.state, "running", "the sibling goes on");

  end(w, "b", 0);
  await done;
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "await");
  assert.equal(s.status, 0, "a discarded branch is not the split's result");
  assert.equal(conn.frame("split.done")?.code, 0);

  // join renders b, names a, and releases: every branch left exited 0.
  const joiner = new FakeConn();
  joiner.push({ v: 1, t: "join.release", consumerStatus: 0 });
  await w.splits.join(joiner, {
    v: 1,
    t: "split.join",
    id,
    keep: false,
    consumer: false,
    terminal: false,
  });
  const render = w.service.requests.find((q) => q.t === "render");
  assert.ok(render?.t === "render");
  assert.deepEqual(render.branches.map((b) => b.label), ["b"]);
  const text = joiner.sent.filter((f) => f.t === "chunk")
    .map((f) => atob((f as { data: string }).data)).join("");
  assert.match(text, /^== a: discarded \(too slow; by host\), not shown$/m);
  assert.equal(joiner.frame("join.released")?.removed, true);
  await w.splits.stop();
});

Deno.test({
  name: "discard: a whole awaiting split is removed, its record and lineage stay",
  permissions,
}, async () => {
  using w = world();
  const { done, id } = await running(w, ["a", "b"]);
  end(w, "a", 0);
  end(w, "b", 1);
  await done;
  const r = await w.splits.discard(host, discard(id, [], "wrong approach"));
  assert.equal(r.scope, "split");
  assert.equal(r.state, "cancelled");
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "cancelled");
  assert.equal(s.identity, null, "its directory is removed");
  assert.equal(s.reason, "discarded by host: wrong approach");
  assert.deepEqual(
    w.journal.branches(id).map((b) => [b.state, b.discard?.after, b.status]),
    [["discarded", "captured", "exited 0"], ["discarded", "captured", "exited 1"]],
  );
  assert.equal(w.service.types.filter((t) => t === "remove").length, 1);
  assert.ok(!w.service.types.includes("drop-fork"));
  // The listing keeps it, with each branch's lineage.
  const [m] = w.splits.list(host, id);
  assert.equal(m!.branches[0]!.discarded?.reason, "wrong approach");
  // Again: nothing left to do, a refusal.
  const again = await refusal(w.splits.discard(host, discard(id)));
  assert.equal(again.code, 1);
  assert.match(again.message, /discarded already; nothing was changed/);
  // A join of it runs nothing.
  const joiner = new FakeConn();
  const j = await refusal(
    w.splits.join(joiner, {
      v: 1,
      t: "split.join",
      id,
      keep: false,
      consumer: false,
      terminal: false,
    }),
  );
  assert.equal(j.code, 130);
  assert.match(j.message, /was discarded \(discarded by host: wrong approach\): nothing to join/);
  await w.splits.stop();
});

Deno.test({
  name: "discard: a whole running split is cancelled first, then every branch discarded",
  permissions,
}, async () => {
  using w = world();
  const { conn, done, id } = await running(w, ["a", "b"]);
  const asked = w.splits.discard(host, discard(id));
  await until(() => w.worker.cancels.length === 2, "both stops");
  end(w, "a", 130);
  end(w, "b", 130);
  await done;
  const r = await asked;
  assert.deepEqual(r.branches.map((b) => [b.label, b.after, b.stopped]), [
    ["a", "cancelled", true],
    ["b", "cancelled", true],
  ]);
  const s = w.journal.getSplit(id)!;
  assert.equal(s.state, "cancelled");
  assert.equal(s.identity, null);
  assert.match(s.reason ?? "", /^discarded by host/);
  assert.equal(conn.frame("split.done")?.code, 130);
  assert.equal(w.service.types.filter((t) => t === "remove").length, 1, "removed once");
  await w.splits.stop();
});

Deno.test({
  name: "discard: unknown labels, a joined split and a branch's own split change nothing",
  permissions,
}, async () => {
  using w = world();
  const { done, id } = await running(w, ["a", "b"]);
  const unknown = await refusal(w.splits.discard(host, discard(id, ["a", "zz"])));
  assert.equal(unknown.code, 2);
  assert.match(unknown.message, /has no branch "zz"; its branches: a, b; nothing was discarded/);
  assert.equal((await refusal(w.splits.discard(host, discard("nope")))).code, 2);
  // From a's own socket: neither its own branch nor its sibling.
  const branch = { kind: "branch", split: id, label: "a", session: `${id}/a` } as const;
  for (const labels of [["a"], ["b"], []]) {
    const e = await refusal(w.splits.discard(branch, discard(id, labels)));
    assert.equal(e.code, 1);
    assert.match(
      e.message,
      /a branch cannot discard its own split or its siblings; only split \w+'s creator may discard it: the host/,
    );
  }
  assert.equal(w.worker.cancels.length, 0, "nothing was stopped");
  assert.deepEqual(w.journal.branches(id).map((b) => b.state), ["running", "running"]);
  end(w, "a", 0);
  end(w, "b", 0);
  await done;
  w.journal.transitionSplit(id, ["await"], "joined");
  const joined = await refusal(w.splits.discard(host, discard(id)));
  assert.equal(joined.code, 1);
  assert.match(joined.message, /was joined/);
  assert.deepEqual(w.journal.branches(id).map((b) => b.state), ["captured", "captured"]);
  await w.splits.stop();
});

Deno.test({
  name: "discard: the branch that made a nested split may discard it; the host may not",
  permissions,
}, async () => {
  using w = world();
  const creator = { kind: "branch", split: "p", label: "x", session: "p/x" } as const;
  w.journal.createSplit(sampleSplit("p", { state: "run" }));
  w.journal.createSplit(
    sampleSplit("n", {
      state: "kept",
      creator: { kind: "session", id: "p/x" },
      parent: { split: "p", label: "x" },
      depth: 2,
      identity: null,
    }),
  );
  w.journal.addBranches("n", [
    sampleBranch("n", "a", 0, { state: "captured", status: "exited 0", code: 0 }),
  ]);
  const e = await refusal(w.splits.discard(host, discard("n", ["a"])));
  assert.equal(e.code, 1);
  assert.match(e.message, /only split n's creator may discard it: the shell branch that made it/);
  const r = await w.splits.discard(creator, discard("n", ["a"], "nested"));
  assert.equal(r.by, "session:p/x");
  assert.equal(w.journal.getBranch("n", "a")!.state, "discarded");
  await w.splits.stop();
});

Deno.test({
  name: "discard: a fork that cannot be dropped is 125, recorded; a second discard finishes it",
  permissions,
}, async () => {
  using w = world();
  const { done, id } = await running(w, ["a", "b"]);
  end(w, "a", 0);
  end(w, "b", 0);
  await done;
  w.service.fail("drop-fork", "input", "cannot unmount /p/.marsh/split/x/a: busy");
  const e = await refusal(w.splits.discard(host, discard(id, ["a"])));
  assert.equal(e.code, 125);
  assert.match(
    e.message,
    /branch a discarded, but its fork was not removed: cannot unmount .*busy; run marsh discard \w+ a again/,
  );
  const a = w.journal.getBranch(id, "a")!;
  assert.equal(a.state, "discarded");
  assert.notEqual(a.forkIdentity, null, "the fork is still recorded");
  w.service.on("drop-fork", (req) => w.service.defaultReply(req));
  const r = await w.splits.discard(host, discard(id, ["a"]));
  assert.equal(r.branches[0]!.already, true);
  assert.equal(w.journal.getBranch(id, "a")!.forkIdentity, null);
  const third = await refusal(w.splits.discard(host, discard(id, ["a"])));
  assert.equal(third.code, 1);
  assert.match(third.message, /branch a was discarded already; nothing was changed/);
  await w.splits.stop();
});
