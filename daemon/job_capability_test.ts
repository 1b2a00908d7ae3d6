/** `job.json`'s limits are the job tree's (docs/rules.md "Admission"); `context.md` says them. */

import assert from "node:assert/strict";
import { jobContext, jobJsonBase } from "./job_capability.ts";
import { CONTEXT_MAX_LINES, contextText } from "../model/job_context.ts";

Deno.test({
  name: "job.json reports the job tree's limits; context.md the same ones",
  permissions: {},
}, () => {
  const base = jobJsonBase("j1", "codex", ["codex", "claude", "marsh", "Bad"]);
  assert.deepEqual(base.limits, { pool: 8, depth: 4, same_kit: 2, fan_out: 4, total: 64 });
  assert.deepEqual(base.registered, ["claude", "codex"]);
  const text = jobContext(base);
  assert.match(text, /depth 4 \(a root job is 1\); 4 live children per job/);
  assert.match(text, /the same Kit at most 2 in a row/);
  assert.match(text, /64 launches per job tree; 8 jobs at once/);
  assert.match(text, /wall time: a child ends when its parent's time is up/);
});

Deno.test({
  name: "context.md: the job's name and spawn set, every topic, at most 60 lines",
  permissions: {},
}, () => {
  const text = jobContext(jobJsonBase("01JOBX", "claude", ["claude", "codex"]));
  const lines = text.split("\n");
  assert.ok(lines.length - 1 <= CONTEXT_MAX_LINES, `${lines.length - 1} lines`);
  assert.equal(lines[0], "# marsh job 01JOBX (claude)");
  assert.match(text, /^You may start: claude, codex\.$/m);
  // Starting one child: the link, and marsh run.
  assert.match(text, /`codex ARGS\.\.\.` \(through its link\n\/run\/marsh\/bin\/codex\)/);
  assert.match(text, /`marsh run codex ARGS\.\.\.`/);
  // Private attempts, and applying a branch's patch.
  assert.match(
    text,
    /marsh split -n ::: a codex "one way" ::: b codex "another way" \| marsh join/,
  );
  assert.match(text, /git apply\n"\$SPLIT_DIR\/a\/diff\.patch"/);
  // Shared-workspace work, the tree, narrowing.
  assert.match(text, /marsh fanout ::: test make test ::: lint make lint \| marsh collect/);
  assert.match(text, /`marsh jobs --tree`/);
  assert.match(text, /MARSH_SPAWN=a,b codex/);
  assert.match(text, /--spawn a,b/);
  assert.match(text, /--no-spawn/);
  assert.match(text, /## Confinement\nA child sees what its parent sees, never more/);
  assert.match(text, /## When not to spawn\n/);
});

Deno.test({
  name: "context.md: an empty spawn set says so; the generic text is the same source",
  permissions: {},
}, () => {
  const base = { ...jobJsonBase("j2", "fixture", ["fixture"]), spawn: [] };
  assert.match(jobContext(base), /^You may start: nothing \(this job's spawn set is empty/m);
  const generic = contextText(null);
  assert.ok(generic.split("\n").length - 1 <= CONTEXT_MAX_LINES);
  assert.match(generic, /^# marsh: what a Kit job may start$/m);
  assert.match(generic, /^You may start: every registered command/m);
  // Everything after the spawn line is the job's text with NAME for the command.
  const tail = (t: string) => t.slice(t.indexOf("\n## One child"));
  assert.equal(
    tail(generic),
    tail(jobContext({ ...jobJsonBase("j3", "NAME", []), spawn: [] })),
  );
});
