/**
 * The cancel of a job tree (docs/rules.md, "Kit jobs" and "Cancel"): one
 * journal transaction marks every job capability at and below the root
 * `cancelling` and revokes every branch capability there (nothing in the
 * tree starts anything after it), then every container and shell branch of
 * the tree gets SIGINT in the same turn of the event loop — the nested
 * splits' and the children's as much as the root's, never after the root's
 * container ended — and SIGKILL after the one grace; the worker verifies
 * each deletion, and whoever runs the job records it (`removed`, else
 * `uncertain` with the slot held until `marsh workers reset KIT`).
 *
 * The one entry for every cancel, whichever path runs the job: a split's
 * (`marsh splits cancel`, Ctrl-C, its deadline, a limit), one branch's
 * stop, a job's end (what it started is cancelled the moment its container
 * exits), and a `marsh run` job's tree (Ctrl-C, a dropped stream, its
 * end). The split path attaches how it signals its splits and branches
 * ({@linkcode JobTreeCancel.attachSplits}); the run path tracks each job
 * while its container may run ({@linkcode JobTreeCancel.track}).
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { TreeRoot, TreeScope } from "../journal/job_tree.ts";

export type { TreeRoot, TreeScope } from "../journal/job_tree.ts";

/** How a tree cancel treats its root. */
export interface TreeCancelOptions {
  /**
   * The root has ended already (a job's exit, a branch's settlement): only
   * what is below it is cancelled, and the root is not signalled.
   */
  readonly below?: boolean;
}

/** How the split path signals what it runs (`daemon/split_lease.ts`). */
export interface SplitSignals {
  /**
   * SIGINT to every launched branch of a running split, SIGKILL after the
   * grace; pending branches never start. False when it does not run here.
   */
  split(id: string, reason: string): boolean;
  /** Stops one branch with `status`: SIGINT now, SIGKILL after the grace, or it never starts. */
  branch(split: string, label: string, status: string): void;
  /**
   * Resolves once split `id` runs nothing here any more: every branch
   * settled (its container's deletion verified) or never started; at once
   * for a split that does not run here.
   */
  quiet(id: string): Promise<void>;
}

/** What {@linkcode JobTreeCancel} needs. */
export interface JobTreeCancelDeps {
  readonly journal: Pick<Journal, "jobTree" | "getJob">;
  readonly log: { info(line: string): void };
}

function describe(root: TreeRoot): string {
  switch (root.kind) {
    case "job":
      return `job ${root.id}`;
    case "split":
      return `split ${root.id}`;
    case "branch":
      return `branch ${root.split}/${root.label}`;
  }
}

/** One daemon's tree cancel, shared by the split path and the run path. */
export class JobTreeCancel {
  readonly #d: JobTreeCancelDeps;
  #splits: SplitSignals | null = null;
  readonly #runs = new Map<string, (reason: string) => void>();

  constructor(d: JobTreeCancelDeps) {
    this.#d = d;
  }

  /** The split path's signals; attached once, when it starts. */
  attachSplits(signals: SplitSignals): void {
    this.#splits = signals;
  }

  /**
   * Tracks a job the run path runs while its container may run: `stop`
   * sends its container SIGINT now and SIGKILL after the grace (the
   * worker's cancel); its end is recorded by the run path. Returns the
   * untrack, for its end.
   */
  track(job: string, stop: (reason: string) => void): () => void {
    this.#runs.set(job, stop);
    return () => {
      if (this.#runs.get(job) === stop) this.#runs.delete(job);
    };
  }

  /**
   * Resolves once every split a job created (at any depth below `root`)
   * runs nothing here any more: a `marsh run` job's end waits for it, so
   * its caller, and a shell branch's capture, see the whole subtree gone
   * (docs/rules.md "Running a registered command as a job"). Cancel first:
   * this only waits.
   */
  async quiet(root: TreeRoot): Promise<void> {
    const splits = this.#splits;
    if (splits === null) return;
    const scope = this.#d.journal.jobTree.scope(root);
    await Promise.all(scope.splits.map((id) => splits.quiet(id)));
  }

  /**
   * Cancels everything at and below `root` at once (the module's rules):
   * the journal's one step (`Journal.jobTree.cancelScope`), then every
   * signal, synchronously. The root split is cancelled with `reason`, the
   * root branch or job stopped with it; everything below gets `its tree was
   * cancelled: <reason>` (with `below`, `reason` itself, and the root is
   * left alone). Returns the scope.
   */
  cancel(root: TreeRoot, reason: string, opts: TreeCancelOptions = {}): TreeScope {
    const { journal, log } = this.#d;
    // Read first: a cancel that would change nothing writes nothing (no commit, no fsync).
    let scope = journal.jobTree.scope(root);
    if (opts.below && scope.below === 0) return scope;
    if (scope.live) scope = journal.jobTree.cancelScope(root);
    const inherited = opts.below ? reason : `its tree was cancelled: ${reason}`;
    if (scope.below > 0) {
      log.info(
        `${
          describe(root)
        }: cancelling its tree at once (${scope.jobs.length} jobs, ${scope.splits.length} splits): ${reason}`,
      );
    }
    const splits = this.#splits;
    const rootJob = root.kind === "job" ? root.id : null;
    if (!opts.below) {
      if (root.kind === "split") splits?.split(root.id, reason);
      else if (root.kind === "branch") splits?.branch(root.split, root.label, reason);
      else if (this.#runs.has(root.id)) this.#runs.get(root.id)!(reason);
      else {
        // A split branch's job: its branch is stopped.
        const job = journal.getJob(root.id);
        if (job !== null && job.split !== "") splits?.branch(job.split, job.label, reason);
      }
    }
    for (const id of scope.splits) {
      if (root.kind !== "split" || id !== root.id) splits?.split(id, inherited);
    }
    for (const id of scope.jobs) {
      if (id === rootJob) continue;
      this.#runs.get(id)?.(inherited);
    }
    return scope;
  }
}
