/**
 * The daemon's journal (docs/rules.md "States and records"): splits,
 * branches, capabilities and the Kit registry in one owner-only SQLite file,
 * `$MARSH_HOME/journal.db`, through `node:sqlite`.
 *
 * - Durable: WAL with `synchronous=FULL`; a call that returned survives
 *   `kill -9` of the daemon. Each operation is one `BEGIN IMMEDIATE`
 *   transaction, and the daemon makes it before the effect it describes.
 * - Versioned: forward migrations in `migrations.ts`; a journal from a newer
 *   marsh is refused with both versions named and left unchanged.
 * - Strict: state strings are checked by SQLite on write and by the code on
 *   read; an unknown value is an error, never coerced.
 * - Compare-and-set: states change only through `transitionSplit` and
 *   `transitionBranch`, which refuse when the current state is not in `from`.
 * - Restart: `recoverAfterRestart` settles every unfinished record in one
 *   transaction and resumes nothing.
 * - Removal: `deleteSplit` (for `marsh splits rm`) deletes the split with its
 *   branches and capabilities; no tombstone is kept.
 *
 * Needs `--allow-read` and `--allow-write` on the journal's directory.
 *
 * @example
 * ```ts
 * import { Journal } from "./mod.ts";
 * using journal = Journal.open(`${Deno.makeTempDirSync()}/journal.db`);
 * journal.counts(); // { active: 0, awaiting: 0, kept: 0 }
 * ```
 *
 * @module
 */

export { BUSY_TIMEOUT_MS, Journal, type JournalSettings, RESTART_REASON } from "./journal.ts";
export { JournalCorruptError, JournalError, JournalVersionError } from "./errors.ts";
export { type Migration, MIGRATIONS, SCHEMA_VERSION } from "./migrations.ts";
export * from "./records.ts";
export * from "../model/kit_rules.ts";
export type { ResolutionFilter } from "./_resolutions.ts";
export {
  type BindResult,
  CheckpointJournal,
  type LogEntry,
  type NewFork,
  type NewOperation,
  type NewSession,
  type RecordResult,
  type RollbackResult,
  type StaleHead,
} from "./checkpoints.ts";
