/**
 * The one error the CLI's commands throw for a failure the user can act on:
 * the top level (`main.ts`) prints its message as one line on stderr and
 * exits with its code. Anything else that escapes a command is a bug.
 *
 * @module
 */

/** Usage errors, refusals and setup failures: the specs' status 2. */
export const USAGE = 2;

/** A failure reported to the user as one line, ending the process with `code`. */
export class CliError extends Error {
  override name = "CliError";
  /** The process's exit status. */
  readonly code: number;
  constructor(message: string, code: number = USAGE, options?: ErrorOptions) {
    super(message, options);
    this.code = code;
  }
}
