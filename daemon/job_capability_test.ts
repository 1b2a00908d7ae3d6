/** `job.json`'s limits are the job tree's (docs/rules.md "Admission"); `context.md` keeps the split's. */

import assert from "node:assert/strict";
import { jobContext, jobJsonBase } from "./job_capability.ts";

Deno.test({
  name: "job.json reports the job tree's limits; context.md the split's",
  permissions: {},
}, () => {
  const base = jobJsonBase("j1", "codex", ["codex", "claude", "marsh", "Bad"]);
  assert.deepEqual(base.limits, { pool: 8, depth: 4, same_kit: 2, fan_out: 4, total: 64 });
  assert.deepEqual(base.registered, ["claude", "codex"]);
  assert.match(
    jobContext(base),
    /at most 16 per split, nesting at most 3 deep,\n8 running at once\./,
  );
});
