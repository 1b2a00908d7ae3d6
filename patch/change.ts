/**
 * The shape of one changed path, as capture hands it to the patch writer.
 *
 * @module
 */

/** Git's file modes for what a patch can carry. Directories never appear. */
export type GitMode = 0o100644 | 0o100755 | 0o120000;

/** One side of a change: its Git mode and its raw bytes (a symlink's target for 120000). */
export interface Side {
  readonly mode: GitMode;
  readonly bytes: Uint8Array;
}

/**
 * A change at one path, relative to the tree root, `/`-separated, UTF-8.
 * `old` absent means added, `new` absent means deleted; a file that became a
 * symlink (or back) is one change whose two sides differ in type.
 */
export interface FileChange {
  readonly path: string;
  readonly old: Side | null;
  readonly new: Side | null;
}

/** Git's name-status letter for a change: added, modified, deleted, type changed. */
export type ChangeStatus = "A" | "M" | "D" | "T";
