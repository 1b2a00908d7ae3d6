/**
 * An operation's seal (docs/checkpoints.md "An operation", step 6, the
 * layer seal): the captured upper dir is renamed, not copied, into a staging
 * wrapper `op/<op>/layer/data`, sealed there as every layer is, and renamed
 * into `.marsh/layers/<layer>` (`splitfs/layers/layer_adopt.ts`). The store
 * shows the layer sealed or not at all, so a `kill -9` anywhere leaves it
 * `absent` (the op dir still holds the upper or the staged wrapper, and the
 * seal runs again) or `durable`.
 *
 * The capture the `op-capture` request made is used when the upper dir is
 * provably unchanged since (`capture_cache.ts`); otherwise it is computed
 * again from the normalised upper dir (capture is idempotent), so the seal
 * also works after a service restart.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { RefusedError } from "../errors.ts";
import { DATA, SEALED } from "../layers/layers.ts";
import { captureUpper } from "./op_capture.ts";
import { forgetCapture, keptCapture } from "./capture_cache.ts";
import { PHASE } from "./session_phases.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";
import { openOpDir, unmountOp } from "./op_dir.ts";
import { MERGED, type SessionPlace, STAGED, UPPER, WORK, writePin } from "./session_dir.ts";

/** The chain an operation's layer names in its `meta.json`: no chain's head is ever one. */
export const SESSION_CHAIN = "session";

/**
 * Seals op `op`'s captured upper dir as layer `layer` with root `rootId` on
 * the stack `layers` (bottom first) and returns the new stack. The op dir
 * then holds only its pin of the new stack, until `op-drop`.
 *
 * Idempotent: a layer sealed already with `rootId` on `layers` answers the
 * same; sealed with another root id (or on another stack) is an error.
 *
 * @throws {RefusedError} when there is nothing to seal, or the upper dir
 *   gives another root id than `rootId`
 * @throws {LayerError} when `layers` is not a sealed stack, or `layer` conflicts
 */
export function sealOp(
  place: SessionPlace,
  op: string,
  layer: string,
  rootId: string,
  layers: readonly string[],
): string[] {
  const store = place.store();
  const stack = [...layers, layer];
  let t = phaseStart();
  const found = store.check(layer, rootId);
  phaseEnd(PHASE.sealCheck, t);
  if (found.state === "durable") {
    // Sealed before: on this very stack?
    store.stackOf(stack);
    pinSealed(place, op, stack);
    return stack;
  }
  if (found.state !== "absent") {
    throw new RefusedError(
      `cannot seal layer ${layer} of operation ${op}: it is ${found.state} (${found.detail})`,
    );
  }
  using dir = openOpDir(place, op);
  if (dir === null) {
    throw new RefusedError(
      `operation ${op} of session ${place.name} has no directory: nothing to seal (it was dropped)`,
    );
  }
  t = phaseStart();
  unmountOp(place, op);
  // The whiteouts' shared inode goes before the seal records their link count and ctime.
  dir.removeTree(WORK);
  phaseEnd(PHASE.sealUnmount, t);
  t = phaseStart();
  const head = store.stackOf(layers);
  phaseEnd(PHASE.stack, t);
  if (dir.statAt(STAGED)?.kind === "dir") {
    let sealed: boolean;
    {
      using staged = dir.openDir(STAGED);
      sealed = staged.statAt(SEALED) !== null;
      // Staged, not sealed: the upper dir goes back to where a capture reads it.
      if (!sealed && staged.statAt(DATA) !== null && dir.statAt(UPPER) === null) {
        staged.rename(DATA, dir, UPPER);
      }
    }
    if (sealed) {
      store.adopt(dir, STAGED, {
        id: layer,
        chain: SESSION_CHAIN,
        parent: head.top,
        index: null,
        rootId,
        counts: { files: 0, dirs: 0, symlinks: 0, whiteouts: 0, bytes: 0 },
      });
      pinSealed(place, op, stack);
      return stack;
    }
    dir.removeTree(STAGED);
  }
  if (dir.statAt(UPPER)?.kind !== "dir") {
    throw new RefusedError(`operation ${op} of session ${place.name} has no upper dir to seal`);
  }
  let capture;
  t = phaseStart();
  {
    using upper = dir.openDir(UPPER);
    const path = place.opPath(op);
    capture = keptCapture(path, head.top.id, rootId, upper) ??
      captureUpper(upper, head, place.mode());
    forgetCapture(path);
  }
  phaseEnd(PHASE.kept, t);
  if (!capture.changed) {
    throw new RefusedError(
      `operation ${op} changed nothing (root ${capture.rootId} is the head's): bind it as no-change instead of sealing`,
    );
  }
  if (capture.rootId !== rootId) {
    throw new RefusedError(
      `operation ${op}'s upper dir gives root ${capture.rootId}, not the requested ${rootId}: capture it again`,
    );
  }
  t = phaseStart();
  dir.mkdir(STAGED, 0o700);
  {
    using staged = dir.openDir(STAGED);
    dir.rename(UPPER, staged, DATA);
  }
  // The new stack's pin, durable before the layer's SEALED: the seal's sync
  // fsyncs the op dir (its rename) but not the pin's bytes. Naming a layer
  // not sealed yet keeps nothing more.
  writePin(dir, stack);
  store.adopt(dir, STAGED, {
    id: layer,
    chain: SESSION_CHAIN,
    parent: head.top,
    index: capture.index,
    base: capture.base,
    rootId,
    counts: capture.counts,
  });
  phaseEnd(PHASE.adopt, t);
  t = phaseStart();
  pinSealed(place, op, stack, false);
  phaseEnd(PHASE.pin, t);
  return stack;
}

/** Leaves the op dir as the pin of `stack` alone (`write`: the pin is not written yet). */
function pinSealed(
  place: SessionPlace,
  op: string,
  stack: readonly string[],
  write = true,
): void {
  using dir = openOpDir(place, op);
  if (dir === null) return;
  unmountOp(place, op);
  if (write) writePin(dir, stack);
  for (const name of [MERGED, WORK]) dir.removeTree(name);
}
