/**
 * One checkpoint as `marsh log` shows it (docs/guide.md "Checkpoint
 * sessions"): the checkpoint, its operation's command, execution outcome and
 * disposition, and the paths it changed.
 *
 * @module
 */

import type { LogEntry, OperationChanges, OperationViewRecord } from "../journal/checkpoints.ts";
import { completenessReceipt } from "../model/op_receipt.ts";
import type { ExecutionOutcome, OperationRecord } from "../model/checkpoint.ts";
import type { LogEntryInfo, LogOperation } from "../protocol/daemon_session.ts";

/** The execution outcome's fields as the log and `op.done` carry them. */
export function executionFields(
  e: ExecutionOutcome | null,
): { execution: string | null; exit: number | null; signal: string | null } {
  return {
    execution: e?.kind ?? null,
    exit: e?.kind === "exited" ? e.code : null,
    signal: e?.kind === "signaled" ? e.signal : null,
  };
}

function operationInfo(o: OperationRecord, view: OperationViewRecord | null): LogOperation {
  return {
    id: o.id,
    argv: o.argv,
    cwd: o.cwd,
    state: o.state,
    ...executionFields(o.execution),
    disposition: o.disposition?.kind ?? null,
    reason: o.reason,
    view: view?.view ?? null,
    view_reason: view?.reason ?? null,
    receipt: view === null ? null : completenessReceipt(view.view, view.drain),
  };
}

/** A journal log entry as `marsh log --json` prints it. */
export function logEntryInfo(
  e: LogEntry,
  ctx: {
    readonly head: string;
    readonly session: string;
    readonly changes: OperationChanges | null;
    readonly view: OperationViewRecord | null;
  },
): LogEntryInfo {
  const c = e.checkpoint;
  const noChange = c.kind === "operation" && c.delta.kind === "no-change";
  return {
    checkpoint: c.id,
    kind: c.kind,
    parent: c.kind === "operation" ? c.parent : null,
    root: c.root,
    session: ctx.session,
    on_head: e.onHead,
    head: c.id === ctx.head,
    created_unix_ms: c.createdMs,
    operation: e.operation === null ? null : operationInfo(e.operation, ctx.view),
    changed: c.kind === "start" ? null : noChange ? 0 : ctx.changes?.changed ?? null,
    paths: noChange ? [] : ctx.changes?.paths ?? [],
    truncated: noChange ? false : ctx.changes?.truncated ?? false,
  };
}
