/**
 * Recovery of interrupted resolutions inside the service (docs/resolution.md,
 * "The recovery rule"): the first time the service holds a project's lock,
 * every resolution a crash left half-done there is brought to its full
 * pre-state or post-state, before a split is made or a resolution runs.
 * Holding the lock first means no other daemon applies beside it.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { MARSH_DIR, SPLIT_DIR } from "../../model/layout.ts";
import type { SplitParent } from "../../protocol/splitfs_fields.ts";
import type { RecoveredReply } from "../../protocol/splitfs_resolve.ts";
import { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { RefusedError } from "../errors.ts";
import type { ProjectLocks } from "../project_lock.ts";
import { readLog } from "../apply/intent_log.ts";
import { listResolutions, logState, recover } from "../apply/recover.ts";
import { openResolveRoot } from "../apply/resolution_dir.ts";

/** Each resolution directory and the state it was brought to (a finished one: `post`). */
export type RecoveredList = RecoveredReply["resolutions"];

/**
 * The tree a resolution of split `root`'s branch applies to: the project
 * root, or for a nested split (`parent`) its creator's fork.
 */
export function sourcePathOf(root: string, parent: SplitParent | null | undefined): string {
  return parent ? `${root}/${MARSH_DIR}/${SPLIT_DIR}/${parent.split}/${parent.label}` : root;
}

/** The project whose lock guards `root`: itself, or the project holding a creator's fork. */
function lockRootOf(root: string): string {
  const at = root.indexOf(`/${MARSH_DIR}/`);
  return at === -1 ? root : root.slice(0, at);
}

/** How far resolution `id`'s log got ("none" for an empty or missing log). */
function stateOf(root: string, id: string): string {
  using dir = Dir.openAbsolute(root);
  using resolve = openResolveRoot(dir, false);
  if (resolve === null || resolve.statAt(id)?.kind !== "dir") return "none";
  using res = resolve.openDir(id);
  return logState(readLog(res));
}

/** The service's recovery of the projects it holds. */
export class ProjectRecovery {
  readonly #locks: () => ProjectLocks;
  readonly #log: (line: string) => void;
  /** Roots whose resolutions were all recovered by this service. */
  readonly #recovered = new Set<string>();

  /** `locks`: the service's project locks (read at each call: the service sets them at start). */
  constructor(locks: () => ProjectLocks, log: (line: string) => void = console.error) {
    this.#locks = locks;
    this.#log = log;
  }

  /**
   * Holds the lock of the project `root` belongs to (when its `.marsh`
   * exists) and recovers every resolution of `root` once; a resolution
   * whose recovery fails is logged and tried again on the next call.
   * Returns the interrupted resolutions recovered and the failures.
   */
  async prepare(root: string): Promise<{ recovered: RecoveredList; failures: string[] }> {
    this.#locks().holdIfPresent(lockRootOf(root));
    if (this.#recovered.has(root)) return { recovered: [], failures: [] };
    const r = await this.recoverAll(root);
    if (r.failures.length === 0) this.#recovered.add(root);
    return r;
  }

  /**
   * {@linkcode prepare} before a resolution: refuses while one of `root`'s
   * resolutions could not be recovered, naming it and what to fix.
   *
   * @throws {RefusedError} when a recovery failed
   */
  async ready(root: string): Promise<RecoveredList> {
    const { recovered, failures } = await this.prepare(root);
    if (failures.length > 0) {
      throw new RefusedError(
        `an interrupted resolution in ${root} could not be recovered, so nothing new runs there: ` +
          `${failures.join("; ")}; fix that, then try again (the service recovers it first)`,
      );
    }
    return recovered;
  }

  /**
   * The `recover-resolutions` frame: holds the lock and recovers every
   * resolution of `root` now, whether or not it was done before.
   *
   * @throws {RefusedError} when a recovery failed
   */
  async recoverNow(root: string): Promise<RecoveredList> {
    this.#recovered.delete(root);
    return await this.ready(root);
  }

  /** {@linkcode prepare} as a project is first used: a failure is logged, never thrown. */
  async atFirstHold(root: string): Promise<void> {
    await this.prepare(root);
  }

  /**
   * Recovers every resolution under `root`'s `.marsh/resolve/` and lists
   * each with its state (a finished one as `post`). Holds no lock: call
   * {@linkcode prepare} or hold it first.
   */
  async recoverAll(root: string): Promise<{ recovered: RecoveredList; failures: string[] }> {
    const recovered: { id: string; state: "pre" | "post" }[] = [];
    const failures: string[] = [];
    let ids: string[];
    try {
      ids = listResolutions(root);
    } catch (error) {
      // A root that is gone has nothing to recover; the request's own checks say so.
      if (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) {
        return { recovered, failures };
      }
      const message = error instanceof Error ? error.message : String(error);
      this.#log(`marsh splitfs: the resolutions in ${root} cannot be listed: ${message}`);
      return { recovered, failures: [`the resolutions cannot be listed: ${message}`] };
    }
    for (const id of ids) {
      try {
        const before = stateOf(root, id);
        const state = await recover(root, id);
        recovered.push({ id, state });
        // The daemon settles a resolution it journaled `applying` by this list, so a finished
        // one is listed too (`post`); only an interrupted one is news worth a log line.
        if (before === "done") continue;
        this.#log(
          `marsh splitfs: resolution ${id} in ${root} was interrupted; recovered to ${state}`,
        );
      } catch (error) {
        const message = error instanceof Error ? error.message : String(error);
        failures.push(`resolution ${id}: ${message}`);
        this.#log(`marsh splitfs: resolution ${id} in ${root} could not be recovered: ${message}`);
      }
    }
    return { recovered, failures };
  }
}
