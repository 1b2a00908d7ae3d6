/**
 * A branch's stdout and stderr pass through the worker on their way to the
 * files in the attempt's directory, so the worker counts them against the
 * attempt's output limit (docs/rules.md "Budgets and capabilities": captured output is a hard
 * limit) and keeps at most that many bytes, stdout and stderr together.
 *
 * @module
 */

import type { Readable } from "node:stream";

/** The bytes of stdout and stderr one attempt may keep. */
export class OutputBudget {
  readonly limit: number;
  #seen = 0;
  #reported = false;

  constructor(limit: number) {
    this.limit = limit;
  }

  /** Bytes read from the branch so far, kept or not. */
  get seen(): number {
    return this.#seen;
  }

  /** Whether the branch wrote more than the limit. */
  get crossed(): boolean {
    return this.#seen > this.limit;
  }

  /** Accounts for `n` more bytes and says how many of them may be kept. */
  take(n: number): number {
    const room = Math.max(0, this.limit - this.#seen);
    this.#seen += n;
    return Math.min(n, room);
  }

  /** True the first time it is called after the limit was crossed, false otherwise. */
  report(): boolean {
    if (!this.crossed || this.#reported) return false;
    this.#reported = true;
    return true;
  }
}

async function writeAll(file: Deno.FsFile, bytes: Uint8Array): Promise<void> {
  for (let off = 0; off < bytes.length;) off += await file.write(bytes.subarray(off));
}

/**
 * Copies `source` into `file` within `budget` and resolves with the bytes
 * kept. Stops reading at the first chunk past the limit, after keeping the
 * part of it that fits, and calls `onCrossed` (once per budget, with the
 * bytes seen). A source destroyed by the caller ends the copy quietly.
 *
 * Needs write access to `file` (already open).
 */
export async function pump(
  source: Readable,
  file: Deno.FsFile,
  budget: OutputBudget,
  onCrossed: (seen: number) => void,
): Promise<number> {
  let kept = 0;
  try {
    for await (const chunk of source as AsyncIterable<Uint8Array>) {
      const keep = budget.take(chunk.length);
      if (keep > 0) {
        await writeAll(file, chunk.subarray(0, keep));
        kept += keep;
      }
      if (budget.crossed) {
        if (budget.report()) onCrossed(budget.seen);
        break;
      }
    }
  } catch (error) {
    // Destroying the source (output limit, lost supervisor) ends the copy.
    if (!source.destroyed) throw error;
  }
  return kept;
}
