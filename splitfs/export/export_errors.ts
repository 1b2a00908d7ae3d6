/**
 * The errors of exporting a root to Git (docs/checkpoints.md, "Checkout and
 * commit"). Pure: no I/O.
 *
 * @module
 */

/** What kind of entry Git cannot hold losslessly. */
export type UnsupportedKind =
  | "empty-directory"
  | "absolute-symlink"
  | "escaping-symlink"
  | "special-file";

/**
 * The root holds something outside Git's admitted subset (regular files,
 * the executable bit, non-empty directories, symlinks whose target stays in
 * the tree). Nothing was written.
 */
export class UnsupportedGitExport extends Error {
  override name = "UnsupportedGitExport";
  constructor(readonly path: string, readonly kind: UnsupportedKind, readonly detail: string) {
    super(`UnsupportedGitExport: ${path}: ${detail}`);
  }
}

/** The export could not run: no repository, a malformed one, or a layer that is not what it says. */
export class ExportError extends Error {
  override name = "ExportError";
}
