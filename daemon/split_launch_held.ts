/**
 * The pool slot of a shell branch whose end is unknown (docs/rules.md
 * "Budgets and capabilities"): held across a daemon restart until that end
 * is verified. Each shell branch's supervisor (`worker/supervisor.pl`)
 * exits only once every process of its branch is gone; when its worker
 * dies with the daemon it cancels the branch by itself (SIGINT, 10 s,
 * SIGKILL). So the launch records the supervisor's pid and `/proc` start
 * time, and a restarted daemon holds the slot of every `uncertain` shell
 * branch until the split-filesystem service shows that process gone (a
 * reused pid never matches its start time), polling while any is held.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { ProcessesReply } from "../protocol/processes.ts";
import { MAX_PROCESSES } from "../protocol/processes.ts";
import type { BranchPool } from "./pool.ts";
import type { SplitContext } from "./split_context.ts";

/** How often a restarted daemon looks at the supervisors it waits for. */
export const HELD_POLL_MS = 1000;

/**
 * Records shell branch `split/label`'s supervisor `pid` with its start
 * time; a failure is logged (that branch's slot is then not held across a
 * restart).
 */
export async function recordSupervisor(
  cx: SplitContext,
  split: string,
  label: string,
  pid: number,
): Promise<void> {
  try {
    const reply = await cx.d.splitfs.request<ProcessesReply>({
      v: 1,
      t: "proc-starts",
      pids: [pid],
    });
    const start = reply.starts[0];
    // Gone already: its branch ended and settles as usual.
    if (start === null || start === undefined) return;
    cx.d.journal.jobTree.recordSupervisor(split, label, pid, start);
  } catch (error) {
    cx.d.log.info(
      `split ${split}/${label}: its supervisor (pid ${pid}) not recorded: ${
        error instanceof Error ? error.message : error
      }; a restart will not hold its slot`,
    );
  }
}

/** What {@linkcode HeldShellSlots} needs. */
export interface HeldShellDeps {
  readonly journal: Pick<Journal, "jobTree">;
  readonly pool: BranchPool;
  readonly log: { info(line: string): void };
  /** The start time of each live pid, null where there is none (`daemon/children.ts`'s link). */
  readonly starts: (pids: readonly number[]) => Promise<readonly (number | null)[]>;
  readonly pollMs?: number;
}

/** A restarted daemon's held shell slots, each released once its supervisor is seen gone. */
export class HeldShellSlots {
  readonly #d: HeldShellDeps;
  #timer: ReturnType<typeof setTimeout> | undefined;
  #stopped = false;

  constructor(d: HeldShellDeps) {
    this.#d = d;
  }

  /**
   * Holds the slot of every shell branch whose end is unknown, in its
   * split's pool session, and starts watching their supervisors. Call
   * once at start, after recovery. Returns how many it holds.
   */
  adopt(): number {
    const held = this.#d.journal.jobTree.heldShellSlots();
    for (const h of held) {
      this.#d.pool.hold(h.session, `${h.split}/${h.label}`);
      this.#d.log.info(
        `restart: shell branch ${h.split}/${h.label} uncertain: its slot stays held until its supervisor (pid ${h.pid}) is gone`,
      );
    }
    if (held.length > 0) void this.check();
    return held.length;
  }

  /** Looks once: every held branch whose supervisor is gone is verified ended, its slot freed. */
  async check(): Promise<void> {
    clearTimeout(this.#timer);
    const { journal, pool, log } = this.#d;
    const held = journal.jobTree.heldShellSlots();
    try {
      for (let i = 0; i < held.length; i += MAX_PROCESSES) {
        const part = held.slice(i, i + MAX_PROCESSES);
        const starts = await this.#d.starts(part.map((h) => h.pid));
        part.forEach((h, j) => {
          if (starts[j] === h.start) return;
          journal.jobTree.supervisorEnded(h.split, h.label);
          pool.release(h.session, `${h.split}/${h.label}`);
          log.info(
            `shell branch ${h.split}/${h.label}: its supervisor (pid ${h.pid}) is gone, so is every process of it: its slot is free`,
          );
        });
      }
    } catch (error) {
      log.info(`held shell slots not checked: ${error instanceof Error ? error.message : error}`);
    }
    if (this.#stopped || journal.jobTree.heldShellSlots().length === 0) return;
    const timer = setTimeout(() => void this.check(), this.#d.pollMs ?? HELD_POLL_MS);
    // The watch never keeps a stopping daemon alive.
    Deno.unrefTimer(timer);
    this.#timer = timer;
  }

  /** Stops watching (the daemon stops). */
  stop(): void {
    this.#stopped = true;
    clearTimeout(this.#timer);
  }
}
