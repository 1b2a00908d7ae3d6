/**
 * The journal's checkpoint sessions (docs/checkpoints.md, "The model" and
 * "Rollback, fork, log"): starting one from a snapshot, forking one at a
 * checkpoint, removing one, rollback as a compare-and-swap of the head, and
 * the log. `CheckpointJournal` (checkpoints.ts) is their public face.
 *
 * @module
 */

import {
  ANCESTORS,
  check,
  checkpointFromRow,
  checkpointIdOf,
  liveOperation,
  readCheckpoint,
  readOperation,
  readSession,
  requireSession,
  sessionFromRow,
  swapHead,
  time,
} from "./_checkpoint_rows.ts";
import type { StaleHead } from "./_checkpoint_ops.ts";
import type { Connection, Params } from "./_connection.ts";
import {
  type CheckpointRecord,
  headCas,
  isRecordId,
  isRootId,
  type OperationRecord,
  sessionNameProblem,
  type SessionRecord,
  sessionViewPath,
} from "../model/checkpoint.ts";

/** A new session started from a snapshot of the project (its `start` checkpoint). */
export interface NewSession {
  readonly id: string;
  readonly project: string;
  readonly name: string;
  readonly withIgnored: boolean;
  /** The snapshot: its root id and the layer stack that shows it, bottom first. */
  readonly start: { readonly root: string; readonly layers: readonly string[] };
  readonly createdMs: number;
}

/** A new session at an existing checkpoint (`marsh fork`). */
export interface NewFork {
  readonly id: string;
  readonly name: string;
  /** The checkpoint it starts at. */
  readonly from: string;
  readonly createdMs: number;
}

/** What {@linkcode rollback} did. */
export type RollbackResult =
  | { readonly kind: "moved"; readonly session: SessionRecord }
  | StaleHead;

/** One line of a session's log. */
export interface LogEntry {
  readonly checkpoint: CheckpointRecord;
  /** The operation that made it; null for a `start` checkpoint. */
  readonly operation: OperationRecord | null;
  /** Whether it is on the line from the head back (false: an abandoned future). */
  readonly onHead: boolean;
}

/** See `CheckpointJournal.findSession`. */
export function findSession(c: Connection, project: string, name: string): SessionRecord | null {
  const row = c.get(
    "SELECT * FROM sessions WHERE project = :project AND name = :name AND state = 'open'",
    { project, name },
  );
  return row === undefined ? null : sessionFromRow(row);
}

/** See `CheckpointJournal.listSessions`. */
export function listSessions(
  c: Connection,
  filter: { readonly project?: string; readonly all?: boolean },
): SessionRecord[] {
  const where: string[] = [];
  const params: Params = {};
  if (filter.project !== undefined) {
    where.push("project = :project");
    params.project = filter.project;
  }
  if (filter.all !== true) where.push("state = 'open'");
  const sql = `SELECT * FROM sessions ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
    ORDER BY created_ms, id`;
  return c.all(sql, params).map(sessionFromRow);
}

function layerList(layers: readonly string[]): string {
  check(
    layers.length > 0 && layers.every((l) => typeof l === "string" && l.length > 0),
    "A checkpoint's layer stack names at least one layer",
  );
  return JSON.stringify(layers);
}

/** The view of a new session, once its id and name pass their rules. */
function newView(id: string, project: string, name: string): string {
  check(isRecordId(id), `Invalid session id: "${id}"`);
  const problem = sessionNameProblem(name);
  if (problem !== null) throw new TypeError(problem);
  return sessionViewPath(project, name);
}

function refuseTaken(c: Connection, id: string, project: string, name: string): void {
  if (readSession(c, id) !== null) {
    throw new Deno.errors.AlreadyExists(`Session already exists: "${id}"`);
  }
  if (findSession(c, project, name) !== null) {
    throw new Deno.errors.AlreadyExists(`A session called "${name}" is open in ${project}`);
  }
}

function insertSession(
  c: Connection,
  s: { id: string; project: string; name: string; view: string; withIgnored: boolean },
  at: { checkpoint: string; root: string },
  createdMs: number,
): SessionRecord {
  c.insert("sessions", {
    id: s.id,
    project: s.project,
    name: s.name,
    base_checkpoint: at.checkpoint,
    base_root: at.root,
    head: at.checkpoint,
    view: s.view,
    with_ignored: s.withIgnored ? 1 : 0,
    state: "open",
    created_ms: createdMs,
  });
  return readSession(c, s.id)!;
}

/** See `CheckpointJournal.createSession`. */
export function createSession(c: Connection, s: NewSession): SessionRecord {
  const view = newView(s.id, s.project, s.name);
  check(isRootId(s.start.root), `Not a root id: "${s.start.root}"`);
  const layers = layerList(s.start.layers);
  const createdMs = time(s.createdMs, "createdMs");
  const start = checkpointIdOf({ kind: "start", session: s.id, root: s.start.root });
  return c.write("create session", () => {
    refuseTaken(c, s.id, s.project, s.name);
    c.insert("checkpoints", {
      id: start,
      session: s.id,
      project: s.project,
      kind: "start",
      root_id: s.start.root,
      layers,
      created_ms: createdMs,
    });
    return insertSession(c, { ...s, view }, { checkpoint: start, root: s.start.root }, createdMs);
  });
}

/** See `CheckpointJournal.forkSession`. */
export function forkSession(c: Connection, f: NewFork): SessionRecord {
  const createdMs = time(f.createdMs, "createdMs");
  return c.write("fork session", () => {
    const from = readCheckpoint(c, f.from);
    if (from === null) throw new Deno.errors.NotFound(`Checkpoint not found: "${f.from}"`);
    const view = newView(f.id, from.project, f.name);
    refuseTaken(c, f.id, from.project, f.name);
    const withIgnored = requireSession(c, from.session).withIgnored;
    return insertSession(
      c,
      { id: f.id, project: from.project, name: f.name, view, withIgnored },
      { checkpoint: from.id, root: from.root },
      createdMs,
    );
  });
}

/** See `CheckpointJournal.removeSession`. */
export function removeSession(c: Connection, id: string, nowMs: number): boolean {
  time(nowMs, "nowMs");
  return c.write("remove session", () => {
    const s = requireSession(c, id);
    if (s.state === "removed") return false;
    const live = liveOperation(c, id);
    if (live !== null) {
      throw new Deno.errors.Busy(`Session "${s.name}" has a running operation: "${live}"`);
    }
    c.update("sessions", { state: "removed", removed_ms: nowMs }, "id = :k", { k: id });
    return true;
  });
}

/** See `CheckpointJournal.rollback`. */
export function rollback(
  c: Connection,
  sessionId: string,
  target: string,
  expectedHead: string,
): RollbackResult {
  return c.write("roll back", () => {
    const s = requireSession(c, sessionId);
    if (s.state !== "open") throw new Deno.errors.NotFound(`Session removed: "${s.name}"`);
    const t = readCheckpoint(c, target);
    const inHistory = t !== null && t.project === s.project &&
      (t.session === s.id ||
        c.get(`${ANCESTORS} SELECT 1 AS x FROM up WHERE id = :t`, { head: s.head, t: target }) !==
          undefined);
    if (!inHistory) {
      throw new Deno.errors.NotFound(
        `Checkpoint ${target} is not in the history of session "${s.name}" (see marsh log --all)`,
      );
    }
    const cas = headCas(expectedHead, s.head);
    if (cas.kind === "stale") return cas;
    if (target !== s.head) swapHead(c, s.id, expectedHead, target);
    return { kind: "moved", session: readSession(c, s.id)! };
  });
}

/** See `CheckpointJournal.sessionLog`. */
export function sessionLog(c: Connection, sessionId: string, all: boolean): LogEntry[] {
  return c.read("read session log", () =>
    c.tx("DEFERRED", () => {
      const s = requireSession(c, sessionId);
      const entry = (checkpoint: CheckpointRecord, onHead: boolean): LogEntry => ({
        checkpoint,
        operation: checkpoint.kind === "operation" ? readOperation(c, checkpoint.operation) : null,
        onHead,
      });
      const line = c.all(
        `${ANCESTORS} SELECT c.* FROM up JOIN checkpoints c ON c.id = up.id ORDER BY up.depth`,
        { head: s.head },
      ).map((row) => entry(checkpointFromRow(row), true));
      if (!all) return line;
      const off = c.all(
        `${ANCESTORS} SELECT * FROM checkpoints WHERE session = :s
           AND id NOT IN (SELECT id FROM up) ORDER BY created_ms DESC, id DESC`,
        { head: s.head, s: s.id },
      ).map((row) => entry(checkpointFromRow(row), false));
      return [...line, ...off];
    }));
}
