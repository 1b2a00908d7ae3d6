/**
 * Removal of a Kit attempt's containers, verified: by id until the engine
 * answers 404, and by the attempt's label so that nothing else of it is left
 * (docs/kits.md: a branch is settled only once its container is shown gone).
 *
 * Needs what `DockerApi` needs.
 *
 * @module
 */

import type { ContainerSummary, DockerApi } from "../docker/docker_api.ts";
import { KitDocker } from "./kit_docker.ts";
import { ContainerNotRemovedError } from "./kit_errors.ts";

/** The label naming a Kit container's attempt (one of the labels every Kit container carries). */
export const LABEL_ATTEMPT = "marsh.attempt";
/** How long removal is retried before it counts as unverified. */
export const REMOVE_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Removes container `id`, verified, then every other container labelled
 * with `attempt`. The listing by label is asked as soon as the removal by id
 * is answered, beside the check by id, not after it.
 *
 * @throws {ContainerNotRemovedError} when a container of the attempt may still exist
 */
export async function removeWithAttempt(
  api: DockerApi,
  id: string,
  attempt: string,
  timeoutMs: number,
): Promise<void> {
  let listing: Promise<ContainerSummary[]> | undefined;
  const answered = () => {
    if (listing !== undefined) return;
    listing = api.listContainers([`${LABEL_ATTEMPT}=${attempt}`]);
    // Awaited by removeAttempt, which says why it failed; unawaited only when the removal by id threw.
    listing.catch((error: unknown) => void error);
  };
  await removeVerified(api, id, { attempt, timeoutMs, answered });
  await removeAttempt(api, attempt, timeoutMs, `container ${id} was removed`, listing);
}

/**
 * Removes every container labelled with `attempt`, verified.
 *
 * @throws {ContainerNotRemovedError} when the engine cannot list them (`why` says why it asked)
 */
export async function removeAttempt(
  api: DockerApi,
  attempt: string,
  timeoutMs: number,
  why: string,
  listing: Promise<ContainerSummary[]> = api.listContainers([`${LABEL_ATTEMPT}=${attempt}`]),
): Promise<void> {
  let left: ContainerSummary[];
  try {
    left = await listing;
  } catch (error) {
    if (error instanceof Deno.errors.NotCapable) throw error;
    throw new ContainerNotRemovedError(
      attempt,
      null,
      `${why}, and the engine cannot list the attempt's containers: ${describe(error)}`,
      { cause: error },
    );
  }
  for (const c of left) await removeVerified(api, c.id, { attempt, timeoutMs });
}

/**
 * `DELETE /containers/{id}?force=1` until `GET /containers/{id}/json`
 * answers 404, retried with backoff for up to `timeoutMs`. Also what
 * `marsh workers reset KIT` uses for each container
 * {@linkcode findLeftoverContainers} lists.
 *
 * Needs what `DockerApi` needs.
 *
 * @throws {ContainerNotRemovedError} when the container cannot be shown gone in time
 */
export async function removeVerified(
  api: DockerApi,
  id: string,
  opts: { readonly attempt?: string; readonly timeoutMs?: number; readonly answered?: () => void } =
    {},
): Promise<void> {
  const docker = new KitDocker(api.socket);
  const deadline = Date.now() + (opts.timeoutMs ?? REMOVE_TIMEOUT_MS);
  let last: unknown = null;
  for (let delay = 50;; delay = Math.min(delay * 2, 1_000)) {
    try {
      await api.removeContainer(id);
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) throw error;
      // 409 (removal in progress) and engine faults: the check below decides.
      last = error;
    }
    opts.answered?.();
    try {
      if (!(await docker.exists(id))) return;
      last ??= new Error("the engine still lists it after removal");
    } catch (error) {
      if (error instanceof Deno.errors.NotCapable) throw error;
      last = error;
    }
    if (Date.now() + delay > deadline) {
      throw new ContainerNotRemovedError(opts.attempt ?? null, id, describe(last), {
        cause: last,
      });
    }
    await sleep(delay);
  }
}

/**
 * The containers marsh made (they carry `marsh.attempt`) that match every
 * one of `labels`, running or not: e.g. `{ "marsh.kit": "claude" }` for
 * `marsh workers reset claude`.
 *
 * @throws {TypeError} when `labels` is empty (that would be every Kit container)
 */
export async function findLeftoverContainers(
  api: DockerApi,
  labels: Readonly<Record<string, string>>,
): Promise<ContainerSummary[]> {
  const filters = Object.entries(labels).map(([k, v]) => `${k}=${v}`);
  if (filters.length === 0) throw new TypeError("findLeftoverContainers needs at least one label");
  return await api.listContainers([LABEL_ATTEMPT, ...filters]);
}
