/**
 * Concurrency in `deno task bench --checkpoints` (bench/checkpoints.ts):
 * eight sessions forked from one checkpoint advancing at once; two writers
 * on one session; a writer whose head a rollback moves while its command
 * runs; and a reader holding a file open in the view while the head
 * advances.
 *
 * @module
 */

import { join } from "node:path";
import type { Marsh, Ran } from "./checkpoints_marsh.ts";

/** Sessions forked and advanced at once. */
export const FORKS = 8;
/** How long the first writer's command runs, so that the second comes while it does. */
const HOLD_S = 1.5;
/** When the second writer (or the rollback) starts, after the first. */
const SECOND_AFTER_MS = 600;

/** What the concurrency checks saw. */
export interface ConcurrencyResult {
  readonly forks: {
    readonly sessions: number;
    readonly succeeded: number;
    /** Distinct heads among them, each with the fork point as its parent. */
    readonly ownHeads: number;
    /** Wall time of all of them at once. */
    readonly wallMs: number;
  };
  /** Two `marsh op` on one session: the first's status, the second's, and the second's message. */
  readonly writers: { readonly first: number; readonly second: number; readonly message: string };
  /** A rollback while an op runs: the op's status and message, the rollback's status. */
  readonly stale: { readonly op: number; readonly message: string; readonly rollback: number };
  /** A file held open in the view while the head moved. */
  readonly reader: {
    readonly heldSaw: string;
    readonly freshSaw: string;
    readonly ok: boolean;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function lastLine(r: Ran): string {
  return r.stderr.trim().split("\n").at(-1) ?? "";
}

/** Runs the checks in session `bench` and in forks of its head (removed after). */
export async function measureConcurrency(o: {
  readonly m: Marsh;
  readonly files: number;
  /** The view of session `bench`. */
  readonly view: string;
  readonly log: (line: string) => void;
}): Promise<ConcurrencyResult> {
  const { m } = o;
  const session = "bench";
  o.log(`checkpoints: ${o.files} files: concurrency`);
  const head = (await m.log({ session })).entries[0]!.checkpoint;
  const names = Array.from({ length: FORKS }, (_, i) => `conc${i + 1}`);
  for (const n of names) await m.run(["fork", "--from", head, n]);
  let forks: ConcurrencyResult["forks"];
  try {
    const t0 = performance.now();
    const runs = await Promise.all(
      names.map((n) => m.try(["op", "--session", n, "--", "sh", "-c", 'echo "$0" > conc.txt', n])),
    );
    const wallMs = performance.now() - t0;
    const heads = new Set<string>();
    for (const n of names) {
      const e = (await m.log({ session: n })).entries[0]!;
      if (e.parent === head) heads.add(e.checkpoint);
    }
    forks = {
      sessions: FORKS,
      succeeded: runs.filter((r) => r.code === 0).length,
      ownHeads: heads.size,
      wallMs,
    };
  } finally {
    for (const n of names) await m.run(["session", "rm", n]);
  }

  // Two writers: the second comes while the first's command runs.
  const slow = (tag: string) => [
    "op",
    "--session",
    session,
    "--",
    "sh",
    "-c",
    `sleep ${HOLD_S}; echo "$0" > writers.txt`,
    tag,
  ];
  const first = m.try(slow("first"));
  await sleep(SECOND_AFTER_MS);
  const second = await m.try(["op", "--session", session, "--", "sh", "-c", "echo 2 > w2.txt"]);
  const firstDone = await first;

  // A rollback while the command runs: its bind finds another head.
  const back = (await m.log({ session })).entries[1]!.checkpoint;
  const op = m.try(slow("stale"));
  await sleep(SECOND_AFTER_MS);
  const rollback = await m.try(["rollback", "--session", session, back]);
  const staleDone = await op;

  // A reader holding a file open in the view keeps its content while the head advances.
  await m.op(["sh", "-c", "echo old > reader.txt"], session);
  const held = await Deno.open(join(o.view, "reader.txt"), { read: true });
  let heldSaw: string, freshSaw: string;
  try {
    await m.op(["sh", "-c", "echo new > reader.txt"], session);
    const buf = new Uint8Array(64);
    const n = await held.read(buf);
    heldSaw = new TextDecoder().decode(buf.subarray(0, n ?? 0)).trim();
    freshSaw = (await Deno.readTextFile(join(o.view, "reader.txt"))).trim();
  } finally {
    held.close();
  }
  return {
    forks,
    writers: { first: firstDone.code, second: second.code, message: lastLine(second) },
    stale: { op: staleDone.code, message: lastLine(staleDone), rollback: rollback.code },
    reader: { heldSaw, freshSaw, ok: heldSaw === "old" && freshSaw === "new" },
  };
}
