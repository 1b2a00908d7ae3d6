/**
 * The worker's argv branch attempts: one Kit container each
 * (`runKitContainer`), an `AbortController` per attempt that `cancel` and
 * shutdown abort, and the events of `protocol/worker.ts` for each. Also
 * `kit-reset` (`marsh workers reset KIT`): the Kit's leftover containers,
 * removed and verified gone, never one a live attempt runs.
 *
 * Needs what `runKitContainer` needs (`kitWorkerFlags` of `kit_flags.ts`).
 *
 * @module
 */

import type { DockerApi } from "../docker/docker_api.ts";
import {
  boundMessage,
  DEFAULT_GRACE_MS,
  type KitLaunchRequest,
  type KitResetRequest,
  type ResetContainer,
  type WorkerEvent,
} from "../protocol/worker.ts";
import {
  ContainerNotRemovedError,
  KitLaunchError,
  LABEL_ATTEMPT,
  LABEL_JOB,
  LABEL_KIT,
  LABEL_LABEL,
  LABEL_OWNER,
  LABEL_SPLIT,
  runKitContainer,
} from "./kit_container.ts";
import { findLeftoverContainers, removeVerified } from "./kit_removal.ts";

/** How many ended attempt ids are remembered, to refuse a reused id. */
const REMEMBERED = 65_536;

/** What the Kit runner needs from the worker. */
export interface KitRunnerOptions {
  /** Where events go, in order. */
  readonly emit: (event: WorkerEvent) => void;
  /** The engine the daemon chose (`engineSocket` of `docker/private_engine.ts`). */
  readonly api: DockerApi;
  /** Notes for the daemon's log. */
  readonly log?: (message: string) => void;
  /**
   * The daemon's control dir, in every container's `marsh.owner` label:
   * `kit-reset` removes only this daemon's containers, never another's on a
   * shared engine. `null` (tests): no such label, and reset takes any.
   */
  readonly owner?: string | null;
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Runs Kit attempts. Every outcome is an event; no method throws for a bad request. */
export class KitRunner {
  readonly #opts: KitRunnerOptions;
  readonly #live = new Map<string, { abort: AbortController; done: Promise<void> }>();
  readonly #ended = new Set<string>();
  #closing = false;

  constructor(opts: KitRunnerOptions) {
    this.#opts = opts;
  }

  /** Whether `attempt` is a live or ended Kit attempt of this worker. */
  has(attempt: string): boolean {
    return this.#live.has(attempt) || this.#ended.has(attempt);
  }

  /** The number of attempts that have not sent their last event. */
  get live(): number {
    return this.#live.size;
  }

  /**
   * Starts an attempt. `taken` says whether another runner of this worker
   * knows the id: a reused id is refused with an error naming no attempt.
   */
  launch(req: KitLaunchRequest, taken = false): void {
    const emit = this.#opts.emit;
    if (taken || this.has(req.attempt)) {
      emit({ v: 1, t: "error", message: `attempt ${JSON.stringify(req.attempt)} exists` });
      return;
    }
    if (this.#closing) {
      emit({ v: 1, t: "error", attempt: req.attempt, message: "the worker is shutting down" });
      return;
    }
    const abort = new AbortController();
    const done = this.#run(req, abort.signal).catch((error) => {
      emit({
        v: 1,
        t: "error",
        attempt: req.attempt,
        message: boundMessage(`internal fault: ${describe(error)}`),
      });
    }).finally(() => {
      this.#live.delete(req.attempt);
      this.#ended.add(req.attempt);
      if (this.#ended.size > REMEMBERED) {
        const oldest = this.#ended.values().next();
        if (!oldest.done) this.#ended.delete(oldest.value);
      }
    });
    this.#live.set(req.attempt, { abort, done });
  }

  async #run(req: KitLaunchRequest, signal: AbortSignal): Promise<void> {
    const { emit, api } = this.#opts;
    const attempt = req.attempt;
    let container: string | null = null;
    try {
      const exit = await runKitContainer(api, req, signal, {
        graceMs: req.graceMs ?? DEFAULT_GRACE_MS,
        owner: this.#opts.owner ?? null,
        onContainer: (id) => {
          container = id;
          emit({ v: 1, t: "launched", attempt, container: id });
        },
      });
      if (exit.outputLimit) {
        // The bytes past the limit were read and dropped; say the limit was crossed.
        emit({
          v: 1,
          t: "output-limit",
          attempt,
          bytes: exit.stdoutBytes + exit.stderrBytes + 1,
        });
      }
      if (exit.code !== null || exit.signal !== null) {
        emit({
          v: 1,
          t: "exited",
          attempt,
          code: exit.code,
          signal: exit.signal,
          ...(exit.wall ? { wall: true as const } : {}),
        });
      }
      emit({
        v: 1,
        t: "settled",
        attempt,
        stdoutBytes: exit.stdoutBytes,
        stderrBytes: exit.stderrBytes,
      });
    } catch (error) {
      if (error instanceof ContainerNotRemovedError) {
        emit({
          v: 1,
          t: "unreaped",
          attempt,
          container: error.containerId ?? container,
          message: boundMessage(error.message),
        });
        return;
      }
      if (signal.aborted && container === null && !(error instanceof KitLaunchError)) {
        emit({
          v: 1,
          t: "error",
          attempt,
          message: "cancelled before its container was made",
        });
        return;
      }
      // KitLaunchError, or the engine failed mid-run: either way no container is left.
      emit({ v: 1, t: "error", attempt, message: boundMessage(describe(error)) });
    }
  }

  /** Aborts an attempt (SIGINT, then SIGKILL after its launch's grace); false when unknown. */
  cancel(attempt: string): boolean {
    const a = this.#live.get(attempt);
    if (a) {
      a.abort.abort();
      return true;
    }
    return this.#ended.has(attempt);
  }

  /**
   * `kit-reset`: every container of the Kit except live attempts', removed
   * and verified gone. Answers with one `kit-reset-done`.
   */
  async reset(req: KitResetRequest): Promise<void> {
    const { emit, api } = this.#opts;
    const removed: ResetContainer[] = [];
    const live: ResetContainer[] = [];
    const failed: (ResetContainer & { message: string })[] = [];
    let found;
    try {
      const owner = this.#opts.owner ?? null;
      found = await findLeftoverContainers(api, {
        [LABEL_KIT]: req.kit,
        ...(owner === null ? {} : { [LABEL_OWNER]: owner }),
      });
    } catch (error) {
      emit({
        v: 1,
        t: "kit-reset-done",
        id: req.id,
        removed,
        live,
        failed,
        error: boundMessage(describe(error)),
      });
      return;
    }
    for (const c of found) {
      const info: ResetContainer = {
        container: c.id,
        attempt: c.labels[LABEL_ATTEMPT] ?? null,
        job: c.labels[LABEL_JOB] ?? null,
        split: c.labels[LABEL_SPLIT] ?? null,
        label: c.labels[LABEL_LABEL] ?? null,
      };
      if (info.attempt !== null && this.#live.has(info.attempt)) {
        live.push(info);
        continue;
      }
      try {
        await removeVerified(api, c.id, info.attempt === null ? {} : { attempt: info.attempt });
        removed.push(info);
      } catch (error) {
        failed.push({ ...info, message: boundMessage(describe(error)) });
      }
    }
    this.#opts.log?.(
      `kit ${req.kit} reset: ${removed.length} removed, ${live.length} live, ${failed.length} failed`,
    );
    emit({ v: 1, t: "kit-reset-done", id: req.id, removed, live, failed });
  }

  /** Refuses new launches, aborts every attempt and resolves when all have ended. */
  async shutdown(): Promise<void> {
    this.#closing = true;
    const all = [...this.#live.values()];
    for (const a of all) a.abort.abort();
    await Promise.all(all.map((a) => a.done));
  }
}
