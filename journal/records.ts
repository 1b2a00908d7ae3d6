/**
 * The records the journal keeps (docs/rules.md "States and records"): one per split, one
 * per branch, one per capability. Field names follow the spec's JSON shapes
 * in camelCase; `*Ms` fields are Unix milliseconds.
 *
 * @module
 */

import type { SplitState } from "../model/split_state.ts";
import type { BranchState } from "../model/branch_state.ts";

// The states and their one transition table are domain rules: model/.
export { isSplitState, SPLIT_STATES, type SplitState } from "../model/split_state.ts";
export { BRANCH_STATES, type BranchState, isBranchState } from "../model/branch_state.ts";

/** Capability states (docs/rules.md "Budgets and capabilities"). */
export const CAPABILITY_STATES = ["live", "revoked"] as const;
/** A capability's state. */
export type CapabilityState = typeof CAPABILITY_STATES[number];

/** Branch kinds: `-b LABEL=STRING` is `shell`, `::: LABEL CMD ARGS...` is `argv`. */
export const BRANCH_KINDS = ["shell", "argv"] as const;
/** A branch's kind. */
export type BranchKind = typeof BRANCH_KINDS[number];

/** How every writer of a shell branch was tracked (docs/architecture.md "Platform choices"). */
export const MECHANISMS = ["cgroup", "subreaper"] as const;
/** A branch's supervision mechanism. */
export type Mechanism = typeof MECHANISMS[number];

/**
 * What a shell branch sees (docs/engine.md, "Containment"): `project`, its
 * fork at the project's own path in a private mount namespace; `fork`, the
 * host's view, started in its fork's directory.
 */
export const VIEWS = ["project", "fork"] as const;
/** A shell branch's view. */
export type View = typeof VIEWS[number];

/**
 * Kit job states (docs/rules.md "Kit jobs"): `queued` (recorded, not launched),
 * `running`, `finished` (its command exited), `failed` (it could not run),
 * `cancelled`, `uncertain` (its end is unknown: a daemon restart, or a
 * container whose removal was not verified).
 */
export const JOB_STATES = [
  "queued",
  "running",
  "finished",
  "failed",
  "cancelled",
  "uncertain",
] as const;
/** A Kit job's state. */
export type JobState = typeof JOB_STATES[number];

/**
 * Whether a job's container is gone (docs/rules.md "Kit jobs"): `none` (no
 * container was ever asked for), `live` (one may exist and this daemon
 * tracks it), `removed` (deletion verified), `uncertain` (one may exist
 * and nobody tracks it: its slot stays held until `marsh workers reset KIT`).
 */
export const JOB_CLEANUPS = ["none", "live", "removed", "uncertain"] as const;
/** A Kit job's cleanup state. */
export type JobCleanup = typeof JOB_CLEANUPS[number];

/** Returns whether `x` is a capability state string. */
export function isCapabilityState(x: unknown): x is CapabilityState {
  return typeof x === "string" && (CAPABILITY_STATES as readonly string[]).includes(x);
}

/**
 * Who created a split (docs/rules.md "States and records"): the host (its handle is the join
 * capability for host callers), a session, or a Kit job.
 */
export type Creator =
  | { readonly kind: "host" }
  | { readonly kind: "session"; readonly id: string }
  | { readonly kind: "job"; readonly id: string };

/** `(dev, ino)` as decimal strings: JSON has no 64-bit integers. */
export type DirIdentity = readonly [dev: string, ino: string];

/** Where a branch runs: a host shell, or a registered Kit command in a container. */
export type Placement = "shell-vm" | `kit:${string}`;

/** The caller's Git state at snapshot time (`git` in docs/guide.md "The manifest"). */
export interface GitSource {
  readonly head: string | null;
  readonly objects: readonly string[];
}

/** One split. */
export interface SplitRecord {
  readonly id: string;
  readonly creator: Creator;
  /** The pool session whose 8 branch slots this split uses. */
  readonly session: string;
  /** The branch that created this split, for a nested one. */
  readonly parent: { readonly split: string; readonly label: string } | null;
  /** 1 for a root split. */
  readonly depth: number;
  /** The project root. */
  readonly root: string;
  /** `<root>/.marsh/split/<id>`. */
  readonly dir: string;
  /** The caller's cwd relative to `root`. */
  readonly cwd: string;
  /** The id of the split's own capability record. */
  readonly cap: string;
  readonly state: SplitState;
  /** The exit status of `marsh split`, once settled. */
  readonly status: number | null;
  /** Why the split was kept or cancelled (for example `daemon restarted`). */
  readonly reason: string | null;
  /** `(dev, ino)` of the split dir; null until the snapshot exists. */
  readonly identity: DirIdentity | null;
  readonly git: GitSource | null;
  readonly createdMs: number;
  /** When every branch was captured. */
  readonly finishedMs: number | null;
  /** `timing_ms`: `snapshot`, `forks`, `run`, `capture:<label>`, `consumer`. */
  readonly timing: Readonly<Record<string, number>>;
  /** `--with-ignored`: the snapshot admitted ignored files too. */
  readonly withIgnored: boolean;
  /** The Git tree id of a layered snapshot (issue 4); null for a copied base or before the snapshot. */
  readonly rootId: string | null;
}

/** The states a branch can be discarded from: its ends (`model/branch_state.ts`). */
export type DiscardableState = "captured" | "rejected" | "failed" | "cancelled" | "uncertain";

/** Who discarded a branch, why and when (docs/guide.md, "Discarding branches"). */
export interface DiscardNote {
  /** `--reason TEXT`, or null when none was given. */
  readonly reason: string | null;
  /** The split's creator, who alone may discard it. */
  readonly by: Creator;
  readonly atMs: number;
}

/** A discarded branch's lineage: the state it had ended in, and the discard. */
export interface BranchDiscard extends DiscardNote {
  readonly after: DiscardableState;
}

/** One branch of a split. */
export interface BranchRecord {
  readonly split: string;
  readonly label: string;
  /** Declaration order, from 0. */
  readonly index: number;
  readonly kind: BranchKind;
  readonly placement: Placement;
  /** The shell string of a shell branch, or the argv of an argv branch. */
  readonly run: string | readonly string[];
  readonly state: BranchState;
  /** `exited N`, `failed: capacity`, `failed: <why>`, `rejected: <why>` or `cancelled`. */
  readonly status: string | null;
  /** The branch code: N for `exited N`, 125 for failed/rejected, 130 for cancelled. */
  readonly code: number | null;
  readonly jobId: string | null;
  /** Changed-file count of the captured result. */
  readonly files: number;
  /** `untrusted` when the fork was never verified (a restart, an unreaped cancel). */
  readonly trust: "untrusted" | null;
  /** `<dir>/<label>`. */
  readonly fork: string;
  readonly forkIdentity: DirIdentity | null;
  /** Which fork strategy made the fork (`reflink`, `copy_file_range`, `copy`, ...). */
  readonly forkStrategy: string | null;
  /** The worker attempt that ran the branch. */
  readonly attempt: string | null;
  readonly startedMs: number | null;
  readonly finishedMs: number | null;
  /** R: a digest of the captured patch. */
  readonly result: string | null;
  readonly mechanism: Mechanism | null;
  /** A launched shell branch's view, and why it is that one. */
  readonly view: View | null;
  readonly viewReason: string | null;
  /** Set once the branch is `discarded` (`marsh discard`), else null. */
  readonly discard: BranchDiscard | null;
}

/**
 * A Kit job: one run of a registered Kit command in a fresh container. For
 * now every job is an argv branch's (`::: LABEL CMD ARGS...`); its lineage
 * names the split and label. Jobs outlive `marsh splits rm` (lineage).
 */
export interface JobRecord {
  readonly id: string;
  /** The registered Kit command. */
  readonly kit: string;
  /** `CMD ARGS...` as given. */
  readonly args: readonly string[];
  /** The split and branch that started it. */
  readonly split: string;
  readonly label: string;
  /** The pool session whose branch slot it holds. */
  readonly session: string;
  readonly state: JobState;
  readonly cleanup: JobCleanup;
  /** The worker attempt, once launched. */
  readonly attempt: string | null;
  /** The engine's container id, once the container exists. */
  readonly container: string | null;
  /** The branch status words (`exited N`, `failed: <why>`, `cancelled`). */
  readonly status: string | null;
  readonly code: number | null;
  readonly createdMs: number;
  readonly startedMs: number | null;
  readonly finishedMs: number | null;
}

/** What a new job's record is given; the rest starts empty. */
export type NewJob = Pick<
  JobRecord,
  "id" | "kit" | "args" | "split" | "label" | "session" | "createdMs"
>;

/** A job's record as admission inserts it: queued, no container asked for, nothing run yet. */
export function queuedJob(job: NewJob): JobRecord {
  return {
    ...job,
    state: "queued",
    cleanup: "none",
    attempt: null,
    container: null,
    status: null,
    code: null,
    startedMs: null,
    finishedMs: null,
  };
}

/** The job fields that may change after creation. */
export const JOB_MUTABLE = [
  "state",
  "cleanup",
  "attempt",
  "container",
  "status",
  "code",
  "startedMs",
  "finishedMs",
] as const;
/** A change to a job's mutable fields; absent (or undefined) fields stay as they are. */
export type JobPatch = Partial<Pick<JobRecord, typeof JOB_MUTABLE[number]>>;

/** Which jobs `listJobs` returns; every given condition must hold. */
export interface JobFilter {
  readonly kit?: string;
  readonly split?: string;
  readonly cleanups?: readonly JobCleanup[];
  /** Only jobs of splits whose creator is this session. */
  readonly creatorSession?: string;
  /** Only jobs of splits whose creator is this job. */
  readonly creatorJob?: string;
}

/**
 * A capability: a daemon record, never a bearer secret (docs/rules.md "Budgets and capabilities").
 */
export interface CapabilityRecord {
  readonly id: string;
  readonly split: string;
  /** The branch it was issued to, or null for the split's own. */
  readonly label: string | null;
  /** Who holds it, for example `session:<id>`, `job:<id>` or `host`. */
  readonly holder: string;
  readonly state: CapabilityState;
  readonly createdMs: number;
  readonly revokedMs: number | null;
}

/** The split fields that may change after creation (state changes go through `transitionSplit`). */
export const SPLIT_MUTABLE = [
  "status",
  "reason",
  "identity",
  "git",
  "finishedMs",
  "timing",
  "rootId",
] as const;
/** A change to a split's mutable fields; absent (or undefined) fields stay as they are. */
export type SplitPatch = Partial<Pick<SplitRecord, typeof SPLIT_MUTABLE[number]>>;

/** The branch fields that may change after creation (state changes go through `transitionBranch`). */
export const BRANCH_MUTABLE = [
  "status",
  "code",
  "jobId",
  "files",
  "trust",
  "forkIdentity",
  "forkStrategy",
  "attempt",
  "startedMs",
  "finishedMs",
  "result",
  "mechanism",
  "view",
  "viewReason",
] as const;
/**
 * A change to a branch's mutable fields; absent (or undefined) fields stay as
 * they are. `discard` is given only with a move to `discarded`
 * (`transitionBranch`), and only there.
 */
export type BranchPatch =
  & Partial<Pick<BranchRecord, typeof BRANCH_MUTABLE[number]>>
  & { readonly discard?: DiscardNote };

/** Which splits `listSplits` returns; every given condition must hold. */
export interface SplitFilter {
  readonly creator?: Creator;
  readonly states?: readonly SplitState[];
  /** Only the children of this split. */
  readonly parent?: string;
  readonly limit?: number;
}

/** What `marsh status` shows. */
export interface SplitCounts {
  /** Splits in `run`. */
  readonly active: number;
  /** Splits in `await`. */
  readonly awaiting: number;
  /** Splits in `kept`. */
  readonly kept: number;
}

/** What restart recovery changed (docs/rules.md "Life cycle and restart"); forks are all kept. */
export interface RecoveryReport {
  readonly atMs: number;
  readonly splits: readonly {
    readonly id: string;
    readonly from: "run" | "await";
    readonly to: SplitState;
  }[];
  readonly branches: readonly {
    readonly split: string;
    readonly label: string;
    readonly from: "running" | "pending";
    readonly to: BranchState;
    /** Kept on disk; an uncertain branch's fork is untrusted. */
    readonly fork: string;
  }[];
  readonly revokedCapabilities: readonly string[];
  /**
   * Kit jobs a restart settled: queued ones are cancelled (never started);
   * launched ones are uncertain, their container possibly alive, their slot
   * held until `marsh workers reset KIT`.
   */
  readonly jobs: readonly {
    readonly id: string;
    readonly kit: string;
    readonly split: string;
    readonly label: string;
    readonly to: BranchState;
    /** The container's id when it was known. */
    readonly container: string | null;
  }[];
}

/**
 * What a resolution is (docs/resolution.md): a `merge` of a branch into the
 * project, a `promote` of a branch over it, a `checkout` of a checkpoint's
 * root over it (docs/checkpoints.md), or the `undo` of an earlier one.
 */
export const RESOLUTION_KINDS = ["merge", "promote", "undo", "checkout"] as const;
/** A resolution's kind. */
export type ResolutionKind = typeof RESOLUTION_KINDS[number];

/**
 * Resolution states: `applying` (journaled before the service is asked to
 * apply; a restart settles it), `applied`, `failed` (nothing was changed:
 * refused, rolled back, or interrupted before its commit point), `undone`
 * (applied, then put back by the `undo` resolution named in `undoneBy`).
 */
export const RESOLUTION_STATES = ["applying", "applied", "failed", "undone"] as const;
/** A resolution's state. */
export type ResolutionState = typeof RESOLUTION_STATES[number];

/** How many paths of each operation a resolution's plan had. */
export interface ResolutionSummary {
  readonly take: number;
  readonly delete: number;
  readonly converged: number;
  readonly conflict: number;
}

/** The tree ids a resolution's plan was computed from (`null` where its scope has none). */
export interface ResolutionTrees {
  readonly base: string | null;
  readonly source: string | null;
  readonly branch: string | null;
  readonly result: string | null;
}

/**
 * One merge, promote or undo, recorded before the split-filesystem service
 * applies it. Kept when the split is removed: the restore point
 * (`<root>/.marsh/resolve/<id>/`) outlives the split, and so does the record.
 */
export interface ResolutionRecord {
  /** The resolution id, also its directory's name under `.marsh/resolve/`. */
  readonly id: string;
  /** The split and branch resolved (for an undo, those of the resolution it undoes). */
  readonly split: string;
  readonly label: string;
  readonly kind: ResolutionKind;
  readonly scope: "git" | "filesystem" | "paths" | "promote" | "undo" | "checkout";
  /**
   * For a checkout (and its undo): the session and the checkpoint whose root
   * the tree became; `split` and `label` are empty then. Absent or null
   * for the resolutions of a split's branch.
   */
  readonly checkout?: CheckoutOf | null;
  /** The tree changed: the project root, or a nested split's creator fork. */
  readonly root: string;
  /** Who asked: the split's creator, as {@linkcode Creator}. */
  readonly who: Creator;
  readonly state: ResolutionState;
  readonly createdMs: number;
  /** When it was applied or failed; null while applying. */
  readonly finishedMs: number | null;
  /** For an undo: the resolution it puts back. */
  readonly undoes: string | null;
  /** For an undone resolution: the undo that put it back. */
  readonly undoneBy: string | null;
  readonly summary: ResolutionSummary;
  readonly trees: ResolutionTrees;
  /** Paths the service changed (takes, deletes and the directories they needed); null until applied. */
  readonly changed: number | null;
  /** Why it failed (and what was restored), or null. */
  readonly message: string | null;
}

/** The session (id and name, as at the checkout) and checkpoint of a checkout. */
export interface CheckoutOf {
  readonly session: string;
  readonly name: string;
  readonly checkpoint: string;
}

/** How a resolution in `applying` ended. */
export type ResolutionEnd =
  | { readonly state: "applied"; readonly finishedMs: number; readonly changed: number }
  | { readonly state: "failed"; readonly finishedMs: number; readonly message: string };
