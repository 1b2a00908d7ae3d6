/**
 * Undo of an applied resolution (docs/resolution.md, "Undo"): the inverse
 * plan is built from the restore point (each path goes back to what it held
 * before, the bytes hard-linked from `backup/`, so nothing is copied), and
 * runs through the same applier, whose re-check refuses, listing the paths
 * and changing nothing, if any of them changed since the apply.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import {
  comparePaths,
  type MergePlan,
  type PlanEntry,
  type Present,
} from "../../model/resolution_plan.ts";
import { ResolutionStateError, UndoRefusedError } from "./errors.ts";
import { type LogRecord, type Prior, readLog } from "./intent_log.ts";
import { logState, settleUndo } from "./recover.ts";
import { BACKUP_DIR, backupName, checkId, openResolveRoot } from "./resolution_dir.ts";
import { type Applied, type ApplyOptions, applyPlan } from "./transaction.ts";

function present(p: Prior): Present | null {
  switch (p.kind) {
    case "absent":
      return null;
    case "dir":
      return { kind: "dir" };
    case "symlink":
      return { kind: "symlink", target: p.target };
    case "file":
      return { kind: "file", mode: p.perm, blob: p.blob };
  }
}

/** The resolution's begin and restore point, when it was applied and not undone. */
function appliedRecords(records: readonly LogRecord[], id: string) {
  const state = logState(records);
  if (state !== "done" && state !== "committed") {
    throw new ResolutionStateError(
      `resolution ${id} was not applied (${state}): there is nothing to undo`,
    );
  }
  const undone = records.find((r) => r.t === "undone");
  if (undone !== undefined) {
    throw new ResolutionStateError(`resolution ${id} was undone already, by ${undone.by}`);
  }
  const begin = records[0] as Extract<LogRecord, { t: "begin" }>;
  const ready = records.find((r) => r.t === "ready") as Extract<LogRecord, { t: "ready" }>;
  return { begin, prior: ready.prior };
}

/** The plan that puts back what resolution `id` changed, and the directory modes it restores. */
export function inversePlan(
  records: readonly LogRecord[],
  id: string,
): { plan: MergePlan; dirModes: Map<string, number>; byPath: Map<string, number> } {
  const { begin, prior } = appliedRecords(records, id);
  const entries: PlanEntry[] = [];
  const dirModes = new Map<string, number>();
  for (const op of begin.ops) {
    const now = op.after;
    const was = present(prior[op.n]!);
    if (was === null) {
      if (now.kind !== "absent") entries.push({ op: "delete", path: op.path, before: now });
    } else {
      entries.push(
        was.kind === "file"
          ? { op: "take", path: op.path, before: now, after: was, bytes: "store" }
          : { op: "take", path: op.path, before: now, after: was },
      );
      if (was.kind === "dir") dirModes.set(op.path, (prior[op.n] as { perm: number }).perm);
    }
  }
  entries.sort((a, b) => comparePaths(a.path, b.path));
  return {
    plan: {
      scope: "undo",
      trees: { base: null, source: null, branch: null, result: null },
      entries,
    },
    dirModes,
    byPath: new Map(begin.ops.map((o) => [o.path, o.n])),
  };
}

/** Options of {@linkcode undo}. */
export interface UndoOptions {
  /** The undo's own resolution id (default: a fresh one). */
  readonly id?: string;
  /** Told each step's name, as {@linkcode ApplyOptions.onStep}. */
  readonly onStep?: (step: string) => void | Promise<void>;
}

/**
 * Puts back exactly what resolution `id` changed in the project at
 * `rootPath`, as a resolution of its own (which can be undone in turn).
 *
 * @throws {UndoRefusedError} listing the paths changed since the apply (nothing changed)
 * @throws {ResolutionStateError} for a resolution unknown, not applied, or undone already
 */
export async function undo(rootPath: string, id: string, opts: UndoOptions = {}): Promise<Applied> {
  checkId(id);
  let records: LogRecord[];
  {
    using root = Dir.openAbsolute(rootPath);
    using resolveRoot = openResolveRoot(root, false);
    if (resolveRoot === null || resolveRoot.statAt(id)?.kind !== "dir") {
      throw new ResolutionStateError(`no resolution ${id} in ${rootPath}`);
    }
    using res = resolveRoot.openDir(id);
    records = readLog(res);
  }
  const { plan, dirModes, byPath } = inversePlan(records, id);
  using root = Dir.openAbsolute(rootPath);
  using resolveRoot = openResolveRoot(root, false)!;
  using res = resolveRoot.openDir(id);
  using backup = res.openDir(BACKUP_DIR);
  const options: ApplyOptions = {
    ...(opts.id !== undefined ? { id: opts.id } : {}),
    ...(opts.onStep !== undefined ? { onStep: opts.onStep } : {}),
    undoes: id,
    dirModes,
    content: (f) => ({ link: backup, name: backupName(byPath.get(f.path)!) }),
    changedError: (changed) => new UndoRefusedError(id, changed),
  };
  const applied = await applyPlan(rootPath, plan, options);
  // The restore point is spent: its files are the undo's now (hard links), and a later edit
  // of one must not reach a backup that nothing reads. Recovery does this too after a crash.
  settleUndo(resolveRoot, id, applied.id);
  return applied;
}
