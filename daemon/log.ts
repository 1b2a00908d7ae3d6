/**
 * The daemon's log: one line per event, appended to `<control dir>/marshd.log`.
 *
 * @module
 */

/** Appends timestamped lines to a file; never throws into the caller. */
export class Log {
  readonly #file: Deno.FsFile | null;
  readonly #enc = new TextEncoder();

  constructor(path: string | null) {
    this.#file = path ? Deno.openSync(path, { append: true, create: true, mode: 0o600 }) : null;
  }

  /** Writes one line. */
  info(message: string): void {
    const line = `${new Date().toISOString()} ${message}\n`;
    try {
      if (this.#file) this.#file.writeSync(this.#enc.encode(line));
      else Deno.stderr.writeSync(this.#enc.encode(line));
    } catch {
      // Logging must never take the daemon down; the journal is the record.
    }
  }

  close(): void {
    this.#file?.close();
  }
}
