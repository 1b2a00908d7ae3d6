/**
 * The `plan-fs` frame through the real split-filesystem service: a child
 * process with its own narrow permissions, spoken to in frames.
 */
import assert from "node:assert/strict";
import type { CreatedReply, ForkedReply } from "../../protocol/splitfs.ts";
import type { PlanFsRequest, PlannedReply } from "../../protocol/splitfs_resolve.ts";
import { SplitfsError, SplitfsService } from "../../protocol/splitfs_client.ts";
import { fingerprint, fingerprintDiff, mountsBelow, put, sandbox } from "../_testing.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

for (const forks of ["copy", "auto"] as const) {
  Deno.test({
    name: `service: plan-fs answers planned, and refuses what it cannot plan (forks: ${forks})`,
    permissions: PERMS,
  }, async () => {
    using sb = sandbox("marsh-plan-fs-service-");
    put(sb.root, "a.txt", "one\n");
    put(sb.root, "src/b.txt", "bee\n");
    put(sb.root, "src/c.txt", "sea\n");
    {
      await using svc = SplitfsService.start();
      const created = await svc.request<CreatedReply>({
        v: 1,
        t: "create",
        id: "s1",
        cwd: sb.root,
        env: {},
        withIgnored: false,
        forks,
      });
      const forked = await svc.request<ForkedReply>({ v: 1, t: "fork", id: "s1", label: "a" });
      assert.equal(forked.strategy === "overlay", forks === "auto");
      const req = (scope: PlanFsRequest["scope"], id = "s1"): PlanFsRequest => ({
        v: 1,
        t: "plan-fs",
        id,
        label: "a",
        scope,
      });
      const refused = async (r: PlanFsRequest, message: RegExp) => {
        const error = await svc.request(r).then(() => null, (e) => e);
        assert.ok(error instanceof SplitfsError, `${error}`);
        assert.equal(error.kind, "input");
        assert.match(error.message, message);
      };
      await refused(
        req("filesystem"),
        /branch a of split s1 has no captured result: it is still running/,
      );
      put(forked.path, "a.txt", "one, edited\n");
      Deno.removeSync(`${forked.path}/src/c.txt`);
      put(forked.path, "new/d.txt", "new\n");
      await svc.request({ v: 1, t: "capture", id: "s1", label: "a" });
      put(sb.root, "src/b.txt", "bee, the user's\n");
      const before = fingerprint(sb.root);
      const planned = await svc.request<PlannedReply>(req("filesystem"));
      assert.equal(planned.t, "planned");
      assert.deepEqual(
        planned.plan.entries.map((e) => `${e.op} ${e.path}`),
        ["take a.txt", "take new", "take new/d.txt", "delete src/c.txt"],
      );
      assert.equal(planned.plan.trees.base, created.snapshot.rootId);
      const promoted = await svc.request<PlannedReply>(req("promote"));
      assert.deepEqual(promoted.sourceChanges, ["src/b.txt"]);
      assert.equal(promoted.sourceChangesMore, 0);
      assert.ok(promoted.plan.entries.some((e) => e.op === "take" && e.path === "src/b.txt"));
      assert.deepEqual(
        fingerprintDiff(before, fingerprint(sb.root)),
        [],
        "planning changed nothing",
      );
      await refused(req("filesystem", "nope"), /no open split nope/);
      await refused({ ...req("filesystem"), label: "b" }, /branch b of split s1 has no fork/);
      await svc.request({ v: 1, t: "remove", id: "s1" });
    }
    assert.deepEqual(mountsBelow(sb.top), []);
  });
}
