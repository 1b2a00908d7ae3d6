/**
 * The `--dry-run` forms of a resolution plan (docs/resolution.md, "The plan
 * schema"): the JSON document `marsh.merge.plan/v1`, its one parser, and
 * the text form, one line per path (`take`, `delete`, `converged`,
 * `conflict`) and a summary.
 *
 * The schema is stable: a field is never renamed or given another meaning
 * within `v1`; a reader ignores fields it does not know.
 *
 * Pure: needs no permission.
 *
 * @module
 */

import {
  type BytesFrom,
  checkPlan,
  countOps,
  isClean,
  type MergePlan,
  OPS,
  type PlanEntry,
  PlanError,
  type Present,
  type Scope,
  SCOPES,
  type Signature,
} from "./resolution_plan.ts";

/** The schema name and version every plan document carries. */
export const PLAN_SCHEMA = "marsh.merge.plan/v1";

/** A signature in JSON: the type, and for a file its mode as four octal digits. */
export type SignatureJson =
  | { type: "absent" }
  | { type: "file"; mode: string; blob: string }
  | { type: "symlink"; target: string }
  | { type: "dir" };

/** One path in JSON. */
export type EntryJson =
  | { path: string; action: "take"; before: SignatureJson; after: SignatureJson; bytes?: string }
  | { path: string; action: "delete"; before: SignatureJson }
  | { path: string; action: "converged"; state: SignatureJson }
  | {
    path: string;
    action: "conflict";
    base: SignatureJson;
    source: SignatureJson;
    branch: SignatureJson;
    reason: string;
  };

/** The whole document. */
export interface PlanJson {
  schema: typeof PLAN_SCHEMA;
  scope: Scope;
  /** No conflict: the plan can be applied. */
  clean: boolean;
  trees: {
    base: string | null;
    source: string | null;
    branch: string | null;
    result: string | null;
  };
  summary: { take: number; delete: number; converged: number; conflict: number };
  paths: EntryJson[];
}

function octal(mode: number): string {
  return mode.toString(8).padStart(4, "0");
}

/** A signature as the plan document writes it. */
export function signatureToJson(s: Signature): SignatureJson {
  switch (s.kind) {
    case "absent":
    case "dir":
      return { type: s.kind };
    case "file":
      return { type: "file", mode: octal(s.mode), blob: s.blob };
    case "symlink":
      return { type: "symlink", target: s.target };
  }
}

function entryJson(e: PlanEntry): EntryJson {
  switch (e.op) {
    case "take":
      return {
        path: e.path,
        action: "take",
        before: signatureToJson(e.before),
        after: signatureToJson(e.after),
        ...(e.bytes === undefined ? {} : { bytes: e.bytes }),
      };
    case "delete":
      return { path: e.path, action: "delete", before: signatureToJson(e.before) };
    case "converged":
      return { path: e.path, action: "converged", state: signatureToJson(e.state) };
    case "conflict":
      return {
        path: e.path,
        action: "conflict",
        base: signatureToJson(e.base),
        source: signatureToJson(e.source),
        branch: signatureToJson(e.branch),
        reason: e.reason,
      };
  }
}

/**
 * The plan as a `marsh.merge.plan/v1` document.
 *
 * @throws {PlanError} when the plan is malformed (nothing malformed is printed)
 */
export function planToJson(plan: MergePlan): PlanJson {
  checkPlan(plan);
  return {
    schema: PLAN_SCHEMA,
    scope: plan.scope,
    clean: isClean(plan),
    trees: { ...plan.trees },
    summary: countOps(plan),
    paths: plan.entries.map(entryJson),
  };
}

/** Reads one field of a plan document, naming where a wrong one is. */
class Reader {
  /** Where, or how to say it: worded only for an error (a plan may hold thousands of entries). */
  constructor(readonly where: string | (() => string)) {}

  fail(what: string): never {
    throw new PlanError([`${typeof this.where === "string" ? this.where : this.where()}: ${what}`]);
  }

  object(x: unknown): Record<string, unknown> {
    if (typeof x !== "object" || x === null || Array.isArray(x)) this.fail("expected an object");
    return x as Record<string, unknown>;
  }

  string(o: Record<string, unknown>, key: string): string {
    const v = o[key];
    if (typeof v !== "string") this.fail(`"${key}" must be a string`);
    return v;
  }

  idOrNull(o: Record<string, unknown>, key: string): string | null {
    const v = o[key];
    if (v === null) return null;
    if (typeof v !== "string") this.fail(`"${key}" must be a tree id or null`);
    return v;
  }
}

/**
 * Reads a signature written by {@linkcode signatureToJson}.
 *
 * @throws {PlanError} naming `where` when it is malformed
 */
export function parseSignatureJson(x: unknown, where: string): Signature {
  return signatureAt(x, where);
}

function signatureAt(x: unknown, where: string | (() => string)): Signature {
  const r = new Reader(where);
  const o = r.object(x);
  const type = r.string(o, "type");
  switch (type) {
    case "absent":
    case "dir":
      return { kind: type };
    case "file": {
      const mode = r.string(o, "mode");
      if (!/^[0-7]{3,4}$/.test(mode)) r.fail(`"mode" must be octal permission bits`);
      return { kind: "file", mode: parseInt(mode, 8), blob: r.string(o, "blob") };
    }
    case "symlink":
      return { kind: "symlink", target: r.string(o, "target") };
    default:
      return r.fail(`unknown type ${JSON.stringify(type)}`);
  }
}

function present(s: Signature, r: Reader, key: string): Present {
  if (s.kind === "absent") r.fail(`"${key}" cannot be absent`);
  return s;
}

function parseEntry(x: unknown, i: number): PlanEntry {
  const r = new Reader(() => `paths[${i}]`);
  const o = r.object(x);
  const path = r.string(o, "path");
  const action = r.string(o, "action");
  const sig = (key: string) => signatureAt(o[key], () => `paths[${i}].${key}`);
  switch (action) {
    case "take": {
      const bytes = o.bytes;
      if (bytes !== undefined && bytes !== "store" && bytes !== "branch") {
        r.fail(`"bytes" must be "store" or "branch"`);
      }
      const after = present(sig("after"), r, "after");
      return bytes === undefined
        ? { op: "take", path, before: sig("before"), after }
        : { op: "take", path, before: sig("before"), after, bytes: bytes as BytesFrom };
    }
    case "delete":
      return { op: "delete", path, before: present(sig("before"), r, "before") };
    case "converged":
      return { op: "converged", path, state: sig("state") };
    case "conflict":
      return {
        op: "conflict",
        path,
        base: sig("base"),
        source: sig("source"),
        branch: sig("branch"),
        reason: r.string(o, "reason"),
      };
    default:
      return r.fail(`unknown action ${JSON.stringify(action)}`);
  }
}

/**
 * Reads a `marsh.merge.plan/v1` document back into a checked plan. The
 * derived fields (`clean`, `summary`) must agree with the paths.
 *
 * @throws {PlanError} for another schema, a malformed field or a malformed plan
 */
export function parsePlanJson(x: unknown): MergePlan {
  const r = new Reader("plan");
  const o = r.object(x);
  const schema = o.schema;
  if (schema !== PLAN_SCHEMA) {
    r.fail(`schema is ${JSON.stringify(schema)}, expected "${PLAN_SCHEMA}"`);
  }
  const scope = r.string(o, "scope");
  if (!SCOPES.includes(scope as Scope)) r.fail(`unknown scope ${JSON.stringify(scope)}`);
  const t = new Reader("plan.trees");
  const trees = t.object(o.trees);
  if (!Array.isArray(o.paths)) r.fail(`"paths" must be an array`);
  const plan = checkPlan({
    scope: scope as Scope,
    trees: {
      base: t.idOrNull(trees, "base"),
      source: t.idOrNull(trees, "source"),
      branch: t.idOrNull(trees, "branch"),
      result: t.idOrNull(trees, "result"),
    },
    entries: (o.paths as unknown[]).map(parseEntry),
  });
  if (o.clean !== isClean(plan)) r.fail(`"clean" does not match the paths`);
  const summary = new Reader("plan.summary").object(o.summary);
  const counts = countOps(plan);
  for (const op of OPS) {
    if (summary[op] !== counts[op]) r.fail(`"summary.${op}" does not match the paths`);
  }
  return plan;
}

/** A path as the text form shows it: bare when plain, JSON-quoted when it has spaces at its ends or control characters. */
export function shownPath(path: string): string {
  // deno-lint-ignore no-control-regex
  return /[\x00-\x1f\x7f"\\]|^\s|\s$/.test(path) ? JSON.stringify(path) : path;
}

function describe(s: Signature): string {
  switch (s.kind) {
    case "absent":
      return "absent";
    case "dir":
      return "directory";
    case "file":
      return `file ${octal(s.mode)} ${s.blob.slice(0, 10)}`;
    case "symlink":
      return `symlink -> ${shownPath(s.target)}`;
  }
}

function line(e: PlanEntry): string {
  const head = `${e.op.padEnd(9)} ${shownPath(e.path)}`;
  switch (e.op) {
    case "take":
      return `${head} (${describe(e.after)})`;
    case "delete":
    case "converged":
      return head;
    case "conflict":
      return `${head}: ${e.reason} (base ${describe(e.base)}; source ${
        describe(e.source)
      }; branch ${describe(e.branch)})`;
  }
}

/**
 * The text form of a dry run: one line per path, then a summary that says
 * whether the plan would apply.
 *
 * @throws {PlanError} when the plan is malformed
 */
export function renderPlanText(plan: MergePlan): string {
  checkPlan(plan);
  const n = countOps(plan);
  const lines = plan.entries.map(line);
  const counts =
    `${n.take} to take, ${n.delete} to delete, ${n.converged} converged, ${n.conflict} ${
      n.conflict === 1 ? "conflict" : "conflicts"
    }`;
  lines.push(
    isClean(plan)
      ? `${counts}: the ${plan.scope} plan applies cleanly`
      : `${counts}: nothing would be changed`,
  );
  return lines.join("\n") + "\n";
}
