import assert from "node:assert/strict";
import type { WorkerEvent } from "../protocol/worker.ts";
import { Attempt } from "./attempt.ts";

Deno.test({
  name: "attempt: a supervisor that cannot start is an error naming the attempt",
  permissions: { read: true, write: true, run: ["/nonexistent/perl"], env: ["NODE_V8_COVERAGE"] },
}, async () => {
  const dir = Deno.makeTempDirSync();
  try {
    const events: WorkerEvent[] = [];
    const a = Attempt.start({
      v: 1,
      t: "launch",
      attempt: "a",
      script: "true",
      cwd: dir,
      env: {},
      stdin: null,
      stdout: `${dir}/stdout`,
      stderr: `${dir}/stderr`,
    }, { emit: (e) => events.push(e), perl: "/nonexistent/perl" });
    await a.done;
    assert.equal(a.ended, true);
    assert.deepEqual(events, [{
      v: 1,
      t: "error",
      attempt: "a",
      message: "cannot start the supervisor (/nonexistent/perl): spawn /nonexistent/perl ENOENT",
    }]);
    a.cancel(0); // after the end: nothing
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
