import assert from "node:assert/strict";
import { CliError } from "./cli_error.ts";
import { formatCompare, parseTestTimeout } from "./compare_command.ts";
import type { CompareReply, CompareRow } from "../protocol/daemon_compare.ts";

Deno.test("parseTestTimeout: 600 by default; 1 and 3600 taken; 0, 3601 and non-integers refused (2)", () => {
  assert.equal(parseTestTimeout(undefined), 600);
  assert.equal(parseTestTimeout("1"), 1);
  assert.equal(parseTestTimeout("3600"), 3600);
  for (const bad of ["0", "3601", "1.5", "-1", "+5", " 5", "5s", "", "1e3"]) {
    assert.throws(
      () => parseTestTimeout(bad),
      (e: unknown) => e instanceof CliError && e.code === 2 && /--timeout/.test(e.message),
      bad,
    );
  }
});

const base: CompareRow = {
  label: "a",
  state: "captured",
  placement: "shell-vm",
  status: "exited 0",
  code: 0,
  captured: true,
  files: 1,
  added: 2,
  removed: 0,
  binary: 0,
  clean: true,
  conflicts: 0,
  overlaps: [],
};

function reply(branches: CompareRow[]): CompareReply {
  return { v: 1, t: "compare", schema: "marsh.compare/v1", id: "x", branches };
}

Deno.test("formatCompare: TEST and TIME columns only when a row has a test", () => {
  assert.doesNotMatch(formatCompare(reply([base])), /TEST/);
  const text = formatCompare(reply([
    { ...base, test: { exit: 0, ms: 250, status: "exited 0" } },
    {
      ...base,
      label: "b",
      test: { exit: null, ms: 2040, status: "failed: time limit of 2 s reached" },
    },
    {
      ...base,
      label: "c",
      captured: false,
      test: { exit: null, ms: 0, status: "not run: not captured (cancelled)" },
    },
  ]));
  const lines = text.split("\n");
  assert.match(lines[0]!, /MERGE\s+TEST\s+TIME\s+OVERLAPS$/);
  assert.match(lines[1]!, /^a .* clean\s+0\s+250ms\s+-$/);
  assert.match(lines[2]!, /^b .* failed: time limit of 2 s reached\s+2\.0s\s+-$/);
  assert.match(lines[3]!, /^c .* not run: not captured \(cancelled\)\s+-\s+-$/);
});
