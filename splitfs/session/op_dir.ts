/**
 * An operation's private overlay (docs/checkpoints.md "An operation"):
 * `<root>/.marsh/session/<name>/op/<op>/` with `upper/`, `work/`, a pin of
 * the head's stack (`layers`), and the read-write overlay of that stack and
 * `upper/` mounted at `merged/`, where the worker runs the command.
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to mount.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { LayerError } from "../layers/layers.ts";
import { F_MODE } from "../layers/layer_index.ts";
import { MountError, mountReadWrite } from "../fork/overlay.ts";
import { E, FsError } from "../fd/ffi.ts";
import { openLowers } from "./view.ts";
import { forgetCapture } from "./capture_cache.ts";
import { PHASE } from "./session_phases.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";
import {
  MERGED,
  mountsAt,
  OP_DIR,
  readPin,
  type SessionPlace,
  unmountUnder,
  UPPER,
  WORK,
  writePin,
} from "./session_dir.ts";

/** What `op-prepare` answers. */
export interface PreparedOp {
  readonly merged: string;
  readonly upper: string;
}

/** The op's directory, or `null` when there is none. The caller closes it. */
export function openOpDir(place: SessionPlace, op: string): Dir | null {
  if (place.dir.statAt(OP_DIR)?.kind !== "dir") return null;
  using ops = place.dir.openDir(OP_DIR);
  return ops.statAt(op)?.kind === "dir" ? ops.openDir(op) : null;
}

/**
 * Makes the op's directory and mounts its overlay over the head's stack
 * `layers` (bottom first), after checking each layer's data against its
 * seal. The same op prepared again on the same stack, still mounted, gets
 * the same answer and its upper dir is left alone.
 *
 * @throws {LayerError} when a layer is missing, unsealed, or changed since its seal
 * @throws {RefusedError} when the op's directory exists for another stack or unmounted
 */
export function prepareOp(place: SessionPlace, op: string, layers: readonly string[]): PreparedOp {
  const path = place.opPath(op);
  const answer = { merged: `${path}/${MERGED}`, upper: `${path}/${UPPER}` };
  {
    using existing = openOpDir(place, op);
    if (existing !== null) {
      const pinned = readPin(existing);
      const same = pinned.length === layers.length && pinned.every((id, i) => id === layers[i]);
      if (same && mountsAt(answer.merged).length === 1) return answer;
      throw new RefusedError(
        `operation ${op} of session ${place.name} was prepared already${
          same ? " and its overlay is no longer mounted" : " on another stack"
        }; drop it (op-drop) first`,
      );
    }
  }
  let t = phaseStart();
  const store = place.store();
  const stack = store.stackOf(layers);
  phaseEnd(PHASE.stack, t);
  t = phaseStart();
  const problem = store.checkStack(stack);
  phaseEnd(PHASE.check, t);
  if (problem !== null) throw new LayerError(stack.top.id, `is not usable: ${problem}`);
  t = phaseStart();
  const mode = place.mode();
  using ops = place.dir.ensureDir(OP_DIR, 0o755);
  ops.mkdir(op, 0o755);
  try {
    using dir = ops.openDir(op);
    // The head's stack, which the journal keeps too: no fsync (see writePin).
    writePin(dir, layers, false);
    dir.mkdir(UPPER, 0o755);
    dir.mkdir(WORK, 0o700);
    dir.mkdir(MERGED, 0o755);
    using upper = dir.openDir(UPPER);
    using work = dir.openDir(WORK);
    // The merged root takes the upper root's mode: the head's root's.
    upper.chmod((stack.index.rootStat[F_MODE] as number) & 0o7777);
    const lowers = openLowers(store, layers, false);
    try {
      using target = dir.openDir(MERGED);
      // Volatile: the command's fsyncs and the unmount at its capture sync
      // nothing; the seal makes the layer durable (docs/checkpoints.md "An operation").
      try {
        mountReadWrite(mode, lowers, { upper, work }, target, answer.upper, true);
      } catch (error) {
        // Before Linux 5.10 overlay has no `volatile`: mount without it.
        if (!(error instanceof MountError && error.cause instanceof FsError)) throw error;
        if (error.cause.errno !== E.EINVAL) throw error;
        mountReadWrite(mode, lowers, { upper, work }, target, answer.upper);
      }
    } finally {
      for (const d of lowers) d.close();
    }
    phaseEnd(PHASE.overlay, t);
    return answer;
  } catch (error) {
    dropOp(place, op);
    throw error;
  }
}

/**
 * Unmounts the op's overlay (verified) and removes its directory. An op
 * with no directory is dropped already.
 *
 * @throws {MountBusyError} when a process still uses its overlay; nothing is removed
 */
export function dropOp(place: SessionPlace, op: string): void {
  if (place.dir.statAt(OP_DIR)?.kind !== "dir") return;
  const path = place.opPath(op);
  forgetCapture(path);
  unmountUnder(path, place.path, `op-drop of ${op}`);
  using ops = place.dir.openDir(OP_DIR);
  ops.removeTree(op);
}

/**
 * Unmounts the op's overlay, if mounted, so its upper dir is final.
 *
 * @throws {MountBusyError} when a process still uses it (the op was not drained)
 */
export function unmountOp(place: SessionPlace, op: string): void {
  const merged = `${place.opPath(op)}/${MERGED}`;
  if (mountsAt(merged).length > 0) unmountUnder(merged, place.path, `op-drop of ${op}`);
}
