import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame, parseDaemonFrame } from "./daemon.ts";
import { parseSplitfsRequest, ProtocolError } from "./splitfs.ts";

Deno.test("split.discard: labels and reason are checked; a whole split has no labels", () => {
  const ok = { v: 1, t: "split.discard", id: "abc", labels: [], reason: null };
  assert.deepEqual(parseClientFrame(ok), ok);
  assert.deepEqual(parseClientFrame({ ...ok, labels: ["a", "b"], reason: "why" }), {
    ...ok,
    labels: ["a", "b"],
    reason: "why",
  });
  for (
    const bad of [
      { ...ok, id: "" },
      { ...ok, labels: "a" },
      { ...ok, labels: [""] },
      { ...ok, labels: [1] },
      { ...ok, reason: 3 },
      { ...ok, reason: "x".repeat(4097) },
      { ...ok, reason: undefined },
    ]
  ) {
    assert.throws(() => parseClientFrame(bad), DaemonProtocolError, JSON.stringify(bad));
  }
});

Deno.test("split.discarded: a reply has its shape", () => {
  const reply = {
    v: 1,
    t: "split.discarded",
    id: "abc",
    scope: "branches",
    reason: null,
    by: "host",
    at_unix_ms: 1,
    branches: [],
    state: "await",
    message: "m",
  };
  assert.equal(parseDaemonFrame(reply).t, "split.discarded");
  assert.throws(() => parseDaemonFrame({ ...reply, scope: "all" }), DaemonProtocolError);
});

Deno.test("drop-fork: names a split and a valid label", () => {
  assert.deepEqual(parseSplitfsRequest({ v: 1, t: "drop-fork", id: "s", label: "a" }), {
    v: 1,
    t: "drop-fork",
    id: "s",
    label: "a",
  });
  for (const label of ["", ".admin", "a/b", "..", 3]) {
    assert.throws(
      () => parseSplitfsRequest({ v: 1, t: "drop-fork", id: "s", label }),
      ProtocolError,
      String(label),
    );
  }
});
