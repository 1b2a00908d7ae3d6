/**
 * What the journal does after a daemon restart: settle every unfinished
 * record in one transaction, resuming nothing. Takes the open
 * {@linkcode Connection}; `Journal` (journal.ts) is its public face.
 *
 * @module
 */

import type { Connection } from "./_connection.ts";
import type { RecoveryReport } from "./records.ts";
import { BRANCH_TRANSITIONS } from "../model/branch_state.ts";
import { SPLIT_TRANSITIONS } from "../model/split_state.ts";

/** The reason recorded on splits that a restart settled. */
export const RESTART_REASON = "daemon restarted";

/**
 * Settles what a daemon restart left unfinished (docs/rules.md "Life cycle and restart"), in one
 * transaction, before the daemon serves anything: splits in `run` become
 * `uncertain` and splits in `await` become `kept`, both with reason
 * `daemon restarted`; launched (`running`) branches become `uncertain`
 * and `untrusted`; unlaunched (`pending`) branches become `cancelled`
 * (status `cancelled`, code 130) and never start; every capability is
 * revoked. Kit jobs: queued ones are cancelled; launched ones (running,
 * or whose container was not confirmed removed) become `uncertain` with
 * cleanup `uncertain`, so their slots stay held until `marsh workers
 * reset KIT`; every job's capability in the job tree is revoked, so no
 * job from before the restart starts anything. Nothing is deleted, resumed
 * or replayed. Running it again
 * changes nothing.
 */
export function recoverAfterRestart(c: Connection, nowMs: number): RecoveryReport {
  return c.write("recover after restart", () => {
    const splits = c.all(
      `SELECT id, state FROM splits WHERE state IN ('run', 'await') ORDER BY created_ms, rowid`,
    ).map((r) => {
      const from = r.state === "run" ? "run" as const : "await" as const;
      return { id: String(r.id), from, to: restartTarget(SPLIT_TRANSITIONS[from].restart) };
    });
    const branches = c.all(
      `SELECT b.split, b.label, b.state, b.fork FROM branches b JOIN splits s ON s.id = b.split
       WHERE b.state IN ('running', 'pending') ORDER BY s.created_ms, s.rowid, b.idx`,
    ).map((r) => {
      const from = r.state === "running" ? "running" as const : "pending" as const;
      return {
        split: String(r.split),
        label: String(r.label),
        from,
        to: restartTarget(BRANCH_TRANSITIONS[from].restart),
        fork: String(r.fork),
      };
    });
    const revokedCapabilities = c.all(
      "SELECT id FROM capabilities WHERE state = 'live' ORDER BY created_ms, id",
    ).map((r) => String(r.id));
    const jobs = c.all(
      `SELECT id, kit, split, label, state, container FROM jobs
       WHERE state IN ('queued', 'running') OR cleanup = 'live' ORDER BY created_ms, rowid`,
    ).map((r) => ({
      id: String(r.id),
      kit: String(r.kit),
      split: String(r.split),
      label: String(r.label),
      to: r.state === "queued" ? "cancelled" as const : "uncertain" as const,
      container: r.container === null ? null : String(r.container),
    }));
    c.run(
      `UPDATE jobs SET state = 'cancelled', status = 'cancelled', code = 130,
         finished_ms = :now WHERE state = 'queued'`,
      { now: nowMs },
    );
    c.run("UPDATE jobs SET state = 'uncertain' WHERE state = 'running'");
    c.run("UPDATE jobs SET cleanup = 'uncertain' WHERE cleanup = 'live'");
    c.run("UPDATE jobs SET cap = 'revoked' WHERE cap IN ('live', 'cancelling')");
    const reason = RESTART_REASON;
    c.run("UPDATE splits SET state = 'uncertain', reason = :reason WHERE state = 'run'", {
      reason,
    });
    c.run("UPDATE splits SET state = 'kept', reason = :reason WHERE state = 'await'", {
      reason,
    });
    c.run(
      "UPDATE branches SET state = 'uncertain', trust = 'untrusted' WHERE state = 'running'",
    );
    c.run(
      `UPDATE branches SET state = 'cancelled', status = 'cancelled', code = 130,
         finished_ms = :now WHERE state = 'pending'`,
      { now: nowMs },
    );
    c.run(
      "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE state = 'live'",
      { now: nowMs },
    );
    return { atMs: nowMs, splits, branches, revokedCapabilities, jobs };
  });
}

/** The state the transition table gives `restart`; a table without it is a programming error. */
function restartTarget<S extends string>(to: S | undefined): S {
  if (to === undefined) throw new TypeError("The transition table has no restart move");
  return to;
}
