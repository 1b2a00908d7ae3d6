/**
 * A captured branch's raw list, `out/<label>/raw` (written by capture,
 * `rawLine` in patch/writer.ts): per changed path its old and new mode and
 * blob id, as `git diff --raw --full-index --no-renames` prints them. A
 * `--git` merge's inputs read it instead of the patch's headers
 * (docs/resolution.md, "In the service"): a line per path, where the patch
 * holds every hunk too. Like the patch, it is absent when nothing changed;
 * branches captured before capture wrote it have none.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { ZERO_ID } from "../../patch/blob_id.ts";
import type { GitMode } from "../../patch/change.ts";
import { cUnquote } from "../../patch/quote.ts";
import { RAW_FILE } from "../capture/capture.ts";
import type { Dir } from "../fd/dir.ts";
import { type PatchEntry, PatchHeaderError, type PatchSide } from "./patch_headers.ts";

/** The most a raw list may weigh (its patch is bounded the same way, `MAX_COUNTED_PATCH`). */
export const MAX_RAW_BYTES = 512 * 1024 * 1024;

const LINE = /^:([0-7]{6}) ([0-7]{6}) ([0-9a-f]{40}) ([0-9a-f]{40}) ([AMDT])\t(.+)$/;
const NO_MODE = "000000";
const MODES: ReadonlySet<number> = new Set([0o100644, 0o100755, 0o120000]);
const dec = new TextDecoder("utf-8", { fatal: true });

function sideOf(mode: string, id: string, line: string): PatchSide | null {
  if (mode === NO_MODE && id === ZERO_ID) return null;
  const m = parseInt(mode, 8);
  if (!MODES.has(m) || id === ZERO_ID) {
    throw new PatchHeaderError(`malformed raw list line: ${line}`);
  }
  return { mode: m as GitMode, blob: id };
}

/**
 * The entries of a raw list's text, in its order (capture's: by path).
 *
 * @throws {PatchHeaderError} for a line capture would not write
 */
export function parseRawList(text: string): PatchEntry[] {
  const lines = text.split("\n");
  if (lines.pop() !== "") throw new PatchHeaderError("the raw list does not end with a newline");
  return lines.map((line) => {
    const m = LINE.exec(line);
    if (m === null) throw new PatchHeaderError(`malformed raw list line: ${line}`);
    let path: string;
    try {
      path = cUnquote(m[6]!);
    } catch (cause) {
      throw new PatchHeaderError(`malformed raw list line: ${line}`, { cause });
    }
    const old = sideOf(m[1]!, m[3]!, line), now = sideOf(m[2]!, m[4]!, line);
    const status = m[5];
    const fits = status === "A"
      ? old === null && now !== null
      : status === "D"
      ? old !== null && now === null
      : old !== null && now !== null &&
        (status === "T") === ((old.mode === 0o120000) !== (now.mode === 0o120000));
    if (!fits) throw new PatchHeaderError(`malformed raw list line: ${line}`);
    return { path, old, new: now };
  });
}

/**
 * The raw list in `labelDir` (`out/<label>/`), or `null` when there is none
 * (a branch captured before capture wrote it: read the patch's headers).
 *
 * @throws {PatchHeaderError} for a list capture would not write
 */
export function readRawList(labelDir: Dir): PatchEntry[] | null {
  const bytes = labelDir.readFileIfExists(RAW_FILE, MAX_RAW_BYTES);
  if (bytes === null) return null;
  let text: string;
  try {
    text = dec.decode(bytes);
  } catch (cause) {
    throw new PatchHeaderError("the raw list is not UTF-8", { cause });
  }
  return parseRawList(text);
}
