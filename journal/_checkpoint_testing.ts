/**
 * Test helpers for operation checkpoints: sample ids, a started session and
 * an operation driven to `drained` or `sealing`.
 *
 * @module
 */

import type { CheckpointJournal } from "./checkpoints.ts";
import type { SessionRecord } from "../model/checkpoint.ts";

/** The project every sample session is in. */
export const PROJECT = "/work/p";
/** Root ids: the snapshot's, then results. */
export const R0 = "0".repeat(40);
/** A second root id. */
export const R1 = "1".repeat(40);
/** A third root id. */
export const R2 = "2".repeat(40);
/** A changed-set digest. */
export const DIGEST = "d".repeat(64);
/** The digest of an empty changed set (any 64 hex digits do for the journal). */
export const EMPTY = "e".repeat(64);

/** Starts session `id` called `name` from a snapshot of root {@linkcode R0} on layers `l0`. */
export function startSession(j: CheckpointJournal, id = "s1", name = "fix"): SessionRecord {
  return j.createSession({
    id,
    project: PROJECT,
    name,
    withIgnored: false,
    start: { root: R0, layers: ["l0"] },
    createdMs: 1_000,
  });
}

/** Records operation `id` on `session` at its current head, launches and drains it (exit `code`). */
export function drained(j: CheckpointJournal, session: string, id: string, code = 0): void {
  const head = j.getSession(session)!.head;
  const r = j.recordOperation({
    id,
    session,
    expectedHead: head,
    argv: ["bash", "-c", `echo ${id} > f`],
    cwd: ".",
    createdMs: 2_000,
  });
  if (r.kind !== "recorded") throw new Error(`not recorded: ${JSON.stringify(r)}`);
  if (!j.launchOperation(id, 2_001)) throw new Error("not launched");
  if (!j.drainOperation(id, { kind: "exited", code }, 2_002)) throw new Error("not drained");
}

/** {@linkcode drained}, then its intent: root `root` on layer `layer-<id>`. */
export function sealing(j: CheckpointJournal, session: string, id: string, root: string): void {
  drained(j, session, id);
  const ok = j.recordIntent(id, { root, layer: `layer-${id}`, changes: DIGEST }, 2_003);
  if (!ok) throw new Error("no intent");
}

/** The layer {@linkcode compactionLine}'s compaction makes. */
export const COMPACTED = "cmp1";
/** The prefix {@linkcode compactionLine}'s compaction replaces. */
export const COMPACTED_PREFIX = ["l0", "layer-op-1", "layer-op-2"];

/**
 * Session `s1` with operations `op-1`..`op-3` bound (stacks `l0`, then one
 * `layer-<op>` each), and session `s2` forked at `op-2`'s checkpoint with
 * `op-4` bound: what compaction rewrites (docs/checkpoints.md "Compaction").
 */
export function compactionLine(j: CheckpointJournal): void {
  startSession(j);
  const roots = [R1, R2, R1];
  for (const [i, root] of roots.entries()) {
    sealing(j, "s1", `op-${i + 1}`, root);
    j.bindCheckpoint(`op-${i + 1}`, { createdMs: 3_000 + i });
  }
  const at = j.getOperation("op-2")!.checkpoint!;
  j.forkSession({ id: "s2", name: "other", from: at, createdMs: 4_000 });
  sealing(j, "s2", "op-4", R1);
  j.bindCheckpoint("op-4", { createdMs: 4_001 });
}
