/**
 * The journal's operations (docs/checkpoints.md, "An operation"): recorded
 * before launch, moved only by `model/operation_state.ts`'s table, the
 * intent before the layer's seal, and THE bind: the checkpoint row, the
 * operation `bound` and the session head moved by compare-and-swap, in one
 * transaction. A stale head fails exactly and is never rebased.
 * `CheckpointJournal` (checkpoints.ts) is their public face.
 *
 * @module
 */

import {
  check,
  checkpointIdOf,
  executionColumns,
  liveOperation,
  readCheckpoint,
  readOperation,
  requireOperation,
  requireSession,
  swapHead,
  time,
} from "./_checkpoint_rows.ts";
import type { Connection, Params } from "./_connection.ts";
import {
  argvProblem,
  type CheckpointRecord,
  cwdProblem,
  type ExecutionOutcome,
  headCas,
  isDigest,
  isRecordId,
  isRootId,
  type OperationRecord,
  staleHeadMessage,
} from "../model/checkpoint.ts";
import { type OperationEvent, operationMove } from "../model/operation_state.ts";

/** An operation about to be launched. */
export interface NewOperation {
  readonly id: string;
  readonly session: string;
  /** The head the caller read: the operation's compare-and-swap guard. */
  readonly expectedHead: string;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly createdMs: number;
}

/** A head that was not the one expected: nothing was published. */
export interface StaleHead {
  readonly kind: "stale";
  readonly expected: string;
  readonly current: string;
}

/** What {@linkcode recordOperation} did. */
export type RecordResult =
  | { readonly kind: "recorded" | "repeated"; readonly operation: OperationRecord }
  | StaleHead;

/** What {@linkcode bindCheckpoint} did; `repeated`: it had been done before. */
export type BindResult =
  | {
    readonly kind: "bound";
    readonly checkpoint: CheckpointRecord;
    readonly operation: OperationRecord;
    readonly repeated: boolean;
  }
  | StaleHead & { readonly operation: OperationRecord; readonly repeated: boolean };

/** See `CheckpointJournal.recordOperation`. */
export function recordOperation(c: Connection, o: NewOperation): RecordResult {
  check(isRecordId(o.id), `Invalid operation id: "${o.id}"`);
  const problem = argvProblem(o.argv) ?? cwdProblem(o.cwd);
  if (problem !== null) throw new TypeError(problem);
  const createdMs = time(o.createdMs, "createdMs");
  return c.write("record operation", () => {
    const known = readOperation(c, o.id);
    if (known !== null) {
      const same = known.session === o.session && known.cwd === o.cwd &&
        JSON.stringify(known.argv) === JSON.stringify(o.argv);
      if (!same) throw new Deno.errors.AlreadyExists(`Operation already exists: "${o.id}"`);
      return { kind: "repeated", operation: known };
    }
    const s = requireSession(c, o.session);
    if (s.state !== "open") throw new Deno.errors.NotFound(`Session removed: "${s.name}"`);
    const cas = headCas(o.expectedHead, s.head);
    if (cas.kind === "stale") return cas;
    const live = liveOperation(c, s.id);
    if (live !== null) {
      throw new Deno.errors.Busy(
        `Session "${s.name}" is running operation "${live}"; one at a time`,
      );
    }
    c.insert("operations", {
      id: o.id,
      session: s.id,
      expected_head: s.head,
      base_root: readCheckpoint(c, s.head)!.root,
      argv: JSON.stringify(o.argv),
      cwd: o.cwd,
      state: "recorded",
      created_ms: createdMs,
    });
    return { kind: "recorded", operation: readOperation(c, o.id)! };
  });
}

/** Moves operation `id` by `event` with `cols`, in its own transaction. */
export function moveOperation(
  c: Connection,
  id: string,
  event: OperationEvent,
  cols: Params,
): boolean {
  return c.write(`${event} operation`, () => moveIn(c, requireOperation(c, id), event, cols));
}

/**
 * Moves `op` by `event` when the table lets it leave its state, with a
 * compare-and-set on that state. Returns false, changing nothing, otherwise.
 */
function moveIn(c: Connection, op: OperationRecord, event: OperationEvent, cols: Params): boolean {
  const { from, to } = operationMove(event);
  if (!from.includes(op.state)) return false;
  return c.update("operations", { ...cols, state: to }, "id = :k_id AND state = :k_state", {
    k_id: op.id,
    k_state: op.state,
  });
}

/** See `CheckpointJournal.drainOperation`. */
export function drainOperation(
  c: Connection,
  id: string,
  outcome: ExecutionOutcome,
  nowMs: number,
): boolean {
  check(outcome.kind !== "failed-to-start", "A drained command started");
  return moveOperation(c, id, "drain", {
    ...executionColumns(outcome),
    drained_ms: time(nowMs, "nowMs"),
  });
}

/** See `CheckpointJournal.failOperation`. */
export function failOperation(c: Connection, id: string, reason: string, nowMs: number): boolean {
  const cols: Params = { reason, ended_ms: time(nowMs, "nowMs") };
  return c.write("fail operation", () => {
    const op = requireOperation(c, id);
    const started = op.state === "recorded"
      ? executionColumns({ kind: "failed-to-start", reason })
      : {};
    return moveIn(c, op, "fail", { ...cols, ...started });
  });
}

/** See `CheckpointJournal.recordIntent`. */
export function recordIntent(
  c: Connection,
  id: string,
  intent: { readonly root: string; readonly layer: string; readonly changes: string },
  nowMs: number,
): boolean {
  check(isRootId(intent.root), `Not a root id: "${intent.root}"`);
  check(intent.layer.length > 0, "An intent names its layer");
  check(isDigest(intent.changes), `Not a changed-set digest: "${intent.changes}"`);
  time(nowMs, "nowMs");
  return c.write("record intent", () => {
    const op = requireOperation(c, id);
    check(
      intent.root !== op.baseRoot,
      `Operation "${id}" changed nothing: bind it without an intent`,
    );
    return moveIn(c, op, "intend", {
      intent_root: intent.root,
      intent_layer: intent.layer,
      intent_changes: intent.changes,
      intent_ms: nowMs,
    });
  });
}

/** See `CheckpointJournal.bindCheckpoint`. */
export function bindCheckpoint(
  c: Connection,
  id: string,
  opts: { readonly createdMs: number; readonly noChange?: { readonly changes: string } },
): BindResult {
  const createdMs = time(opts.createdMs, "createdMs");
  return c.write("bind checkpoint", () => {
    const op = requireOperation(c, id);
    const repeated = priorBind(c, op);
    if (repeated !== null) return repeated;
    check(
      op.state === "drained" || op.state === "sealing",
      `Operation "${id}" is ${op.state}: it cannot be bound`,
    );
    check(
      (op.state === "drained") === (opts.noChange !== undefined),
      op.state === "drained"
        ? `Operation "${id}" has no intent: bind it as no change, or record its intent first`
        : `Operation "${id}" has an intent: it is bound with its layer`,
    );
    const session = requireSession(c, op.session);
    const cas = headCas(op.expectedHead, session.head);
    if (cas.kind === "stale") {
      moveIn(c, op, "stale", {
        seen_head: cas.current,
        reason: staleHeadMessage(session.name, cas),
        ended_ms: createdMs,
      });
      return { ...cas, operation: readOperation(c, id)!, repeated: false };
    }
    const parent = readCheckpoint(c, op.expectedHead)!;
    const intent = op.intent;
    const root = intent?.root ?? op.baseRoot;
    const changes = intent?.changes ?? opts.noChange!.changes;
    check(isDigest(changes), `Not a changed-set digest: "${changes}"`);
    const checkpoint = checkpointIdOf({
      kind: "operation",
      operation: op.id,
      parent: parent.id,
      root,
      changes,
    });
    c.insert("checkpoints", {
      id: checkpoint,
      session: session.id,
      project: session.project,
      kind: "operation",
      parent: parent.id,
      parent_root: parent.root,
      root_id: root,
      layers: JSON.stringify(intent === null ? parent.layers : [...parent.layers, intent.layer]),
      layer: intent?.layer ?? null,
      operation: op.id,
      changes,
      created_ms: createdMs,
    });
    moveIn(c, op, "bind", {
      disposition: intent === null ? "no-change" : "sealed",
      checkpoint,
      result_root: root,
      ended_ms: createdMs,
    });
    swapHead(c, session.id, op.expectedHead, checkpoint);
    return {
      kind: "bound",
      checkpoint: readCheckpoint(c, checkpoint)!,
      operation: readOperation(c, id)!,
      repeated: false,
    };
  });
}

/** What a bound or stale operation got the first time, or null for any other. */
function priorBind(c: Connection, op: OperationRecord): BindResult | null {
  if (op.state === "bound") {
    const checkpoint = readCheckpoint(c, op.checkpoint!)!;
    return { kind: "bound", checkpoint, operation: op, repeated: true };
  }
  if (op.state === "stale") {
    const current = op.seenHead!;
    return { kind: "stale", expected: op.expectedHead, current, operation: op, repeated: true };
  }
  return null;
}
