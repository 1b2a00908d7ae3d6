/**
 * The split state machine (docs/guide.md, "Life of a split"): create
 * → snapshot → forks → branches → capture → await → joined | kept, or
 * cancelled; every journal record is written before the effect it
 * describes. This is its face for the server; each responsibility is its
 * own module:
 *
 * - `split_settings.ts`: the tunables and the output limit checks;
 * - `split_context.ts`: the links it drives and the live splits and branches;
 * - `split_create.ts`: creation, the spool, the snapshot and the forks;
 * - `split_launch.ts`, `split_launch_kit.ts`: a branch's launch per placement;
 * - `split_settle.ts`: settlement and publication, the split's end;
 * - `split_lease.ts`: the lease and cancellation;
 * - `split_join.ts`, `split_remove.ts`: join, reading `out/`, removal, listing;
 * - `split_discard.ts`: `marsh discard`, a branch's or the whole split's;
 * - `split_moves.ts` with `model/split_state.ts` and `model/branch_state.ts`:
 *   the journaled states' one transition table each; `model/split_phase.ts`
 *   and `model/branch_phase.ts`: what only the live daemon knows.
 *
 * The daemon holds no FFI and reads no project file: the split-filesystem
 * service does that work; the worker runs the branches.
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import type { JoinRequest, SplitCreateRequest } from "../protocol/daemon.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import type { Authority } from "./conn.ts";
import { type SplitConn, SplitContext, type SplitDeps } from "./split_context.ts";
import { create } from "./split_create.ts";
import { ensureOpen, join, readOut } from "./split_join.ts";
import { RequestError } from "./request_error.ts";
import { cancel, cancelRequest, liveOutput, splitSignals } from "./split_lease.ts";
import { adoptAwaiting, list, remove, stop } from "./split_remove.ts";
import { runTests, type TestSpec } from "./compare_runs.ts";
import type { CompareTest } from "../protocol/daemon_compare.ts";
import { discardBranches, discardRequest, type DiscardResult } from "./split_discard.ts";
import type { DiscardRequest } from "../protocol/daemon_discard.ts";
import type { Creator } from "../journal/records.ts";

export type {
  BranchSockets,
  ServiceLink,
  SplitConn,
  SplitDeps,
  WorkerPort,
} from "./split_context.ts";
export { type Settings, settingsFromEnv } from "./split_settings.ts";
export { shellBranchRefusal } from "./split_create.ts";
export type { DiscardResult } from "./split_discard.ts";

/** Runs and holds splits. */
export class Splits {
  readonly #cx: SplitContext;

  constructor(deps: SplitDeps) {
    this.#cx = new SplitContext(deps);
    this.#cx.tree.attachSplits(splitSignals(this.#cx));
  }

  /** `marsh split`: runs a split over the creator's connection. */
  create(conn: SplitConn, req: SplitCreateRequest): Promise<void> {
    return create(this.#cx, conn, req);
  }

  /**
   * Cancels a running split: SIGINT to every process of every branch, the
   * grace, then SIGKILL; branches not yet launched never start.
   */
  cancel(id: string, reason: string): boolean {
    return cancel(this.#cx, id, reason);
  }

  /** What `marsh logs` follows of a branch this daemon runs (`daemon/branch_logs.ts`), or null. */
  liveOutput(id: string, label: string): { dir: string | null; ended: Promise<void> } | null {
    return liveOutput(this.#cx, id, label);
  }

  /**
   * Streams `out/<label>/<name>` of split `id` to `onChunk`, through the
   * split-filesystem service (the daemon reads no project file).
   *
   * @throws {RequestError} when the split's directory is gone or the file is missing
   */
  readOut(
    id: string,
    label: string,
    name: "stdout" | "stderr",
    onChunk: (bytes: Uint8Array) => Promise<void>,
  ): Promise<void> {
    return readOut(this.#cx, id, label, name, onChunk);
  }

  /** `marsh join`: rendering, consumer, release. */
  join(conn: SplitConn, req: JoinRequest): Promise<void> {
    return join(this.#cx, conn, req);
  }

  /** `marsh splits [ID]`: the host sees all; a branch its own. */
  list(auth: Authority, id?: string): ReturnType<typeof list> {
    return list(this.#cx, auth, id);
  }

  /** `marsh splits cancel ID [LABEL]`: the split, or one branch (daemon/branch_controls.ts). */
  cancelRequest(auth: Authority, id: string, label?: string): string {
    return cancelRequest(this.#cx, auth, id, label);
  }

  /** `marsh splits rm ID`: removes a kept (or cancelled, joined, uncertain) split. */
  remove(auth: Authority, id: string): Promise<string> {
    return remove(this.#cx, auth, id);
  }

  /** Has the service hold split `s`'s descriptors for a resolution (`daemon/resolve_context.ts`). */
  async openHeld(s: SplitRecord): Promise<void> {
    const live = this.#cx.liveOf(s.id, s.session);
    if (live.joinConn && !live.joinConn.isClosed) {
      throw new RequestError(
        2,
        `split ${s.id} is being joined: resolve it once the join has ended`,
      );
    }
    try {
      await ensureOpen(this.#cx, live, s);
    } catch (error) {
      throw error instanceof SplitfsError
        ? new RequestError(2, `split ${s.id}: ${error.message}`)
        : error;
    }
  }

  /** Test-only: stops at `step` until the test kills the daemon (`MARSH_TEST_PAUSE_AT`). */
  pause(step: string): Promise<void> {
    return this.#cx.pause(step);
  }

  /** `marsh compare --test`: the test in a throwaway fork of each branch (`daemon/compare_runs.ts`). */
  compareTests(s: SplitRecord, labels: readonly string[], spec: TestSpec): Promise<CompareTest[]> {
    return runTests(this.#cx, s, labels, spec);
  }

  /** `marsh discard ID [LABEL...]`: only the split's creator (daemon/split_discard.ts). */
  discard(auth: Authority, req: DiscardRequest): Promise<DiscardResult> {
    return discardRequest(this.#cx, auth, req);
  }

  /**
   * Discards branches `labels` of split `splitId` (the whole split when
   * empty) as done by `who`, who must be its creator (the caller checks):
   * for `marsh choose`, which discards the losers.
   *
   * @throws {RequestError} 2 unknown split or label, 1 refused (nothing changed), 125 a removal failed
   */
  discardBranches(
    splitId: string,
    labels: readonly string[],
    reason: string | null,
    who: Creator,
  ): Promise<DiscardResult> {
    return discardBranches(this.#cx, splitId, labels, reason, who);
  }

  /** Starts lease timers for awaiting splits found at start-up. */
  adoptAwaiting(): void {
    adoptAwaiting(this.#cx);
  }

  /** Cancels every running split and waits for them to settle (daemon stop). */
  stop(): Promise<void> {
    return stop(this.#cx);
  }
}
