/**
 * Background compaction of deep session stacks (docs/checkpoints.md
 * "Compaction"). After an operation's bind, when the head's stack is deeper
 * than {@linkcode COMPACT_DEPTH}, the split-filesystem service merges that
 * stack into one new sealed bottom layer with the same root id, in short
 * steps so other requests interleave (`compact`); then one journal
 * transaction rewrites every checkpoint stack of the project that starts
 * with it to `[compacted layer, ...rest]` (`compactStacks`: the head's, and
 * those bound on it meanwhile), and the layer's pin in the session's
 * directory goes (`compact-drop`). Root ids, checkpoint ids, heads and log
 * entries do not change; views move to the shorter stack at their next
 * remount. Never on an operation's path: a failure is logged, and the next
 * bind tries again.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { CompactedReply } from "../protocol/splitfs_session.ts";
import type { Log } from "./log.ts";
import type { SessionAt } from "./session_context.ts";

/**
 * A head stack deeper than this is compacted. The service takes stacks of
 * at most 64 layers (`MAX_SESSION_LAYERS`) and the snapshot store rebases
 * at 32 (docs/engine.md): compacting past 32 leaves 31 more operations of
 * room while the copy runs, so the 64-layer refusal is reached only when
 * compaction falls that far behind.
 */
export const COMPACT_DEPTH = 32;

/** The service's compaction frames, as calls (`protocol/splitfs_session_client.ts`). */
export interface CompactStore {
  compact(
    at: SessionAt,
    layers: readonly string[],
    layer?: string,
    budgetMs?: number,
  ): Promise<CompactedReply>;
  dropCompaction(at: SessionAt, layer: string): Promise<void>;
}

/** What compaction needs. */
export interface CompactDeps {
  readonly journal: Journal;
  readonly store: CompactStore;
  readonly log: Log;
  /** Test-only: stops at a step until the daemon is killed (`MARSH_TEST_PAUSE_AT`). */
  readonly pause: (step: string) => Promise<void>;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** One compaction at a time per session; each runs in the background. */
export class Compactor {
  readonly #d: CompactDeps;
  readonly #running = new Map<string, Promise<void>>();

  constructor(d: CompactDeps) {
    this.#d = d;
  }

  /**
   * After a bind: compacts `layers` (the head's stack of session `at`) in
   * the background when it is deeper than {@linkcode COMPACT_DEPTH} and no
   * compaction of that session is running. Returns at once.
   */
  afterBind(at: SessionAt, layers: readonly string[]): void {
    if (layers.length <= COMPACT_DEPTH) return;
    const key = `${at.root}\0${at.name}`;
    if (this.#running.has(key)) return;
    const run = this.#compact(at, [...layers]).finally(() => this.#running.delete(key));
    this.#running.set(key, run);
  }

  /** Resolves once no compaction runs (tests; a stopping daemon). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running.values()]);
  }

  async #compact(at: SessionAt, layers: string[]): Promise<void> {
    const d = this.#d;
    const t0 = performance.now();
    let layer: string | undefined;
    try {
      let steps = 0;
      for (;;) {
        const r = await d.store.compact(at, layers, layer);
        layer = r.layer;
        steps++;
        if (steps === 1) await d.pause("compact-copying");
        if (r.state === "sealed") {
          d.log.info(
            `compact ${at.name}: ${layers.length} layers into ${r.layer} (${r.files} files, ` +
              `${r.bytes} bytes, ${steps} steps, ${(performance.now() - t0).toFixed(0)} ms)`,
          );
          break;
        }
      }
      await d.pause("compact-sealed");
      const n = d.journal.checkpoints.compactStacks(at.root, layers, layer);
      d.log.info(`compact ${at.name}: ${n} checkpoint stacks now start with ${layer}`);
      await d.pause("compact-journaled");
      await d.store.dropCompaction(at, layer);
    } catch (error) {
      d.log.info(
        `compact ${at.name}: the stack of ${layers.length} layers was not compacted: ` +
          `${message(error)} (the next operation tries again)`,
      );
      if (layer !== undefined) {
        // A sealed layer the journal does not name yet stays pinned only until this drop; gc takes it.
        await d.store.dropCompaction(at, layer).catch((e) =>
          d.log.info(`compact ${at.name}: ${layer} was not unpinned: ${message(e)}`)
        );
      }
    }
  }
}
