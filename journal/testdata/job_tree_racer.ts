/**
 * One side of the spawn-against-cancel race (`job_tree_test.ts`), run as a
 * worker with its own journal connection, as a second daemon request
 * would be. Per round I, both sides meet at a barrier, then at once
 * `spawn` admits child `cI` of parent `pI` and `cancel` cancels `pI`'s
 * tree: every round is a real race, won by either side.
 *
 * It receives `{mode, path, n, barrier}` (`barrier` an `Int32Array` on
 * shared memory) and posts `{admitted}` or `{error}`.
 *
 * @module
 */

import { Journal } from "../journal.ts";
import { JournalError } from "../errors.ts";
import { jobRecord, launch, WIDE } from "../_job_tree_testing.ts";

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * Runs `fn` again while SQLite says the database is locked: its busy
 * handler is unfair (a waiter sleeps while the other side takes the lock
 * again), and on a loaded machine a wait can pass the journal's 5 s busy
 * timeout. A transaction that could not begin did nothing, so it is
 * retried whole.
 */
function retried<T>(fn: () => T): T {
  for (let attempt = 0;; attempt++) {
    try {
      return fn();
    } catch (error) {
      const locked = error instanceof JournalError && error instanceof Error &&
        error.message.includes("database is locked");
      if (!locked || attempt >= 20) throw error;
      sleep(1);
    }
  }
}

/** Both sides arrive before either goes on: round `i` waits for `2 * (i + 1)` arrivals. */
function meet(barrier: Int32Array, i: number): void {
  Atomics.add(barrier, 0, 1);
  Atomics.notify(barrier, 0);
  for (let seen = Atomics.load(barrier, 0); seen < 2 * (i + 1); seen = Atomics.load(barrier, 0)) {
    Atomics.wait(barrier, 0, seen, 1000);
  }
}

interface Task {
  readonly mode: "spawn" | "cancel";
  readonly path: string;
  readonly n: number;
  readonly barrier: Int32Array;
}

/** This module runs as a worker: its global scope is the worker's. */
const scope = self as unknown as {
  onmessage: (e: MessageEvent<Task>) => void;
  postMessage(message: unknown): void;
};

scope.onmessage = (e: MessageEvent<Task>) => {
  const { mode, path, n, barrier } = e.data;
  try {
    using journal = Journal.open(path);
    let admitted = 0;
    for (let i = 0; i < n; i++) {
      meet(barrier, i);
      if (mode === "spawn") {
        const d = retried(() =>
          journal.jobTree.admit(launch(`c${i}`, `p${i}`), WIDE, jobRecord(`c${i}`))
        );
        if (d.ok) admitted++;
      } else {
        retried(() => journal.jobTree.cancelTree(`p${i}`));
      }
    }
    scope.postMessage({ admitted });
  } catch (error) {
    scope.postMessage({
      error: error instanceof Error ? error.stack ?? error.message : String(error),
    });
  }
};
