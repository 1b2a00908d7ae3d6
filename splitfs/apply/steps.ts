/**
 * The applier's steps and their inverses (docs/resolution.md, "The
 * recovery rule"). A step is one rename or one `mkdir`, so whether it ran
 * can be read off the disk: a backed-up entry is in `backup/` or at its
 * path, a staged one in `stage/` or at its path. Undoing a step checks
 * first, so rolling back twice (a crash during recovery) is harmless.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { comparePaths } from "../../model/resolution_plan.ts";
import { fsyncAll, openParent, parentOf } from "./fs_extra.ts";
import type { Op, Prior, StepKind } from "./intent_log.ts";
import type { Changed } from "./errors.ts";
import { identityOf } from "./path_state.ts";
import { backupName, stageName } from "./resolution_dir.ts";

/** One step: what it does to which op. */
export interface Step {
  readonly kind: StepKind;
  readonly n: number;
}

/** A resolution's working dirs. */
export interface Work {
  readonly stage: Dir;
  readonly backup: Dir;
}

/**
 * The steps of `ops` in the order they run: every path that holds something
 * now moves to the backup, deepest first (a directory once emptied of its
 * planned entries); then directories are made, parents first; then staged
 * files and symlinks are renamed into place. `prior[n]` is what `ops[n]`'s
 * path holds now.
 */
export function stepsOf(ops: readonly Op[], prior: readonly Prior[]): Step[] {
  const byPath = [...ops].sort((a, b) => comparePaths(a.path, b.path));
  const out: Step[] = [];
  for (const op of [...byPath].reverse()) {
    if (prior[op.n]?.kind !== "absent") out.push({ kind: "backup", n: op.n });
  }
  for (const op of byPath) if (op.after.kind === "dir") out.push({ kind: "mkdir", n: op.n });
  for (const op of byPath) {
    if (op.after.kind === "file" || op.after.kind === "symlink") {
      out.push({ kind: "place", n: op.n });
    }
  }
  return out;
}

/** A path found changed once moved to the backup: it changed after the re-check. */
export class ChangedDuringApply extends Error {
  override name = "ChangedDuringApply";
  constructor(readonly changed: Changed) {
    super(`${changed.path} changed while the apply ran`);
  }
}

/**
 * Runs one step. A backed-up entry is compared with what the re-check read
 * (`identity`: see path_state.ts), and a backed-up directory must be empty.
 */
export function runStep(
  root: Dir,
  work: Work,
  op: Op,
  kind: StepKind,
  identity: string | null = null,
): void {
  const { dir, name } = parentOf(root, op.path);
  using _ = dir;
  switch (kind) {
    case "backup": {
      const b = backupName(op.n);
      dir.rename(name, work.backup, b);
      const st = work.backup.statAt(b);
      let found: string | null = null;
      if (st?.kind === "dir") {
        using moved = work.backup.openDir(b);
        const left = moved.listing();
        const first = left.entries[0]?.name ?? left.invalid[0]?.shown;
        if (first !== undefined) found = `a directory holding ${first}`;
      } else if (identity !== null && (st === null || identityOf(st) !== identity)) {
        found = "written after it was checked";
      }
      if (found !== null) {
        throw new ChangedDuringApply({ path: op.path, expected: "what was checked", found });
      }
      return;
    }
    case "mkdir":
      dir.mkdir(name, op.dirMode ?? 0o777);
      if (op.dirMode !== undefined) {
        using made = dir.openDir(name);
        made.chmod(op.dirMode);
      }
      return;
    case "place":
      work.stage.rename(stageName(op.n), dir, name);
      return;
  }
}

/** Undoes one step if it ran; does nothing if it did not (so it may run again). */
export function undoStep(root: Dir, work: Work, op: Op, kind: StepKind): void {
  switch (kind) {
    case "place": {
      if (work.stage.statAt(stageName(op.n)) !== null) return;
      const p = openParent(root, op.path);
      if (!p.ok) return;
      using dir = p.dir;
      // Neither staged nor placed: the staged entry was lost before its rename, which never ran.
      if (dir.statAt(p.name) === null) return;
      dir.rename(p.name, work.stage, stageName(op.n));
      return;
    }
    case "mkdir": {
      const p = openParent(root, op.path);
      if (!p.ok) return;
      using dir = p.dir;
      if (dir.statAt(p.name)?.kind === "dir") dir.rmdir(p.name);
      return;
    }
    case "backup": {
      if (work.backup.statAt(backupName(op.n)) === null) return;
      const { dir, name } = parentOf(root, op.path);
      using _ = dir;
      work.backup.rename(backupName(op.n), dir, name);
      return;
    }
  }
}

/** The parent directory of a path (`""` for the root). */
function parentPath(path: string): string {
  const i = path.lastIndexOf("/");
  return i === -1 ? "" : path.slice(0, i);
}

/**
 * Flushes every directory whose entries the ops change (each path's
 * parent, and each directory made), then the resolution's own dirs, so
 * the renames are on disk before the log says they are final.
 */
export async function syncTouched(root: Dir, work: Work, ops: readonly Op[]): Promise<void> {
  const dirs = new Set<string>();
  for (const op of ops) {
    dirs.add(parentPath(op.path));
    if (op.after.kind === "dir") dirs.add(op.path);
  }
  // Opened first, then flushed together (fsyncAll); at most SYNC_BATCH descriptors held.
  const open: Dir[] = [];
  const flush = async () => {
    try {
      await fsyncAll(open);
    } finally {
      for (const d of open.splice(0)) d.close();
    }
  };
  try {
    for (const d of dirs) {
      if (d === "") {
        open.push(root.dup());
      } else {
        const p = openParent(root, d);
        if (!p.ok) continue;
        using parent = p.dir;
        if (parent.statAt(p.name)?.kind !== "dir") continue;
        open.push(parent.openDir(p.name));
      }
      if (open.length >= SYNC_BATCH) await flush();
    }
    open.push(work.stage.dup(), work.backup.dup());
    await flush();
  } finally {
    for (const d of open) d.close();
  }
}

/** How many directories are flushed together at most (each holds a descriptor meanwhile). */
const SYNC_BATCH = 64;

/**
 * Undoes the logged steps, last first, each only if it ran; `onUndo` is
 * told before each (a test pauses there).
 */
export async function rollBack(
  root: Dir,
  work: Work,
  ops: readonly Op[],
  logged: readonly Step[],
  onUndo?: (index: number) => void | Promise<void>,
): Promise<void> {
  for (let i = logged.length - 1; i >= 0; i--) {
    const s = logged[i]!;
    await onUndo?.(logged.length - 1 - i);
    undoStep(root, work, ops[s.n]!, s.kind);
  }
  await syncTouched(root, work, ops);
}
