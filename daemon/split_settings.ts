/**
 * The split life cycle's tunables and fixed limits: the lease, the deadline,
 * the cancel grace and the fork policy, read from the environment (tests
 * shorten them), and the captured-output checks (docs/guide.md, "Limits").
 *
 * @module
 */

import type { ForkPolicy } from "../protocol/splitfs.ts";

/** How often the captured output of a running split is measured. */
export const OUTPUT_POLL_MS = 100;

/** Why a split whose branches' output passed the limit is cancelled. */
export const OUTPUT_LIMIT_REASON = "captured output limit of 16 MiB exceeded";

/** Tunables; tests shorten the lease and the grace through the environment. */
export interface Settings {
  /** An awaiting split unheld this long becomes kept (`MARSH_LEASE_MS`, default 60 s). */
  readonly leaseMs: number;
  /** The split deadline (`MARSH_SPLIT_DEADLINE_MS`, default 1 h). */
  readonly deadlineMs: number;
  /** SIGINT to SIGKILL on cancel (`MARSH_CANCEL_GRACE_MS`, default 10 s). */
  readonly graceMs: number;
  /** Test-only: stop at this step and wait to be killed (`MARSH_TEST_PAUSE_AT`). */
  readonly pauseAt: string | null;
  /** `auto`: overlay forks where this host allows them; `copy`: always copy (`MARSH_FORKS`). */
  readonly forks: ForkPolicy;
  /**
   * `auto`: the `project` shell view where a mount namespace can be had;
   * `fork`: never (`MARSH_SHELL_VIEW`): shell branches run in their fork's
   * directory and operations are `relative`, as on a host without one.
   */
  readonly shellView?: "auto" | "fork";
}

/**
 * Reads the settings from the environment.
 *
 * @throws {Error} naming the variable when a value is not a number of milliseconds or a policy
 */
export function settingsFromEnv(get: (name: string) => string | undefined): Settings {
  const ms = (name: string, dflt: number) => {
    const v = get(name);
    if (v === undefined || v === "") return dflt;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) {
      throw new Error(`${name} must be a number of milliseconds: ${v}`);
    }
    return n;
  };
  return {
    leaseMs: ms("MARSH_LEASE_MS", 60_000),
    deadlineMs: ms("MARSH_SPLIT_DEADLINE_MS", 3_600_000),
    graceMs: ms("MARSH_CANCEL_GRACE_MS", 10_000),
    pauseAt: get("MARSH_TEST_PAUSE_AT") || null,
    forks: forkPolicy(get("MARSH_FORKS")),
    shellView: shellViewPolicy(get("MARSH_SHELL_VIEW")),
  };
}

function shellViewPolicy(v: string | undefined): "auto" | "fork" {
  if (v === undefined || v === "" || v === "auto") return "auto";
  if (v === "fork") return "fork";
  throw new Error(`MARSH_SHELL_VIEW must be "auto" or "fork": ${v}`);
}

function forkPolicy(v: string | undefined): ForkPolicy {
  if (v === undefined || v === "" || v === "auto") return "auto";
  if (v === "copy") return "copy";
  throw new Error(`MARSH_FORKS must be "auto" or "copy": ${v}`);
}

/** The bytes in an attempt's stdout and stderr files so far. Needs read access to `dir`. */
export function outputSize(dir: string): number {
  let n = 0;
  for (const name of ["stdout", "stderr"]) {
    try {
      n += Deno.statSync(`${dir}/${name}`).size;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // The worker has not created it yet.
    }
  }
  return n;
}
