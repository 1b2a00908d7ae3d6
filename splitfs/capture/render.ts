/**
 * The text rendering a join consumer reads on stdin (docs/engine.md
 * "Publish, manifest and render"): per branch a header line, its `diff.patch` with every
 * `GIT binary patch` section replaced by one summary line, and a blank line, written by the
 * renderer `marsh collect` shares (`patch/branch_rendering.ts`).
 * Patches are streamed in bounded pieces: a 350 MB patch is never held whole.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { cQuote, cUnquoteAt } from "../../patch/quote.ts";
import { PATCH_FILE } from "./capture.ts";
import { type Dir, type FileHandle, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { E, FsError } from "../fd/ffi.ts";
import { BranchRendering, type Emit } from "../../patch/branch_rendering.ts";

/** One branch as the rendering shows it. */
export interface RenderBranch {
  readonly label: string;
  /** The status text (`exited 0`, `failed: capacity`, ...). */
  readonly status: string;
  /** Changed paths. */
  readonly files: number;
  /** A rejected branch: its patch is named, not shown (docs/engine.md, "Publish, manifest and render"). */
  readonly untrusted?: boolean;
}

export type { Emit };

const LF = 0x0a;
const D = 0x64; // "d", the first byte of `diff --git`
const G = 0x47; // "G", the first byte of `GIT binary patch`
/**
 * The longest line kept whole to recognise it. A `diff --git` line names a
 * path (at most PATH_MAX bytes, four times that C-quoted) twice; a longer
 * line is patch content and passes through (or is dropped) in pieces.
 */
const MAX_LINE = 64 * 1024;

const enc = new TextEncoder();
const dec = new TextDecoder();
const DIFF_GIT = enc.encode("diff --git ");
const BINARY_TITLE = "GIT binary patch";

type Mode =
  /** Patch text: passed through. */
  | "text"
  /** After `GIT binary patch`: the next line is the forward hunk's header. */
  | "title"
  /** Inside a binary section: dropped until the next `diff --git`. */
  | "skip";

function startsWith(line: Uint8Array, prefix: Uint8Array): boolean {
  if (line.length < prefix.length) return false;
  for (let i = 0; i < prefix.length; i++) if (line[i] !== prefix[i]) return false;
  return true;
}

/**
 * Turns a patch into its rendering: pushes pieces of any size, emits the
 * patch with each `GIT binary patch` section (the title line and its literal
 * hunks) replaced by
 * `binary file changed: <path> (<N> bytes; full patch in $SPLIT_DIR/<label>/diff.patch)`.
 * At most {@linkcode MAX_LINE} bytes are buffered.
 */
export class BinarySummarizer {
  readonly #label: string;
  readonly #emit: Emit;
  #mode: Mode = "text";
  #path = "";
  readonly #line = new Uint8Array(MAX_LINE + 1);
  #len = 0;
  /** The current line outgrew {@linkcode MAX_LINE}: the rest of it passes or is dropped. */
  #rest: "pass" | "drop" | null = null;

  constructor(label: string, emit: Emit) {
    this.#label = label;
    this.#emit = emit;
  }

  /** Feeds the next piece of the patch. */
  push(chunk: Uint8Array): void {
    const n = chunk.length;
    let i = 0;
    while (i < n) {
      if (this.#rest !== null) {
        const nl = chunk.indexOf(LF, i);
        const end = nl === -1 ? n : nl + 1;
        if (this.#rest === "pass") this.#emit(chunk.subarray(i, end));
        if (nl !== -1) this.#rest = null;
        i = end;
        continue;
      }
      if (this.#len === 0 && this.#mode === "text") {
        // Only a line starting with "d" or "G" can matter: pass runs of the
        // others in one piece, without copying them.
        const start = i;
        while (i < n && chunk[i] !== D && chunk[i] !== G) {
          const nl = chunk.indexOf(LF, i);
          if (nl === -1) {
            i = n;
            this.#rest = "pass";
            break;
          }
          i = nl + 1;
        }
        if (i > start) this.#emit(chunk.subarray(start, i));
        if (i >= n || this.#rest !== null) continue;
      }
      const nl = chunk.indexOf(LF, i);
      const end = nl === -1 ? n : nl;
      const piece = chunk.subarray(i, end);
      if (this.#len + piece.length > MAX_LINE) {
        this.#spill(piece);
        i = end; // the LF, if any, ends the spilled line in the branch above
        continue;
      }
      this.#line.set(piece, this.#len);
      this.#len += piece.length;
      i = end;
      if (nl !== -1) {
        i++;
        const len = this.#len;
        this.#len = 0;
        this.#handle(len, true);
      }
    }
  }

  /** Ends the patch: a last line without a newline, a binary section cut short. */
  end(): void {
    if (this.#rest === null && this.#len > 0) {
      const len = this.#len;
      this.#len = 0;
      this.#handle(len, false);
    }
    if (this.#mode === "title") this.#summary(null);
    this.#mode = "text";
    this.#rest = null;
    this.#len = 0;
  }

  /** A line longer than anything recognised: content, never a header. */
  #spill(piece: Uint8Array): void {
    if (this.#mode === "text") {
      this.#emit(this.#line.subarray(0, this.#len));
      this.#emit(piece);
      this.#rest = "pass";
    } else {
      if (this.#mode === "title") this.#summary(null);
      this.#mode = "skip";
      this.#rest = "drop";
    }
    this.#len = 0;
  }

  /** One whole line of `len` bytes in #line (its LF not included). */
  #handle(len: number, lf: boolean): void {
    const line = this.#line.subarray(0, len);
    const isDiff = startsWith(line, DIFF_GIT);
    if (this.#mode === "title") {
      const m = isDiff ? null : /^literal (\d+)$/.exec(dec.decode(line));
      this.#summary(m ? Number(m[1]) : null);
      this.#mode = "skip";
    }
    if (this.#mode === "skip") {
      if (!isDiff) return;
      this.#mode = "text";
    }
    if (isDiff) {
      this.#path = pathOfDiffLine(dec.decode(line.subarray(DIFF_GIT.length)));
    } else if (len === BINARY_TITLE.length && dec.decode(line) === BINARY_TITLE) {
      this.#mode = "title";
      return;
    }
    if (lf) this.#line[len] = LF;
    this.#emit(this.#line.subarray(0, lf ? len + 1 : len));
  }

  #summary(size: number | null): void {
    const what = size === null ? "size unknown" : `${size} bytes`;
    this.#emit(enc.encode(
      `binary file changed: ${this.#path} (${what}; full patch in $SPLIT_DIR/${this.#label}/${PATCH_FILE})\n`,
    ));
  }
}

/**
 * The path of a `diff --git a/P b/P` line (the text after `diff --git `),
 * unquoted; `null` when the line names no `a/` path. Capture writes no
 * renames, so both names are the same path.
 */
export function diffLinePath(names: string): string | null {
  if (names.startsWith('"')) {
    const q = cUnquoteAt(names);
    if (q && q.text.startsWith("a/")) return q.text.slice(2);
  } else if (names.startsWith("a/")) {
    // "a/P b/P": the two halves have the same length.
    const len = (names.length - 5) / 2;
    if (Number.isInteger(len) && names.slice(2, 2 + len) === names.slice(len + 5)) {
      return names.slice(2, 2 + len);
    }
    const cut = names.indexOf(" b/");
    if (cut > 2) return names.slice(2, cut);
  }
  return null;
}

/**
 * The path of a `diff --git a/P b/P` line (the text after `diff --git `) in
 * the form the `files` list uses: unquoted, or C-quoted when it must be.
 */
export function pathOfDiffLine(names: string): string {
  return cQuote(diffLinePath(names) ?? names);
}

function tampered(label: string, cause: unknown): RejectedError {
  return new RejectedError(`out/${label} was tampered with`, { cause });
}

/**
 * Opens `out/<label>/diff.patch`, or `null` when the branch has none.
 *
 * @throws {RejectedError} `out/<label> was tampered with` for a symlink or
 *   special file where a directory or `diff.patch` belongs
 */
export function openPatch(out: Dir, label: string): FileHandle | null {
  let dir: Dir;
  try {
    dir = out.openDir(label);
  } catch (error) {
    if (error instanceof FsError && error.errno === E.ENOENT) return null;
    if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
      throw tampered(label, error);
    }
    throw error;
  }
  try {
    return dir.openFile(PATCH_FILE);
  } catch (error) {
    if (error instanceof FsError && error.errno === E.ENOENT) return null;
    if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
      throw tampered(label, error);
    }
    throw error;
  } finally {
    dir.close();
  }
}

const READ_CHUNK = 1 << 20;

/**
 * Renders branches from `out` (the split's held `out/` descriptor). Every
 * patch is opened before anything is emitted, so a tampered `out/<label>`
 * fails the rendering before its first byte.
 *
 * @throws {RejectedError} `out/<label> was tampered with` for a symlink or
 *   special file where a directory or `diff.patch` belongs
 * @returns the sum of the branches' changed paths
 */
export function renderBranches(
  out: Dir,
  branches: readonly RenderBranch[],
  terminal: boolean,
  emit: Emit,
): number {
  const patches: (FileHandle | null)[] = [];
  try {
    for (const b of branches) patches.push(b.untrusted ? null : openPatch(out, b.label));
    const rendering = new BranchRendering(emit, terminal);
    const body: Emit = (bytes) => rendering.body(bytes);
    const buf = new Uint8Array(READ_CHUNK);
    let total = 0;
    branches.forEach((b, index) => {
      total += b.files;
      const changes = b.files === 0
        ? "no changes"
        : `${b.files} ${b.files === 1 ? "file" : "files"} changed`;
      rendering.header(b.label, b.status, changes);
      if (b.untrusted && b.files > 0) {
        body(enc.encode(`untrusted patch, not shown: $SPLIT_DIR/${b.label}/${PATCH_FILE}\n`));
      }
      const patch = patches[index];
      if (patch) {
        const summarizer = new BinarySummarizer(b.label, body);
        for (let n = patch.read(buf); n > 0; n = patch.read(buf)) {
          summarizer.push(buf.subarray(0, n));
        }
        summarizer.end();
      }
      rendering.end();
    });
    rendering.finish();
    return total;
  } finally {
    for (const p of patches) p?.close();
  }
}
