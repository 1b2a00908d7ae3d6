/**
 * The session views' remounts (docs/checkpoints.md "The model"): a view
 * follows its session's head, but is not it. One remount of a view runs at a
 * time; a request made while one runs waits, and a newer request replaces
 * one still waiting (its callers get the newer mount, which shows a later
 * head). What each view shows is kept for `marsh sessions`.
 *
 * @module
 */

import type { SessionAt, SessionStore, ViewState } from "./session_context.ts";

interface Pending {
  layers: readonly string[];
  create: boolean;
  readonly waiters: PromiseWithResolvers<ViewState>[];
}

interface Queue {
  next: Pending | null;
  /** Resolves when no remount runs or waits. */
  readonly idle: Promise<void>;
}

/** The remounts of every session's view, by session id. */
export class ViewMounts {
  readonly #store: SessionStore;
  readonly #shown = new Map<string, ViewState>();
  readonly #queues = new Map<string, Queue>();

  constructor(store: SessionStore) {
    this.#store = store;
  }

  /** What session `id`'s view shows, or null (never mounted here, or its last remount failed). */
  shown(id: string): ViewState | null {
    return this.#shown.get(id) ?? null;
  }

  /** Forgets session `id`'s view (removed). */
  forget(id: string): void {
    this.#shown.delete(id);
  }

  /** Resolves once session `id` has no remount running or waiting. */
  async idle(id: string): Promise<void> {
    await this.#queues.get(id)?.idle;
  }

  /**
   * Remounts session `id`'s view (at `at`) on `layers`; `create`: its first
   * mount, which makes the session's directory.
   *
   * @throws what the service threw for the remount this request got
   */
  remount(
    id: string,
    at: SessionAt,
    layers: readonly string[],
    create = false,
  ): Promise<ViewState> {
    const w = Promise.withResolvers<ViewState>();
    const q = this.#queues.get(id);
    if (q !== undefined) {
      if (q.next === null) q.next = { layers, create, waiters: [w] };
      else {
        // Replaces the waiting request: the view should show the newest head.
        q.next.layers = layers;
        q.next.create ||= create;
        q.next.waiters.push(w);
      }
      return w.promise;
    }
    const first: Pending = { layers, create, waiters: [w] };
    const done = Promise.withResolvers<void>();
    const queue: Queue = { next: first, idle: done.promise };
    this.#queues.set(id, queue);
    void this.#run(id, at, queue).finally(() => {
      this.#queues.delete(id);
      done.resolve();
    });
    return w.promise;
  }

  async #run(id: string, at: SessionAt, q: Queue): Promise<void> {
    for (let job = q.next; job !== null; job = q.next) {
      q.next = null;
      try {
        const v = await this.#store.mountView(at, job.layers, job.create);
        const state = { root: v.rootId, class: v.class };
        this.#shown.set(id, state);
        for (const w of job.waiters) w.resolve(state);
      } catch (error) {
        this.#shown.delete(id);
        for (const w of job.waiters) w.reject(error);
      }
    }
  }
}
