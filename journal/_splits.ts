/**
 * The journal's split records: create, read, update, the compare-and-set of
 * a split's state, listing, counting and deletion. Each function takes the
 * open {@linkcode Connection}; `Journal` (journal.ts) is their public face.
 *
 * @module
 */

import { splitColumns, splitFromRow, splitPatchColumns } from "./_codec.ts";
import {
  checkStates,
  type Connection,
  mutable,
  type Params,
  splitNotFound,
} from "./_connection.ts";
import {
  isSplitState,
  SPLIT_MUTABLE,
  type SplitCounts,
  type SplitFilter,
  type SplitPatch,
  type SplitRecord,
  type SplitState,
} from "./records.ts";
import { splitMayMove } from "../model/split_state.ts";

/** Records a new split. @throws {Deno.errors.AlreadyExists} for a known id. */
export function createSplit(c: Connection, rec: SplitRecord): void {
  const cols = splitColumns(rec);
  c.write("create split", () => {
    if (c.get("SELECT 1 AS x FROM splits WHERE id = :id", { id: rec.id }) !== undefined) {
      throw new Deno.errors.AlreadyExists(`Split already exists: "${rec.id}"`);
    }
    c.insert("splits", cols);
  });
}

/** Reads one split, or null. */
export function getSplit(c: Connection, id: string): SplitRecord | null {
  return c.read("read split", () => {
    const row = c.get("SELECT * FROM splits WHERE id = :id", { id });
    return row === undefined ? null : splitFromRow(row);
  });
}

/**
 * Changes a split's mutable fields ({@linkcode SPLIT_MUTABLE}); its state
 * changes only through `Journal.transitionSplit`.
 *
 * @throws {Deno.errors.NotFound} for an unknown split.
 * @throws {TypeError} for a field that is not mutable.
 */
export function updateSplit(c: Connection, id: string, patch: SplitPatch): void {
  const cols = splitPatchColumns(mutable(patch, SPLIT_MUTABLE, "split"));
  c.write("update split", () => {
    if (!c.update("splits", cols, "id = :k_id", { k_id: id })) throw splitNotFound(id);
  });
}

/**
 * Compare-and-set of a split's state: moves it to `to` (with `patch`) only
 * if its state is one of `from`. Returns false, changing nothing, otherwise.
 *
 * @throws {Deno.errors.NotFound} for an unknown split.
 */
export function transitionSplit(
  c: Connection,
  id: string,
  from: readonly SplitState[],
  to: SplitState,
  patch: SplitPatch = {},
): boolean {
  checkStates(from, to, isSplitState, "split", splitMayMove);
  const cols = { ...splitPatchColumns(mutable(patch, SPLIT_MUTABLE, "split")), state: to };
  return c.write("transition split", () => {
    const current = c.get("SELECT state FROM splits WHERE id = :id", { id });
    if (current === undefined) throw splitNotFound(id);
    if (!(from as readonly unknown[]).includes(current.state)) return false;
    return c.update("splits", cols, "id = :k_id", { k_id: id });
  });
}

/** Adds or replaces entries of a split's `timing` (for example `capture:<label>`). */
export function recordTiming(
  c: Connection,
  id: string,
  entries: Readonly<Record<string, number>>,
): void {
  c.write("record timing", () => {
    const split = getSplit(c, id);
    if (split === null) throw splitNotFound(id);
    const cols = splitPatchColumns({ timing: { ...split.timing, ...entries } });
    c.update("splits", cols, "id = :k_id", { k_id: id });
  });
}

/** The splits matching `filter`, newest first. */
export function listSplits(c: Connection, filter: SplitFilter = {}): SplitRecord[] {
  const where: string[] = [];
  const params: Params = {};
  if (filter.creator !== undefined) {
    where.push("creator_kind = :ck");
    params.ck = filter.creator.kind;
    if (filter.creator.kind !== "host") {
      where.push("creator_id = :cid");
      params.cid = filter.creator.id;
    }
  }
  if (filter.states !== undefined) {
    if (filter.states.length === 0) return [];
    filter.states.forEach((s, i) => {
      if (!isSplitState(s)) throw new TypeError(`Unknown split state: ${JSON.stringify(s)}`);
      params[`s${i}`] = s;
    });
    where.push(`state IN (${filter.states.map((_, i) => `:s${i}`).join(", ")})`);
  }
  if (filter.parent !== undefined) {
    where.push("parent_split = :parent");
    params.parent = filter.parent;
  }
  params.lim = filter.limit ?? -1;
  const sql = `SELECT * FROM splits ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
    ORDER BY created_ms DESC, rowid DESC LIMIT :lim`;
  return c.read("list splits", () => c.all(sql, params).map((r) => splitFromRow(r)));
}

/**
 * Deletes a split's record with its branches and capabilities
 * (`marsh splits rm`, after its directory is gone). No tombstone is kept:
 * the spec keeps a record "until splits rm", and child splits keep the
 * parent's id in their own `parent`. Returns false for an unknown split.
 *
 * @throws {Deno.errors.Busy} while the split is in `run` (a process of
 *   its branches may live) or any of its capabilities is live.
 */
export function deleteSplit(c: Connection, id: string): boolean {
  return c.write("delete split", () => {
    const row = c.get("SELECT state FROM splits WHERE id = :id", { id });
    if (row === undefined) return false;
    if (row.state === "run") {
      throw new Deno.errors.Busy(`Cannot delete split "${id}": it is in state "${row.state}"`);
    }
    const live = c.get(
      "SELECT id FROM capabilities WHERE split = :id AND state = 'live' LIMIT 1",
      { id },
    );
    if (live !== undefined) {
      throw new Deno.errors.Busy(
        `Cannot delete split "${id}": its capability "${String(live.id)}" is live`,
      );
    }
    c.run("DELETE FROM splits WHERE id = :id", { id });
    return true;
  });
}

/** What `marsh status` counts: splits in `run`, `await` and `kept`. */
export function counts(c: Connection): SplitCounts {
  return c.read("count splits", () => {
    const n: Record<string, number> = {};
    for (
      const row of c.all(
        "SELECT state, count(*) AS n FROM splits WHERE state IN ('run', 'await', 'kept') GROUP BY state",
      )
    ) n[String(row.state)] = Number(row.n);
    return { active: n.run ?? 0, awaiting: n.await ?? 0, kept: n.kept ?? 0 };
  });
}
