/**
 * The transactional applier (docs/resolution.md, "The applier"): executes
 * one clean plan on a project tree all or nothing. It stages every new file
 * and symlink under `.marsh/resolve/<id>/stage/`, re-checks each path's
 * state against the plan's `before`, records the restore point, then runs
 * the steps (backup by rename, `mkdir`, rename into place), logging each
 * before it runs. Any failure rolls back in reverse; a crash is resolved by
 * `recover` (recover.ts). On success the staging goes and the restore point
 * (`backup/` and the log) stays, for `undo`.
 *
 * Every call is descriptor-relative and never follows a symlink (`Dir`).
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir, type FileHandle } from "../fd/dir.ts";
import {
  checkPlan,
  comparePaths,
  type MergePlan,
  type Signature,
} from "../../model/resolution_plan.ts";
import {
  ApplyFailedError,
  ApplyRefusedError,
  type Changed,
  ConcurrentChangeError,
  RollbackFailedError,
} from "./errors.ts";
import { blobIdOfFile, fsyncAll, fsyncDir } from "./fs_extra.ts";
import { IntentLog, type Op } from "./intent_log.ts";
import { describeState } from "./path_state.ts";
import { type Blocked, checkOps, hexLengthOf, opsOf } from "./plan_ops.ts";
import {
  BACKUP_DIR,
  checkId,
  makeResolutionDir,
  newId,
  openResolveRoot,
  STAGE_DIR,
  stageName,
} from "./resolution_dir.ts";
import {
  ChangedDuringApply,
  rollBack,
  runStep,
  type Step,
  stepsOf,
  syncTouched,
  type Work,
} from "./steps.ts";

/** Where a taken file's bytes come from. */
export type Content =
  /** The bytes themselves (a blob read from the split's store). */
  | { readonly bytes: Uint8Array }
  /** A regular file to copy (a branch's result), opened without following a symlink. */
  | { readonly from: Dir; readonly name: string }
  /** A file to hard-link, keeping its inode and mode (the same file system; an undo's restore point). */
  | { readonly link: Dir; readonly name: string };

/** A taken file, as the content callback is asked for it. */
export interface TakenFile {
  readonly path: string;
  readonly after: Extract<Signature, { kind: "file" }>;
}

/** Options of {@linkcode applyPlan}. */
export interface ApplyOptions {
  /** The resolution id (default: a fresh one). */
  readonly id?: string;
  /** The bytes of each taken file; they are checked against its blob id once staged. */
  readonly content: (file: TakenFile) => Content | Promise<Content>;
  /** Told each step's name as it is reached (tests pause there and are killed). */
  readonly onStep?: (step: string) => void | Promise<void>;
  /** For an undo: the resolution it takes back, and the exact modes of directories it remakes. */
  readonly undoes?: string;
  readonly dirModes?: ReadonlyMap<string, number>;
  /** Turns the paths changed since the plan into the error thrown (an undo says so). */
  readonly changedError?: (changed: readonly Changed[]) => Error;
}

/**
 * The error for paths changed since the plan, or blocked: an undo's own
 * (every path listed as changed), else the changed paths, else the blocks.
 */
function refusalOf(
  c: { changed: readonly Changed[]; blocked: readonly Blocked[] },
  opts: ApplyOptions,
): Error {
  if (opts.changedError !== undefined) {
    const all = new Map([...c.changed, ...c.blocked].map((x) => [x.path, x]));
    return opts.changedError([...all.values()].sort((x, y) => comparePaths(x.path, y.path)));
  }
  if (c.changed.length > 0) return new ConcurrentChangeError(c.changed);
  return new ApplyRefusedError([...new Set(c.blocked.map((b) => b.problem))]);
}

/** What an apply did. */
export interface Applied {
  readonly id: string;
  /** Every path changed, with its state before and after. */
  readonly ops: readonly Op[];
}

/** How many staged files are flushed together at most (each holds a descriptor meanwhile). */
const SYNC_BATCH = 64;

/**
 * Stages one taken file or symlink as `stage/s<n>`, checked against its
 * signature. Returns a file written here, still open and not yet flushed:
 * the caller flushes it (a hard link's inode is on disk already).
 */
async function stageOne(
  work: Work,
  op: Op,
  opts: ApplyOptions,
  hexLength: number,
): Promise<FileHandle | null> {
  const name = stageName(op.n);
  const after = op.after;
  if (after.kind === "symlink") {
    work.stage.symlink(new TextEncoder().encode(after.target), name);
    return null;
  }
  if (after.kind !== "file") return null;
  const c = await opts.content({ path: op.path, after });
  const written = !("link" in c);
  if ("link" in c) {
    c.link.link(c.name, work.stage, name);
  } else {
    using dst = work.stage.createFile(name, 0o600);
    if ("bytes" in c) dst.writeAll(c.bytes);
    else {
      using src = c.from.openFile(c.name);
      src.copyTo(dst, "reflink");
    }
    dst.chmod(after.mode);
  }
  const staged = work.stage.openFile(name);
  try {
    const blob = blobIdOfFile(staged, hexLength);
    const perm = staged.stat().perm;
    if (blob !== after.blob || perm !== after.mode) {
      throw new Error(
        `the bytes given for ${op.path} are not what the plan takes ` +
          `(${describeState({ kind: "file", perm, blob })}, not ${
            describeState(after)
          }); plan again`,
      );
    }
  } catch (error) {
    staged.close();
    throw error;
  }
  if (written) return staged;
  staged.close();
  return null;
}

/**
 * Stages every taken file and symlink, then flushes the files written
 * (`SYNC_BATCH` at a time, together; `stage/` itself with the last batch,
 * once every entry is in it): every staged entry is on disk before the
 * re-check.
 */
async function stageAll(
  work: Work,
  ops: readonly Op[],
  opts: ApplyOptions,
  hexLength: number,
): Promise<void> {
  const unsynced: (FileHandle | Dir)[] = [];
  const flush = async () => {
    try {
      await fsyncAll(unsynced);
    } finally {
      for (const f of unsynced.splice(0)) f.close();
    }
  };
  try {
    for (const op of ops) {
      const file = await stageOne(work, op, opts, hexLength);
      if (file === null) continue;
      unsynced.push(file);
      if (unsynced.length >= SYNC_BATCH) await flush();
    }
    unsynced.push(work.stage.dup());
    await flush();
  } finally {
    for (const f of unsynced) f.close();
  }
}

/** `steps` cut where their kind changes: the backups, the directories made, the placements. */
function phasesOf(steps: readonly Step[]): Step[][] {
  const out: Step[][] = [];
  for (const s of steps) {
    const last = out.at(-1);
    if (last !== undefined && last[0]!.kind === s.kind) last.push(s);
    else out.push([s]);
  }
  return out;
}

/**
 * Applies a clean plan to the project at `rootPath` (absolute), all or
 * nothing. Returns the resolution id and what changed; its restore point
 * stays under `.marsh/resolve/<id>/` for `undo`.
 *
 * @throws {PlanError} for a malformed plan; {@linkcode ApplyRefusedError}
 *   for a conflict or a tree the plan cannot take;
 *   {@linkcode ConcurrentChangeError} when a path changed since the plan
 *   (nothing changed, the path named); {@linkcode ApplyFailedError} when a
 *   step failed (everything undone)
 */
export async function applyPlan(
  rootPath: string,
  plan: MergePlan,
  opts: ApplyOptions,
): Promise<Applied> {
  checkPlan(plan);
  const id = checkId(opts.id ?? newId());
  const gitModes = plan.scope === "git";
  const hexLength = hexLengthOf(plan);
  using root = Dir.openAbsolute(rootPath);
  const { ops, blocked } = opsOf(root, plan, opts.dirModes);
  if (blocked.length > 0) {
    // Name every changed path too, not only the first obstacle found.
    const { changed } = checkOps(root, ops, gitModes, hexLength);
    throw refusalOf({ changed, blocked }, opts);
  }
  const step = async (name: string) => await opts.onStep?.(name);
  using resolveRoot = openResolveRoot(root, true)!;
  using res = makeResolutionDir(resolveRoot, id);
  using stage = res.openDir(STAGE_DIR);
  using backup = res.openDir(BACKUP_DIR);
  const work: Work = { stage, backup };
  using log = IntentLog.open(res);
  log.append({
    t: "begin",
    v: 1,
    id,
    scope: plan.scope,
    gitModes,
    ops,
    ...(opts.undoes !== undefined ? { undoes: opts.undoes } : {}),
  });
  await step("begin");
  const logged: Step[] = [];
  let refusal: Error | null = null;
  try {
    await stageAll(work, ops, opts, hexLength);
    await step("staged");
    const checked = checkOps(root, ops, gitModes, hexLength);
    if (checked.changed.length > 0 || checked.blocked.length > 0) {
      refusal = refusalOf(checked, opts);
      throw refusal;
    }
    const prior = checked.prior;
    log.append({ t: "ready", prior });
    await step("ready");
    let i = 0;
    for (const phase of phasesOf(stepsOf(ops, prior))) {
      // A phase's records are flushed together, before its first step runs (one fsync, not
      // one per step): recovery undoes a logged step only if the disk shows it ran (steps.ts),
      // and a phase starts once the one before has run whole, so a placement is never logged
      // while the path still holds what its backup step will move away.
      log.appendAll(phase.map((s) => ({ t: "step", kind: s.kind, n: s.n })));
      logged.push(...phase);
      for (const s of phase) {
        const name = `${s.kind}-${i++}`;
        await step(`${name}:logged`);
        runStep(root, work, ops[s.n]!, s.kind, checked.identities[s.n] ?? null);
        await step(`${name}:done`);
      }
    }
    await syncTouched(root, work, ops);
    await step("synced");
  } catch (error) {
    try {
      await rollBack(root, work, ops, logged);
    } catch (rollbackError) {
      throw new RollbackFailedError(id, error, rollbackError);
    }
    log.append({
      t: "rolled-back",
      reason: error instanceof Error ? error.message : String(error),
    });
    res.close();
    resolveRoot.removeTree(id);
    fsyncDir(resolveRoot);
    if (error instanceof ChangedDuringApply) {
      throw refusalOf({ changed: [error.changed], blocked: [] }, opts);
    }
    throw error === refusal ? error : new ApplyFailedError(id, error);
  }
  log.append({ t: "commit" });
  await step("committed");
  res.removeTree(STAGE_DIR);
  fsyncDir(res);
  log.append({ t: "done" });
  await step("done");
  return { id, ops };
}
