/**
 * The bounds of a split (`docs/guide.md`, "Limits"): the state machine
 * enforces them and the job capability hands them to the jobs it launches,
 * so they live in a leaf module both can import.
 *
 * @module
 */

/** Branches per split. */
export const MAX_BRANCHES = 16;
/** Nesting depth of a split made from a branch of a split. */
export const MAX_DEPTH = 3;
/** Bytes of stdin kept in a split's spool. */
export const SPOOL_LIMIT = 64 * 1024 * 1024;
/** Bytes of stdout and stderr of all of a split's branches together. */
export const OUTPUT_LIMIT = 16 * 1024 * 1024;
