/**
 * Rows to records and back. Reading never coerces: a value this code does
 * not know is a {@linkcode JournalCorruptError} naming the row and column.
 *
 * @module
 */

import type { SQLInputValue, SQLOutputValue } from "node:sqlite";
import { JournalCorruptError } from "./errors.ts";
import {
  checkKitEntrypoint,
  checkKitEnv,
  checkKitImage,
  checkKitImageId,
  checkKitName,
  checkKitNetwork,
  checkKitRecord,
  checkKitWall,
  type KitRecord,
  KitRuleError,
} from "../model/kit_rules.ts";
import {
  BRANCH_KINDS,
  type BranchDiscard,
  type BranchKind,
  type BranchRecord,
  type CapabilityRecord,
  type Creator,
  type DirIdentity,
  type DiscardableState,
  type DiscardNote,
  type GitSource,
  isBranchState,
  isCapabilityState,
  isSplitState,
  JOB_CLEANUPS,
  JOB_STATES,
  type JobCleanup,
  type JobPatch,
  type JobRecord,
  type JobState,
  type Mechanism,
  MECHANISMS,
  type Placement,
  type SplitRecord,
  VIEWS,
} from "./records.ts";

type Row = Record<string, SQLOutputValue>;

const DECIMAL = /^(0|[1-9][0-9]*)$/;

/** Reads one row's columns, naming the row and column of a value it cannot decode. */
export class RowReader {
  constructor(readonly table: string, readonly key: string, readonly row: Row) {}

  fail(column: string, detail: string): never {
    throw new JournalCorruptError(this.table, this.key, column, this.row[column], detail);
  }

  text(column: string): string {
    const v = this.row[column];
    return typeof v === "string" ? v : this.fail(column, "expected text");
  }

  optText(column: string): string | null {
    const v = this.row[column];
    return v === null ? null : this.text(column);
  }

  int(column: string): number {
    const v = this.row[column];
    return typeof v === "number" && Number.isSafeInteger(v)
      ? v
      : this.fail(column, "expected an integer");
  }

  optInt(column: string): number | null {
    return this.row[column] === null ? null : this.int(column);
  }

  identity(devColumn: string, inoColumn: string): DirIdentity | null {
    const dev = this.optText(devColumn);
    const ino = this.optText(inoColumn);
    if (dev === null && ino === null) return null;
    if (dev === null || !DECIMAL.test(dev)) return this.fail(devColumn, "expected a decimal");
    if (ino === null || !DECIMAL.test(ino)) return this.fail(inoColumn, "expected a decimal");
    return [dev, ino];
  }

  json(column: string): unknown {
    const text = this.text(column);
    try {
      return JSON.parse(text);
    } catch {
      return this.fail(column, "expected JSON");
    }
  }
}

/** A text column that must be one of `known`. */
export function oneOf<T extends string>(r: RowReader, column: string, known: readonly T[]): T {
  const v = r.text(column);
  return (known as readonly string[]).includes(v)
    ? v as T
    : r.fail(column, `unknown value, expected one of ${known.join(", ")}`);
}

/** Decodes a `splits` row. */
export function splitFromRow(row: Row): SplitRecord {
  const r = new RowReader("split", String(row.id), row);
  const state = r.text("state");
  if (!isSplitState(state)) return r.fail("state", "unknown split state");
  const kind = r.text("creator_kind");
  let creator: Creator;
  if (kind === "host") {
    if (r.optText("creator_id") !== null) r.fail("creator_id", "a host creator has no id");
    creator = { kind };
  } else if (kind === "session" || kind === "job") {
    creator = { kind, id: r.text("creator_id") };
  } else {
    return r.fail("creator_kind", "unknown creator kind");
  }
  const parentSplit = r.optText("parent_split");
  const parentLabel = r.optText("parent_label");
  if ((parentSplit === null) !== (parentLabel === null)) {
    r.fail("parent_label", "parent split and label must both be set or both be null");
  }
  const gitText = r.optText("git");
  const withIgnored = r.int("with_ignored");
  if (withIgnored !== 0 && withIgnored !== 1) r.fail("with_ignored", "expected 0 or 1");
  return {
    id: r.text("id"),
    creator,
    session: r.text("session"),
    parent: parentSplit === null || parentLabel === null
      ? null
      : { split: parentSplit, label: parentLabel },
    depth: r.int("depth"),
    root: r.text("root"),
    dir: r.text("dir"),
    cwd: r.text("cwd"),
    cap: r.text("cap"),
    state,
    status: r.optInt("status"),
    reason: r.optText("reason"),
    identity: r.identity("identity_dev", "identity_ino"),
    git: gitText === null ? null : parseGit(r),
    createdMs: r.int("created_ms"),
    finishedMs: r.optInt("finished_ms"),
    timing: parseTiming(r),
    withIgnored: withIgnored === 1,
    rootId: r.optText("root_id"),
  };
}

function parseGit(r: RowReader): GitSource {
  const v = r.json("git");
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return r.fail("git", "expected an object");
  }
  const { head, objects } = v as Record<string, unknown>;
  if (head !== null && typeof head !== "string") return r.fail("git", "head must be text or null");
  if (!Array.isArray(objects) || !objects.every((o) => typeof o === "string")) {
    return r.fail("git", "objects must be a list of text");
  }
  return { head, objects };
}

function parseTiming(r: RowReader): Record<string, number> {
  const v = r.json("timing");
  if (typeof v !== "object" || v === null || Array.isArray(v)) {
    return r.fail("timing", "expected an object");
  }
  const out: Record<string, number> = {};
  for (const [k, ms] of Object.entries(v)) {
    if (typeof ms !== "number" || !Number.isFinite(ms)) {
      return r.fail("timing", `"${k}" is not a number`);
    }
    out[k] = ms;
  }
  return out;
}

const DISCARDABLE: readonly DiscardableState[] = [
  "captured",
  "rejected",
  "failed",
  "cancelled",
  "uncertain",
];

/** `host`, `session:<id>` or `job:<id>`: who discarded a branch, as stored. */
function holderOf(c: Creator): string {
  return c.kind === "host" ? "host" : `${c.kind}:${c.id}`;
}

function creatorFromHolder(r: RowReader, column: string): Creator {
  const v = r.text(column);
  if (v === "host") return { kind: "host" };
  const m = /^(session|job):(.+)$/s.exec(v);
  if (m === null) return r.fail(column, "expected host, session:<id> or job:<id>");
  return { kind: m[1] as "session" | "job", id: m[2]! };
}

/**
 * A branch's discard (migration 7): the state column keeps the state it had
 * ended in, and `discarded_ms` makes it `discarded`.
 */
function discardFromRow(r: RowReader, raw: string): BranchDiscard | null {
  const atMs = r.optInt("discarded_ms");
  if (atMs === null) return null;
  if (!(DISCARDABLE as readonly string[]).includes(raw)) {
    return r.fail("state", "a discarded branch must have ended");
  }
  return {
    after: raw as DiscardableState,
    reason: r.optText("discard_reason"),
    by: creatorFromHolder(r, "discarded_by"),
    atMs,
  };
}

/** Columns of a move to `discarded`: the state column is left as it is. */
export function discardColumns(note: DiscardNote): Record<string, SQLInputValue> {
  checkMs(note.atMs, "discard.atMs");
  check(note.reason === null || typeof note.reason === "string", `"discard.reason" must be text`);
  return {
    discarded_ms: note.atMs,
    discarded_by: holderOf(note.by),
    discard_reason: note.reason,
  };
}

/** Decodes a `branches` row. */
export function branchFromRow(row: Row): BranchRecord {
  const r = new RowReader("branch", `${String(row.split)}/${String(row.label)}`, row);
  const raw = r.text("state");
  if (!isBranchState(raw) || raw === "discarded") return r.fail("state", "unknown branch state");
  const discard = discardFromRow(r, raw);
  const state = discard === null ? raw : "discarded";
  const kind: BranchKind = oneOf(r, "kind", BRANCH_KINDS);
  const placement = r.text("placement");
  if (!isPlacement(placement)) return r.fail("placement", "expected shell-vm or kit:<command>");
  const run = r.json("run");
  if (kind === "shell" && typeof run !== "string") {
    return r.fail("run", "a shell branch runs a string");
  }
  if (kind === "argv" && !isArgv(run)) {
    return r.fail("run", "an argv branch runs a non-empty list of text");
  }
  const trust = r.optText("trust");
  if (trust !== null && trust !== "untrusted") return r.fail("trust", "expected untrusted or null");
  const mechanism = r.row.mechanism === null ? null : oneOf<Mechanism>(r, "mechanism", MECHANISMS);
  const view = r.row.view === null ? null : oneOf(r, "view", VIEWS);
  const files = r.int("files");
  if (files < 0) r.fail("files", "expected a count");
  return {
    split: r.text("split"),
    label: r.text("label"),
    index: r.int("idx"),
    kind,
    placement,
    run: run as string | string[],
    state,
    status: r.optText("status"),
    code: r.optInt("code"),
    jobId: r.optText("job_id"),
    files,
    trust,
    fork: r.text("fork"),
    forkIdentity: r.identity("fork_dev", "fork_ino"),
    forkStrategy: r.optText("fork_strategy"),
    attempt: r.optText("attempt"),
    startedMs: r.optInt("started_ms"),
    finishedMs: r.optInt("finished_ms"),
    result: r.optText("result"),
    mechanism,
    view,
    viewReason: r.optText("view_reason"),
    discard,
  };
}

/** Decodes a `capabilities` row. */
export function capabilityFromRow(row: Row): CapabilityRecord {
  const r = new RowReader("capability", String(row.id), row);
  const state = r.text("state");
  if (!isCapabilityState(state)) return r.fail("state", "unknown capability state");
  return {
    id: r.text("id"),
    split: r.text("split"),
    label: r.optText("label"),
    holder: r.text("holder"),
    state,
    createdMs: r.int("created_ms"),
    revokedMs: r.optInt("revoked_ms"),
  };
}

function isPlacement(x: string): x is Placement {
  return x === "shell-vm" || (x.startsWith("kit:") && x.length > 4);
}

function isArgv(x: unknown): x is string[] {
  return Array.isArray(x) && x.length > 0 && x.every((a) => typeof a === "string");
}

// Writing: the types already hold; these checks catch values that arrived
// through a cast or a parsed frame, before they reach the file.

function check(ok: boolean, what: string): void {
  if (!ok) throw new TypeError(`Invalid journal record: ${what}`);
}

function checkMs(v: number | null, field: string): void {
  check(v === null || (Number.isSafeInteger(v) && v >= 0), `"${field}" must be Unix milliseconds`);
}

function checkIdentity(v: DirIdentity | null, field: string): void {
  check(
    v === null ||
      (Array.isArray(v) && v.length === 2 &&
        v.every((x) => typeof x === "string" && DECIMAL.test(x))),
    `"${field}" must be [dev, ino] as decimal strings`,
  );
}

function checkGit(v: GitSource | null): void {
  check(
    v === null ||
      ((v.head === null || typeof v.head === "string") && Array.isArray(v.objects) &&
        v.objects.every((o) => typeof o === "string")),
    `"git" must be {head, objects}`,
  );
}

function checkTiming(v: Readonly<Record<string, number>>): void {
  check(
    typeof v === "object" && v !== null &&
      Object.values(v).every((ms) => typeof ms === "number" && Number.isFinite(ms)),
    `"timing" must map names to milliseconds`,
  );
}

/** A split's column values. Throws `TypeError` for a value the types forbid. */
export function splitColumns(s: SplitRecord): Record<string, SQLInputValue> {
  check(isSplitState(s.state), `unknown split state ${JSON.stringify(s.state)}`);
  check(Number.isSafeInteger(s.depth) && s.depth >= 1, `"depth" must be 1 or more`);
  check(
    s.creator.kind === "host" ||
      ((s.creator.kind === "session" || s.creator.kind === "job") &&
        typeof s.creator.id === "string"),
    `unknown creator ${JSON.stringify(s.creator)}`,
  );
  checkMs(s.createdMs, "createdMs");
  return {
    id: s.id,
    creator_kind: s.creator.kind,
    creator_id: s.creator.kind === "host" ? null : s.creator.id,
    session: s.session,
    parent_split: s.parent?.split ?? null,
    parent_label: s.parent?.label ?? null,
    depth: s.depth,
    root: s.root,
    dir: s.dir,
    cwd: s.cwd,
    cap: s.cap,
    state: s.state,
    with_ignored: s.withIgnored ? 1 : 0,
    created_ms: s.createdMs,
    ...splitPatchColumns(s),
  };
}

/** Columns for the mutable split fields present in `patch`. */
export function splitPatchColumns(
  patch: Partial<SplitRecord>,
): Record<string, SQLInputValue> {
  const out: Record<string, SQLInputValue> = {};
  if (patch.status !== undefined) {
    check(
      patch.status === null || Number.isSafeInteger(patch.status),
      `"status" must be an integer`,
    );
    out.status = patch.status;
  }
  if (patch.reason !== undefined) out.reason = patch.reason;
  if (patch.identity !== undefined) {
    checkIdentity(patch.identity, "identity");
    out.identity_dev = patch.identity?.[0] ?? null;
    out.identity_ino = patch.identity?.[1] ?? null;
  }
  if (patch.git !== undefined) {
    checkGit(patch.git);
    out.git = patch.git === null
      ? null
      : JSON.stringify({ head: patch.git.head, objects: patch.git.objects });
  }
  if (patch.finishedMs !== undefined) {
    checkMs(patch.finishedMs, "finishedMs");
    out.finished_ms = patch.finishedMs;
  }
  if (patch.timing !== undefined) {
    checkTiming(patch.timing);
    out.timing = JSON.stringify(patch.timing);
  }
  if (patch.rootId !== undefined) {
    check(patch.rootId === null || /^[0-9a-f]{40}$/.test(patch.rootId), `"rootId" must be 40 hex`);
    out.root_id = patch.rootId;
  }
  return out;
}

/** A branch's column values. Throws `TypeError` for a value the types forbid. */
export function branchColumns(b: BranchRecord): Record<string, SQLInputValue> {
  check(isBranchState(b.state), `unknown branch state ${JSON.stringify(b.state)}`);
  // A branch is discarded only by a move from its end (transitionBranch).
  check(b.state !== "discarded" && b.discard === null, "a new branch cannot be discarded");
  check(Number.isSafeInteger(b.index) && b.index >= 0, `"index" must be 0 or more`);
  check(
    (BRANCH_KINDS as readonly string[]).includes(b.kind),
    `unknown kind ${JSON.stringify(b.kind)}`,
  );
  check(
    typeof b.placement === "string" && isPlacement(b.placement),
    `"placement" must be shell-vm or kit:<command>`,
  );
  check(
    b.kind === "shell" ? typeof b.run === "string" : isArgv(b.run),
    b.kind === "shell"
      ? "a shell branch runs a string"
      : "an argv branch runs a non-empty list of text",
  );
  return {
    split: b.split,
    label: b.label,
    idx: b.index,
    kind: b.kind,
    placement: b.placement,
    run: JSON.stringify(b.run),
    state: b.state,
    fork: b.fork,
    files: 0,
    ...branchPatchColumns(b),
  };
}

/** Columns for the mutable branch fields present in `patch`. */
export function branchPatchColumns(
  patch: Partial<BranchRecord>,
): Record<string, SQLInputValue> {
  const out: Record<string, SQLInputValue> = {};
  if (patch.status !== undefined) out.status = patch.status;
  if (patch.code !== undefined) {
    check(patch.code === null || Number.isSafeInteger(patch.code), `"code" must be an integer`);
    out.code = patch.code;
  }
  if (patch.jobId !== undefined) out.job_id = patch.jobId;
  if (patch.files !== undefined) {
    check(Number.isSafeInteger(patch.files) && patch.files >= 0, `"files" must be a count`);
    out.files = patch.files;
  }
  if (patch.trust !== undefined) {
    check(patch.trust === null || patch.trust === "untrusted", `"trust" must be untrusted or null`);
    out.trust = patch.trust;
  }
  if (patch.forkIdentity !== undefined) {
    checkIdentity(patch.forkIdentity, "forkIdentity");
    out.fork_dev = patch.forkIdentity?.[0] ?? null;
    out.fork_ino = patch.forkIdentity?.[1] ?? null;
  }
  if (patch.forkStrategy !== undefined) out.fork_strategy = patch.forkStrategy;
  if (patch.attempt !== undefined) out.attempt = patch.attempt;
  if (patch.startedMs !== undefined) {
    checkMs(patch.startedMs, "startedMs");
    out.started_ms = patch.startedMs;
  }
  if (patch.finishedMs !== undefined) {
    checkMs(patch.finishedMs, "finishedMs");
    out.finished_ms = patch.finishedMs;
  }
  if (patch.result !== undefined) out.result = patch.result;
  if (patch.mechanism !== undefined) {
    check(
      patch.mechanism === null || (MECHANISMS as readonly string[]).includes(patch.mechanism),
      `"mechanism" must be cgroup, subreaper or null`,
    );
    out.mechanism = patch.mechanism;
  }
  if (patch.view !== undefined) {
    check(
      patch.view === null || (VIEWS as readonly string[]).includes(patch.view),
      `"view" must be project, fork or null`,
    );
    out.view = patch.view;
  }
  if (patch.viewReason !== undefined) out.view_reason = patch.viewReason;
  return out;
}

/** A capability's column values. */
export function capabilityColumns(c: CapabilityRecord): Record<string, SQLInputValue> {
  check(isCapabilityState(c.state), `unknown capability state ${JSON.stringify(c.state)}`);
  checkMs(c.createdMs, "createdMs");
  checkMs(c.revokedMs, "revokedMs");
  check(
    (c.state === "revoked") === (c.revokedMs !== null),
    `"revokedMs" is set exactly when revoked`,
  );
  return {
    id: c.id,
    split: c.split,
    label: c.label,
    holder: c.holder,
    state: c.state,
    created_ms: c.createdMs,
    revoked_ms: c.revokedMs,
  };
}

/** Decodes a `kits` row; a value the rules refuse is a {@linkcode JournalCorruptError}. */
export function kitFromRow(row: Row): KitRecord {
  const r = new RowReader("kit", String(row.name), row);
  const words = (column: string): string[] => {
    const v = r.json(column);
    return Array.isArray(v) && v.every((w) => typeof w === "string")
      ? v
      : r.fail(column, "expected a list of text");
  };
  const ruled = <T>(column: string, value: T, rule: (v: T) => void): T => {
    try {
      rule(value);
    } catch (error) {
      if (error instanceof KitRuleError) return r.fail(column, error.message);
      throw error;
    }
    return value;
  };
  const entrypoint = r.row.entrypoint === null ? null : words("entrypoint");
  return {
    name: ruled("name", r.text("name"), checkKitName),
    image: ruled("image", r.text("image"), checkKitImage),
    imageId: ruled("image_id", r.text("image_id"), checkKitImageId),
    entrypoint: entrypoint === null ? null : ruled("entrypoint", entrypoint, checkKitEntrypoint),
    network: ruled("network", r.text("network"), checkKitNetwork),
    env: ruled("env", words("env"), checkKitEnv),
    wallS: ruled("wall_s", r.int("wall_s"), checkKitWall),
    home: ruled("home", r.text("home"), (h) => {
      if (!h.startsWith("/")) throw new KitRuleError("expected an absolute path");
    }),
    createdMs: r.int("created_ms"),
  };
}

/** A Kit's column values. Throws {@linkcode KitRuleError} (a `TypeError`) for a value the rules forbid. */
export function kitColumns(k: KitRecord): Record<string, SQLInputValue> {
  checkKitRecord(k);
  return {
    name: k.name,
    image: k.image,
    image_id: k.imageId,
    entrypoint: k.entrypoint === null ? null : JSON.stringify(k.entrypoint),
    network: k.network,
    env: JSON.stringify(k.env),
    wall_s: k.wallS,
    home: k.home,
    created_ms: k.createdMs,
  };
}

/** Decodes a `jobs` row. */
export function jobFromRow(row: Row): JobRecord {
  const r = new RowReader("job", String(row.id), row);
  const args = r.json("args");
  if (!isArgv(args)) return r.fail("args", "expected a non-empty list of text");
  return {
    id: r.text("id"),
    kit: r.text("kit"),
    args,
    split: r.text("split"),
    label: r.text("label"),
    session: r.text("session"),
    state: oneOf<JobState>(r, "state", JOB_STATES),
    cleanup: oneOf<JobCleanup>(r, "cleanup", JOB_CLEANUPS),
    attempt: r.optText("attempt"),
    container: r.optText("container"),
    status: r.optText("status"),
    code: r.optInt("code"),
    createdMs: r.int("created_ms"),
    startedMs: r.optInt("started_ms"),
    finishedMs: r.optInt("finished_ms"),
  };
}

/** A job's column values. Throws `TypeError` for a value the types forbid. */
export function jobColumns(j: JobRecord): Record<string, SQLInputValue> {
  check(typeof j.id === "string" && j.id !== "", `"id" must be non-empty text`);
  check(typeof j.kit === "string" && j.kit !== "", `"kit" must be non-empty text`);
  check(isArgv(j.args), `"args" must be a non-empty list of text`);
  checkMs(j.createdMs, "createdMs");
  return {
    id: j.id,
    kit: j.kit,
    args: JSON.stringify(j.args),
    split: j.split,
    label: j.label,
    session: j.session,
    created_ms: j.createdMs,
    ...jobPatchColumns(j),
  };
}

/** Columns for the mutable job fields present in `patch`. */
export function jobPatchColumns(patch: JobPatch): Record<string, SQLInputValue> {
  const out: Record<string, SQLInputValue> = {};
  if (patch.state !== undefined) {
    check((JOB_STATES as readonly string[]).includes(patch.state), `unknown job state`);
    out.state = patch.state;
  }
  if (patch.cleanup !== undefined) {
    check((JOB_CLEANUPS as readonly string[]).includes(patch.cleanup), `unknown job cleanup`);
    out.cleanup = patch.cleanup;
  }
  if (patch.attempt !== undefined) out.attempt = patch.attempt;
  if (patch.container !== undefined) out.container = patch.container;
  if (patch.status !== undefined) out.status = patch.status;
  if (patch.code !== undefined) {
    check(patch.code === null || Number.isSafeInteger(patch.code), `"code" must be an integer`);
    out.code = patch.code;
  }
  if (patch.startedMs !== undefined) {
    checkMs(patch.startedMs, "startedMs");
    out.started_ms = patch.startedMs;
  }
  if (patch.finishedMs !== undefined) {
    checkMs(patch.finishedMs, "finishedMs");
    out.finished_ms = patch.finishedMs;
  }
  return out;
}
