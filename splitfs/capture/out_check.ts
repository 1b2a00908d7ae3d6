/**
 * Whether a split's `out/` holds every file its manifest and the consumer's
 * `$SPLIT_DIR` promise (docs/guide.md, "Results: out/ and the manifest"):
 * join asks before it runs a consumer, since a write that failed (a full
 * disk) leaves a file out, and a consumer must never read a half result.
 *
 * Every file under `out/<label>/` is written all or nothing (created
 * `O_EXCL`, removed again when a write fails), so a file that is there is
 * whole; one that is absent, or is not a regular file, is missing.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type Dir, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { FILES_FILE, PATCH_FILE } from "./capture.ts";
import { E, FsError } from "../fd/ffi.ts";

/** Under `out/<label>/`: written by `publish` for every branch that ended. */
export const PUBLISHED_FILES = ["status", "stdout", "stderr"] as const;

/** What `out/<label>/` must hold for one branch. */
export interface OutExpectation {
  readonly label: string;
  /** Captured: `files` too. */
  readonly captured: boolean;
  /** Captured with changes: `diff.patch` too. */
  readonly changed: boolean;
}

/** The files one branch lacks, by name under `out/<label>/`. */
export interface MissingOut {
  readonly label: string;
  readonly files: readonly string[];
}

/** The names `out/<label>/` must hold for `e`. */
export function expectedFiles(e: OutExpectation): string[] {
  return [
    ...PUBLISHED_FILES,
    ...(e.captured ? [FILES_FILE] : []),
    ...(e.captured && e.changed ? [PATCH_FILE] : []),
  ];
}

/**
 * The branches whose `out/<label>/` lacks an expected file, in the order
 * given; empty when `out/` is complete.
 *
 * @throws {FsError} when `out/` cannot be read
 */
export function missingOut(out: Dir, expect: readonly OutExpectation[]): MissingOut[] {
  const missing: MissingOut[] = [];
  for (const e of expect) {
    const want = expectedFiles(e);
    let dir: Dir;
    try {
      dir = out.openDir(e.label);
    } catch (error) {
      if (
        error instanceof SymlinkRefusedError || error instanceof WrongKindError ||
        (error instanceof FsError && error.errno === E.ENOENT)
      ) {
        missing.push({ label: e.label, files: want });
        continue;
      }
      throw error;
    }
    try {
      const lacking = want.filter((name) => dir.statAt(name)?.kind !== "file");
      if (lacking.length > 0) missing.push({ label: e.label, files: lacking });
    } finally {
      dir.close();
    }
  }
  return missing;
}
