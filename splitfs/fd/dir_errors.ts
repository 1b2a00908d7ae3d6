/**
 * The refusals of `dir.ts`'s descriptor walks: a symlink where a
 * directory or file was needed, an entry of the wrong kind, a file past its
 * bound, a name that is not UTF-8.
 *
 * @module
 */

import type { EntryKind } from "./stat.ts";

/** A path component that was a symlink where marsh needed a directory or a file. */
export class SymlinkRefusedError extends Error {
  override name = "SymlinkRefusedError";
  constructor(readonly path: string, options?: ErrorOptions) {
    super(`refusing to follow a symlink at ${path}`, options);
  }
}

/** An entry that is not of the kind a step requires (a FIFO where a file was expected). */
export class WrongKindError extends Error {
  override name = "WrongKindError";
  constructor(readonly path: string, readonly kind: EntryKind, readonly wanted: EntryKind) {
    super(`${path} is a ${describeKind(kind)}, not a ${describeKind(wanted)}`);
  }
}

/** A file larger than the caller's bound. */
export class TooLargeError extends Error {
  override name = "TooLargeError";
  constructor(readonly path: string, readonly size: number, readonly limit: number) {
    super(`${path} is larger than ${limit} bytes: ${size} bytes`);
  }
}

/** A file name that is not UTF-8: marsh cannot carry it in a path, a patch or a message. */
export class InvalidNameError extends Error {
  override name = "InvalidNameError";
  /** What the user can do about it (`rename it, or ignore it ...`), or `null`. */
  readonly fix: string | null;
  /** `options.fix` is appended to the message. */
  constructor(
    readonly dir: string,
    readonly shown: string,
    options?: ErrorOptions & { readonly fix?: string },
  ) {
    const fix = options?.fix ?? null;
    super(`file name is not valid UTF-8 in ${dir}: "${shown}"${fix ? `; ${fix}` : ""}`, options);
    this.fix = fix;
  }
}

function describeKind(kind: EntryKind): string {
  switch (kind) {
    case "file":
      return "regular file";
    case "dir":
      return "directory";
    case "symlink":
      return "symlink";
    case "fifo":
      return "FIFO";
    case "socket":
      return "socket";
    case "char":
      return "character device";
    case "block":
      return "block device";
  }
}
