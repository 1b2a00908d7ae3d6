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

/**
 * The engine operations the benchmarks time. Every call is awaited to
 * completion before the clock stops; nothing may keep working in the
 * background after a promise resolves.
 */
export interface MarshOps {
  /**
   * Snapshots the project tree `root` (a Git worktree) into
   * `<root>/.marsh/split/<id>/base` and returns that split's directory.
   */
  snapshot(root: string): Promise<OpReport & { readonly splitDir: string }>;

  /**
   * Forks the split's base once for branch `label` and returns the fork's
   * directory, where the harness then applies the small change.
   */
  fork(splitDir: string, label: string): Promise<OpReport & { readonly forkDir: string }>;

  /**
   * Captures what the fork `label` changed (the harness applied 10 modified,
   * 5 added, 5 deleted files inside it) as a git-apply-ready patch.
   */
  capture(splitDir: string, label: string): Promise<OpReport>;

  /** Removes the split and everything under it; untimed. */
  cleanup(splitDir: string): Promise<void>;
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
