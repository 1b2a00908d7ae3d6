/**
 * What the Kit benchmark (bench/kit_e2e.ts) measures: its result types,
 * shared by the measurement, its report and the bench's targets.
 *
 * @module
 */

import type { Summary } from "./measure.ts";

/** The Kit name the benchmark registers (the tests' fixture image). */
export const KIT = "fixture";

/** One container's life in phases, medians over the runs, ms; null when not seen. */
export interface ContainerPhases {
  /** marsh: the daemon's launch request → engine `create`; docker: CLI spawn → `create`. */
  readonly toCreateMs: number | null;
  readonly createToStartMs: number | null;
  /** The container's start-to-exit as the engine sees it. */
  readonly startToDieMs: number | null;
  readonly dieToDestroyMs: number | null;
  /** marsh: `destroy` → branch settled (capture and publish included); docker: → CLI exit. */
  readonly destroyToDoneMs: number | null;
  /** marsh: launch → settled (the job window); docker: CLI spawn → exit. */
  readonly totalMs: number;
}

/** Part 1: one `true` container, marsh's Kit branch against `docker run --rm`. */
export interface KitContainerResult {
  readonly marsh: ContainerPhases;
  readonly docker: ContainerPhases;
  /** `timing_ms["capture:a"]`, median. */
  readonly captureMs: number;
  /** The job window without the capture, median. */
  readonly marshWindowNoCaptureMs: number;
  /** Containers whose engine events were found, of those expected (per side). */
  readonly eventsSeen: { readonly marsh: number; readonly docker: number; readonly of: number };
}

/** Where the pipeline's time goes, from the manifest, medians, ms. */
export interface KitBreakdown {
  /** Spawning `marsh split` until the daemon journaled the split. */
  readonly cliToRequestMs: number;
  /** The split journaled until its first branch was launched. */
  readonly requestToLaunchMs: number;
  /** `timing_ms.snapshot`. */
  readonly snapshotMs: number;
  /** `timing_ms.forks`. */
  readonly forksMs: number;
  /** First launch until the last branch settled. */
  readonly launchToSettledMs: number;
  /** `timing_ms["capture:*"]`, summed over the branches. */
  readonly captureMs: number;
  /** The last branch settled until both `split` and `join` exited (join removes the split). */
  readonly settledToExitMs: number;
}

/** Part 2: N branches. */
export interface KitE2eRow {
  readonly branches: number;
  /** `marsh split -n ::: … | marsh join --json`, spawn to both exited. */
  readonly marsh: Summary;
  /** N `docker run --rm … true` at once, spawn to the last exit. */
  readonly docker: Summary;
  readonly overheadMs: number;
  readonly overheadPerBranchMs: number;
  readonly ratio: number;
  readonly breakdown: KitBreakdown;
}

/** The whole measurement. */
export interface KitE2eResult {
  /** The engine's socket. */
  readonly socket: string;
  /** The fixture Kit image (tag) and its id. */
  readonly image: string;
  readonly imageId: string;
  readonly runs: number;
  /** Files in the temporary project (its tree, `.git` aside). */
  readonly files: number;
  /** Every `fork_strategy` the timed splits' manifests showed, sorted. */
  readonly forkStrategies: readonly string[];
  /** Part 1; null when no one-branch row ran. */
  readonly container: KitContainerResult | null;
  readonly rows: readonly KitE2eRow[];
  readonly warnings: readonly string[];
}
