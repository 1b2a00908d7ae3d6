/**
 * Lineage (docs/rules.md, "Lineage"): the lineage JSON, argument cutting,
 * and how one job's fields are written (`job_listing_test.ts` has the
 * listings).
 */

import assert from "node:assert/strict";
import {
  commandText,
  cutArgs,
  lineageJson,
  runTime,
  shellQuote,
  startedAgo,
} from "./job_lineage.ts";

const NOW = 1_700_000_000_000;

Deno.test(
  { name: "lineage: JSON with its optional fields only where they apply", permissions: {} },
  () => {
    assert.deepEqual(lineageJson({ parent: "session:s", root: "r", depth: 1, spawn: ["a"] }), {
      parent: "session:s",
      root: "r",
      depth: 1,
      spawn: ["a"],
    });
    assert.deepEqual(
      JSON.stringify(lineageJson({
        parent: "job:p",
        root: "r",
        depth: 2,
        spawn: [],
        split: "sp",
        label: "a",
        deadlineMs: 5,
        parentDeadline: true,
        consumes: "sp0",
        fanout: "f/a",
      }, ["c1", "c2"])),
      `{"parent":"job:p","root":"r","depth":2,"spawn":[],"split":"sp","label":"a","deadline_unix_ms":5,"parent_deadline":true,"consumes":"sp0","fanout":"f/a","children":["c1","c2"]}`,
    );
    assert.equal(
      "parent_deadline" in
        lineageJson({ parent: "session:s", root: "r", depth: 1, spawn: [], parentDeadline: false }),
      false,
    );
  },
);

Deno.test(
  { name: "lineage: the first 16 arguments, each cut to 200 characters", permissions: {} },
  () => {
    const many = Array.from({ length: 20 }, (_, i) => `a${i}`);
    assert.deepEqual(cutArgs(many), many.slice(0, 16));
    assert.deepEqual(
      cutArgs(["x".repeat(199), "y".repeat(200), "z".repeat(201)]).map((a) => a.length),
      [199, 200, 200],
    );
    // Characters, not UTF-16 units: an emoji is never cut in half.
    const emoji = "😀".repeat(201);
    assert.equal([...cutArgs([emoji])[0]!].length, 200);
    // Not UTF-8 (a lone surrogate): replaced, as a lossy decoding would.
    assert.deepEqual(cutArgs(["a\ud800b"]), ["a\ufffdb"]);
    assert.deepEqual(cutArgs([]), []);
  },
);

Deno.test(
  { name: "lineage: STARTED, RUN and COMMAND as the listing writes them", permissions: {} },
  () => {
    assert.deepEqual(
      [0, 59_999, 60_000, 3_599_999, 3_600_000, 86_399_999, 86_400_000].map((d) =>
        startedAgo(NOW - d, NOW)
      ),
      ["0s ago", "59s ago", "1m ago", "59m ago", "1h ago", "23h ago", "1d ago"],
    );
    assert.deepEqual(
      [0, 12_345, 59_999, 60_000, 133_000, 3_599_999, 3_600_000, 3_900_000, 93_600_000].map(
        runTime,
      ),
      ["0.0s", "12.3s", "59.9s", "1m00s", "2m13s", "59m59s", "1h00m", "1h05m", "26h00m"],
    );
    assert.deepEqual(["a", "a b", "", "it's", "x=1", "$HOME", "-p"].map(shellQuote), [
      "a",
      "'a b'",
      "''",
      `'it'\\''s'`,
      "x=1",
      "'$HOME'",
      "-p",
    ]);
    assert.equal(commandText("codex", ["exec", "review it"]), "codex exec 'review it'");
    const long = commandText("fixture", ["x".repeat(100)]);
    assert.equal([...long].length, 64);
    assert.equal(long, `fixture ${"x".repeat(55)}…`);
    assert.equal(
      commandText("f", ["x".repeat(62)]),
      `f ${"x".repeat(62)}`,
      "64 exactly is not cut",
    );
  },
);
