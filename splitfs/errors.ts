/**
 * The engine's errors that callers catch and turn into statuses.
 *
 * @module
 */

/** A fork's result cannot be trusted: its status becomes `rejected: <reason>`. */
export class RejectedError extends Error {
  override name = "RejectedError";
  constructor(readonly reason: string, options?: ErrorOptions) {
    super(`rejected: ${reason}`, options);
  }
}

/** A directory marsh made was replaced behind its back (`git clean -xfd`, `rm -rf`). */
export class WorkspaceReplacedError extends Error {
  override name = "WorkspaceReplacedError";
  constructor(readonly detail: string, options?: ErrorOptions) {
    super("workspace replaced", options);
  }
}

/** A snapshot could not be taken; setup fails and nothing runs. */
export class SnapshotError extends Error {
  override name = "SnapshotError";
}

/**
 * A request the engine will not carry out as asked (an invalid label, a
 * capture of a split reopened after a restart); nothing was changed.
 */
export class RefusedError extends Error {
  override name = "RefusedError";
}
