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

import { Dir } from "../dir.ts";
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
import { blobIdOfFile, fsyncDir, openParent } from "./fs_extra.ts";
import { IntentLog, type Op, type Prior } from "./intent_log.ts";
import { describeState, type Found, matches, readState } from "./path_state.ts";
import {
  BACKUP_DIR,
  checkId,
  makeResolutionDir,
  newId,
  openResolveRoot,
  STAGE_DIR,
  stageName,
} from "./resolution_dir.ts";
import { rollBack, runStep, type Step, stepsOf, syncTouched, type Work } from "./steps.ts";

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

/** What an apply did. */
export interface Applied {
  readonly id: string;
  /** Every path changed, with its state before and after. */
  readonly ops: readonly Op[];
}

function hexLengthOf(plan: MergePlan): number {
  for (const e of plan.entries) {
    for (
      const s of [
        e.op === "take" ? e.after : null,
        e.op !== "conflict" && e.op !== "converged" ? e.before : null,
      ]
    ) {
      if (s?.kind === "file") return s.blob.length;
    }
  }
  return 40;
}

/**
 * The unplanned entries below directory `path`, which must go because the
 * plan puts something else there: each subdirectory that holds only planned
 * deletions is returned to be removed too (Git's plans list files only);
 * anything else is a problem, since the applier never removes what the
 * plan does not name.
 */
function emptiedDirs(
  root: Dir,
  path: string,
  planned: ReadonlySet<string>,
  problems: string[],
): string[] {
  const p = openParent(root, path);
  if (!p.ok) return [];
  using parent = p.dir;
  if (parent.statAt(p.name)?.kind !== "dir") return [];
  using dir = parent.openDir(p.name);
  const { entries, invalid } = dir.listing();
  const out: string[] = [];
  const extra = invalid.map((e) => `${path}/${e.shown}`);
  for (const e of entries) {
    const q = `${path}/${e.name}`;
    if (planned.has(q)) continue;
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    if (kind !== "dir") {
      extra.push(q);
      continue;
    }
    const before = problems.length;
    const below = emptiedDirs(root, q, planned, problems);
    if (problems.length === before) out.push(q, ...below);
  }
  if (extra.length > 0) {
    problems.push(
      `${path} is a directory that still holds ${extra.slice(0, 3).join(", ")}${
        extra.length > 3 ? ", ..." : ""
      }, which the plan does not remove: move them away, or plan them`,
    );
  }
  return out;
}

/** The ops of a clean plan, with the directories it needs made or emptied; refuses what cannot be. */
function opsOf(root: Dir, plan: MergePlan, dirModes?: ReadonlyMap<string, number>): Op[] {
  const conflicts = plan.entries.filter((e) => e.op === "conflict").map((e) =>
    `${e.path} conflicts`
  );
  if (conflicts.length > 0) throw new ApplyRefusedError(conflicts);
  const inPlan = new Set(plan.entries.map((e) => e.path));
  const raw: Omit<Op, "n">[] = [];
  const implicit = new Map<string, string>();
  const problems: string[] = [];
  for (const e of plan.entries) {
    if (e.op !== "take" && e.op !== "delete") continue;
    const after: Signature = e.op === "take" ? e.after : { kind: "absent" };
    const dirMode = dirModes?.get(e.path);
    raw.push({
      path: e.path,
      before: e.before,
      after,
      ...(dirMode !== undefined ? { dirMode } : {}),
    });
    if (after.kind !== "dir") {
      for (const d of emptiedDirs(root, e.path, inPlan, problems)) {
        raw.push({ path: d, before: { kind: "dir" }, after: { kind: "absent" }, implicit: true });
      }
    }
    if (e.op !== "take") continue;
    const parts = e.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const a = parts.slice(0, i).join("/");
      if (inPlan.has(a) || implicit.has(a)) continue;
      const p = openParent(root, a);
      if (!p.ok) {
        implicit.set(a, "absent");
        continue;
      }
      using dir = p.dir;
      const kind = dir.statAt(p.name)?.kind ?? "absent";
      implicit.set(a, kind);
      if (kind !== "dir" && kind !== "absent") {
        problems.push(
          `${a} is a ${kind}, not a directory, and the plan does not replace it (needed for ${e.path})`,
        );
      }
    }
  }
  if (problems.length > 0) throw new ApplyRefusedError(problems);
  for (const [path, kind] of implicit) {
    if (kind === "absent") {
      raw.push({ path, before: { kind: "absent" }, after: { kind: "dir" }, implicit: true });
    }
  }
  raw.sort((a, b) => comparePaths(a.path, b.path));
  return raw.map((op, n) => ({ n, ...op }));
}

/** Stages one taken file or symlink as `stage/s<n>`, checked against its signature. */
async function stageOne(work: Work, op: Op, opts: ApplyOptions, hexLength: number): Promise<void> {
  const name = stageName(op.n);
  const after = op.after;
  if (after.kind === "symlink") {
    work.stage.symlink(new TextEncoder().encode(after.target), name);
    return;
  }
  if (after.kind !== "file") return;
  const c = await opts.content({ path: op.path, after });
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
    dst.sync();
  }
  using staged = work.stage.openFile(name);
  const blob = blobIdOfFile(staged, hexLength);
  const perm = staged.stat().perm;
  if (blob !== after.blob || perm !== after.mode) {
    throw new Error(
      `the bytes given for ${op.path} are not what the plan takes ` +
        `(${describeState({ kind: "file", perm, blob })}, not ${describeState(after)}); plan again`,
    );
  }
}

/**
 * The state of every op's path now (the restore point), what changed since
 * the plan, and what blocks it: a directory that goes must hold nothing
 * the plan does not remove.
 */
function checkOps(root: Dir, ops: readonly Op[], gitModes: boolean, hexLength: number) {
  const prior: Prior[] = [];
  const changed: Changed[] = [];
  const problems: string[] = [];
  const removed = new Set(ops.filter((o) => o.after.kind === "absent").map((o) => o.path));
  for (const op of ops) {
    const found: Found = readState(root, op.path, hexLength);
    prior.push(found.kind === "other" ? { kind: "absent" } : found);
    const emptied = found.kind === "dir" && op.after.kind !== "dir";
    if (!matches(found, op.before, gitModes)) {
      changed.push({
        path: op.path,
        expected: describeState(op.before),
        found: describeState(found),
      });
    }
    if (!emptied) continue;
    const p = openParent(root, op.path);
    if (!p.ok) continue;
    using parent = p.dir;
    using dir = parent.openDir(p.name);
    const { entries, invalid } = dir.listing();
    const extra = [
      ...entries.map((e) => `${op.path}/${e.name}`).filter((x) => !removed.has(x)),
      ...invalid.map((e) => `${op.path}/${e.shown}`),
    ];
    if (extra.length > 0) {
      problems.push(
        `${op.path} is a directory that still holds ${extra.slice(0, 3).join(", ")}${
          extra.length > 3 ? ", ..." : ""
        }, which the plan does not remove: move them away, or plan them`,
      );
    }
  }
  return { prior, changed, problems };
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
  const ops = opsOf(root, plan, opts.dirModes);
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
    for (const op of ops) await stageOne(work, op, opts, hexLength);
    fsyncDir(stage);
    await step("staged");
    const { prior, changed, problems } = checkOps(root, ops, gitModes, hexLength);
    if (changed.length > 0) {
      refusal = opts.changedError?.(changed) ?? new ConcurrentChangeError(changed);
    } else if (problems.length > 0) refusal = new ApplyRefusedError(problems);
    if (refusal !== null) throw refusal;
    log.append({ t: "ready", prior });
    await step("ready");
    let i = 0;
    for (const s of stepsOf(ops, prior)) {
      const name = `${s.kind}-${i++}`;
      log.append({ t: "step", kind: s.kind, n: s.n });
      logged.push(s);
      await step(`${name}:logged`);
      runStep(root, work, ops[s.n]!, s.kind);
      await step(`${name}:done`);
    }
    syncTouched(root, work, ops);
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
