/**
 * One path's section of a `git diff --full-index --binary --no-renames`
 * patch, written without running Git.
 *
 * @module
 */

import { ByteBuilder } from "./_byte_builder.ts";
import { binaryPatch } from "./binary_hunk.ts";
import { blobId, ZERO_ID } from "./blob_id.ts";
import type { ChangeStatus, FileChange, GitMode, Side } from "./change.ts";
import { isBinary } from "./is_binary.ts";
import { cQuote, quotePrefixed } from "./quote.ts";
import { textHunks } from "./text_hunk.ts";

/** Options for {@linkcode writeFilePatch}. */
export interface WritePatchOptions {
  /**
   * How long one text diff may run, in milliseconds, before the change is
   * sent as a binary literal patch instead. Default 5000.
   */
  readonly textDiffTimeoutMs?: number;
}

/** The patch for one changed path. */
export interface FilePatch {
  /** Git's name-status letter: `A` added, `M` modified (content or mode), `D` deleted, `T` file/symlink swap. */
  readonly status: ChangeStatus;
  /** The `diff --git` section(s), ready to concatenate with other paths' into one patch file. */
  readonly patch: Uint8Array;
  /** Blob id of the old side, or `null` when added. */
  readonly oldId: string | null;
  /** Blob id of the new side, or `null` when deleted. */
  readonly newId: string | null;
}

const VALID_MODES: ReadonlySet<number> = new Set([0o100644, 0o100755, 0o120000]);

function invalid(path: string, detail: string): TypeError {
  return new TypeError(`Cannot write a patch for path ${JSON.stringify(path)}: ${detail}`);
}

function checkPath(path: string): void {
  const parts = path.split("/");
  const bad = path === "" || !path.isWellFormed() || path.includes("\0") ||
    parts.some((part) => part === "" || part === "." || part === ".." || /^\.git$/i.test(part));
  if (bad) {
    throw invalid(path, "it must be relative and normalised, without NUL or a .git component");
  }
}

function checkSide(path: string, side: Side | null): void {
  if (side !== null && !VALID_MODES.has(side.mode)) {
    throw invalid(path, `unsupported mode ${side.mode.toString(8)}`);
  }
}

function isSymlink(side: Side): boolean {
  return side.mode === 0o120000;
}

function octal(mode: GitMode): string {
  return mode.toString(8);
}

const EMPTY = new Uint8Array(0);

/**
 * Writes one `diff --git` section: old side `oldSide` (null when the path is
 * created) to `newSide` (null when deleted); at most one side is null.
 */
function writeSection(
  out: ByteBuilder,
  path: string,
  oldSide: Side | null,
  newSide: Side | null,
  oldId: string | null,
  newId: string | null,
  timeoutMs: number | undefined,
): void {
  // git apply (2.39 at least; newer sources keep looking) cannot split an
  // unquoted `diff --git` line whose path has a space before a slash (a
  // directory name ending in a space): it gives up at the first " /". It
  // needs that line's name whenever there are no ---/+++ lines (mode
  // changes, empty files, binary patches), so such paths are always quoted.
  const always = path.includes(" /");
  const nameA = quotePrefixed("a/", path, { always });
  const nameB = quotePrefixed("b/", path, { always });
  let head = `diff --git ${nameA} ${nameB}\n`;
  if (oldSide === null) head += `new file mode ${octal(newSide!.mode)}\n`;
  else if (newSide === null) head += `deleted file mode ${octal(oldSide.mode)}\n`;
  else if (oldSide.mode !== newSide.mode) {
    head += `old mode ${octal(oldSide.mode)}\nnew mode ${octal(newSide.mode)}\n`;
  }
  const oldBytes = oldSide?.bytes ?? EMPTY;
  const newBytes = newSide?.bytes ?? EMPTY;
  if (oldId !== null && oldId === newId) {
    // A mode-only change: Git prints no index line and no hunks.
    out.text(head);
    return;
  }
  head += `index ${oldId ?? ZERO_ID}..${newId ?? ZERO_ID}`;
  if (oldSide !== null && newSide !== null && oldSide.mode === newSide.mode) {
    head += ` ${octal(oldSide.mode)}`;
  }
  head += "\n";
  if (oldBytes.length === 0 && newBytes.length === 0) {
    // An empty file created or deleted: the header alone says it all.
    out.text(head);
    return;
  }
  const hunks = isBinary(oldBytes) || isBinary(newBytes)
    ? undefined
    : textHunks(oldBytes, newBytes, { timeoutMs });
  if (hunks === undefined) {
    out.text(head);
    out.bytes(binaryPatch(oldBytes, newBytes));
    return;
  }
  // diff.c appends a TAB to a name with a space (never to /dev/null) so
  // that GNU patch does not take the rest for a timestamp.
  const tab = path.includes(" ") ? "\t" : "";
  head += `--- ${oldSide === null ? "/dev/null" : nameA + tab}\n`;
  head += `+++ ${newSide === null ? "/dev/null" : nameB + tab}\n`;
  out.text(head);
  out.bytes(hunks);
}

/**
 * Writes the patch for one changed path exactly as
 * `git diff --full-index --binary --no-renames` lays it out: the
 * `diff --git` line, `new file mode` / `deleted file mode` / `old mode` +
 * `new mode`, `index <old id>..<new id>[ <mode>]`, then `---`/`+++` and
 * unified hunks, or `GIT binary patch` with literal forward and reverse
 * hunks when either side has a NUL in its first 8000 bytes or the text diff
 * runs past `options.textDiffTimeoutMs`. A file that became a symlink or
 * back (status `T`) is a deletion section followed by a creation section,
 * as Git prints it. Paths are C-quoted where Git quotes them, and also when
 * they hold a space before a `/`, which `git apply` 2.39 cannot otherwise
 * parse.
 *
 * Concatenate the sections of all changed paths, sorted by path, to get a
 * patch for `git apply` (which applies every deletion before any creation,
 * so `a` → `a/b` works in either order) and `git apply -R`.
 *
 * Pure: no file system access, no permissions needed.
 *
 * @throws {TypeError} When the change has neither side, its sides are
 * identical, a mode is not 100644, 100755 or 120000, or the path is not a
 * relative normalised path (empty, leading or doubled `/`, `.` or `..`
 * component, NUL, a `.git` component, or lone UTF-16 surrogates), which
 * `git apply` would refuse.
 */
export function writeFilePatch(change: FileChange, options: WritePatchOptions = {}): FilePatch {
  const { path } = change;
  checkPath(path);
  checkSide(path, change.old);
  checkSide(path, change.new);
  const timeoutMs = options.textDiffTimeoutMs;
  const oldSide = change.old;
  const newSide = change.new;
  if (oldSide === null && newSide === null) {
    throw invalid(path, "no side given");
  }
  const oldId = oldSide === null ? null : blobId(oldSide.bytes);
  const newId = newSide === null ? null : blobId(newSide.bytes);
  const out = new ByteBuilder(
    Math.min(1 << 20, 256 + (oldSide?.bytes.length ?? 0) + (newSide?.bytes.length ?? 0)),
  );
  let status: ChangeStatus;
  if (oldSide === null) {
    status = "A";
    writeSection(out, path, null, newSide, null, newId, timeoutMs);
  } else if (newSide === null) {
    status = "D";
    writeSection(out, path, oldSide, null, oldId, null, timeoutMs);
  } else if (isSymlink(oldSide) !== isSymlink(newSide)) {
    status = "T";
    writeSection(out, path, oldSide, null, oldId, null, timeoutMs);
    writeSection(out, path, null, newSide, null, newId, timeoutMs);
  } else {
    if (oldSide.mode === newSide.mode && oldId === newId) {
      throw invalid(path, "nothing changed");
    }
    status = "M";
    writeSection(out, path, oldSide, newSide, oldId, newId, timeoutMs);
  }
  return { status, patch: out.finish(), oldId, newId };
}

/**
 * Returns one line of a name-status list: the status letter, a TAB, the
 * C-quoted path and a newline, as `git diff --name-status` prints it.
 *
 * @example
 * ```ts
 * import { filesLine } from "./writer.ts";
 * filesLine("M", "src/a b.ts"); // "M\tsrc/a b.ts\n"
 * ```
 */
export function filesLine(status: ChangeStatus, path: string): string {
  return `${status}\t${cQuote(path)}\n`;
}

const NO_MODE = "000000";

/**
 * Returns one line of a raw list: what `git diff --raw --full-index
 * --no-renames` prints for the path (`:<old mode> <new mode> <old id>
 * <new id> <status>`, a TAB, the C-quoted path, a newline), an absent side
 * as mode `000000` and the all-zero id. It names both sides' blobs even for
 * a change of mode alone, where the patch names none.
 *
 * @example
 * ```ts
 * import { rawLine } from "./writer.ts";
 * const id = "0123456789012345678901234567890123456789";
 * rawLine("A", "a.txt", null, { mode: 0o100644 }, null, id);
 * // ":000000 100644 0000000000000000000000000000000000000000 0123...6789 A\ta.txt\n"
 * ```
 */
export function rawLine(
  status: ChangeStatus,
  path: string,
  oldSide: { readonly mode: GitMode } | null,
  newSide: { readonly mode: GitMode } | null,
  oldId: string | null,
  newId: string | null,
): string {
  const mode = (s: { readonly mode: GitMode } | null) => s === null ? NO_MODE : octal(s.mode);
  return `:${mode(oldSide)} ${mode(newSide)} ${oldId ?? ZERO_ID} ${newId ?? ZERO_ID} ${status}\t${
    cQuote(path)
  }\n`;
}
