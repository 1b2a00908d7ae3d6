/**
 * Reading back what marsh's own patch writer wrote, for `marsh compare`
 * (docs/resolution.md, "Comparing branches"): the files list
 * (`out/<label>/files`, one `STATUS\tPATH` line per changed path, the path
 * quoted as in `quote.ts`) and the line counts of `diff.patch`.
 *
 * Pure: needs no permission.
 *
 * @module
 */

import type { ChangeStatus } from "./change.ts";
import { cUnquote } from "./quote.ts";

/** Lines added and removed, and files whose change is binary (counted apart: they have no lines). */
export interface PatchStats {
  /** `diff --git` sections: a file/symlink swap has two. */
  readonly sections: number;
  readonly added: number;
  readonly removed: number;
  /** Sections with a `GIT binary patch` (or Git's `Binary files … differ`). */
  readonly binary: number;
}

/** One line of a files list. */
export interface ListedFile {
  readonly status: ChangeStatus;
  readonly path: string;
}

/**
 * Parses a files list (`out/<label>/files`).
 *
 * @throws {SyntaxError} naming the first malformed line
 */
export function parseFilesList(text: string): ListedFile[] {
  const out: ListedFile[] = [];
  const lines = text.split("\n");
  if (lines.at(-1) === "") lines.pop();
  for (const [i, line] of lines.entries()) {
    const m = /^([AMDT])\t(.+)$/.exec(line);
    if (m === null) throw new SyntaxError(`files list line ${i + 1} is malformed`);
    out.push({ status: m[1] as ChangeStatus, path: cUnquote(m[2]!) });
  }
  return out;
}

const NL = 0x0a;

/**
 * Counts a patch's added and removed lines and its binary sections. Lines
 * are counted only inside hunks, so a `---`/`+++` header is never a line;
 * a removed line that reads `-- x` is one, as in `git apply --numstat`.
 */
export function patchStats(patch: Uint8Array): PatchStats {
  let sections = 0, added = 0, removed = 0, binary = 0;
  let inHunk = false;
  const dec = new TextDecoder();
  for (let start = 0; start < patch.length;) {
    let end = patch.indexOf(NL, start);
    if (end === -1) end = patch.length;
    const first = patch[start];
    if (first === 0x64 /* d */ && startsWith(patch, start, "diff --git ")) {
      sections++;
      inHunk = false;
    } else if (first === 0x40 /* @ */ && startsWith(patch, start, "@@ ")) {
      inHunk = true;
    } else if (inHunk && first === 0x2b /* + */) added++;
    else if (inHunk && first === 0x2d /* - */) removed++;
    else if (
      !inHunk &&
      (startsWith(patch, start, "GIT binary patch") ||
        (first === 0x42 /* B */ && dec.decode(patch.subarray(start, end)).endsWith(" differ")))
    ) binary++;
    start = end + 1;
  }
  return { sections, added, removed, binary };
}

function startsWith(bytes: Uint8Array, at: number, prefix: string): boolean {
  if (at + prefix.length > bytes.length) return false;
  for (let i = 0; i < prefix.length; i++) {
    if (bytes[at + i] !== prefix.charCodeAt(i)) return false;
  }
  return true;
}
