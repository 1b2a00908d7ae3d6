/**
 * Housekeeping around splits (docs/guide.md "Housekeeping"): `marsh splits`
 * scoped to the caller's project, `marsh splits prune` of finished splits,
 * and `marsh gc --all`, which removes every split of a project and then
 * everything else marsh stored there (`splitfs/layers/purge.ts`).
 *
 * Every split is removed through {@linkcode Splits.remove}, the same path
 * as `marsh splits rm ID`, with its checks and messages: one removal that
 * is refused does not stop the others, and each says why.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { SplitsListRequest } from "../protocol/daemon.ts";
import type {
  GcAllReply,
  GcAllRequest,
  KeptSplit,
  PrunedReply,
  RemovedSplit,
  SplitsPruneRequest,
} from "../protocol/housekeeping.ts";
import type { Manifest } from "../protocol/manifest.ts";
import type { PurgedReply } from "../protocol/purge.ts";
import type { LocatedReply } from "../protocol/splitfs.ts";
import { SplitfsError, type SplitfsService } from "../protocol/splitfs_client.ts";
import { MARSH_DIR } from "../model/layout.ts";
import { sweepAttempts } from "./attempts.ts";
import type { Authority } from "./conn.ts";
import type { Log } from "./log.ts";
import { RequestError } from "./request_error.ts";
import type { Splits } from "./splits.ts";

/**
 * Finished splits, which `prune` removes: nothing of theirs runs or waits
 * for a join, and their end is known (an `uncertain` one's is not: it goes
 * only by its id, or with `gc --all`).
 */
export const FINISHED: ReadonlySet<string> = new Set(["joined", "kept", "cancelled"]);
/** States `gc --all` refuses to remove under. */
const BUSY: ReadonlySet<string> = new Set(["run", "await"]);

/** What housekeeping needs of the daemon. */
export interface HousekeepingDeps {
  readonly splits: Pick<Splits, "list" | "remove">;
  readonly splitfs: Pick<SplitfsService, "request">;
  readonly journal: Journal;
  readonly home: string;
  readonly log: Log;
}

type Body<T> = Omit<T, "v" | "t">;

/** `marsh splits` (scoped), `marsh splits prune` and `marsh gc --all`. */
export class Housekeeping {
  readonly #d: HousekeepingDeps;

  constructor(deps: HousekeepingDeps) {
    this.#d = deps;
  }

  /**
   * `marsh splits [--all] [ID]`: with a cwd (no `--all`, no ID), the host
   * sees the splits of the project there and how many are elsewhere. A
   * branch sees the splits it created, wherever it asks from.
   */
  async list(
    auth: Authority,
    req: SplitsListRequest,
  ): Promise<{ splits: Manifest[]; root?: string; elsewhere?: number }> {
    const all = this.#d.splits.list(auth, req.id);
    if (req.id !== undefined || req.cwd === undefined || auth.kind !== "host") {
      return { splits: all };
    }
    const root = await this.#root(req.cwd, "marsh splits --all lists every project's splits");
    const mine = all.filter((m) => m.root === root);
    return { splits: mine, root, elsewhere: all.length - mine.length };
  }

  /** `marsh splits prune`: removes the caller's finished splits (of one project, or all). */
  async prune(auth: Authority, req: SplitsPruneRequest): Promise<Body<PrunedReply>> {
    const root = req.cwd === null
      ? null
      : await this.#root(req.cwd, "marsh splits prune --all prunes every project's splits");
    const now = Date.now();
    const chosen = this.#d.splits.list(auth).filter((m) =>
      (root === null || m.root === root) && FINISHED.has(m.state) &&
      (req.olderThanMs === null || now - m.created_unix_ms >= req.olderThanMs)
    );
    return { root, dry_run: req.dryRun, ...await this.#removeAll(auth, chosen, req.dryRun) };
  }

  /**
   * `marsh gc --all`: every split of the project (none may run or await a
   * join), then the snapshot store and the rest of `.marsh`. The store is
   * left alone when a split could not be removed.
   *
   * @throws {RequestError} when the project cannot be located, or a split of it runs or awaits
   */
  async gcAll(auth: Authority, req: GcAllRequest): Promise<Body<GcAllReply>> {
    const root = await this.#root(req.cwd, null);
    const all = this.#d.splits.list(auth).filter((m) => m.root === root);
    const busy = all.filter((m) => BUSY.has(m.state));
    if (busy.length > 0) {
      throw new RequestError(
        2,
        `--all refused: ${busy.map(busyReason).join("; ")}; nothing was removed`,
      );
    }
    const { removed, failed } = await this.#removeAll(auth, all, req.dryRun);
    const body = { root, dry_run: req.dryRun, splits: removed, failed };
    if (failed.length > 0) {
      const n = failed.length === 1 ? "a split" : `${failed.length} splits`;
      return {
        ...body,
        layers: [],
        bytes: 0,
        gone: false,
        left: [],
        problem:
          `the snapshot store was kept: ${n} of the project could not be removed; deal with that, then run marsh gc --all again`,
      };
    }
    let purged: PurgedReply;
    try {
      purged = await this.#d.splitfs.request<PurgedReply>({
        v: 1,
        t: "purge",
        root,
        known: req.dryRun ? all.map((m) => m.id) : [],
        dryRun: req.dryRun,
      });
    } catch (error) {
      if (!(error instanceof SplitfsError)) throw error;
      this.#d.log.info(`gc --all ${root}: the store was not removed: ${error.message}`);
      return { ...body, layers: [], bytes: 0, gone: false, left: [], problem: error.message };
    }
    if (!req.dryRun) sweepAttempts(this.#d.home, this.#d.journal, this.#d.log);
    this.#d.log.info(
      `gc --all ${root}: ${removed.length} splits, ${purged.layers.length} layers${
        req.dryRun ? " (dry run)" : ""
      }`,
    );
    const { layers, bytes, gone, left, problem } = purged;
    return { ...body, layers, bytes, gone, left, problem };
  }

  /** Removes each split in turn (newest first, so nested ones before their parents). */
  async #removeAll(
    auth: Authority,
    chosen: readonly Manifest[],
    dryRun: boolean,
  ): Promise<{ removed: RemovedSplit[]; failed: KeptSplit[] }> {
    const removed: RemovedSplit[] = [];
    const failed: KeptSplit[] = [];
    const order = [...chosen].sort((a, b) => b.created_unix_ms - a.created_unix_ms);
    for (const m of order) {
      const seen = { id: m.id, state: m.state, created_unix_ms: m.created_unix_ms };
      if (dryRun) {
        removed.push({ ...seen, message: `split ${m.id} would be removed` });
        continue;
      }
      try {
        removed.push({ ...seen, message: await this.#d.splits.remove(auth, m.id) });
      } catch (error) {
        if (!(error instanceof RequestError)) {
          this.#d.log.info(
            `removing split ${m.id} failed: ${error instanceof Error ? error.stack : error}`,
          );
        }
        const reason = error instanceof Error ? error.message : String(error);
        failed.push({ id: m.id, state: m.state, reason });
      }
    }
    return { removed, failed };
  }

  /**
   * The project of `cwd`, found as `marsh split` finds it. A cwd inside
   * `.marsh` (a kept fork, an `out/` dir) is in the project holding it.
   */
  async #root(cwd: string, hint: string | null): Promise<string> {
    const parts = cwd.split("/");
    const at = parts.indexOf(MARSH_DIR);
    const from = at > 1 ? parts.slice(0, at).join("/") : cwd;
    try {
      const r = await this.#d.splitfs.request<LocatedReply>({ v: 1, t: "locate", cwd: from });
      return r.root;
    } catch (error) {
      if (!(error instanceof SplitfsError)) throw error;
      throw new RequestError(2, hint === null ? error.message : `${error.message}; ${hint}`);
    }
  }
}

function busyReason(m: Manifest): string {
  return m.state === "run"
    ? `split ${m.id} is running (cancel it with: marsh splits cancel ${m.id})`
    : `split ${m.id} is awaiting its join (join it, or wait until it is kept)`;
}
