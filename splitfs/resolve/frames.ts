/**
 * The service's resolution frames that read and change the source
 * (protocol/splitfs_resolve.ts; docs/resolution.md): `merge-inputs`,
 * `apply-plan`, `undo-resolution` and `recover-resolutions`. Each first holds
 * the project's lock and recovers any resolution a crash interrupted there.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { SplitfsReply } from "../../protocol/splitfs.ts";
import type {
  ApplyPlanRequest,
  MergeInputsRequest,
  RecoverResolutionsRequest,
  UndoResolutionRequest,
} from "../../protocol/splitfs_resolve.ts";
import type { SplitWorkspace } from "../workspace/workspace.ts";
import { applyErrorReply, applyPlanFrame, undoFrame } from "./apply_frame.ts";
import { mergeInputs } from "./merge_inputs.ts";
import { type ProjectRecovery, sourcePathOf } from "./recovery.ts";

/** The frames this module answers. */
export type ResolutionFrame =
  | MergeInputsRequest
  | ApplyPlanRequest
  | UndoResolutionRequest
  | RecoverResolutionsRequest;

/** What the frames need of the service. */
export interface ResolutionContext {
  /** The open split `id` (throws when there is none). */
  readonly workspace: (id: string) => SplitWorkspace;
  readonly recovery: ProjectRecovery;
}

/**
 * Answers one resolution frame. The applier's failures become error
 * replies with their own messages; other errors are thrown, for the
 * service's own mapping.
 */
export async function handleResolution(
  req: ResolutionFrame,
  ctx: ResolutionContext,
): Promise<SplitfsReply> {
  try {
    switch (req.t) {
      case "merge-inputs": {
        const ws = ctx.workspace(req.id);
        await ctx.recovery.ready(sourcePathOf(ws.root, req.parent));
        return mergeInputs(ws, req);
      }
      case "apply-plan": {
        const ws = ctx.workspace(req.id);
        // The root is checked against the split's source before the apply.
        await ctx.recovery.ready(sourcePathOf(ws.root, req.parent));
        return await applyPlanFrame(ws, req);
      }
      case "undo-resolution":
        await ctx.recovery.ready(req.root);
        return await undoFrame(req);
      case "recover-resolutions":
        return { v: 1, t: "recovered", resolutions: await ctx.recovery.recoverNow(req.root) };
    }
  } catch (error) {
    const reply = applyErrorReply(error);
    if (reply !== null) return reply;
    throw error;
  }
}
