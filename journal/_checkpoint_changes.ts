/**
 * The paths an operation changed, as its capture listed them (docs/checkpoints.md
 * "Rollback, fork, log"): `marsh log` shows them. Informational: no checkpoint,
 * head or root depends on them, so they are written in their own transaction
 * once the capture is known, before the intent.
 *
 * @module
 */

import type { Connection } from "./_connection.ts";
import { requireOperation } from "./_checkpoint_rows.ts";

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
