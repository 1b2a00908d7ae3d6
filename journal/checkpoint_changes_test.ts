import assert from "node:assert/strict";
import { Journal } from "./journal.ts";
import { freshPath, scratchDir } from "./_testing.ts";
import { DIGEST, drained, R1, startSession } from "./_checkpoint_testing.ts";

const dir = scratchDir("checkpoint-changes");
const permissions: Deno.PermissionOptions = { read: [dir], write: [dir] };

Deno.test(
  { name: "operation changes: kept once, read back, survive a reopen", permissions },
  () => {
    const path = freshPath(dir);
    {
      using j = Journal.open(path);
      const c = j.checkpoints;
      startSession(c);
      drained(c, "s1", "o1");
      assert.equal(c.changesOf("o1"), null);
      const paths = [{ path: "a.txt", change: "modified" }, { path: "b c", change: "deleted" }];
      c.recordChanges("o1", { changed: 3, truncated: true, paths });
      // The same operation again is a no-op: the first capture's list stays.
      c.recordChanges("o1", { changed: 0, truncated: false, paths: [] });
      assert.deepEqual(c.changesOf("o1"), { changed: 3, truncated: true, paths });
      assert.throws(
        () => c.recordChanges("nope", { changed: 0, truncated: false, paths: [] }),
        Deno.errors.NotFound,
      );
      assert.throws(
        () => c.recordChanges("o1", { changed: 1, truncated: false, paths }),
        TypeError,
        "more paths than the count",
      );
    }
    using j = Journal.open(path);
    assert.equal(j.checkpoints.changesOf("o1")?.changed, 3);
  },
);

Deno.test({ name: "operation view: project or relative, kept once", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  startSession(c);
  drained(c, "s1", "o1");
  assert.equal(c.viewOf("o1"), null);
  c.recordView("o1", { view: "relative", reason: "no mount namespace" });
  c.recordView("o1", { view: "project", reason: "again" });
  // Launched before its view was kept (as no daemon does): no drain proof on it.
  assert.deepEqual(c.viewOf("o1"), { view: "relative", reason: "no mount namespace", drain: null });
  assert.throws(
    () => c.recordView("o1", { view: "other" as "project", reason: "" }),
    TypeError,
  );
  assert.throws(() => c.recordView("nope", { view: "project", reason: "" }), Deno.errors.NotFound);
});

Deno.test(
  { name: "operation drain proof: kept with the launch, survives a reopen", permissions },
  () => {
    const path = freshPath(dir);
    {
      using j = Journal.open(path);
      const c = j.checkpoints;
      startSession(c);
      const head = c.getSession("s1")!.head;
      for (const [id, drain] of [["o1", "cgroup"], ["o2", "subreaper"]] as const) {
        c.recordOperation({
          id,
          session: "s1",
          expectedHead: head,
          argv: ["true"],
          cwd: ".",
          createdMs: 1,
        });
        c.recordView(id, { view: "project", reason: "root" });
        assert.equal(c.viewOf(id)?.drain, null, "not launched yet");
        assert.ok(c.launchOperation(id, 2, drain));
        assert.deepEqual(c.viewOf(id), { view: "project", reason: "root", drain });
        // A launch again (from another state) changes nothing.
        assert.equal(c.launchOperation(id, 3, drain === "cgroup" ? "subreaper" : "cgroup"), false);
        assert.equal(c.viewOf(id)?.drain, drain);
        assert.ok(c.drainOperation(id, { kind: "exited", code: 0 }, 4));
        assert.ok(c.discardOperation(id, 5));
      }
      assert.throws(() => c.launchOperation("o3", 2, "other" as "cgroup"), Deno.errors.NotFound);
    }
    using j = Journal.open(path);
    assert.equal(j.checkpoints.viewOf("o1")?.drain, "cgroup");
    assert.equal(j.checkpoints.viewOf("o2")?.drain, "subreaper");
  },
);

Deno.test({ name: "the intent keeps the paths in its one transaction", permissions }, () => {
  using j = Journal.open(freshPath(dir));
  const c = j.checkpoints;
  startSession(c);
  drained(c, "s1", "o1");
  const paths = [{ path: "a.txt", change: "added" }];
  const before = j.commits;
  assert.ok(
    c.recordIntent("o1", { root: R1, layer: "l1", changes: DIGEST }, 5_000, {
      changed: 1,
      truncated: false,
      paths,
    }),
  );
  assert.equal(j.commits - before, 1, "one commit: still one durability step");
  assert.deepEqual(c.changesOf("o1")?.paths, paths);
  assert.equal(c.getOperation("o1")?.state, "sealing");
  // From another state nothing moves and nothing is kept.
  startSession(c, "s2", "other");
  drained(c, "s2", "o2");
  c.discardOperation("o2", 6_000);
  assert.equal(
    c.recordIntent("o2", { root: R1, layer: "l2", changes: DIGEST }, 7_000, {
      changed: 1,
      truncated: false,
      paths,
    }),
    false,
  );
  assert.equal(c.changesOf("o2"), null);
});
