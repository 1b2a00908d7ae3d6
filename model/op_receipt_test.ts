import assert from "node:assert/strict";
import { completenessReceipt } from "./op_receipt.ts";

Deno.test("completeness receipt: complete only with a drain proof and the project view", () => {
  for (const drain of ["cgroup", "subreaper"] as const) {
    const r = completenessReceipt("project", drain);
    assert.equal(r.complete, true);
    assert.equal(r.drain, drain);
    assert.match(r.why, /private mount namespace made its overlay the only writable view/);
    const rel = completenessReceipt("relative", drain);
    assert.equal(rel.complete, false, "relative is never complete");
    assert.match(rel.why, /^relative: .*absolute path may have bypassed its overlay/);
  }
  const old = completenessReceipt("project", null);
  assert.equal(old.complete, false);
  assert.match(old.why, /not recorded/);
  assert.equal(completenessReceipt("relative", null).complete, false);
});
