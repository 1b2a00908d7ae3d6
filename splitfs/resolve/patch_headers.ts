/**
 * The per-path headers of a captured `diff.patch` (written by capture as
 * `git diff --binary --full-index --no-renames` lays it out, patch/writer.ts):
 * for each path its old and new side, each a Git mode and a blob id. A
 * `--git` merge's inputs start from these (docs/resolution.md, "The `--git`
 * scope"). The patch is streamed in bounded pieces, never held whole.
 *
 * Needs `--allow-ffi=<libc path>` (it reads through a `FileHandle`).
 *
 * @module
 */

import { ZERO_ID } from "../../patch/blob_id.ts";
import type { GitMode } from "../../patch/change.ts";
import { diffLinePath } from "../capture/render.ts";
import type { FileHandle } from "../fd/dir.ts";
import { INDEX_LINE } from "../git/object_export.ts";

/** A patch is not what capture writes. */
export class PatchHeaderError extends Error {
  override name = "PatchHeaderError";
}

/** One side of a path in a patch. */
export interface PatchSide {
  readonly mode: GitMode;
  /**
   * The blob id; `null` for a change of mode alone, where Git names no blob
   * (both sides hold the same bytes).
   */
  readonly blob: string | null;
}

/** One path of a patch: `old` absent when added, `new` absent when deleted. */
export interface PatchEntry {
  readonly path: string;
  readonly old: PatchSide | null;
  readonly new: PatchSide | null;
}

/** Header lines are short; a longer line is patch content (and a name is at most 4096 bytes, quoted ×4, twice). */
const MAX_LINE = 64 * 1024;
const READ_CHUNK = 1 << 20;
const LF = 0x0a;
/** Stands for a line too long to be a header: it ends one. */
const LONG = new Uint8Array([0x2b]);
/** What a line that cannot be a header is handed on as (its first byte is not one of a header's). */
const SKIPPED = new Uint8Array([0x20]);
const DIFF_GIT = new TextEncoder().encode("diff --git ");

function startsWithDiff(bytes: Uint8Array): boolean {
  if (bytes.length < DIFF_GIT.length) return false;
  for (let i = 0; i < DIFF_GIT.length; i++) if (bytes[i] !== DIFF_GIT[i]) return false;
  return true;
}
const dec = new TextDecoder();
const MODES: ReadonlySet<number> = new Set([0o100644, 0o100755, 0o120000]);
/** The first bytes of the lines read: `d`iff, `n`ew, `d`eleted, `o`ld, `i`ndex. */
const HEADER_START: ReadonlySet<number> = new Set([..."dnoi"].map((c) => c.charCodeAt(0)));

/** What one `diff --git` section's header said. */
interface Section {
  path: string;
  newFile?: GitMode;
  deleted?: GitMode;
  oldMode?: GitMode;
  newMode?: GitMode;
  index?: { old: string; new: string; mode?: GitMode };
}

function modeOf(text: string, line: string): GitMode {
  const m = /^[0-7]{6}$/.test(text) ? parseInt(text, 8) : NaN;
  if (!MODES.has(m)) throw new PatchHeaderError(`unsupported mode in patch line: ${line}`);
  return m as GitMode;
}

function blobOf(id: string): string | null {
  return id === ZERO_ID ? null : id;
}

/** The two sides a finished section names. */
function sidesOf(s: Section): { old: PatchSide | null; new: PatchSide | null } {
  const where = `the patch section of ${JSON.stringify(s.path)}`;
  const idx = s.index;
  if (s.newFile !== undefined) {
    if (!idx || blobOf(idx.new) === null) throw new PatchHeaderError(`${where} names no new blob`);
    return { old: null, new: { mode: s.newFile, blob: idx.new } };
  }
  if (s.deleted !== undefined) {
    if (!idx || blobOf(idx.old) === null) throw new PatchHeaderError(`${where} names no old blob`);
    return { old: { mode: s.deleted, blob: idx.old }, new: null };
  }
  if (s.oldMode !== undefined && s.newMode !== undefined) {
    return {
      old: { mode: s.oldMode, blob: idx ? idx.old : null },
      new: { mode: s.newMode, blob: idx ? idx.new : null },
    };
  }
  if (!idx || idx.mode === undefined) throw new PatchHeaderError(`${where} has no index line`);
  return { old: { mode: idx.mode, blob: idx.old }, new: { mode: idx.mode, blob: idx.new } };
}

/**
 * Reads every path's sides from a captured patch, in the patch's order
 * (capture sorts by path). A file that became a symlink or back is one entry
 * made of its deletion and creation sections.
 *
 * @throws {PatchHeaderError} for a header capture would not write
 */
export function readPatchEntries(patch: FileHandle): PatchEntry[] {
  const entries: PatchEntry[] = [];
  let section: Section | null = null;
  let inHeader = false;
  const finish = () => {
    if (section === null) return;
    const sides = sidesOf(section);
    const last = entries.at(-1);
    if (last?.path === section.path) {
      // A type change: its deletion section, then its creation section.
      if (last.new !== null || last.old === null || sides.old !== null || sides.new === null) {
        throw new PatchHeaderError(`the patch names ${JSON.stringify(section.path)} twice`);
      }
      entries[entries.length - 1] = { path: last.path, old: last.old, new: sides.new };
    } else entries.push({ path: section.path, ...sides });
    section = null;
  };
  const onLine = (bytes: Uint8Array) => {
    // Only a header line starts with one of these; hunk lines start with
    // a space, `+`, `-`, a backslash or `@`; binary hunk lines are base85, without a space.
    if (!HEADER_START.has(bytes[0] ?? 0)) {
      inHeader = false;
      return;
    }
    // Outside a header only a `diff --git` line matters: a base85 line may start with a letter.
    if (!inHeader && !startsWithDiff(bytes)) return;
    const line = dec.decode(bytes);
    if (line.startsWith("diff --git ")) {
      finish();
      const path = diffLinePath(line.slice("diff --git ".length));
      if (path === null) throw new PatchHeaderError(`unreadable patch line: ${line}`);
      section = { path };
      inHeader = true;
      return;
    }
    if (!inHeader || section === null) return;
    const s: Section = section;
    const word = /^(new file mode|deleted file mode|old mode|new mode) (\S+)$/.exec(line);
    if (word) {
      const mode = modeOf(word[2]!, line);
      if (word[1] === "new file mode") s.newFile = mode;
      else if (word[1] === "deleted file mode") s.deleted = mode;
      else if (word[1] === "old mode") s.oldMode = mode;
      else s.newMode = mode;
      return;
    }
    const idx = INDEX_LINE.exec(line);
    if (idx) {
      s.index = {
        old: idx[1]!,
        new: idx[2]!,
        ...(idx[3] !== undefined ? { mode: modeOf(idx[3], line) } : {}),
      };
      return;
    }
    // `---`, `GIT binary patch`, a hunk: the header is over.
    inHeader = false;
  };
  streamLines(patch, onLine);
  finish();
  return entries;
}

/** Calls `onLine` with each line of at most {@linkcode MAX_LINE} bytes (longer ones are content, skipped). */
function streamLines(file: FileHandle, onLine: (line: Uint8Array) => void): void {
  const line = new Uint8Array(MAX_LINE);
  let len = 0;
  let long = false;
  const buf = new Uint8Array(READ_CHUNK);
  for (let n = file.read(buf); n > 0; n = file.read(buf)) {
    for (let i = 0; i < n;) {
      const nl = buf.subarray(0, n).indexOf(LF, i);
      const stop = nl === -1 ? n : nl;
      // A line that cannot be a header is not copied: most of a patch is hunks.
      if (len === 0 && !long && i < stop && !HEADER_START.has(buf[i]!)) {
        if (nl === -1) {
          long = true;
          break;
        }
        onLine(SKIPPED);
        i = nl + 1;
        continue;
      }
      if (!long) {
        if (len + stop - i > MAX_LINE) long = true;
        else {
          line.set(buf.subarray(i, stop), len);
          len += stop - i;
        }
      }
      if (nl === -1) break;
      onLine(long ? LONG : line.subarray(0, len));
      len = 0;
      long = false;
      i = nl + 1;
    }
  }
  if (len > 0 || long) onLine(long ? LONG : line.subarray(0, len));
}
