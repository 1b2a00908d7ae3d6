/**
 * A nested split's plans: the source is its creator branch's fork, not the
 * project. Real files, real splits, the real applier.
 */
import assert from "node:assert/strict";
import { fingerprint, fingerprintDiff, put, sandbox } from "../_testing.ts";
import { applyPlan } from "../apply/transaction.ts";
import { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { SplitWorkspace } from "../workspace/workspace.ts";
import type { PlanFsRequest } from "../../protocol/splitfs_resolve.ts";

const PERMS: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  env: true,
  run: ["awk", "umount"],
};

for (const parentForks of ["copy", "auto"] as const) {
  Deno.test({
    name: `a nested split plans against its creator's fork (parent forks: ${parentForks})`,
    permissions: PERMS,
  }, async () => {
    using sb = sandbox("marsh-plan-nested-");
    put(sb.root, "a.txt", "a\n");
    put(sb.root, "b.txt", "b\n");
    using parent = SplitWorkspace.create({ root: sb.root, id: "p1", forks: parentForks });
    const creator = parent.fork("c").path;
    put(creator, "a.txt", "a, by the creator\n");
    using nested = SplitWorkspace.create({
      root: sb.root,
      id: "n1",
      parent: { split: "p1", label: "c" },
    });
    const fork = nested.fork("x").path;
    put(fork, "a.txt", "a, by the nested branch\n");
    put(fork, "b.txt", "b, by the nested branch\n");
    put(fork, "new.txt", "new\n");
    nested.capture("x");
    // The creator edits b.txt meanwhile; the project itself is never read.
    put(creator, "b.txt", "b, by the creator later\n");
    put(sb.root, "a.txt", "the user's a\n");
    const skip = (rel: string) => rel === ".marsh";
    const project = fingerprint(sb.root, { skip });
    const req: PlanFsRequest = {
      v: 1,
      t: "plan-fs",
      id: "n1",
      label: "x",
      scope: "filesystem",
      parent: { split: "p1", label: "c" },
    };
    const planned = nested.planFs(req);
    assert.deepEqual(
      planned.plan.entries.map((e) => `${e.op} ${e.path}`),
      ["take a.txt", "conflict b.txt", "take new.txt"],
    );
    assert.throws(() => nested.planFs({ ...req, parent: undefined }), RefusedError);
    const narrowed = nested.planFs({ ...req, scope: "paths", paths: ["a.txt", "new.txt"] });
    using from = Dir.openAbsolute(fork);
    await applyPlan(creator, narrowed.plan, { content: (f) => ({ from, name: f.path }) });
    assert.equal(Deno.readTextFileSync(`${creator}/a.txt`), "a, by the nested branch\n");
    assert.equal(Deno.readTextFileSync(`${creator}/new.txt`), "new\n");
    assert.equal(Deno.readTextFileSync(`${creator}/b.txt`), "b, by the creator later\n");
    assert.deepEqual(
      fingerprintDiff(project, fingerprint(sb.root, { skip })),
      [],
      "the project itself was not changed",
    );
  });
}
