/**
 * The error of a request the caller got wrong. Every daemon module that
 * refuses a request throws it, and the connection handler turns it into the
 * reply's exit status and message (`docs/messages.md`), so it lives in a leaf
 * module that any of them can import.
 *
 * @module
 */

/** A request the caller got wrong; `code` is the exit status. */
export class RequestError extends Error {
  override name = "RequestError";
  constructor(readonly code: number, message: string) {
    super(message);
  }
}
