/**
 * The worker's attempts: launch, cancel and shutdown, with each attempt's
 * events handed to one `emit` in order.
 *
 * @module
 */

import {
  type CancelRequest,
  DEFAULT_GRACE_MS,
  type LaunchRequest,
  type WorkerEvent,
  type WorkerRequest,
} from "../protocol/worker.ts";
import { Attempt, type AttemptOptions } from "./attempt.ts";

/** How many ended attempt ids are remembered, to refuse a reused id. */
const REMEMBERED = 65_536;

/** Runs shell branches. Every outcome is an event; no method throws for a bad request. */
export class BranchRunner {
  readonly #opts: AttemptOptions;
  readonly #live = new Map<string, Attempt>();
  readonly #ended = new Set<string>();
  #closing = false;

  constructor(opts: AttemptOptions) {
    this.#opts = opts;
  }

  /** The number of attempts that have not sent their last event. */
  get live(): number {
    return this.#live.size;
  }

  /** Whether `attempt` is a live or remembered attempt of this runner. */
  knows(attempt: string): boolean {
    return this.#live.has(attempt) || this.#ended.has(attempt);
  }

  /** Handles a launch or cancel; a shutdown must go through {@linkcode shutdown}. */
  handle(req: Extract<WorkerRequest, { t: "launch" | "cancel" }>): void {
    if (req.t === "launch") this.launch(req);
    else this.cancel(req);
  }

  /**
   * Starts an attempt. A reused id is refused with an error that names no
   * attempt, so it cannot end the attempt that holds the id.
   */
  launch(req: LaunchRequest): void {
    if (this.#live.has(req.attempt) || this.#ended.has(req.attempt)) {
      this.#emit({ v: 1, t: "error", message: `attempt ${JSON.stringify(req.attempt)} exists` });
      return;
    }
    if (this.#closing) {
      this.#emit({
        v: 1,
        t: "error",
        attempt: req.attempt,
        message: "the worker is shutting down",
      });
      return;
    }
    const attempt = Attempt.start(req, this.#opts);
    this.#live.set(req.attempt, attempt);
    void attempt.done.then(() => {
      this.#live.delete(req.attempt);
      this.#ended.add(req.attempt);
      if (this.#ended.size > REMEMBERED) {
        const oldest = this.#ended.values().next();
        if (!oldest.done) this.#ended.delete(oldest.value);
      }
    });
  }

  /** Cancels an attempt; one that already ended is left alone. */
  cancel(req: CancelRequest): void {
    const attempt = this.#live.get(req.attempt);
    if (attempt) {
      attempt.cancel(req.graceMs ?? DEFAULT_GRACE_MS);
    } else if (!this.#ended.has(req.attempt)) {
      this.#emit({
        v: 1,
        t: "error",
        message: `cannot cancel attempt ${JSON.stringify(req.attempt)}: no such attempt`,
      });
    }
  }

  /** Refuses new launches, cancels every attempt and resolves when all have ended. */
  async shutdown(graceMs = DEFAULT_GRACE_MS): Promise<void> {
    this.#closing = true;
    const all = [...this.#live.values()];
    for (const a of all) a.cancel(graceMs);
    await Promise.all(all.map((a) => a.done));
  }

  #emit(event: WorkerEvent): void {
    this.#opts.emit(event);
  }
}
