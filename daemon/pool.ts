/**
 * The split branch pool (`docs/guide.md`, "Limits"): at most `POOL_SIZE` (8) concurrent branches per
 * creating session, all host CLI splits sharing one pool. Admission happens
 * at launch; a slot frees only when its process's end is confirmed.
 *
 * @module
 */

import { POOL_SIZE } from "../model/limits.ts";

/** Slots held per session. */
export class BranchPool {
  readonly #held = new Map<string, Set<string>>();
  /** Who waits for a slot (`marsh compare --test`'s runs), first come first served. */
  readonly #waiting: { session: string; holder: string; admitted: () => void }[] = [];
  constructor(readonly size = POOL_SIZE) {}

  /**
   * Takes a slot for `holder` in `session`, waiting while the pool is full
   * (a branch never waits: see {@linkcode admit}). False when `signal`
   * aborts first.
   */
  wait(session: string, holder: string, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return Promise.resolve(false);
    const ahead = this.#waiting.some((w) => w.session === session);
    if (!ahead && this.admit(session, holder)) return Promise.resolve(true);
    const { promise, resolve } = Promise.withResolvers<boolean>();
    const entry = { session, holder, admitted: () => resolve(true) };
    this.#waiting.push(entry);
    signal.addEventListener("abort", () => {
      const i = this.#waiting.indexOf(entry);
      if (i >= 0) {
        this.#waiting.splice(i, 1);
        resolve(false);
      }
    }, { once: true });
    return promise;
  }

  /** Takes a slot for `holder` in `session`; false when the pool is full. */
  admit(session: string, holder: string): boolean {
    const set = this.#held.get(session) ?? new Set<string>();
    if (set.size >= this.size) return false;
    set.add(holder);
    this.#held.set(session, set);
    return true;
  }

  /**
   * Takes a slot whatever the pool's fill: one a restart found held (an
   * uncertain job's), which stays held until a reset releases it.
   */
  hold(session: string, holder: string): void {
    const set = this.#held.get(session) ?? new Set<string>();
    set.add(holder);
    this.#held.set(session, set);
  }

  /** Frees a slot once the holder's end is confirmed. */
  release(session: string, holder: string): void {
    const set = this.#held.get(session);
    set?.delete(holder);
    if (set?.size === 0) this.#held.delete(session);
    this.#wake(session);
  }

  /** Hands freed slots of `session` to its waiters, in order. */
  #wake(session: string): void {
    for (let i = 0; i < this.#waiting.length;) {
      const w = this.#waiting[i]!;
      if (w.session !== session) {
        i++;
        continue;
      }
      if (!this.admit(session, w.holder)) return;
      this.#waiting.splice(i, 1);
      w.admitted();
    }
  }

  /** Slots in use in a session. */
  inUse(session: string): number {
    return this.#held.get(session)?.size ?? 0;
  }
}
