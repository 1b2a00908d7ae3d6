import assert from "node:assert/strict";
import { DaemonProtocolError, parseClientFrame } from "./daemon.ts";

const ask = (test: unknown) => ({ v: 1, t: "resolve.compare", id: "abc", test });

Deno.test("resolve.compare: test.timeoutS is taken from 1 to 3600, refused at 0, 3601 and fractions", () => {
  for (const timeoutS of [1, 3600]) {
    const frame = ask({ script: "npm test", timeoutS, env: { A: "1" } });
    assert.deepEqual(parseClientFrame(frame), frame);
  }
  for (const timeoutS of [0, 3601, 1.5, -1, "60", null]) {
    assert.throws(
      () => parseClientFrame(ask({ script: "true", timeoutS, env: {} })),
      DaemonProtocolError,
      String(timeoutS),
    );
  }
});

Deno.test("resolve.compare: a test needs a script and an env; without test the frame is as before", () => {
  assert.throws(
    () => parseClientFrame(ask({ script: "", timeoutS: 5, env: {} })),
    DaemonProtocolError,
  );
  assert.throws(() => parseClientFrame(ask({ timeoutS: 5, env: {} })), DaemonProtocolError);
  assert.throws(() => parseClientFrame(ask({ script: "x", timeoutS: 5 })), DaemonProtocolError);
  assert.throws(() => parseClientFrame(ask("true")), DaemonProtocolError);
  assert.deepEqual(parseClientFrame({ v: 1, t: "resolve.compare", id: "abc" }), {
    v: 1,
    t: "resolve.compare",
    id: "abc",
  });
  assert.deepEqual(parseClientFrame({ v: 1, t: "resolve.compare.cancel" }), {
    v: 1,
    t: "resolve.compare.cancel",
  });
});
