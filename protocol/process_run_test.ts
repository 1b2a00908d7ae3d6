/** The `process.*` frames (docs/rules.md "Running a registered command as a job"): one parser at the boundary. */

import assert from "node:assert/strict";
import { parseClientFrame, parseDaemonFrame } from "./daemon.ts";

const run = {
  v: 1,
  t: "process.run",
  name: "codex",
  args: ["exec", "a b", ""],
  cwd: "/p",
  env: { LANG: "C.UTF-8" },
  spawn: { env: "codex", flag: "", none: false },
  tty: false,
  via: "link",
};

Deno.test("process frames: a valid run, stdin and signal parse as sent", () => {
  assert.deepEqual(parseClientFrame(run), run);
  assert.deepEqual(parseClientFrame({ v: 1, t: "process.stdin", data: "" }), {
    v: 1,
    t: "process.stdin",
    data: "",
  });
  assert.deepEqual(parseClientFrame({ v: 1, t: "process.signal", signal: "INT" }), {
    v: 1,
    t: "process.signal",
    signal: "INT",
  });
  assert.deepEqual(parseClientFrame({ ...run, spawn: {} }).t, "process.run");
  // A job's offer carries its starting digests (docs/rules.md "Environment forwarding").
  const offered = { ...run, envDigests: { LANG: "0f".repeat(32) } };
  assert.deepEqual(parseClientFrame(offered), offered);
});

Deno.test("process frames: a run's fanout and consumes marks parse as sent, absent when not", () => {
  const marked = { ...run, fanout: "abcdefghij12/a", consumes: "5p1i7000aaaa" };
  assert.deepEqual(parseClientFrame(marked), marked);
  const plain: object = parseClientFrame(run);
  assert.deepEqual(["fanout" in plain, "consumes" in plain], [false, false]);
});

Deno.test("process frames: a malformed one is refused naming the field", () => {
  for (
    const [over, field] of [
      [{ via: "host" }, "via"],
      [{ tty: "no" }, "tty"],
      [{ cwd: "p" }, "cwd is not absolute"],
      [{ name: "" }, "name"],
      [{ args: ["a\0b"] }, "args"],
      [{ env: { "A=B": "x" } }, "env"],
      [{ spawn: { none: "yes" } }, "spawn.none"],
      [{ spawn: null }, "spawn"],
      [{ fanout: "abc/x" }, "fanout"],
      [{ fanout: "abcdefghijkl/" }, "fanout"],
      [{ fanout: 7 }, "fanout"],
      [{ consumes: "../x" }, "consumes"],
      [{ consumes: "" }, "consumes"],
      [{ envDigests: [] }, "envDigests"],
      [{ envDigests: { LANG: "secret" } }, "envDigests"],
      [{ envDigests: { LANG: "0F".repeat(32) } }, "envDigests"],
    ] as const
  ) {
    assert.throws(
      () => parseClientFrame({ ...run, ...over }),
      (e: unknown) => e instanceof Error && e.message === `malformed process.run frame: ${field}`,
      JSON.stringify(over),
    );
  }
  assert.throws(() => parseClientFrame({ v: 1, t: "process.signal", signal: "KILL" }), /signal/);
});

Deno.test("process frames: the daemon's replies are checked", () => {
  const exit = {
    v: 1,
    t: "process.exit",
    job: "j",
    code: 3,
    signal: null,
    status: 3,
    cause: null,
  };
  assert.deepEqual(parseDaemonFrame(exit), exit);
  assert.throws(() => parseDaemonFrame({ ...exit, status: "3" }), /malformed process.exit frame/);
  assert.throws(
    () => parseDaemonFrame({ v: 1, t: "process.out", stream: "stdin", data: "" }),
    /malformed process.out frame/,
  );
  assert.deepEqual(
    parseDaemonFrame({ v: 1, t: "process.started", job: "j", warnings: ["w"] }).t,
    "process.started",
  );
});
