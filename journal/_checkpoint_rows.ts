/**
 * Rows of the `sessions`, `checkpoints` and `operations` tables to records
 * (`model/checkpoint.ts`) and back. Reading never coerces: a value this code
 * does not know is a `JournalCorruptError` naming the row and column.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { oneOf, RowReader } from "./_codec.ts";
import type { Connection, Row } from "./_connection.ts";
import {
  checkpointPreimage,
  type CheckpointRecord,
  DISPOSITION_KINDS,
  EXECUTION_KINDS,
  type ExecutionOutcome,
  type FilesystemDisposition,
  isCheckpointId,
  isRootId,
  type OperationRecord,
  type SessionRecord,
} from "../model/checkpoint.ts";
import { OPERATION_STATES } from "../model/operation_state.ts";

/** A checkpoint's id: the SHA-256 of its preimage (`model/checkpoint.ts`). */
export function checkpointIdOf(preimage: Parameters<typeof checkpointPreimage>[0]): string {
  return createHash("sha256").update(checkpointPreimage(preimage)).digest("hex");
}

function rootId(r: RowReader, column: string): string {
  const v = r.text(column);
  return isRootId(v) ? v : r.fail(column, "expected a root id");
}

function checkpointId(r: RowReader, column: string): string {
  const v = r.text(column);
  return isCheckpointId(v) ? v : r.fail(column, "expected a checkpoint id");
}

function strings(r: RowReader, column: string): string[] {
  const v = r.json(column);
  return Array.isArray(v) && v.every((x) => typeof x === "string")
    ? v
    : r.fail(column, "expected an array of strings");
}

/** Decodes a `sessions` row. */
export function sessionFromRow(row: Row): SessionRecord {
  const r = new RowReader("session", String(row.id), row);
  const state = oneOf(r, "state", ["open", "removed"] as const);
  const withIgnored = r.int("with_ignored");
  if (withIgnored !== 0 && withIgnored !== 1) r.fail("with_ignored", "expected 0 or 1");
  const common = {
    id: r.text("id"),
    project: r.text("project"),
    name: r.text("name"),
    baseCheckpoint: checkpointId(r, "base_checkpoint"),
    baseRoot: rootId(r, "base_root"),
    head: checkpointId(r, "head"),
    view: r.text("view"),
    withIgnored: withIgnored === 1,
    createdMs: r.int("created_ms"),
  };
  return state === "open"
    ? { ...common, state, removedMs: null }
    : { ...common, state, removedMs: r.int("removed_ms") };
}

/** Decodes a `checkpoints` row. */
export function checkpointFromRow(row: Row): CheckpointRecord {
  const r = new RowReader("checkpoint", String(row.id), row);
  const common = {
    id: checkpointId(r, "id"),
    session: r.text("session"),
    project: r.text("project"),
    root: rootId(r, "root_id"),
    layers: strings(r, "layers"),
    createdMs: r.int("created_ms"),
  };
  if (oneOf(r, "kind", ["start", "operation"] as const) === "start") {
    return { ...common, kind: "start" };
  }
  const layer = r.optText("layer");
  return {
    ...common,
    kind: "operation",
    parent: checkpointId(r, "parent"),
    parentRoot: rootId(r, "parent_root"),
    operation: r.text("operation"),
    delta: layer === null ? { kind: "no-change" } : { kind: "layer", layer },
    changes: r.text("changes"),
  };
}

function execution(r: RowReader): ExecutionOutcome | null {
  if (r.optText("exec_kind") === null) return null;
  const kind = oneOf(r, "exec_kind", EXECUTION_KINDS);
  switch (kind) {
    case "exited":
      return { kind, code: r.int("exec_code") };
    case "signaled":
      return { kind, signal: r.text("exec_detail") };
    case "failed-to-start":
      return { kind, reason: r.text("exec_detail") };
    default:
      return { kind };
  }
}

function disposition(r: RowReader): FilesystemDisposition | null {
  if (r.optText("disposition") === null) return null;
  const kind = oneOf(r, "disposition", DISPOSITION_KINDS);
  switch (kind) {
    case "sealed":
      return { kind, root: rootId(r, "result_root"), layer: r.text("intent_layer") };
    case "no-change":
      return { kind, root: rootId(r, "result_root") };
    case "discarded":
      return { kind };
  }
}

/** Decodes an `operations` row. */
export function operationFromRow(row: Row): OperationRecord {
  const r = new RowReader("operation", String(row.id), row);
  const intentRoot = r.optText("intent_root");
  return {
    id: r.text("id"),
    session: r.text("session"),
    expectedHead: checkpointId(r, "expected_head"),
    baseRoot: rootId(r, "base_root"),
    argv: strings(r, "argv"),
    cwd: r.text("cwd"),
    state: oneOf(r, "state", OPERATION_STATES),
    execution: execution(r),
    disposition: disposition(r),
    checkpoint: r.optText("checkpoint"),
    intent: intentRoot === null ? null : {
      root: rootId(r, "intent_root"),
      layer: r.text("intent_layer"),
      changes: r.text("intent_changes"),
      recordedMs: r.int("intent_ms"),
    },
    reason: r.optText("reason"),
    seenHead: r.optText("seen_head"),
    createdMs: r.int("created_ms"),
    launchedMs: r.optInt("launched_ms"),
    drainedMs: r.optInt("drained_ms"),
    endedMs: r.optInt("ended_ms"),
  };
}

/** The execution columns of an outcome. */
export function executionColumns(
  e: ExecutionOutcome,
): { exec_kind: string; exec_code: number | null; exec_detail: string | null } {
  switch (e.kind) {
    case "exited":
      if (!Number.isSafeInteger(e.code)) throw new TypeError(`Invalid exit code: ${e.code}`);
      return { exec_kind: e.kind, exec_code: e.code, exec_detail: null };
    case "signaled":
      return { exec_kind: e.kind, exec_code: null, exec_detail: e.signal };
    case "failed-to-start":
      return { exec_kind: e.kind, exec_code: null, exec_detail: e.reason };
    default:
      return { exec_kind: e.kind, exec_code: null, exec_detail: null };
  }
}

/** Reads one session, or null. */
export function readSession(c: Connection, id: string): SessionRecord | null {
  const row = c.get("SELECT * FROM sessions WHERE id = :id", { id });
  return row === undefined ? null : sessionFromRow(row);
}

/** Reads one session. @throws {Deno.errors.NotFound} for an unknown one */
export function requireSession(c: Connection, id: string): SessionRecord {
  const s = readSession(c, id);
  if (s === null) throw new Deno.errors.NotFound(`Session not found: "${id}"`);
  return s;
}

/** Reads one checkpoint, or null. */
export function readCheckpoint(c: Connection, id: string): CheckpointRecord | null {
  const row = c.get("SELECT * FROM checkpoints WHERE id = :id", { id });
  return row === undefined ? null : checkpointFromRow(row);
}

/** Reads one operation, or null. */
export function readOperation(c: Connection, id: string): OperationRecord | null {
  const row = c.get("SELECT * FROM operations WHERE id = :id", { id });
  return row === undefined ? null : operationFromRow(row);
}

/** Reads one operation. @throws {Deno.errors.NotFound} for an unknown one */
export function requireOperation(c: Connection, id: string): OperationRecord {
  const op = readOperation(c, id);
  if (op === null) throw new Deno.errors.NotFound(`Operation not found: "${id}"`);
  return op;
}

/** The id of a live operation of `session`, or null (docs/checkpoints.md: one at a time). */
export function liveOperation(c: Connection, session: string): string | null {
  const row = c.get(
    `SELECT id FROM operations WHERE session = :s
       AND state IN ('recorded', 'launched', 'drained', 'sealing')`,
    { s: session },
  );
  return row === undefined ? null : String(row.id);
}

/**
 * Moves `session`'s head from `expected` to `next`. The caller read the head
 * in this same transaction, so a miss is a bug: it throws, rolling it all back.
 */
export function swapHead(c: Connection, session: string, expected: string, next: string): void {
  const moved = c.run(
    "UPDATE sessions SET head = :next WHERE id = :id AND head = :expected",
    { id: session, expected, next },
  );
  if (moved !== 1) throw new Error(`Session head of "${session}" moved inside a transaction`);
}

/** A `WITH` clause: `up (id, parent, depth)`, the checkpoint `:head` and its ancestors. */
export const ANCESTORS = `WITH RECURSIVE up (id, parent, depth) AS (
    SELECT id, parent, 0 FROM checkpoints WHERE id = :head
    UNION ALL SELECT c.id, c.parent, up.depth + 1 FROM checkpoints c JOIN up ON c.id = up.parent
  )`;

/** Throws a `TypeError` saying `what` unless `ok`. */
export function check(ok: boolean, what: string): void {
  if (!ok) throw new TypeError(what);
}

/** `ms` when it is a time in ms. @throws {TypeError} otherwise */
export function time(ms: number, field: string): number {
  check(Number.isSafeInteger(ms) && ms >= 0, `Invalid "${field}": ${ms}`);
  return ms;
}
