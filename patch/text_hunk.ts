/**
 * Unified-diff hunks between two byte contents, in the form `git diff`
 * prints and `git apply` reads.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { diffArrays } from "diff";
import { ByteBuilder } from "./_byte_builder.ts";

/** Options for {@linkcode textHunks}. */
export interface TextHunkOptions {
  /**
   * Give up (return `undefined`) once the line diff has run this long, in
   * milliseconds. Default 5000, the capture deadline for one text diff.
   */
  readonly timeoutMs?: number;
}

/** Lines of unchanged context around each change, as in `git diff`. */
const CONTEXT = 3;

const NO_NEWLINE = new TextEncoder().encode("\n\\ No newline at end of file\n");

/** A run of removed old lines `[o, o+oc)` replaced by new lines `[n, n+nc)`. */
interface Change {
  readonly o: number;
  oc: number;
  readonly n: number;
  nc: number;
}

/** One content split into lines; line `i` is `bytes[starts[i], starts[i+1])`, LF included. */
interface Lines {
  readonly bytes: Uint8Array;
  readonly starts: number[];
  readonly count: number;
  readonly endsWithNewline: boolean;
}

function splitLines(bytes: Uint8Array): Lines {
  const starts = [0];
  let at = 0;
  for (;;) {
    const lf = bytes.indexOf(0x0a, at);
    if (lf === -1) break;
    at = lf + 1;
    starts.push(at);
  }
  if (at < bytes.length) starts.push(bytes.length);
  return {
    bytes,
    starts,
    count: starts.length - 1,
    endsWithNewline: bytes.length === 0 || bytes[bytes.length - 1] === 0x0a,
  };
}

/**
 * Numbers each distinct line so the diff compares small integers. Lines are
 * decoded as latin1 (one character per byte), so any byte sequence keys
 * exactly; the LF stays in the key, so a last line without one differs from
 * the same text with one, as in Git.
 */
function lineIds(lines: Lines, intern: Map<string, number>): number[] {
  const { bytes, starts, count } = lines;
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("latin1");
  const ids = new Array<number>(count);
  for (let i = 0; i < count; i++) {
    const key = text.slice(starts[i]!, starts[i + 1]!);
    let id = intern.get(key);
    if (id === undefined) {
      id = intern.size;
      intern.set(key, id);
    }
    ids[i] = id;
  }
  return ids;
}

/** Returns the changed line runs, or `undefined` if the diff passed `deadline` (a `Date.now()` value). */
function lineChanges(
  oldIds: number[],
  newIds: number[],
  deadline: number,
): Change[] | undefined {
  // Trimming the common ends is linear and keeps the Myers diff to the
  // region that changed.
  const shorter = Math.min(oldIds.length, newIds.length);
  let head = 0;
  while (head < shorter && oldIds[head] === newIds[head]) head++;
  let tail = 0;
  while (
    tail < shorter - head &&
    oldIds[oldIds.length - 1 - tail] === newIds[newIds.length - 1 - tail]
  ) tail++;
  const oldMid = oldIds.slice(head, oldIds.length - tail);
  const newMid = newIds.slice(head, newIds.length - tail);
  if (oldMid.length === 0 && newMid.length === 0) return [];
  if (oldMid.length === 0 || newMid.length === 0) {
    return [{ o: head, oc: oldMid.length, n: head, nc: newMid.length }];
  }
  const parts = diffArrays(oldMid, newMid, { timeout: Math.max(0, deadline - Date.now()) });
  if (parts === undefined) return undefined;
  const changes: Change[] = [];
  let o = head;
  let n = head;
  let open: Change | undefined;
  for (const part of parts) {
    if (part.added) {
      open ??= { o, oc: 0, n, nc: 0 };
      open.nc += part.count;
      n += part.count;
    } else if (part.removed) {
      open ??= { o, oc: 0, n, nc: 0 };
      open.oc += part.count;
      o += part.count;
    } else {
      // Git prints a run's removed lines before its added ones, whatever
      // order the diff found them in, so each run between common lines is
      // one change.
      if (open !== undefined) changes.push(open);
      open = undefined;
      o += part.count;
      n += part.count;
    }
  }
  if (open !== undefined) changes.push(open);
  return changes;
}

/** Git's hunk range: `start,count`, the count left out when 1, and `N,0` (N the line before) when empty. */
function range(start: number, count: number): string {
  if (count === 0) return `${start},0`;
  if (count === 1) return `${start + 1}`;
  return `${start + 1},${count}`;
}

function emitLine(out: ByteBuilder, prefix: number, lines: Lines, index: number): void {
  out.byte(prefix);
  out.bytes(lines.bytes.subarray(lines.starts[index]!, lines.starts[index + 1]!));
  if (index === lines.count - 1 && !lines.endsWithNewline) out.bytes(NO_NEWLINE);
}

/**
 * Returns the unified hunks (`@@ -a,b +c,d @@` and their lines) that turn
 * `oldContent` into `newContent`, with 3 lines of context and hunks merged
 * when their context would touch, as `git diff` does; an empty array when
 * the contents are equal. Lines end at LF only, so CR stays content, and
 * bytes are copied verbatim, so any encoding round-trips through
 * `git apply`. A last line without LF is followed by
 * `\ No newline at end of file`.
 *
 * Returns `undefined` when the line diff does not finish within
 * `options.timeoutMs` (default 5000); the caller then sends the change as
 * a binary patch. Everything but the diff itself is linear in the input.
 */
export function textHunks(
  oldContent: Uint8Array,
  newContent: Uint8Array,
  options: TextHunkOptions = {},
): Uint8Array | undefined {
  const deadline = Date.now() + (options.timeoutMs ?? 5000);
  const oldLines = splitLines(oldContent);
  const newLines = splitLines(newContent);
  const intern = new Map<string, number>();
  const changes = lineChanges(lineIds(oldLines, intern), lineIds(newLines, intern), deadline);
  if (changes === undefined) return undefined;

  const out = new ByteBuilder(4096);
  for (let i = 0; i < changes.length;) {
    let j = i;
    while (j + 1 < changes.length) {
      const prev = changes[j]!;
      if (changes[j + 1]!.o - (prev.o + prev.oc) > 2 * CONTEXT) break;
      j++;
    }
    const first = changes[i]!;
    const last = changes[j]!;
    const lead = Math.min(CONTEXT, first.o);
    const oldChangeEnd = last.o + last.oc;
    // After a hunk's last change the two sides agree up to the next change
    // (at least 7 lines on), so the trailing context is the same on both.
    const trail = Math.min(CONTEXT, oldLines.count - oldChangeEnd);
    const oldStart = first.o - lead;
    const newStart = first.n - lead;
    const oldCount = oldChangeEnd + trail - oldStart;
    const newCount = last.n + last.nc + trail - newStart;
    out.text(`@@ -${range(oldStart, oldCount)} +${range(newStart, newCount)} @@\n`);
    let at = oldStart;
    for (let k = i; k <= j; k++) {
      const change = changes[k]!;
      for (; at < change.o; at++) emitLine(out, 0x20, oldLines, at);
      for (let q = change.o; q < change.o + change.oc; q++) emitLine(out, 0x2d, oldLines, q);
      for (let q = change.n; q < change.n + change.nc; q++) emitLine(out, 0x2b, newLines, q);
      at = change.o + change.oc;
    }
    for (; at < oldChangeEnd + trail; at++) emitLine(out, 0x20, oldLines, at);
    i = j + 1;
  }
  return out.finish();
}
