/**
 * The limits of splits, branches and Kit jobs that several processes apply
 * (`docs/guide.md`, "Limits"): the CLI refuses early with them, the daemon
 * enforces them, the frame contracts bound what they carry by them, and a
 * job's `job.json` reports them. Pure, importing nothing.
 *
 * @module
 */

/** Branches per split; also the `fan_out` a job's `job.json` reports. */
export const MAX_BRANCHES = 16;
/** Nesting depth of a split made from a branch of a split. */
export const MAX_DEPTH = 3;
/** Branches a creating session may run at once (the branch pool, `daemon/pool.ts`). */
export const POOL_SIZE = 8;
/** Bytes of stdin kept in a split's spool. */
export const SPOOL_LIMIT = 64 * 1024 * 1024;
/** Bytes of stdout and stderr of all of a split's branches together. */
export const OUTPUT_LIMIT = 16 * 1024 * 1024;
/** The longest a split may run, in seconds (1 h): no branch's time limit may be longer. */
export const SPLIT_DURATION_S = 3600;

/**
 * What is wrong with `seconds` as a shell branch's time limit (`-t
 * LABEL=SECONDS`): it must be a whole number from 1 to
 * {@linkcode SPLIT_DURATION_S}. Null when it is fine. Each caller puts its
 * own prefix (the option as typed, or the branch) in front.
 */
export function timeLimitRangeProblem(seconds: number): string | null {
  if (!Number.isSafeInteger(seconds) || seconds < 1) {
    return `the time limit must be a whole number of seconds from 1 to ${SPLIT_DURATION_S}`;
  }
  if (seconds > SPLIT_DURATION_S) {
    return `a time limit of ${seconds} s is longer than a split may run (${SPLIT_DURATION_S} s)`;
  }
  return null;
}

/** A Kit job's wall clock when `marsh kits add --wall` gives none: one hour, as a split's. */
export const DEFAULT_WALL_S = SPLIT_DURATION_S;
/** The longest `--wall`, and the longest wall clock a Kit launch may ask for: one day. */
export const MAX_WALL_S = 86_400;

/**
 * Consecutive parent→child steps of one Kit identity a job chain may hold
 * (docs/rules.md, "Admission"): claude → claude is admitted, a third claude
 * is refused. `job.json` reports it as `same_kit`.
 */
export const JOB_SAME_KIT = 2;
/**
 * Launches a top-level job tree may make in all, refused ones included
 * (docs/rules.md, "Admission"); `job.json` reports it as `total`.
 */
export const JOB_TREE_TOTAL = 64;
/** The depth of a job tree: a root job is depth 1 (docs/rules.md, "Admission"). */
export const JOB_DEPTH = 4;
/**
 * Live children one job may have, its splits' branch jobs included
 * (docs/rules.md, "Admission"); `job.json` reports it as `fan_out`.
 */
export const JOB_FAN_OUT = 4;
/** Distinct Kit VMs one job tree may use at once, unless `MARSH_TREE_KIT_VMS` says otherwise. */
export const JOB_TREE_KIT_VMS = 4;
/** The range `MARSH_TREE_KIT_VMS` may set. */
export const JOB_TREE_KIT_VMS_MAX = 64;
/** Wall time a child needs left on its parent's clock to be admitted, in ms. */
export const JOB_MIN_WALL_MS = 1000;
