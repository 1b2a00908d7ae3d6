/**
 * Which checkpoint `marsh commit` and `marsh show` mean (docs/guide.md,
 * "Committing a checkpoint"): a checkpoint id or a unique prefix of one
 * among the project's checkpoints, else a session's head: `--session NAME`
 * (the CLI passes `MARSH_SESSION` when the option is absent), else the
 * project's one open session. The rules are the session commands' own
 * (`session_context.ts`); this reads the journal directly.
 *
 * @module
 */

import type { CheckpointJournal } from "../journal/checkpoints.ts";
import type { CheckpointRecord, OperationRecord, SessionRecord } from "../model/checkpoint.ts";
import type { CheckpointInfo } from "../protocol/daemon_checkpoint.ts";
import { type CompletenessReceipt, completenessReceipt } from "../model/op_receipt.ts";
import type { LocatedReply } from "../protocol/splitfs.ts";
import { SplitfsError, type SplitfsService } from "../protocol/splitfs_client.ts";
import { RequestError } from "./request_error.ts";
import { chooseSession, projectCheckpoints, resolveCheckpoint } from "./session_context.ts";

/** Exit status of an unknown session or checkpoint, or a request to change (docs/messages.md). */
const NOT_FOUND = 2;

/** What the checkpoint commands read. */
export interface CheckpointDeps {
  readonly checkpoints: CheckpointJournal;
  readonly splitfs: Pick<SplitfsService, "request">;
}

/**
 * The project root of `cwd`, as `marsh split` finds it.
 *
 * @throws {RequestError} 2 when the service cannot locate it
 */
export async function projectOf(d: CheckpointDeps, cwd: string): Promise<string> {
  try {
    return (await d.splitfs.request<LocatedReply>({ v: 1, t: "locate", cwd })).root;
  } catch (error) {
    if (error instanceof SplitfsError) throw new RequestError(NOT_FOUND, error.message);
    throw error;
  }
}

/** A checkpoint and the session whose head chose it, if one did. */
export interface Found {
  readonly checkpoint: CheckpointRecord;
  readonly session: SessionRecord;
}

/**
 * The checkpoint asked for in `project`.
 *
 * @throws {RequestError} 2 for an unknown or ambiguous checkpoint or session
 */
export function findCheckpoint(
  j: CheckpointJournal,
  project: string,
  session: string | null,
  checkpoint: string | null,
): Found {
  if (checkpoint === null) {
    const chosen = chooseSession(j, project, session);
    const head = j.getCheckpoint(chosen.head);
    if (head === null) {
      throw new RequestError(NOT_FOUND, `session "${chosen.name}" has no head checkpoint`);
    }
    return { checkpoint: head, session: chosen };
  }
  // The same rules as the session commands (daemon/session_context.ts): a
  // named session limits the search to its history.
  const s = session === null ? null : chooseSession(j, project, session);
  const candidates = s === null
    ? projectCheckpoints(j, project)
    : new Set(j.sessionLog(s.id, { all: true }).map((e) => e.checkpoint.id));
  const id = resolveCheckpoint(
    candidates,
    checkpoint,
    s === null ? project : `session "${s.name}"`,
  );
  const c = j.getCheckpoint(id);
  const owner = c === null ? null : j.getSession(c.session);
  if (c === null || owner === null) throw new RequestError(NOT_FOUND, `no checkpoint ${id}`);
  return { checkpoint: c, session: owner };
}

/** How an operation ended, in words (`exited 3`). */
function exitOf(o: OperationRecord): string | null {
  const e = o.execution;
  if (e === null) return null;
  switch (e.kind) {
    case "exited":
      return `exited ${e.code}`;
    case "signaled":
      return `signaled ${e.signal}`;
    case "failed-to-start":
      return `failed to start: ${e.reason}`;
    default:
      return e.kind;
  }
}

/** An operation's completeness receipt from its kept view and drain proof, or null. */
function receiptOf(j: CheckpointJournal, op: string): CompletenessReceipt | null {
  const v = j.viewOf(op);
  return v === null ? null : completenessReceipt(v.view, v.drain);
}

/** A checkpoint as the replies carry it. */
export function infoOf(j: CheckpointJournal, f: Found): CheckpointInfo {
  const c = f.checkpoint;
  const op = c.kind === "operation" ? j.getOperation(c.operation) : null;
  return {
    id: c.id,
    kind: c.kind,
    session: { id: f.session.id, name: f.session.name },
    project: c.project,
    root: c.root,
    parent: c.kind === "operation" ? c.parent : null,
    parent_root: c.kind === "operation" ? c.parentRoot : null,
    layers: c.layers,
    created_unix_ms: c.createdMs,
    operation: op === null ? null : {
      id: op.id,
      argv: op.argv,
      cwd: op.cwd,
      state: op.state,
      exit: exitOf(op),
      disposition: op.disposition?.kind ?? null,
      receipt: receiptOf(j, op.id),
    },
  };
}
