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
  constructor(readonly size = POOL_SIZE) {}

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
  }

  /** Slots in use in a session. */
  inUse(session: string): number {
    return this.#held.get(session)?.size ?? 0;
  }
}
