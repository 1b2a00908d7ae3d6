/**
 * Recovery of a resolution a crash interrupted (docs/resolution.md, "The
 * recovery rule"): run at the next start for every directory under
 * `.marsh/resolve/`. Without a `commit` record the logged steps are undone
 * (the full pre-state); with one the post-state is already whole and only
 * the staging goes. Every action checks the disk first, so a crash during
 * recovery is followed by recovery again.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { ResolutionStateError } from "./errors.ts";
import { fsyncDir } from "./fs_extra.ts";
import { IntentLog, type LogRecord, readLog } from "./intent_log.ts";
import { BACKUP_DIR, checkId, openResolveRoot, STAGE_DIR } from "./resolution_dir.ts";
import { rollBack, type Step } from "./steps.ts";

/** What recovery left: the tree before the resolution, after it, or a resolution already settled. */
export type Recovered = "pre" | "post";

/** Options of {@linkcode recover}. */
export interface RecoverOptions {
  /** Told each recovery step's name as it is reached (tests pause there and are killed). */
  readonly onStep?: (step: string) => void | Promise<void>;
}

/** The state a log says a resolution reached. */
export type LogState = "none" | "begun" | "committed" | "done" | "rolled-back";

/** How far a log got. */
export function logState(records: readonly LogRecord[]): LogState {
  if (records[0]?.t !== "begin") return "none";
  const has = (t: LogRecord["t"]) => records.some((r) => r.t === t);
  if (has("rolled-back")) return "rolled-back";
  if (has("done")) return "done";
  if (has("commit")) return "committed";
  return "begun";
}

/**
 * Marks resolution `original` undone by `by` and drops its backup (its files
 * are the undo's now, hard-linked); does nothing when already marked, so
 * recovery can finish an undo that a crash interrupted after its commit.
 */
export function settleUndo(resolveRoot: Dir, original: string, by: string): void {
  if (resolveRoot.statAt(original)?.kind !== "dir") return;
  using res = resolveRoot.openDir(original);
  if (!readLog(res).some((r) => r.t === "undone")) {
    using log = IntentLog.open(res);
    log.append({ t: "undone", by });
  }
  res.removeTree(BACKUP_DIR);
  fsyncDir(res);
}

/** The ids of the resolutions under `<root>/.marsh/resolve/`, sorted. */
export function listResolutions(rootPath: string): string[] {
  using root = Dir.openAbsolute(rootPath);
  using dir = openResolveRoot(root, false);
  if (dir === null) return [];
  return dir.entries().filter((e) => e.kind === "dir" || e.kind === undefined).map((e) => e.name)
    .sort();
}

/**
 * Brings the project to exactly the pre-state or the post-state of
 * resolution `id` and settles its directory: a rolled-back resolution's
 * directory goes; a committed one keeps its restore point. Idempotent.
 *
 * @throws {ResolutionStateError} when there is no such resolution
 */
export async function recover(
  rootPath: string,
  id: string,
  opts: RecoverOptions = {},
): Promise<Recovered> {
  checkId(id);
  const step = async (name: string) => await opts.onStep?.(name);
  using root = Dir.openAbsolute(rootPath);
  using resolveRoot = openResolveRoot(root, false);
  if (resolveRoot === null || resolveRoot.statAt(id)?.kind !== "dir") {
    throw new ResolutionStateError(`no resolution ${id} in ${rootPath}: see listResolutions`);
  }
  const res = resolveRoot.openDir(id);
  try {
    const records = readLog(res);
    const state = logState(records);
    const begin = records[0]?.t === "begin" ? records[0] : null;
    if (state === "done" || state === "committed") {
      if (state === "committed") {
        await step("drop-stage");
        res.removeTree(STAGE_DIR);
        fsyncDir(res);
        using log = IntentLog.open(res);
        log.append({ t: "done" });
      }
      if (begin?.undoes !== undefined) settleUndo(resolveRoot, begin.undoes, id);
      return "post";
    }
    if (state === "begun" && begin !== null) {
      const logged: Step[] = records.flatMap((r) =>
        r.t === "step" ? [{ kind: r.kind, n: r.n }] : []
      );
      if (res.statAt(STAGE_DIR) === null) res.mkdir(STAGE_DIR, 0o700);
      if (res.statAt(BACKUP_DIR) === null) res.mkdir(BACKUP_DIR, 0o700);
      using stage = res.openDir(STAGE_DIR);
      using backup = res.openDir(BACKUP_DIR);
      await rollBack(root, { stage, backup }, begin.ops, logged, (i) => step(`undo-${i}`));
      using log = IntentLog.open(res);
      log.append({ t: "rolled-back", reason: "interrupted; recovered at start" });
      await step("rolled-back");
    }
  } finally {
    res.close();
  }
  // Nothing was applied (never begun, or rolled back): the directory holds no restore point.
  resolveRoot.removeTree(id);
  fsyncDir(resolveRoot);
  return "pre";
}

/** Recovers every resolution under the project's `.marsh/resolve/`; returns each id's outcome. */
export async function recoverAll(rootPath: string): Promise<Map<string, Recovered>> {
  const out = new Map<string, Recovered>();
  for (const id of listResolutions(rootPath)) out.set(id, await recover(rootPath, id));
  return out;
}
