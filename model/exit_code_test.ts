import assert from "node:assert/strict";
import { exitCodeOf } from "./exit_code.ts";

Deno.test("an exit code stays; a signal is 128 plus its number", () => {
  assert.equal(exitCodeOf(0, null), 0);
  assert.equal(exitCodeOf(3, "SIGKILL"), 3);
  assert.equal(exitCodeOf(null, "SIGKILL"), 137);
  assert.equal(exitCodeOf(null, "SIGTERM"), 143);
  assert.equal(exitCodeOf(null, "SIGINT"), 130);
  assert.equal(exitCodeOf(null, "SIGUSR9"), 128);
  assert.equal(exitCodeOf(null, null), 128);
});
