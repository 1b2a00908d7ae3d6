/**
 * The one capability the Git metadata readers need: reading a small file as
 * bytes. {@linkcode readGitSource} and the ignore rules never touch the file
 * system themselves; the caller hands them a {@linkcode ReadFile} backed by
 * no-follow descriptors (`dir.ts`), so what they may reach is decided there.
 *
 * @module
 */

/**
 * Reads a small file, or `null` when it is absent. Paths are relative to
 * whatever root the caller chose, `/`-separated, with no `.` or `..`
 * components.
 *
 * Contract for implementations:
 * - `null` only when there is no such entry (`ENOENT`);
 * - a file larger than `maxBytes` throws `TooLargeError` from `dir.ts`
 *   (its `size` says how large), and callers may rely on that to word their
 *   own message;
 * - a directory where the file should be throws `WrongKindError` from
 *   `dir.ts` with `kind` `"dir"`;
 * - any other failure (a symlink, a FIFO, an I/O error) throws.
 */
export type ReadFile = (relPath: string, maxBytes: number) => Uint8Array | null;
