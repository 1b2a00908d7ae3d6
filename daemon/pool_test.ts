import assert from "node:assert/strict";
import { BranchPool } from "./pool.ts";

/** Whether `p` has settled, after the microtasks queued so far. */
async function settledYet(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  void p.then(() => done = true);
  await new Promise((r) => setTimeout(r, 0));
  return done;
}

Deno.test("pool.wait: admitted at once while there is room, else when a slot of its session frees", async () => {
  const pool = new BranchPool(2);
  const never = new AbortController().signal;
  assert.equal(await pool.wait("s", "a", never), true);
  assert.ok(pool.admit("s", "b"));
  const c = pool.wait("s", "c", never);
  const d = pool.wait("s", "d", never);
  assert.equal(await settledYet(c), false);
  // Another session's release frees nothing of this one.
  assert.ok(pool.admit("t", "x"));
  pool.release("t", "x");
  assert.equal(await settledYet(c), false);
  pool.release("s", "a");
  assert.equal(await c, true, "first come, first served");
  assert.equal(await settledYet(d), false);
  assert.equal(pool.inUse("s"), 2);
  // A branch never waits, and never jumps the queue: the pool is full.
  assert.equal(pool.admit("s", "branch"), false);
  pool.release("s", "b");
  assert.equal(await d, true);
  assert.equal(pool.inUse("s"), 2);
});

Deno.test("pool.wait: an abort takes a waiter out of the queue (false) and gives it no slot", async () => {
  const pool = new BranchPool(1);
  const never = new AbortController().signal;
  assert.ok(pool.admit("s", "a"));
  const abort = new AbortController();
  const b = pool.wait("s", "b", abort.signal);
  const c = pool.wait("s", "c", never);
  abort.abort();
  assert.equal(await b, false);
  pool.release("s", "a");
  assert.equal(await c, true, "the aborted one is skipped");
  assert.equal(pool.inUse("s"), 1);
  assert.equal(await pool.wait("s", "d", abort.signal), false, "already aborted: no wait");
});

Deno.test("pool.wait: a waiter does not overtake earlier waiters when a slot is free", async () => {
  const pool = new BranchPool(1);
  const never = new AbortController().signal;
  assert.ok(pool.admit("s", "a"));
  const b = pool.wait("s", "b", never);
  pool.release("s", "a");
  assert.equal(await b, true);
  pool.release("s", "b");
  assert.equal(await pool.wait("s", "c", never), true);
});
