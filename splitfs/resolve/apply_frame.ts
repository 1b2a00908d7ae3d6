/**
 * The `apply-plan` and `undo-resolution` frames (docs/resolution.md, "The
 * applier"): a clean plan applied to the source with the transactional
 * applier, each taken file's bytes read from the split's `store.git` or
 * copied from the branch's fork; an undo through the same applier. A
 * refusal that changed nothing is an `apply-refused` reply listing the
 * paths; a failure is an error whose message says what was restored.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { type BytesFrom, isClean, PlanError } from "../../model/resolution_plan.ts";
import type { ErrorReply } from "../../protocol/splitfs.ts";
import type {
  AppliedReply,
  ApplyPlanRequest,
  ApplyRefusedReply,
  UndoResolutionRequest,
} from "../../protocol/splitfs_resolve.ts";
import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { readStoreBlob } from "../git/object_export.ts";
import type { SplitWorkspace } from "../workspace/workspace.ts";
import {
  ApplyFailedError,
  ApplyRefusedError,
  ConcurrentChangeError,
  ResolutionStateError,
  RollbackFailedError,
  UndoRefusedError,
} from "../apply/errors.ts";
import { parentOf } from "../apply/fs_extra.ts";
import { applyPlan, type Content } from "../apply/transaction.ts";
import { undo } from "../apply/undo.ts";

/** How many conflicting paths a refusal names. */
const SHOWN = 10;

/**
 * Applies `req.plan` to `req.root`, the source of split `ws`'s branch
 * `req.label`, as resolution `req.resolution`.
 *
 * @throws {RefusedError} for a plan with conflicts, or a root that is not the split's source
 * @throws {ApplyFailedError} / {@linkcode RollbackFailedError} when a step failed
 */
export async function applyPlanFrame(
  ws: SplitWorkspace,
  req: ApplyPlanRequest,
): Promise<AppliedReply | ApplyRefusedReply> {
  if (!isClean(req.plan)) {
    const conflicts = req.plan.entries.filter((e) => e.op === "conflict").map((e) => e.path);
    throw new RefusedError(
      `the plan has ${conflicts.length} conflicting path(s), so nothing was changed: ` +
        `${conflicts.slice(0, SHOWN).join(", ")}${conflicts.length > SHOWN ? ", ..." : ""}; ` +
        `settle them in the source, or choose another scope or branch, and plan again`,
    );
  }
  using view = ws.resolveView(req.label, req.parent ?? null);
  if (req.root !== view.sourcePath) {
    throw new RefusedError(
      `${req.root} is not the source of split ${ws.id} (${view.sourcePath}); apply its plans there`,
    );
  }
  const from = new Map<string, BytesFrom>();
  for (const e of req.plan.entries) if (e.op === "take" && e.bytes) from.set(e.path, e.bytes);
  const opened: Dir[] = [];
  try {
    const applied = await applyPlan(req.root, req.plan, {
      id: req.resolution,
      content: (f): Content => {
        if (from.get(f.path) !== "branch") {
          return { bytes: readStoreBlob(view.objects, f.after.blob) };
        }
        if (view.fork === null) {
          throw new RefusedError(
            `branch ${req.label} has no fork in this service to copy ${f.path} from; ` +
              `reopen the split with its forks`,
          );
        }
        // The fork's file is checked against the plan's blob id once staged.
        const p = parentOf(view.fork, f.path);
        opened.push(p.dir);
        return { from: p.dir, name: p.name };
      },
    });
    return { v: 1, t: "applied", resolution: applied.id, changed: applied.ops.length };
  } catch (error) {
    const refused = refusedReply(error);
    if (refused !== null) return refused;
    throw error;
  } finally {
    for (const d of opened) d.close();
  }
}

/** Puts back what resolution `req.resolution` changed in `req.root`, as resolution `req.by`. */
export async function undoFrame(
  req: UndoResolutionRequest,
): Promise<AppliedReply | ApplyRefusedReply> {
  try {
    const done = await undo(req.root, req.resolution, { id: req.by });
    return { v: 1, t: "applied", resolution: done.id, changed: done.ops.length };
  } catch (error) {
    const refused = refusedReply(error);
    if (refused !== null) return refused;
    throw error;
  }
}

/** The `apply-refused` reply for a refusal that changed nothing; `null` for anything else. */
export function refusedReply(error: unknown): ApplyRefusedReply | null {
  if (error instanceof ConcurrentChangeError || error instanceof UndoRefusedError) {
    return {
      v: 1,
      t: "apply-refused",
      message: error.message,
      changed: error.changed.map((c) => ({ path: c.path, expected: c.expected, found: c.found })),
    };
  }
  // Its problems name paths in words (a file where a directory is needed, an unplanned entry).
  if (error instanceof ApplyRefusedError) {
    return { v: 1, t: "apply-refused", message: error.message, changed: [] };
  }
  return null;
}

/**
 * The error reply for the applier's failures and an unknown or settled
 * resolution: each message says what was restored, or what to fix.
 * `null` for anything else.
 */
export function applyErrorReply(error: unknown): ErrorReply | null {
  if (
    error instanceof ApplyFailedError || error instanceof RollbackFailedError ||
    error instanceof ResolutionStateError || error instanceof PlanError
  ) {
    return { v: 1, t: "error", kind: "input", message: error.message };
  }
  return null;
}
