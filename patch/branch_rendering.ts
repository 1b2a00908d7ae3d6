/**
 * The rendering of branches, one after another in declaration order, that `marsh join` (a split's
 * patches: docs/guide.md, "The rendering") and `marsh collect` (a fanout's output: docs/guide.md,
 * "marsh fanout and marsh collect") both print: per branch a header line `== LABEL: STATUS
 * (DETAIL)`, its body, a failed branch's stderr under `== LABEL stderr ==`, and a blank line. On a
 * terminal every byte goes through {@linkcode TerminalEscaper}, so a branch cannot drive it.
 *
 * Pure code: the split-filesystem service (join), the CLI and the in-job client (collect) share it.
 *
 * @module
 */

import { TerminalEscaper } from "./terminal_escape.ts";

/** Receives output; the bytes are valid only during the call (buffers are reused). */
export type Emit = (bytes: Uint8Array) => void;

const enc = new TextEncoder();
const LF = 0x0a;
const NEWLINE = new Uint8Array([LF]);

/** The header line of a branch, with its newline. */
export function branchHeader(label: string, status: string, detail: string | null): string {
  return `== ${label}: ${status}${detail === null ? "" : ` (${detail})`}\n`;
}

/** The line above a branch's stderr, with its newline. */
export function stderrHeader(label: string): string {
  return `== ${label} stderr ==\n`;
}

/** Writes branches one at a time: {@linkcode header}, {@linkcode body}, {@linkcode end}, ... {@linkcode finish}. */
export class BranchRendering {
  readonly #sink: Emit;
  readonly #escaper: TerminalEscaper | null;
  /** The last byte of the body so far, to end it on a line of its own. */
  #last = LF;

  /** `terminal`: control bytes are shown as `\xNN` (the reader is a terminal). */
  constructor(emit: Emit, terminal: boolean) {
    this.#escaper = terminal ? new TerminalEscaper(emit) : null;
    const escaper = this.#escaper;
    this.#sink = escaper ? (bytes) => escaper.push(bytes) : emit;
  }

  /** Starts a branch. */
  header(label: string, status: string, detail: string | null): void {
    this.#last = LF;
    this.#sink(enc.encode(branchHeader(label, status, detail)));
  }

  /** A piece of the branch's body (its patch, or its stdout). */
  body(bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#sink(bytes);
    this.#last = bytes[bytes.length - 1]!;
  }

  /** The branch's stderr under its own line; nothing when it is empty. */
  stderr(label: string, bytes: Uint8Array): void {
    if (bytes.length === 0) return;
    this.#endLine();
    this.#sink(enc.encode(stderrHeader(label)));
    this.body(bytes);
  }

  /** Ends the branch: its last line, then a blank line. */
  end(): void {
    this.#endLine();
    this.#sink(NEWLINE);
  }

  /** Ends the rendering (a held-back byte of the escaper). */
  finish(): void {
    this.#escaper?.end();
  }

  #endLine(): void {
    if (this.#last !== LF) this.#sink(NEWLINE);
    this.#last = LF;
  }
}
