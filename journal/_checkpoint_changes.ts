/**
 * The paths an operation changed, as its capture listed them (docs/checkpoints.md
 * "Rollback, fork, log"), and the view it ran in (`project` or `relative`):
 * `marsh log` shows them. Informational: no checkpoint, head or root depends
 * on them: the view is written before the launch, the paths in the intent's
 * own transaction (`CheckpointJournal.recordIntent`), so the publication
 * keeps its three durability steps.
 *
 * @module
 */

import type { Connection } from "./_connection.ts";
import { requireOperation } from "./_checkpoint_rows.ts";
import type { DrainProof } from "../model/op_receipt.ts";

/** One changed path, relative to the project's root. */
export interface ChangedPath {
  readonly path: string;
  /** `added`, `modified`, `deleted` or `type` (a file became a directory, ...). */
  readonly change: string;
}

/** What an operation's capture listed. */
export interface OperationChanges {
  /** How many paths changed in all. */
  readonly changed: number;
  /** Whether {@linkcode OperationChanges.paths} lists only the first of them. */
  readonly truncated: boolean;
  readonly paths: readonly ChangedPath[];
}

/** See `CheckpointJournal.recordChanges`. */
export function recordChanges(c: Connection, id: string, ch: OperationChanges): void {
  if (!Number.isSafeInteger(ch.changed) || ch.changed < 0 || ch.paths.length > ch.changed) {
    throw new TypeError(`Invalid changed count ${ch.changed} for ${ch.paths.length} paths`);
  }
  c.write("record operation changes", () => {
    requireOperation(c, id);
    c.run(
      `INSERT INTO operation_changes (operation, changed, truncated, paths)
         VALUES (:id, :changed, :truncated, :paths) ON CONFLICT (operation) DO NOTHING`,
      {
        id,
        changed: ch.changed,
        truncated: ch.truncated ? 1 : 0,
        paths: JSON.stringify(ch.paths.map((p) => ({ path: p.path, change: p.change }))),
      },
    );
  });
}

/** See `CheckpointJournal.changesOf`. */
export function changesOf(c: Connection, id: string): OperationChanges | null {
  const row = c.get("SELECT * FROM operation_changes WHERE operation = :id", { id });
  if (row === undefined) return null;
  return {
    changed: Number(row.changed),
    truncated: row.truncated === 1,
    paths: JSON.parse(String(row.paths)) as ChangedPath[],
  };
}

/** How an operation saw the project: its overlay at the project's path, or its cwd only. */
export interface OperationView {
  readonly view: "project" | "relative";
  /** Why (the daemon's shell view reason). */
  readonly reason: string;
}

export type { DrainProof } from "../model/op_receipt.ts";

/** An operation's view as kept, with its drain proof once launched (else null). */
export interface OperationViewRecord extends OperationView {
  readonly drain: DrainProof | null;
}

/** See `CheckpointJournal.recordView`. */
export function recordView(c: Connection, id: string, v: OperationView): void {
  if (v.view !== "project" && v.view !== "relative") {
    throw new TypeError(`Invalid operation view: "${v.view}"`);
  }
  c.write("record operation view", () => {
    requireOperation(c, id);
    c.run(
      `INSERT INTO operation_views (operation, view, reason) VALUES (:id, :view, :reason)
         ON CONFLICT (operation) DO NOTHING`,
      { id, view: v.view, reason: v.reason },
    );
  });
}

/**
 * Keeps what will prove `id`'s process tree gone (the worker's launch says
 * which), on its view's row; no row (never given a view): nothing.
 */
export function recordDrain(c: Connection, id: string, drain: DrainProof): void {
  if (drain !== "cgroup" && drain !== "subreaper") {
    throw new TypeError(`Invalid drain proof: "${drain}"`);
  }
  c.write("record operation drain", () => {
    c.run("UPDATE operation_views SET drain = :drain WHERE operation = :id", { id, drain });
  });
}

/** See `CheckpointJournal.viewOf`. */
export function viewOf(c: Connection, id: string): OperationViewRecord | null {
  const row = c.get("SELECT * FROM operation_views WHERE operation = :id", { id });
  if (row === undefined) return null;
  return {
    view: row.view === "relative" ? "relative" : "project",
    reason: String(row.reason),
    drain: row.drain === "cgroup" || row.drain === "subreaper" ? row.drain : null,
  };
}
