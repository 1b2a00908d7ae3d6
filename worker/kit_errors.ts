/**
 * The errors a Kit container run ends with, apart from the engine's own
 * (`EngineUnreachableError`, `DockerApiError` of `docker/docker_api.ts`).
 *
 * The rule callers rely on: every rejection of `runKitContainer` other than
 * {@linkcode ContainerNotRemovedError} means no container of the attempt
 * exists any more (none was made, or it was removed and the removal
 * verified), so the attempt's slot may be released.
 *
 * @module
 */

/** The launch cannot run as given (its image, mounts, argv or files); no container is left. */
export class KitLaunchError extends Error {
  override name = "KitLaunchError";
  readonly attempt: string;
  constructor(attempt: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.attempt = attempt;
  }
}

/**
 * A container of the attempt may still exist: its removal failed or could
 * not be verified. The caller keeps the attempt's slot held until
 * `marsh workers reset KIT` removes it (docs/rules.md "Budgets and capabilities").
 */
export class ContainerNotRemovedError extends Error {
  override name = "ContainerNotRemovedError";
  /** The attempt the container ran, when known. */
  readonly attempt: string | null;
  /** The container's id, or `null` when a create may or may not have made one. */
  readonly containerId: string | null;
  constructor(
    attempt: string | null,
    containerId: string | null,
    detail: string,
    options?: ErrorOptions,
  ) {
    super(
      `container ${
        containerId ?? `of attempt ${attempt ?? "(unknown)"}`
      } may still exist: ${detail}`,
      options,
    );
    this.attempt = attempt;
    this.containerId = containerId;
  }
}
