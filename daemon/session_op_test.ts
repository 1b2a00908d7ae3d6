import assert from "node:assert/strict";
import { lingeringReply } from "./session_op.ts";

Deno.test({
  name: "lingeringReply: what keeps the operation open, in one line",
  permissions: "none",
}, () => {
  const one = lingeringReply("o1", "fix", {
    processes: [{ pid: 7, command: "sleep 30" }],
    more: 0,
  });
  assert.equal(
    one.message,
    "marsh: the command exited, but 1 process it started still runs: 7 (sleep 30); the " +
      "operation ends, and is checkpointed, when it has ended (Ctrl-C stops it)",
  );
  assert.deepEqual(one.processes, [{ pid: 7, command: "sleep 30" }]);
  const many = lingeringReply("o1", "fix", {
    processes: [{ pid: 7, command: "a" }, { pid: 9, command: "b" }],
    more: 3,
  });
  assert.match(
    many.message,
    /^marsh: the command exited, but 5 processes it started still run: 7 \(a\), 9 \(b\) and 3 more; .* when they have ended \(Ctrl-C stops them\)$/,
  );
  assert.equal(many.more, 3);
  assert.equal(many.t, "op.lingering");
});
