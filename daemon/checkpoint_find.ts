/**
 * Which checkpoint `marsh commit` and `marsh show` mean (docs/guide.md,
 * "Committing a checkpoint"): a checkpoint id or a unique prefix of one
 * among the project's checkpoints, else a session's head: `--session NAME`
 * (the CLI passes `MARSH_SESSION` when the option is absent), else the
 * project's one open session. Read from the journal directly; the session
 * commands follow the same rule.
 *
 * @module
 */

import type { CheckpointJournal } from "../journal/checkpoints.ts";
import type { CheckpointRecord, OperationRecord, SessionRecord } from "../model/checkpoint.ts";
import type { CheckpointInfo } from "../protocol/daemon_checkpoint.ts";
import type { LocatedReply } from "../protocol/splitfs.ts";
import { SplitfsError, type SplitfsService } from "../protocol/splitfs_client.ts";
import { RequestError } from "./request_error.ts";

/** Exit status of an unknown session or checkpoint, or a request to change (docs/messages.md). */
const NOT_FOUND = 2;
/** The shortest checkpoint id prefix taken. */
const MIN_PREFIX = 4;
const HEX = /^[0-9a-f]+$/;

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
  const s = session === null ? null : namedSession(j, project, session);
  if (checkpoint === null) {
    const chosen = s ?? onlySession(j, project);
    const head = j.getCheckpoint(chosen.head);
    if (head === null) {
      throw new RequestError(NOT_FOUND, `session "${chosen.name}" has no head checkpoint`);
    }
    return { checkpoint: head, session: chosen };
  }
  const c = byIdOrPrefix(j, project, checkpoint, s);
  const owner = j.getSession(c.session);
  if (owner === null) throw new RequestError(NOT_FOUND, `no session ${c.session}`);
  return { checkpoint: c, session: owner };
}

function namedSession(j: CheckpointJournal, project: string, name: string): SessionRecord {
  const s = j.findSession(project, name);
  if (s === null) {
    throw new RequestError(
      NOT_FOUND,
      `no open session "${name}" in ${project}${openNames(j, project)}`,
    );
  }
  return s;
}

function openNames(j: CheckpointJournal, project: string): string {
  const open = j.listSessions({ project }).map((s) => s.name);
  return open.length === 0 ? "" : ` (open sessions: ${open.join(", ")})`;
}

function onlySession(j: CheckpointJournal, project: string): SessionRecord {
  const open = j.listSessions({ project });
  if (open.length === 1) return open[0]!;
  if (open.length === 0) {
    throw new RequestError(
      NOT_FOUND,
      `no open session in ${project}: start one with \`marsh session start\`, or name a checkpoint`,
    );
  }
  throw new RequestError(
    NOT_FOUND,
    `${project} has ${open.length} open sessions (${
      open.map((s) => s.name).join(", ")
    }): give --session NAME or set MARSH_SESSION`,
  );
}

/**
 * A checkpoint of `project` by its id or a unique prefix (at least
 * {@linkcode MIN_PREFIX} hex digits); within session `s`'s history when given.
 */
function byIdOrPrefix(
  j: CheckpointJournal,
  project: string,
  ref: string,
  s: SessionRecord | null,
): CheckpointRecord {
  const want = ref.toLowerCase();
  if (!HEX.test(want) || want.length < MIN_PREFIX || want.length > 64) {
    throw new RequestError(
      NOT_FOUND,
      `invalid checkpoint ${
        JSON.stringify(ref)
      }: give its id or at least ${MIN_PREFIX} of its first hex digits (marsh log lists them)`,
    );
  }
  const sessions = s === null ? j.listSessions({ project, all: true }) : [s];
  const found = new Map<string, CheckpointRecord>();
  for (const session of sessions) {
    for (const entry of j.sessionLog(session.id, { all: true })) {
      const c = entry.checkpoint;
      if (c.project === project && c.id.startsWith(want)) found.set(c.id, c);
    }
  }
  if (found.size === 1) return [...found.values()][0]!;
  const where = s === null ? project : `session "${s.name}"`;
  if (found.size === 0) throw new RequestError(NOT_FOUND, `no checkpoint ${ref} in ${where}`);
  throw new RequestError(
    NOT_FOUND,
    `checkpoint ${ref} is ambiguous in ${where}: ${
      [...found.keys()].map((id) => id.slice(0, 12)).join(", ")
    }; give more of its digits`,
  );
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
    },
  };
}
