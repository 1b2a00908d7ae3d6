/**
 * `marsh undo RESOLUTION` (docs/guide.md, "marsh undo"): puts back exactly
 * what an applied merge, promote or undo changed, from its restore point,
 * if those paths have not changed since; otherwise it refuses, listing
 * them, and nothing is changed. The undo is a resolution of its own
 * (journaled, crash-safe, and itself undoable); once applied, the one it
 * undid is `undone`.
 *
 * @module
 */

import type { AppliedReply, ApplyRefusedReply } from "../protocol/splitfs_resolve.ts";
import type { Authority } from "./conn.ts";
import { creatorOf } from "./creator.ts";
import { RequestError } from "./request_error.ts";
import { applyResolution } from "./resolve_apply.ts";
import { authorize, type Outcome, outcome, type ResolveDeps } from "./resolve_context.ts";

/**
 * Undoes resolution `id`.
 *
 * @throws {RequestError} (2) for an unknown resolution or a caller that did not make it
 */
export async function undo(d: ResolveDeps, auth: Authority, id: string): Promise<Outcome> {
  const r = d.journal.getResolution(id);
  if (r === null) throw new RequestError(2, `no resolution ${id}; marsh resolutions lists them`);
  // The split may be gone (marsh splits rm): the restore point is the project's, and so is the right.
  authorize(auth, r.who, "undo", `resolution ${id}`);
  switch (r.state) {
    case "undone":
      return outcome({
        outcome: "refused",
        code: 1,
        message: `resolution ${id} was already undone by ${r.undoneBy}; nothing was changed ` +
          `(to apply it again: marsh undo ${r.undoneBy})`,
      });
    case "failed":
      return outcome({
        outcome: "refused",
        code: 1,
        message: `resolution ${id} failed, so it changed nothing: there is nothing to undo`,
      });
    case "applying":
      return outcome({
        outcome: "refused",
        code: 1,
        message: `resolution ${id} is still being applied: undo it once it has ended ` +
          `(marsh resolutions shows its state)`,
      });
    case "applied":
      break;
  }
  return await applyResolution(d, {
    split: r.split,
    label: r.label,
    kind: "undo",
    scope: "undo",
    root: r.root,
    who: creatorOf(auth),
    plan: null,
    undoes: r.id,
    refusedHint:
      "they changed since the resolution, and undo would overwrite them: put them back as it left them (or keep them)",
    checkout: r.checkout ?? null,
    done: `undid resolution ${r.id} (${
      r.checkout
        ? `${r.kind} of checkpoint ${
          r.checkout.checkpoint.slice(0, 12)
        } of session ${r.checkout.name}`
        : `${r.kind} of branch ${r.label} of split ${r.split}`
    })`,
    request: (by) =>
      d.splitfs.request<AppliedReply | ApplyRefusedReply>({
        v: 1,
        t: "undo-resolution",
        root: r.root,
        resolution: r.id,
        by,
      }),
  });
}
