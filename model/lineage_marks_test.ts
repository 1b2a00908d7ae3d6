/** A job's display marks (docs/rules.md "Lineage"): which launch records `fanout` and `consumes`. */

import assert from "node:assert/strict";
import { lineageMarks } from "./lineage_marks.ts";

const offered = { fanout: "abcdefghij12/a", consumes: "5p1i7000aaaa" };
const session = { kind: "session", id: "host" } as const;
const shell = { kind: "split", split: "5p1i7000aaaa", label: "s" } as const;
const job = { kind: "job", id: "r1234567" } as const;

Deno.test("lineage marks: a root job records both, a job's child neither", () => {
  assert.deepEqual(lineageMarks(session, false, offered), offered);
  // A shell branch's command has no parent job: a root job too.
  assert.deepEqual(lineageMarks(shell, false, offered), offered);
  // A fanout inside a job: its registered names are ordinary children.
  assert.deepEqual(lineageMarks(job, false, offered), {});
  assert.deepEqual(lineageMarks(job, true, offered), {});
});

Deno.test("lineage marks: a split argv branch's job records fanout, never consumes", () => {
  assert.deepEqual(lineageMarks(shell, true, offered), { fanout: offered.fanout });
  assert.deepEqual(lineageMarks(session, true, { consumes: offered.consumes }), {});
});

Deno.test("lineage marks: a malformed offer is left out, the other kept", () => {
  for (const fanout of ["", "abc/a", "abcdefghij12", "abcdefghij12/", "abcdefghij12/a b"]) {
    assert.deepEqual(lineageMarks(session, false, { ...offered, fanout }), {
      consumes: offered.consumes,
    }, fanout);
  }
  for (const consumes of ["", "../x", "A", "x/y"]) {
    assert.deepEqual(lineageMarks(session, false, { ...offered, consumes }), {
      fanout: offered.fanout,
    }, consumes);
  }
  assert.deepEqual(lineageMarks(session, false, {}), {});
});
