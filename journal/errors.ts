/**
 * The journal's errors. Missing records are `Deno.errors.NotFound`,
 * duplicates `Deno.errors.AlreadyExists`, deleting a live split
 * `Deno.errors.Busy`, use after `close()` `Deno.errors.BadResource`, and a
 * record that breaks the types a `TypeError`; the classes here are the ones
 * the daemon catches.
 *
 * @module
 */

/** SQLite refused or failed an operation; `cause` holds SQLite's error. */
export class JournalError extends Error {
  override name = "JournalError";
}

/**
 * The journal was written by a newer marsh: opening it would risk
 * misreading it, so nothing is changed.
 */
export class JournalVersionError extends JournalError {
  override name = "JournalVersionError";
  constructor(
    readonly path: string,
    readonly found: number,
    readonly supported: number,
    options?: ErrorOptions,
  ) {
    super(
      `Journal is newer than this marsh: "${path}" has schema version ${found}, ` +
        `this marsh knows versions up to ${supported}`,
      options,
    );
  }
}

/** A row holds a value this code does not know (an unknown state, a malformed field). */
export class JournalCorruptError extends JournalError {
  override name = "JournalCorruptError";
  constructor(
    readonly table: string,
    readonly key: string,
    readonly column: string,
    readonly value: unknown,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(
      `Journal row cannot be read: ${table} "${key}" column "${column}" holds ` +
        `${JSON.stringify(value) ?? String(value)}: ${detail}`,
      options,
    );
  }
}
