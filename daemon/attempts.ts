/**
 * The per-attempt dirs of the control dir (`attempts/<split>-<label>-<4>`:
 * the branch's stdout and stderr, a Kit job's `/run/marsh`). A dir is
 * removed once its output is published into the split's `out/`; one whose
 * publish failed, or whose branch ended uncertain, is kept while its split
 * is: it may hold the only copy of that output. These go with their split,
 * and {@linkcode sweepAttempts} takes what a crash or an older daemon left.
 *
 * Needs read and write on the control dir.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BranchRecord, SplitRecord } from "../journal/records.ts";
import { ATTEMPTS_DIR } from "../protocol/control_dir.ts";
import type { Log } from "./log.ts";

/** `<split id>-<label>-<suffix>`: the split id is the part before the first `-`. */
const ATTEMPT_NAME = /^([a-z0-9]{1,64})-./;

/** Removes one attempt dir; a failure is logged, never thrown (the split's record matters more). */
export function removeAttemptDir(dir: string, log: Log, who: string): boolean {
  try {
    Deno.removeSync(dir, { recursive: true });
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return true;
    log.info(`${who}: ${dir} not removed: ${error}`);
    return false;
  }
}

/** Removes the attempt dirs of a split's branches: call once the split itself is removed. */
export function removeAttemptsOf(
  home: string,
  splitId: string,
  branches: readonly BranchRecord[],
  log: Log,
): void {
  for (const b of branches) {
    if (b.attempt === null) continue;
    removeAttemptDir(`${home}/${ATTEMPTS_DIR}/${b.attempt}`, log, `split ${splitId}/${b.label}`);
  }
}

/** Whether a split's directory, and so any use of its attempts' output, is gone. */
function gone(s: SplitRecord | null): boolean {
  if (s === null) return true;
  return (s.state === "joined" || s.state === "cancelled") && s.identity === null;
}

/**
 * Removes every attempt dir whose split is no longer journaled, or was
 * joined or cancelled and removed from disk. Dirs of splits that are
 * running, awaiting, kept or uncertain stay. Call at daemon start (before
 * any split runs) and from `marsh gc`.
 *
 * @returns the names removed
 */
export function sweepAttempts(home: string, journal: Journal, log: Log): string[] {
  const root = `${home}/${ATTEMPTS_DIR}`;
  let entries: Deno.DirEntry[];
  try {
    entries = [...Deno.readDirSync(root)];
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
  const removed: string[] = [];
  for (const e of entries) {
    const m = ATTEMPT_NAME.exec(e.name);
    if (!m || !e.isDirectory) continue;
    if (!gone(journal.getSplit(m[1]!))) continue;
    if (removeAttemptDir(`${root}/${e.name}`, log, `split ${m[1]}`)) removed.push(e.name);
  }
  if (removed.length > 0) {
    log.info(`attempts: removed ${removed.length} dirs of splits that are gone`);
  }
  return removed.sort();
}
