/**
 * The journal's operation checkpoints (docs/checkpoints.md): sessions,
 * checkpoints and operations, each write one `BEGIN IMMEDIATE` transaction.
 * `Journal.checkpoints` (journal.ts) returns this face; the SQL is in
 * `_checkpoint_sessions.ts` and `_checkpoint_ops.ts`.
 *
 * Methods throw `Deno.errors.NotFound` for an unknown session, checkpoint
 * or operation, `Deno.errors.AlreadyExists` for a duplicate, `TypeError`
 * for a record the model's rules refuse (`model/checkpoint.ts`) or a move
 * the table does not allow where no `false` is returned, and `JournalError`
 * when SQLite fails.
 *
 * @module
 */

import * as ops from "./_checkpoint_ops.ts";
import type { BindResult, NewOperation, RecordResult } from "./_checkpoint_ops.ts";
import {
  operationFromRow,
  readCheckpoint,
  readOperation,
  readSession,
  time,
} from "./_checkpoint_rows.ts";
import * as sessions from "./_checkpoint_sessions.ts";
import * as changed from "./_checkpoint_changes.ts";
import { compactStacks } from "./_checkpoint_compact.ts";
import type {
  DrainProof,
  OperationChanges,
  OperationView,
  OperationViewRecord,
} from "./_checkpoint_changes.ts";
import type { LogEntry, NewFork, NewSession, RollbackResult } from "./_checkpoint_sessions.ts";
import type { Connection } from "./_connection.ts";
import type {
  CheckpointRecord,
  ExecutionOutcome,
  OperationRecord,
  SessionRecord,
} from "../model/checkpoint.ts";

export type { BindResult, NewOperation, RecordResult, StaleHead } from "./_checkpoint_ops.ts";
export type {
  ChangedPath,
  DrainProof,
  OperationChanges,
  OperationView,
  OperationViewRecord,
} from "./_checkpoint_changes.ts";
export type { LogEntry, NewFork, NewSession, RollbackResult } from "./_checkpoint_sessions.ts";

/** Sessions, checkpoints and operations in the journal. */
export class CheckpointJournal {
  readonly #c: Connection;

  /** Works on the journal's open connection (`Journal.checkpoints`). */
  constructor(c: Connection) {
    this.#c = c;
  }

  /** Reads one session, or null. */
  getSession(id: string): SessionRecord | null {
    return this.#c.read("read session", () => readSession(this.#c, id));
  }

  /** The open session of `project` called `name`, or null. */
  findSession(project: string, name: string): SessionRecord | null {
    return this.#c.read("find session", () => sessions.findSession(this.#c, project, name));
  }

  /** The sessions of `project` (of every project when omitted), open ones unless `all`, oldest first. */
  listSessions(
    filter: { readonly project?: string; readonly all?: boolean } = {},
  ): SessionRecord[] {
    return this.#c.read("list sessions", () => sessions.listSessions(this.#c, filter));
  }

  /** Reads one checkpoint, or null. */
  getCheckpoint(id: string): CheckpointRecord | null {
    return this.#c.read("read checkpoint", () => readCheckpoint(this.#c, id));
  }

  /** Reads one operation, or null. */
  getOperation(id: string): OperationRecord | null {
    return this.#c.read("read operation", () => readOperation(this.#c, id));
  }

  /**
   * Every live operation (`recorded`, `launched`, `drained`, `sealing`),
   * oldest first: what start-up recovery settles (docs/checkpoints.md, "Recovery").
   */
  liveOperations(): OperationRecord[] {
    return this.#c.read("list live operations", () =>
      this.#c.all(
        `SELECT * FROM operations WHERE state IN ('recorded', 'launched', 'drained', 'sealing')
           ORDER BY created_ms, id`,
      ).map(operationFromRow));
  }

  /**
   * Starts a session from a snapshot: its `start` checkpoint and the session
   * whose base and head it is, in one transaction. Nothing is copied.
   *
   * @throws {Deno.errors.AlreadyExists} for a known id, or a name an open session of the project has
   */
  createSession(s: NewSession): SessionRecord {
    return sessions.createSession(this.#c, s);
  }

  /**
   * Makes a session whose base and head are an existing checkpoint (`marsh
   * fork`): one row, nothing copied, no new checkpoint.
   *
   * @throws {Deno.errors.NotFound} for an unknown checkpoint
   * @throws {Deno.errors.AlreadyExists} for a known id or a name in use
   */
  forkSession(f: NewFork): SessionRecord {
    return sessions.forkSession(this.#c, f);
  }

  /**
   * Removes a session; its checkpoints and operations stay until `marsh gc`.
   * Returns false when it was already removed.
   *
   * @throws {Deno.errors.Busy} while one of its operations is live
   */
  removeSession(id: string, nowMs: number): boolean {
    return sessions.removeSession(this.#c, id, nowMs);
  }

  /**
   * Records an operation before anything is launched (`recorded`). The same
   * id again returns the first record (`repeated`) in whatever state it is:
   * nothing runs twice. A head other than `expectedHead` records nothing
   * (`stale`).
   *
   * @throws {Deno.errors.NotFound} for an unknown or removed session
   * @throws {Deno.errors.AlreadyExists} for a known id with another command or session
   * @throws {Deno.errors.Busy} while another operation of the session is live
   */
  recordOperation(o: NewOperation): RecordResult {
    return ops.recordOperation(this.#c, o);
  }

  /**
   * `recorded -> launched`, with what will prove its process tree gone (kept
   * on its view's row, in the same transaction). Returns false, changing
   * nothing, from another state.
   */
  launchOperation(id: string, nowMs: number, drain?: DrainProof): boolean {
    // Not fsynced on its own: see drainOperation.
    return this.#c.unsynced(() =>
      this.#c.write("launch operation", () => {
        const moved = ops.moveOperation(this.#c, id, "launch", {
          launched_ms: time(nowMs, "nowMs"),
        });
        // The completeness receipt's drain proof, with the move (docs/checkpoints.md step 3).
        if (moved && drain !== undefined) changed.recordDrain(this.#c, id, drain);
        return moved;
      })
    );
  }

  /** `launched -> drained`, with how the command ended. Returns false from another state. */
  drainOperation(id: string, outcome: ExecutionOutcome, nowMs: number): boolean {
    // Not fsynced on its own (docs/checkpoints.md "An operation"): the intent's
    // or the no-change bind's commit makes it durable; a power loss before
    // that leaves the operation `launched`, which recovery never reruns.
    return this.#c.unsynced(() => ops.drainOperation(this.#c, id, outcome, nowMs));
  }

  /**
   * `recorded | drained | sealing -> failed`, with why (from `recorded` its
   * outcome is `failed-to-start`). Returns false from another state.
   */
  failOperation(id: string, reason: string, nowMs: number): boolean {
    return ops.failOperation(this.#c, id, reason, nowMs);
  }

  /** `drained -> discarded`: its changes intentionally not checkpointed. */
  discardOperation(id: string, nowMs: number): boolean {
    const ended = time(nowMs, "nowMs");
    return ops.moveOperation(this.#c, id, "discard", { disposition: "discarded", ended_ms: ended });
  }

  /** `launched -> escaped`: a writer may outlive it, so it is never sealed. */
  escapeOperation(id: string, reason: string, nowMs: number): boolean {
    const ended = time(nowMs, "nowMs");
    return ops.moveOperation(this.#c, id, "escape", { reason, ended_ms: ended });
  }

  /** A live, failed or escaped operation to `recovery-required`, with why. */
  requireRecovery(id: string, reason: string, nowMs: number): boolean {
    const ended = time(nowMs, "nowMs");
    return ops.moveOperation(this.#c, id, "require", { reason, ended_ms: ended });
  }

  /** `recovery-required -> abandoned`, by hand. */
  abandonOperation(id: string, reason: string, nowMs: number): boolean {
    const ended = time(nowMs, "nowMs");
    return ops.moveOperation(this.#c, id, "abandon", { reason, ended_ms: ended });
  }

  /**
   * `drained -> sealing`: the write-ahead intent, before the layer is sealed:
   * the exact root id and layer id it must produce, and the changed set's
   * digest. Returns false, changing nothing, from another state. With
   * `paths`, what the capture listed is kept in the same transaction (for
   * `marsh log`): the intent stays one durability step.
   *
   * @throws {TypeError} for a root equal to the operation's base: no change
   *   is bound without an intent
   */
  recordIntent(
    id: string,
    intent: { readonly root: string; readonly layer: string; readonly changes: string },
    nowMs: number,
    paths?: OperationChanges,
  ): boolean {
    if (paths === undefined) return ops.recordIntent(this.#c, id, intent, nowMs);
    // The nested writes are savepoints of this one transaction.
    return this.#c.write("record intent", () => {
      const moved = ops.recordIntent(this.#c, id, intent, nowMs);
      if (moved) changed.recordChanges(this.#c, id, paths);
      return moved;
    });
  }

  /**
   * THE bind, one transaction: the checkpoint row, the operation `bound`, and
   * the session head moved by compare-and-swap from the operation's expected
   * head. From `sealing` it binds the intent's root and layer; from `drained`
   * it binds no change (`noChange`: the same root, no layer, no intent). A
   * head that moved makes the operation `stale` and publishes nothing. A
   * bound or stale operation returns what it got the first time.
   *
   * @throws {TypeError} from any other state, or with a `noChange` that does not fit it
   */
  bindCheckpoint(
    id: string,
    opts: { readonly createdMs: number; readonly noChange?: { readonly changes: string } },
  ): BindResult {
    return ops.bindCheckpoint(this.#c, id, opts);
  }

  /**
   * Rollback: the session head moved by compare-and-swap from `expectedHead`
   * to `target`, a checkpoint of its history (an ancestor of its head, or
   * one it made: an abandoned future). Writes one row; deletes nothing.
   *
   * @throws {Deno.errors.NotFound} for an unknown or removed session, or a target outside its history
   */
  rollback(sessionId: string, target: string, expectedHead: string): RollbackResult {
    return sessions.rollback(this.#c, sessionId, target, expectedHead);
  }

  /**
   * Keeps what an operation's capture listed (`marsh log`): how many paths
   * changed and the first of them. Written once, before the intent; the
   * same again is a no-op.
   *
   * @throws {Deno.errors.NotFound} for an unknown operation
   */
  recordChanges(id: string, changes: OperationChanges): void {
    changed.recordChanges(this.#c, id, changes);
  }

  /** What {@linkcode CheckpointJournal.recordChanges} kept for an operation, or null. */
  changesOf(id: string): OperationChanges | null {
    return this.#c.read("read operation changes", () => changed.changesOf(this.#c, id));
  }

  /**
   * Keeps how an operation saw the project (`project` or `relative`), before
   * it is launched; the same again is a no-op.
   *
   * @throws {Deno.errors.NotFound} for an unknown operation
   */
  recordView(id: string, view: OperationView): void {
    // Not fsynced on its own: see drainOperation.
    this.#c.unsynced(() => changed.recordView(this.#c, id, view));
  }

  /**
   * What {@linkcode CheckpointJournal.recordView} kept for an operation, with
   * the drain proof its launch recorded; or null.
   */
  viewOf(id: string): OperationViewRecord | null {
    return this.#c.read("read operation view", () => changed.viewOf(this.#c, id));
  }

  /**
   * Compaction's rewrite (docs/checkpoints.md "Compaction"), one
   * transaction: every checkpoint of `project` whose stack starts with
   * `prefix` gets the stack `[layer, ...rest]`, `layer` holding the
   * prefix's merged view. Root ids, checkpoint ids, heads and log entries do
   * not change. Returns how many stacks were rewritten; again, none.
   *
   * @throws {TypeError} for an empty prefix or one that holds `layer`
   */
  compactStacks(project: string, prefix: readonly string[], layer: string): number {
    return compactStacks(this.#c, project, prefix, layer);
  }

  /**
   * A session's log: its head, then each parent back to the start (across
   * the session it was forked from). With `all`, then the checkpoints it
   * made that are no longer on that line (abandoned futures), newest first.
   */
  sessionLog(sessionId: string, opts: { readonly all?: boolean } = {}): LogEntry[] {
    return sessions.sessionLog(this.#c, sessionId, opts.all === true);
  }
}
