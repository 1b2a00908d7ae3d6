/** `--older-than D`: the forms accepted, and the message for the rest. */

import assert from "node:assert/strict";
import { parseDuration } from "./duration.ts";

Deno.test({ name: "durations: a whole number and one unit", permissions: {} }, () => {
  assert.deepEqual(parseDuration("0s"), { ms: 0 });
  assert.deepEqual(parseDuration("45s"), { ms: 45_000 });
  assert.deepEqual(parseDuration("30m"), { ms: 1_800_000 });
  assert.deepEqual(parseDuration("2h"), { ms: 7_200_000 });
  assert.deepEqual(parseDuration("3d"), { ms: 259_200_000 });
  assert.deepEqual(parseDuration("1w"), { ms: 604_800_000 });
  assert.deepEqual(parseDuration("5200w"), { ms: 5200 * 604_800_000 });
});

Deno.test({ name: "durations: anything else says what is wanted", permissions: {} }, () => {
  for (const bad of ["", "3", "h", "1.5h", "-1h", "2 h", "2H", "1h30m", "3x", "١h"]) {
    const r = parseDuration(bad);
    assert.ok("problem" in r, bad);
    assert.equal(
      r.problem,
      `${
        JSON.stringify(bad)
      } is not a duration: give a whole number and a unit, s, m, h, d or w (e.g. 30m, 2h, 3d)`,
    );
  }
  assert.deepEqual(parseDuration("999999999999w"), {
    problem: '"999999999999w" is too long a duration: at most 100 years',
  });
});
