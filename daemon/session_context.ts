/**
 * What the session verbs share (docs/guide.md "Checkpoint sessions"): the
 * split-filesystem calls they make, which session a request means, which
 * checkpoint an abbreviated id names, and a session as `marsh sessions`
 * shows it.
 *
 * @module
 */

import type { CheckpointJournal } from "../journal/checkpoints.ts";
import {
  type CheckpointRecord,
  sessionNameProblem,
  type SessionRecord,
} from "../model/checkpoint.ts";
import type { SessionInfo } from "../protocol/daemon_session.ts";
import type { OpCaptured } from "../protocol/splitfs_session.ts";
import { RequestError } from "./request_error.ts";

/** A project's session in the service: its root (absolute, canonical) and name. */
export interface SessionAt {
  readonly root: string;
  readonly name: string;
}

/** What `op-capture` answers: the service's reply without its `v` and `t`. */
export type Captured = OpCaptured;

/**
 * The split-filesystem service's session calls (`SessionFs` of
 * `protocol/splitfs_session_client.ts` has this shape); each throws
 * `SplitfsError` with the service's message.
 */
export interface SessionStore {
  open(
    at: SessionAt,
    withIgnored: boolean,
  ): Promise<{ layers: readonly string[]; rootId: string; files: number; bytes: number }>;
  mountView(
    at: SessionAt,
    layers: readonly string[],
    create?: boolean,
  ): Promise<{ view: string; rootId: string; class: string }>;
  prepareOp(
    at: SessionAt,
    op: string,
    layers: readonly string[],
  ): Promise<{ merged: string; upper: string }>;
  captureOp(
    at: SessionAt,
    op: string,
    head: { readonly layers: readonly string[]; readonly rootId: string },
  ): Promise<Captured>;
  sealOp(
    at: SessionAt,
    op: string,
    sealed: { readonly layer: string; readonly rootId: string; readonly layers: readonly string[] },
  ): Promise<readonly string[]>;
  dropOp(at: SessionAt, op: string): Promise<void>;
  checkLayer(root: string, layer: string, rootId: string): Promise<{ state: string }>;
  close(at: SessionAt): Promise<void>;
}

/** The shortest checkpoint prefix accepted, as Git's abbreviated ids. */
export const MIN_PREFIX = 8;
const PREFIX = /^[0-9a-f]+$/;

/**
 * The one checkpoint of `candidates` that `given` names: its full id, or a
 * unique prefix of at least {@linkcode MIN_PREFIX} hex digits.
 *
 * @throws {RequestError} 2 for a malformed, unknown or ambiguous id
 */
export function resolveCheckpoint(
  candidates: Iterable<string>,
  given: string,
  where: string,
): string {
  const g = given.toLowerCase();
  if (!PREFIX.test(g) || g.length < MIN_PREFIX || g.length > 64) {
    throw new RequestError(
      2,
      `invalid checkpoint ${JSON.stringify(given.slice(0, 80))}: give its id, or at least ` +
        `${MIN_PREFIX} of its leading hex digits (see marsh log)`,
    );
  }
  const hits = new Set<string>();
  for (const c of candidates) if (c.startsWith(g)) hits.add(c);
  if (hits.size === 1) return [...hits][0]!;
  if (hits.size === 0) {
    throw new RequestError(2, `unknown checkpoint ${g} in ${where} (see marsh log --all)`);
  }
  const list = [...hits].sort().map((c) => c.slice(0, 16)).join(", ");
  throw new RequestError(
    2,
    `checkpoint prefix ${g} is ambiguous in ${where}: it names ${list}; give more digits`,
  );
}

/** Every checkpoint id of a project's sessions (removed ones too), for {@linkcode resolveCheckpoint}. */
export function projectCheckpoints(j: CheckpointJournal, root: string): Set<string> {
  const ids = new Set<string>();
  for (const s of j.listSessions({ project: root, all: true })) {
    for (const e of j.sessionLog(s.id, { all: true })) ids.add(e.checkpoint.id);
  }
  return ids;
}

/**
 * The session a request means: `name` when given, else the project's one
 * open session (`marsh op` and the CLI pass `MARSH_SESSION` as `name`).
 *
 * @throws {RequestError} 2 for a bad or unknown name, or no single open session
 */
export function chooseSession(
  j: CheckpointJournal,
  root: string,
  name: string | null,
): SessionRecord {
  const open = j.listSessions({ project: root });
  const names = open.map((s) => s.name).join(", ");
  if (name !== null) {
    const problem = sessionNameProblem(name);
    if (problem !== null) throw new RequestError(2, problem);
    const s = open.find((x) => x.name === name);
    if (s !== undefined) return s;
    throw new RequestError(
      2,
      `no open session "${name}" in ${root}` +
        (open.length === 0
          ? ": start one with marsh session start"
          : ` (open: ${names}; see marsh sessions)`),
    );
  }
  if (open.length === 1) return open[0]!;
  if (open.length === 0) {
    throw new RequestError(2, `no open session in ${root}: start one with marsh session start`);
  }
  throw new RequestError(
    2,
    `${open.length} sessions are open in ${root} (${names}): name one with --session NAME ` +
      `or MARSH_SESSION=NAME`,
  );
}

/** The name `marsh session start` gives when none is given: `s1`, `s2`, ..., the first not open. */
export function defaultSessionName(j: CheckpointJournal, root: string): string {
  const taken = new Set(j.listSessions({ project: root }).map((s) => s.name));
  for (let n = 1;; n++) if (!taken.has(`s${n}`)) return `s${n}`;
}

/**
 * The name a new session takes, checked: the label rule, and no open
 * session of the project has it.
 *
 * @throws {RequestError} 2 for a bad name, 1 for one in use
 */
export function newSessionName(j: CheckpointJournal, root: string, name: string): string {
  const problem = sessionNameProblem(name);
  if (problem !== null) throw new RequestError(2, problem);
  if (j.findSession(root, name) !== null) {
    throw new RequestError(
      1,
      `a session named "${name}" is already open in ${root}: choose another name, or remove it ` +
        `with marsh session rm ${name}`,
    );
  }
  return name;
}

/** A fresh record id: a prefix, the time in base 36 and 40 random bits. */
export function newRecordId(prefix: "s" | "o"): string {
  const rand = [...crypto.getRandomValues(new Uint8Array(5))]
    .map((b) => b.toString(16).padStart(2, "0")).join("");
  return `${prefix}-${Date.now().toString(36)}-${rand}`;
}

/** What the daemon knows of a view's mount: the root it shows and its class. */
export interface ViewState {
  readonly root: string;
  readonly class: string;
}

/** A session as `marsh sessions --json` prints it. */
export function sessionInfo(
  s: SessionRecord,
  head: CheckpointRecord,
  view: ViewState | null,
  visible: SessionInfo["view_visible"],
): SessionInfo {
  return {
    name: s.name,
    id: s.id,
    head: s.head,
    root: head.root,
    base: s.baseCheckpoint,
    base_root: s.baseRoot,
    view: s.view,
    view_root: view?.root ?? null,
    view_class: view?.class ?? null,
    view_visible: visible,
    with_ignored: s.withIgnored,
    created_unix_ms: s.createdMs,
    rollback_protection: "unavailable",
  };
}
