/**
 * The shared limits: the time-limit rule, and docs/guide.md's "Limits" table
 * naming the same figures.
 */

import assert from "node:assert/strict";
import {
  DEFAULT_WALL_S,
  MAX_BRANCHES,
  MAX_DEPTH,
  MAX_WALL_S,
  OUTPUT_LIMIT,
  POOL_SIZE,
  SPLIT_DURATION_S,
  SPOOL_LIMIT,
  timeLimitRangeProblem,
} from "./limits.ts";

Deno.test({ name: "time limits: whole seconds from 1 to the split's 1 h", permissions: {} }, () => {
  for (const ok of [1, 600, SPLIT_DURATION_S]) {
    assert.equal(timeLimitRangeProblem(ok), null, `${ok}`);
  }
  for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53]) {
    assert.equal(
      timeLimitRangeProblem(bad),
      "the time limit must be a whole number of seconds from 1 to 3600",
      `${bad}`,
    );
  }
  assert.equal(
    timeLimitRangeProblem(3601),
    "a time limit of 3601 s is longer than a split may run (3600 s)",
  );
});

Deno.test({ name: "kit wall clocks: an hour by default, a day at most", permissions: {} }, () => {
  assert.equal(DEFAULT_WALL_S, 3600);
  assert.equal(MAX_WALL_S, 86_400);
  assert.ok(DEFAULT_WALL_S <= MAX_WALL_S);
});

Deno.test({
  name: "limits: docs/guide.md's table names these figures",
  permissions: { read: true },
}, () => {
  const guide = Deno.readTextFileSync(new URL("../docs/guide.md", import.meta.url));
  const row = (what: string) => {
    const m = new RegExp(`^\\| ${what.replace(/[+()]/g, "\\$&")} +\\| ([^|]+?) +\\|`, "m")
      .exec(guide);
    assert.ok(m, `the guide's Limits row "${what}"`);
    return m[1];
  };
  const mib = (n: number) => `${n / (1024 * 1024)} MiB`;
  assert.equal(row("branches per split"), `${MAX_BRANCHES}`);
  assert.equal(row("branches running at once"), `${POOL_SIZE} per creator`);
  assert.equal(row("nesting depth"), `${MAX_DEPTH}`);
  assert.equal(row("split duration"), `${SPLIT_DURATION_S / 3600} h`);
  assert.equal(row("a shell branch's `-t` limit"), `1 s to ${SPLIT_DURATION_S / 3600} h`);
  assert.equal(row("spool (stdin)"), mib(SPOOL_LIMIT));
  assert.equal(row("stdout + stderr of all branches"), mib(OUTPUT_LIMIT));
});
