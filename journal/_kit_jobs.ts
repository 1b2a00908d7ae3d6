/**
 * The journal's Kit registry and Kit job records. Each function takes the
 * open {@linkcode Connection}; `Journal` (journal.ts) is their public face.
 *
 * @module
 */

import { jobColumns, jobFromRow, jobPatchColumns, kitColumns, kitFromRow } from "./_codec.ts";
import { type Connection, mutable, type Params } from "./_connection.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { JOB_MUTABLE, type JobFilter, type JobPatch, type JobRecord } from "./records.ts";

/**
 * Registers a Kit command. With `replace`, an existing registration of
 * the same name is replaced in the same transaction and returned.
 *
 * @returns the registration it replaced, or null
 * @throws {Deno.errors.AlreadyExists} for a registered name without `replace`.
 * @throws {KitRuleError} (a `TypeError`) for a field that breaks its rule.
 */
export function addKit(
  c: Connection,
  rec: KitRecord,
  options: { readonly replace?: boolean } = {},
): KitRecord | null {
  const cols = kitColumns(rec);
  return c.write("add kit", () => {
    const old = getKit(c, rec.name);
    if (old !== null) {
      if (!options.replace) {
        throw new Deno.errors.AlreadyExists(`Kit already registered: "${rec.name}"`);
      }
      c.run("DELETE FROM kits WHERE name = :name", { name: rec.name });
    }
    c.insert("kits", cols);
    return old;
  });
}

/** Reads one Kit registration, or null. */
export function getKit(c: Connection, name: string): KitRecord | null {
  return c.read("read kit", () => {
    const row = c.get("SELECT * FROM kits WHERE name = :name", { name });
    return row === undefined ? null : kitFromRow(row);
  });
}

/** Every registered Kit, by name. */
export function listKits(c: Connection): KitRecord[] {
  return c.read(
    "list kits",
    () => c.all("SELECT * FROM kits ORDER BY name").map((r) => kitFromRow(r)),
  );
}

/**
 * Forgets a Kit registration (its home directory is not the journal's
 * business and stays where it is).
 *
 * @returns the registration removed, or null for an unknown name
 */
export function removeKit(c: Connection, name: string): KitRecord | null {
  return c.write("remove kit", () => {
    const old = getKit(c, name);
    if (old !== null) c.run("DELETE FROM kits WHERE name = :name", { name });
    return old;
  });
}

/** Records a Kit job. @throws {Deno.errors.AlreadyExists} for a known id. */
export function addJob(c: Connection, rec: JobRecord): void {
  const cols = jobColumns(rec);
  c.write("add job", () => {
    if (c.get("SELECT 1 AS x FROM jobs WHERE id = :id", { id: rec.id }) !== undefined) {
      throw new Deno.errors.AlreadyExists(`Job already exists: "${rec.id}"`);
    }
    c.insert("jobs", cols);
  });
}

/** Reads one job, or null. */
export function getJob(c: Connection, id: string): JobRecord | null {
  return c.read("read job", () => {
    const row = c.get("SELECT * FROM jobs WHERE id = :id", { id });
    return row === undefined ? null : jobFromRow(row);
  });
}

/**
 * Changes a job's mutable fields ({@linkcode JOB_MUTABLE}).
 *
 * @throws {Deno.errors.NotFound} for an unknown job.
 */
export function updateJob(c: Connection, id: string, patch: JobPatch): void {
  const cols = jobPatchColumns(mutable(patch, JOB_MUTABLE, "job"));
  c.write("update job", () => {
    if (!c.update("jobs", cols, "id = :k_id", { k_id: id })) {
      throw new Deno.errors.NotFound(`Job not found: "${id}"`);
    }
  });
}

/** The jobs matching `filter`, newest first (a split's jobs in declaration order). */
export function listJobs(c: Connection, filter: JobFilter = {}): JobRecord[] {
  const where: string[] = [];
  const params: Params = {};
  if (filter.kit !== undefined) {
    where.push("j.kit = :kit");
    params.kit = filter.kit;
  }
  if (filter.split !== undefined) {
    where.push("j.split = :split");
    params.split = filter.split;
  }
  if (filter.cleanups !== undefined) {
    if (filter.cleanups.length === 0) return [];
    filter.cleanups.forEach((c, i) => params[`c${i}`] = c);
    where.push(`j.cleanup IN (${filter.cleanups.map((_, i) => `:c${i}`).join(", ")})`);
  }
  if (filter.creatorSession !== undefined) {
    where.push(
      "j.split IN (SELECT id FROM splits WHERE creator_kind = 'session' AND creator_id = :cs)",
    );
    params.cs = filter.creatorSession;
  }
  if (filter.creatorJob !== undefined) {
    where.push(
      "j.split IN (SELECT id FROM splits WHERE creator_kind = 'job' AND creator_id = :cj)",
    );
    params.cj = filter.creatorJob;
  }
  const sql = `SELECT j.* FROM jobs j ${where.length > 0 ? `WHERE ${where.join(" AND ")}` : ""}
    ORDER BY j.created_ms DESC, j.rowid`;
  return c.read("list jobs", () => c.all(sql, params).map((r) => jobFromRow(r)));
}
