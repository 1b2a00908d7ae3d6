/**
 * A stand-in for the daemon, killed with SIGKILL by the durability tests.
 * It writes to the journal, prints `written` once the call has returned,
 * then waits to be killed without closing anything.
 *
 * Usage: `deno run --allow-read=DIR --allow-write=DIR journal_child.ts MODE DB`
 *
 * - `split`: commits split `s1`.
 * - `mid-transaction`: creates split `s1` inside a transaction that never commits.
 * - `mid-run`: commits the mid-run scenario of `_testing.ts`.
 * - `bind-open`: session `s1` with operation `op-1` sealing (`_checkpoint_testing.ts`), then its
 *   bind inside a transaction that never commits.
 * - `bind-done`: the same, the bind committed.
 * - `intent-done`: session `s1` with operation `op-1` sealing: killed after its intent, before
 *   any bind.
 * - `compact-open`: the line of `compactionLine`, then its stacks' compaction inside a
 *   transaction that never commits.
 * - `compact-done`: the same, the compaction committed.
 *
 * @module
 */

import { Journal } from "../journal.ts";
import { sampleSplit, writeMidRunScenario } from "../_testing.ts";
import {
  COMPACTED,
  COMPACTED_PREFIX,
  compactionLine,
  PROJECT,
  R1,
  sealing,
  startSession,
} from "../_checkpoint_testing.ts";

function written(): void {
  Deno.stdout.writeSync(new TextEncoder().encode("written\n"));
}

function blockForever(): never {
  // Blocks this thread without returning to the event loop, so no
  // transaction can finish and no finalizer can run.
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  throw new Error("Atomics.wait returned");
}

const [mode, path] = Deno.args;
if (path === undefined) throw new TypeError("Usage: journal_child.ts MODE DB");
const journal = Journal.open(path);
switch (mode) {
  case "split":
    journal.createSplit(sampleSplit("s1"));
    written();
    blockForever();
    break;
  case "mid-transaction":
    journal.immediate(() => {
      journal.createSplit(sampleSplit("s1"));
      written();
      blockForever();
    });
    break;
  case "mid-run":
    writeMidRunScenario(journal);
    written();
    blockForever();
    break;
  case "intent-done":
    startSession(journal.checkpoints);
    sealing(journal.checkpoints, "s1", "op-1", R1);
    written();
    blockForever();
    break;
  case "bind-open":
  case "bind-done": {
    const c = journal.checkpoints;
    startSession(c);
    sealing(c, "s1", "op-1", R1);
    const bind = () => c.bindCheckpoint("op-1", { createdMs: 3_000 });
    if (mode === "bind-done") {
      bind();
      written();
      blockForever();
    }
    journal.immediate(() => {
      bind();
      written();
      blockForever();
    });
    break;
  }
  case "compact-open":
  case "compact-done": {
    const c = journal.checkpoints;
    compactionLine(c);
    const compact = () => c.compactStacks(PROJECT, COMPACTED_PREFIX, COMPACTED);
    if (mode === "compact-done") {
      compact();
      written();
      blockForever();
    }
    journal.immediate(() => {
      compact();
      written();
      blockForever();
    });
    break;
  }
  default:
    throw new TypeError(`Unknown mode: "${mode}"`);
}
