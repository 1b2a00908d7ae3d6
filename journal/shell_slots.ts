/**
 * The supervisor of each shell branch (its pid and `/proc` start time), so
 * that a restarted daemon can hold the pool slot of a shell branch whose end
 * is unknown until that end is verified (docs/rules.md "Budgets and
 * capabilities"): the supervisor exits only once every process of its
 * branch is gone. A slot is held while the branch is `uncertain` and its
 * supervisor was not seen gone.
 *
 * Takes the open {@linkcode Connection}; `Journal.jobTree` is its public face.
 *
 * @module
 */

import type { Connection } from "./_connection.ts";

/** A shell branch whose end is unknown, holding its slot. */
export interface HeldShellSlot {
  readonly split: string;
  readonly label: string;
  /** The pool session of its split. */
  readonly session: string;
  readonly pid: number;
  readonly start: number;
}

/** The SQL condition of a held shell slot over `shell_supervisors s JOIN branches b`. */
export const HELD_SHELL = "b.state = 'uncertain' AND b.kind = 'shell' AND s.ended_ms IS NULL";

/** Records the supervisor of a running shell branch (a second record replaces the first). */
export function recordSupervisor(
  c: Connection,
  split: string,
  label: string,
  pid: number,
  start: number,
): void {
  c.write("record a shell branch's supervisor", () => {
    c.run(
      `INSERT INTO shell_supervisors (split, label, pid, start) VALUES (:split, :label, :pid, :start)
       ON CONFLICT (split, label) DO UPDATE SET pid = :pid, start = :start, ended_ms = NULL`,
      { split, label, pid, start },
    );
  });
}

/** Every held shell slot, oldest split first. */
export function heldShellSlots(c: Connection): HeldShellSlot[] {
  return c.read("list held shell slots", () =>
    c.all(
      `SELECT s.split, s.label, s.pid, s.start, p.session FROM shell_supervisors s
       JOIN branches b ON b.split = s.split AND b.label = s.label
       JOIN splits p ON p.id = s.split
       WHERE ${HELD_SHELL} ORDER BY p.created_ms, b.idx`,
    ).map((r) => ({
      split: String(r.split),
      label: String(r.label),
      session: String(r.session),
      pid: Number(r.pid),
      start: Number(r.start),
    })));
}

/** The branch's supervisor was seen gone: its end is verified and its slot frees. */
export function supervisorEnded(c: Connection, split: string, label: string, nowMs: number): void {
  c.write("a shell branch's supervisor ended", () => {
    c.run(
      "UPDATE shell_supervisors SET ended_ms = :now WHERE split = :split AND label = :label",
      { split, label, now: nowMs },
    );
  });
}
