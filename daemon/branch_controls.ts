/**
 * Per-branch controls of a running split (docs/guide.md, "Watching and
 * stopping a branch"): a shell branch's time limit, the words for cancelling
 * one branch, and the processes a branch left running after its shell
 * exited. This module keeps the state; the split state machine
 * (`daemon/splits.ts`) decides what it means for the branch.
 *
 * @module
 */

import type { BranchRecord } from "../journal/records.ts";
import { SPLIT_DURATION_S, timeLimitRangeProblem } from "../model/limits.ts";
import type { BranchSpec } from "../protocol/daemon.ts";
import type { Lingering, Manifest } from "../protocol/manifest.ts";
import type { LingeringEvent } from "../protocol/worker.ts";

/** The status of a branch stopped at its time limit (code 125, like every `failed:`). */
export function timeLimitStatus(seconds: number): string {
  return `failed: time limit of ${seconds} s reached`;
}

/** The state a branch stopped alone ends in, from the status it was given. */
export function stoppedState(status: string): "cancelled" | "failed" {
  return status === "cancelled" ? "cancelled" : "failed";
}

/** Why a branch's time limit is refused, or null (the CLI checks the same, with its words). */
export function timeLimitProblem(spec: BranchSpec): string | null {
  if (spec.kind !== "shell" || spec.timeLimitS === undefined) return null;
  const s = spec.timeLimitS;
  const problem = timeLimitRangeProblem(s);
  if (problem === null) return null;
  // Too short or not whole: say what was given; too long already says it.
  return `branch "${spec.label}": ${problem}${s > SPLIT_DURATION_S ? "" : `, got ${s}`}`;
}

/** The refusal for a label the split does not have, naming the ones it has. */
export function noBranch(id: string, label: string, branches: readonly BranchRecord[]): string {
  const labels = branches.map((b) => b.label).join(", ");
  return `split ${id} has no branch ${JSON.stringify(label)}; its branches: ${labels}`;
}

/** Time limits and lingering processes of the branches this daemon runs. */
export class BranchControls {
  readonly #timers = new Map<string, ReturnType<typeof setTimeout>>();
  readonly #lingering = new Map<string, Lingering>();

  /** Calls `onLimit` `seconds` after now, unless the branch ends first ({@linkcode ended}). */
  startLimit(split: string, label: string, seconds: number, onLimit: () => void): void {
    const key = `${split}/${label}`;
    clearTimeout(this.#timers.get(key));
    this.#timers.set(
      key,
      setTimeout(() => {
        this.#timers.delete(key);
        onLimit();
      }, seconds * 1000),
    );
  }

  /** The worker named what a branch left running (`lingering`). */
  lingering(split: string, label: string, ev: LingeringEvent): void {
    this.#lingering.set(`${split}/${label}`, {
      since_unix_ms: ev.since,
      processes: ev.processes.map((p) => ({ pid: p.pid, command: p.command })),
      more: ev.more,
    });
  }

  /** The branch ended: its timer and what lingered go. */
  ended(split: string, label: string): void {
    const key = `${split}/${label}`;
    clearTimeout(this.#timers.get(key));
    this.#timers.delete(key);
    this.#lingering.delete(key);
  }

  /** The split ended: everything of its branches goes. */
  forget(split: string): void {
    for (const [key, timer] of this.#timers) {
      if (key.startsWith(`${split}/`)) {
        clearTimeout(timer);
        this.#timers.delete(key);
      }
    }
    for (const key of this.#lingering.keys()) {
      if (key.startsWith(`${split}/`)) this.#lingering.delete(key);
    }
  }

  /** `m` with each running branch's lingering processes, for `marsh splits`. */
  decorate(m: Manifest): Manifest {
    if (m.state !== "run") return m;
    return {
      ...m,
      branches: m.branches.map((b) => {
        const l = b.state === "running" ? this.#lingering.get(`${m.id}/${b.label}`) : undefined;
        return l === undefined ? b : { ...b, lingering: l };
      }),
    };
  }
}

/**
 * Why branch `label` of split `s` cannot be cancelled alone, or null: the
 * split must be running, and the branch must be one of its own that has not
 * ended.
 */
export function branchCancelProblem(
  s: { readonly id: string; readonly state: string },
  branches: readonly BranchRecord[],
  label: string,
): string | null {
  if (s.state !== "run") return `split ${s.id} is not running (state ${s.state})`;
  const b = branches.find((x) => x.label === label);
  if (!b) return noBranch(s.id, label, branches);
  if (b.state !== "pending" && b.state !== "running") {
    return `branch ${label} of split ${s.id} has already ended: ${b.status ?? b.state}`;
  }
  return null;
}
