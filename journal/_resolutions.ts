/**
 * The journal's resolution records (docs/resolution.md, "The commands"):
 * one row per merge, promote and undo, written `applying` before the
 * split-filesystem service applies it and settled once it answers (or at
 * the next start). Each function takes the open {@linkcode Connection};
 * `Journal` (journal.ts) is their public face.
 *
 * @module
 */

import type { SQLInputValue } from "node:sqlite";
import { oneOf, RowReader } from "./_codec.ts";
import type { Connection, Params, Row } from "./_connection.ts";
import {
  type CheckoutOf,
  type Creator,
  RESOLUTION_KINDS,
  RESOLUTION_STATES,
  type ResolutionEnd,
  type ResolutionKind,
  type ResolutionRecord,
  type ResolutionState,
} from "./records.ts";

const SCOPES = ["git", "filesystem", "paths", "promote", "undo", "checkout"] as const;

function resolutionNotFound(id: string): Deno.errors.NotFound {
  return new Deno.errors.NotFound(`Resolution not found: "${id}"`);
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new TypeError(`Invalid resolution record: ${what}`);
}

function count(n: number, field: string): number {
  check(Number.isSafeInteger(n) && n >= 0, `"${field}" must be a count`);
  return n;
}

/** Decodes a `resolutions` row. */
export function resolutionFromRow(row: Row): ResolutionRecord {
  const r = new RowReader("resolution", String(row.id), row);
  const whoKind = oneOf(r, "who_kind", ["host", "session", "job"] as const);
  const who: Creator = whoKind === "host"
    ? { kind: "host" }
    : { kind: whoKind, id: r.text("who_id") };
  return {
    id: r.text("id"),
    split: r.text("split"),
    label: r.text("label"),
    kind: oneOf<ResolutionKind>(r, "kind", RESOLUTION_KINDS),
    scope: oneOf(r, "scope", SCOPES),
    root: r.text("root"),
    who,
    state: oneOf<ResolutionState>(r, "state", RESOLUTION_STATES),
    createdMs: r.int("created_ms"),
    finishedMs: r.optInt("finished_ms"),
    undoes: r.optText("undoes"),
    undoneBy: r.optText("undone_by"),
    summary: {
      take: r.int("takes"),
      delete: r.int("deletes"),
      converged: r.int("converged"),
      conflict: r.int("conflicts"),
    },
    trees: {
      base: r.optText("base_tree"),
      source: r.optText("source_tree"),
      branch: r.optText("branch_tree"),
      result: r.optText("result_tree"),
    },
    changed: r.optInt("changed"),
    message: r.optText("message"),
    // Only a checkout and its undo carry it: the records of a split's branch stay as they were.
    ...checkoutOf(r),
  };
}

function checkoutOf(r: RowReader): { checkout?: CheckoutOf } {
  const session = r.optText("checkout_session");
  if (session === null) return {};
  return {
    checkout: {
      session,
      name: r.text("checkout_name"),
      checkpoint: r.text("checkout_checkpoint"),
    },
  };
}

function columns(rec: ResolutionRecord): Record<string, SQLInputValue> {
  check(rec.state === "applying", `a new resolution is "applying"`);
  check(rec.finishedMs === null && rec.undoneBy === null, `a new resolution has not ended`);
  check(Number.isSafeInteger(rec.createdMs) && rec.createdMs >= 0, `"createdMs"`);
  check((rec.kind === "undo") === (rec.undoes !== null), `only an undo undoes`);
  check(
    rec.kind !== "checkout" || (rec.checkout ?? null) !== null,
    `a checkout names its checkpoint`,
  );
  return {
    id: rec.id,
    split: rec.split,
    label: rec.label,
    kind: rec.kind,
    scope: rec.scope,
    root: rec.root,
    who_kind: rec.who.kind,
    who_id: rec.who.kind === "host" ? null : rec.who.id,
    state: rec.state,
    created_ms: rec.createdMs,
    finished_ms: null,
    undoes: rec.undoes,
    undone_by: null,
    takes: count(rec.summary.take, "summary.take"),
    deletes: count(rec.summary.delete, "summary.delete"),
    converged: count(rec.summary.converged, "summary.converged"),
    conflicts: count(rec.summary.conflict, "summary.conflict"),
    base_tree: rec.trees.base,
    source_tree: rec.trees.source,
    branch_tree: rec.trees.branch,
    result_tree: rec.trees.result,
    changed: null,
    message: rec.message,
    checkout_session: rec.checkout?.session ?? null,
    checkout_name: rec.checkout?.name ?? null,
    checkout_checkpoint: rec.checkout?.checkpoint ?? null,
  };
}

/**
 * Records a resolution about to be applied (state `applying`).
 *
 * @throws {Deno.errors.AlreadyExists} for a known id
 * @throws {TypeError} for a record that is not a new one
 */
export function addResolution(c: Connection, rec: ResolutionRecord): void {
  const cols = columns(rec);
  c.write("add resolution", () => {
    if (c.get("SELECT 1 AS x FROM resolutions WHERE id = :id", { id: rec.id }) !== undefined) {
      throw new Deno.errors.AlreadyExists(`Resolution already exists: "${rec.id}"`);
    }
    c.insert("resolutions", cols);
  });
}

/** Reads one resolution, or null. */
export function getResolution(c: Connection, id: string): ResolutionRecord | null {
  return c.read("read resolution", () => {
    const row = c.get("SELECT * FROM resolutions WHERE id = :id", { id });
    return row === undefined ? null : resolutionFromRow(row);
  });
}

/** Which resolutions {@linkcode listResolutions} returns; every given condition must hold. */
export interface ResolutionFilter {
  readonly state?: ResolutionState;
  readonly root?: string;
  /** Only the ones this creator asked for. */
  readonly who?: Creator;
  /** At most this many, the newest. */
  readonly limit?: number;
}

/** The resolutions matching `filter`, newest first. */
export function listResolutions(c: Connection, filter: ResolutionFilter = {}): ResolutionRecord[] {
  const where: string[] = [];
  const params: Params = {};
  if (filter.state !== undefined) {
    where.push("state = :state");
    params.state = filter.state;
  }
  if (filter.root !== undefined) {
    where.push("root = :root");
    params.root = filter.root;
  }
  if (filter.who !== undefined) {
    where.push("who_kind = :wk");
    params.wk = filter.who.kind;
    if (filter.who.kind !== "host") {
      where.push("who_id = :wi");
      params.wi = filter.who.id;
    }
  }
  const limit = filter.limit === undefined ? "" : ` LIMIT ${count(filter.limit, "limit")}`;
  const sql = `SELECT * FROM resolutions ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
    ORDER BY created_ms DESC, id DESC${limit}`;
  return c.read("list resolutions", () => c.all(sql, params).map(resolutionFromRow));
}

/**
 * Settles a resolution in `applying`: `applied` with the count of paths
 * changed, or `failed` with why. An applied undo marks the resolution it
 * undoes `undone` in the same transaction.
 *
 * @returns false, changing nothing, when the resolution is not `applying`
 * @throws {Deno.errors.NotFound} for an unknown resolution
 */
export function endResolution(c: Connection, id: string, end: ResolutionEnd): boolean {
  check(Number.isSafeInteger(end.finishedMs) && end.finishedMs >= 0, `"finishedMs"`);
  const cols: Params = end.state === "applied"
    ? { state: "applied", finished_ms: end.finishedMs, changed: count(end.changed, "changed") }
    : { state: "failed", finished_ms: end.finishedMs, message: end.message };
  return c.write("end resolution", () => {
    const rec = getResolution(c, id);
    if (rec === null) throw resolutionNotFound(id);
    if (rec.state !== "applying") return false;
    c.update("resolutions", cols, "id = :k_id", { k_id: id });
    if (end.state === "applied" && rec.undoes !== null) {
      c.run(
        "UPDATE resolutions SET state = 'undone', undone_by = :by WHERE id = :id AND state = 'applied'",
        { by: id, id: rec.undoes },
      );
    }
    return true;
  });
}
