/**
 * The contract between the benchmark harness and the marsh engine: the
 * harness times these four operations; `bench/marsh_ops.ts` implements them
 * against the engine.
 *
 * @module
 */

/** What an operation may report beyond its timing. */
export interface OpReport {
  /**
   * Peak RSS in KiB of child processes the operation ran (for example a
   * splitfs service). The harness only samples its own process, so an
   * implementation that works in children should report their peak here
   * (for example from `/usr/bin/time -f %M` or the service's own
   * `VmHWM`); the harness shows it next to its in-process peak.
   */
  readonly childPeakRssKiB?: number;
}

import type { ForkPolicy } from "../protocol/splitfs.ts";

/**
 * The fork policies the harness compares: `auto` (a layered snapshot and
 * overlay forks where the host allows them) and `copy`.
 */
export type { ForkPolicy };

/** The layered base a snapshot made, or null for a copied base. */
export interface LayersReport {
  /** Layers the base stacks. */
  readonly count: number;
  /** The Git tree id of the snapshot. */
  readonly rootId: string;
  /** Files written into a new layer by this snapshot (0 when nothing changed). */
  readonly copied: number;
}

/** What a snapshot reports beyond its timing. */
export interface SnapshotReport extends OpReport {
  /** The split's directory, for {@linkcode MarshOps.fork} and the rest. */
  readonly splitDir: string;
  /** The fork strategy the split's forks use (`overlay`, `userns-overlay`, `copy`), and why. */
  readonly forkChoice: { readonly strategy: string; readonly reason: string };
  readonly layers: LayersReport | null;
  /** Entries the snapshot admitted (files and symlinks). */
  readonly files: number;
  /**
   * The engine's own clock for the snapshot proper (the walk and copy, the
   * layer's seal, the base's mount), ms; the rest of the timed call is
   * opening the project, reading its Git index and ignore files, and
   * making the split's directories and object store.
   */
  readonly engineMs: number;
}

/**
 * The engine operations the benchmarks time. Every call is awaited to
 * completion before the clock stops; nothing may keep working in the
 * background after a promise resolves.
 */
export interface MarshOps {
  /**
   * Snapshots the project tree `root` (a Git worktree) into a new split
   * under `<root>/.marsh/split/` with the fork policy `forks`, and returns
   * that split's directory and how it was made.
   */
  snapshot(root: string, forks: ForkPolicy): Promise<SnapshotReport>;

  /**
   * Forks the split's base once for branch `label` and returns the fork's
   * directory, where the harness then applies the small change.
   */
  fork(splitDir: string, label: string): Promise<OpReport & { readonly forkDir: string }>;

  /**
   * Captures what the fork `label` changed (the harness applied 10 modified,
   * 5 added, 5 deleted files inside it) as a git-apply-ready patch.
   */
  capture(splitDir: string, label: string): Promise<OpReport & { readonly files: number }>;

  /**
   * Checks the data of the layers of `root`'s tracked chain against their
   * seals, as a snapshot does before it reuses them.
   *
   * @throws {Error} when a layer does not match its seal (nothing may change them here)
   */
  sealCheck(root: string): Promise<OpReport>;

  /** Removes the split and everything under it (its mounts first); untimed. */
  cleanup(splitDir: string): Promise<void>;

  /**
   * Forgets every snapshot of `root` (its layer store), so that the next
   * `auto` snapshot is a first one; untimed.
   *
   * @throws {Error} when something is still mounted under the engine's state in `root`
   */
  forgetSnapshots(root: string): Promise<void>;

  /**
   * Removes all of the engine's state in `root` (splits, layers), leaving
   * the tree as it was before the first snapshot; untimed.
   *
   * @throws {Error} when something is still mounted under the engine's state in `root`
   */
  removeState(root: string): Promise<void>;

  /** Mount points under `root` (overlay bases and forks) still mounted; empty when all is clean. */
  mountsUnder(root: string): string[];
}

/** The message of {@linkcode NotWiredError}. */
export const NOT_WIRED_MESSAGE = "marsh engine ops not wired yet";

/**
 * Thrown by the placeholder `marsh_ops.ts` until the engine is wired in; the
 * harness then prints the baselines alone and marks the marsh columns n/a.
 */
export class NotWiredError extends Error {
  constructor() {
    super(NOT_WIRED_MESSAGE);
    this.name = "NotWiredError";
  }
}

/** True for {@linkcode NotWiredError}, or any error carrying its exact message. */
export function isNotWired(err: unknown): boolean {
  return err instanceof NotWiredError ||
    (err instanceof Error && err.message === NOT_WIRED_MESSAGE);
}
