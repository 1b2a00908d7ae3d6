/** The `marsh.fanout/v1` line: written and read back, and every malformed field named. */

import assert from "node:assert/strict";
import {
  FANOUT_ID,
  fanoutBranchValue,
  fanoutLine,
  FanoutLineError,
  type FanoutRecord,
  firstFailure,
  newFanoutId,
  parseFanoutBranch,
  parseFanoutLine,
} from "./fanout.ts";

const enc = new TextEncoder();

const record: FanoutRecord = {
  id: "abcdef123456",
  status: 3,
  signal: null,
  createdMs: 1000,
  finishedMs: 2000,
  branches: [
    {
      kind: "shell",
      label: "a",
      string: "make test",
      exit: 0,
      status: "exited 0",
      stdout: enc.encode("ok\n"),
      stderr: new Uint8Array([0, 255, 10]),
      startedMs: 1001,
      finishedMs: 1500,
    },
    {
      kind: "argv",
      label: "b.2",
      argv: ["sh", "-c", "exit 3"],
      exit: 3,
      status: "exited 3",
      stdout: new Uint8Array(0),
      stderr: new Uint8Array(0),
      startedMs: 1002,
      finishedMs: 1999,
    },
  ],
};

Deno.test("a fanout line reads back as it was written, bytes included", () => {
  const line = fanoutLine(record);
  assert.ok(line.endsWith("}\n") && !line.slice(0, -1).includes("\n"));
  assert.match(line, /^\{"schema":"marsh\.fanout\/v1","fanout_id":"abcdef123456","status":3,/);
  assert.match(line, /"stderr":"AP8K"/);
  assert.deepEqual(parseFanoutLine(line), record);
  assert.deepEqual(parseFanoutLine(line.slice(0, -1)), record);
});

Deno.test("a malformed line is refused with the field that is wrong", () => {
  const doc = () => JSON.parse(fanoutLine(record));
  const cases: [unknown, string][] = [
    ["[1]", "it is not a JSON object"],
    [{ ...doc(), schema: "marsh.fanout/v2" }, 'schema is "marsh.fanout/v2", not "marsh.fanout/v1"'],
    [{ ...doc(), fanout_id: "../x" }, 'fanout_id "../x" is not an id'],
    [{ ...doc(), branches: [] }, "branches is not a list of 1 to 16 branches"],
    [
      { ...doc(), branches: Array(17).fill(doc().branches[0]) },
      "branches is not a list of 1 to 16 branches",
    ],
    [
      { ...doc(), branches: [doc().branches[0], doc().branches[0]] },
      'branches[1].label "a" is given twice',
    ],
    [
      { ...doc(), branches: [{ ...doc().branches[0], label: "../x" }] },
      "branches[0].label: invalid label",
    ],
    [
      { ...doc(), branches: [{ ...doc().branches[0], stdout: "!!" }] },
      "branches[0].stdout is not base64",
    ],
    [
      { ...doc(), branches: [{ ...doc().branches[0], exit: 256 }] },
      "branches[0].exit is not an exit status (0-255)",
    ],
    [
      { ...doc(), branches: [{ ...doc().branches[0], kind: "pty" }] },
      'branches[0].kind is not "shell" or "argv"',
    ],
    [
      { ...doc(), branches: [{ ...doc().branches[1], argv: [] }] },
      "branches[0].argv is not a list of words",
    ],
    [{ ...doc(), signal: 2 }, "signal is not a signal name or null"],
    [{ ...doc(), finished_unix_ms: -1 }, "finished_unix_ms is not a time in ms"],
  ];
  for (const [value, message] of cases) {
    const text = typeof value === "string" ? value : JSON.stringify(value);
    assert.throws(() => parseFanoutLine(text), (e: unknown) => {
      assert.ok(e instanceof FanoutLineError);
      assert.ok(e.message.startsWith(message), `${e.message} ≠ ${message}`);
      return true;
    });
  }
  assert.throws(() => parseFanoutLine("{"), /it is not JSON/);
});

Deno.test("fanout ids, FANOUT_BRANCH values and the first failure", () => {
  const ids = new Set(Array.from({ length: 200 }, newFanoutId));
  assert.equal(ids.size, 200);
  for (const id of ids) assert.match(id, FANOUT_ID);
  assert.equal(fanoutBranchValue("abcdef123456", "lint"), "abcdef123456/lint");
  assert.deepEqual(parseFanoutBranch("abcdef123456/lint"), {
    fanout: "abcdef123456",
    label: "lint",
  });
  for (
    const bad of [
      "abcdef123456",
      "short/lint",
      "abcdef123456/",
      "abcdef123456/a/b",
      "ABCDEF123456/a",
    ]
  ) {
    assert.equal(parseFanoutBranch(bad), null, bad);
  }
  assert.equal(firstFailure([0, 0]), 0);
  assert.equal(firstFailure([0, 4, 2]), 4);
});
