/**
 * The service's session frames (protocol/splitfs_session.ts;
 * docs/checkpoints.md): a session's snapshot and view, an operation's
 * overlay, capture and seal, and the layer read-back recovery uses. Each
 * holds the project's lock first, as a split does.
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to mount.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { RefusedError, SnapshotError } from "../errors.ts";
import { GITFILE_ROOT_REFUSAL } from "../git/git_source.ts";
import { LayerStore } from "../layers/layers.ts";
import type { Progress } from "../layers/snapshot.ts";
import type { ProjectLocks } from "../project_lock.ts";
import { projectIgnore, snapshotProject } from "../workspace/project_snapshot.ts";
import { captureUpper } from "./op_capture.ts";
import { keepCapture } from "./capture_cache.ts";
import { dropOp, openOpDir, prepareOp, unmountOp } from "./op_dir.ts";
import { sealOp } from "./op_seal.ts";
import { SessionPlace, unmountUnder, UPPER, WORK } from "./session_dir.ts";
import { mountView } from "./view.ts";
import { compactStep, dropCompaction, endCompactions } from "./compact.ts";
import { PHASE } from "./session_phases.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";
import { LAYERS_DIR, MARSH_DIR } from "../../model/layout.ts";
import { SESSION_DIR } from "../../model/checkpoint.ts";
import {
  COMPACT_STEP_MS,
  MAX_CAPTURED_PATHS,
  type SessionReply,
  type SessionRequest,
} from "../../protocol/splitfs_session.ts";

const enc = new TextEncoder();

/** What the frames need of the service. */
export interface SessionContext {
  readonly locks: ProjectLocks;
  /** Recovers the project's interrupted resolutions the first time it is locked. */
  readonly atFirstHold: (root: string) => Promise<void>;
  readonly progress?: Progress;
}

/** Answers one session frame; errors are thrown, for the service's own mapping. */
export async function handleSession(
  req: SessionRequest,
  ctx: SessionContext,
): Promise<SessionReply> {
  await ctx.atFirstHold(req.root);
  switch (req.t) {
    case "session-open":
      return { v: 1, t: "session-opened", ...openSession(req, ctx) };
    case "view-mount": {
      using place = SessionPlace.open(req.root, req.name, ctx.locks, req.create === true);
      return { v: 1, t: "view-mounted", ...mountView(place, req.layers) };
    }
    case "op-prepare": {
      using place = SessionPlace.open(req.root, req.name, ctx.locks, false);
      return { v: 1, t: "op-prepared", ...prepareOp(place, req.op, req.layers) };
    }
    case "op-capture": {
      using place = SessionPlace.open(req.root, req.name, ctx.locks, false);
      return captureOp(place, req.op, req.layers, req.rootId);
    }
    case "op-seal": {
      using place = SessionPlace.open(req.root, req.name, ctx.locks, false);
      return {
        v: 1,
        t: "op-sealed",
        layers: sealOp(place, req.op, req.layer, req.rootId, req.layers),
      };
    }
    case "op-drop": {
      using place = openIfPresent(req.root, req.name, ctx.locks);
      if (place !== null) dropOp(place, req.op);
      return { v: 1, t: "op-dropped" };
    }
    case "layer-check": {
      using rootDir = Dir.openAbsolute(req.root);
      if (rootDir.statAt(MARSH_DIR)?.kind !== "dir") {
        return { v: 1, t: "layer-checked", state: "absent" };
      }
      using marsh = rootDir.openDir(MARSH_DIR);
      // A read-back writes nothing: no store, no layer.
      if (marsh.statAt(LAYERS_DIR)?.kind !== "dir") {
        return { v: 1, t: "layer-checked", state: "absent" };
      }
      ctx.locks.hold(marsh, req.root);
      using store = LayerStore.open(marsh);
      return { v: 1, t: "layer-checked", ...store.check(req.layer, req.rootId) };
    }
    case "session-close": {
      using place = openIfPresent(req.root, req.name, ctx.locks);
      if (place !== null) closeSession(place);
      return { v: 1, t: "session-closed" };
    }
    case "compact": {
      using place = SessionPlace.open(req.root, req.name, ctx.locks, false);
      const step = compactStep(place, req.layers, req.layer, req.budgetMs ?? COMPACT_STEP_MS);
      return step.state === "compacting"
        ? { v: 1, t: "compacted", state: "compacting", layer: step.layer, files: step.files }
        : {
          v: 1,
          t: "compacted",
          state: "sealed",
          layer: step.layer,
          files: step.files,
          rootId: step.rootId,
          bytes: step.bytes,
        };
    }
    case "compact-drop": {
      using place = openIfPresent(req.root, req.name, ctx.locks);
      if (place !== null) dropCompaction(place, req.layer);
      return { v: 1, t: "compact-dropped" };
    }
  }
}

/** The session's place, or `null` when it has no directory (closed already). */
function openIfPresent(root: string, name: string, locks: ProjectLocks): SessionPlace | null {
  using rootDir = Dir.openAbsolute(root);
  if (rootDir.statAt(MARSH_DIR)?.kind !== "dir") return null;
  using marsh = rootDir.openDir(MARSH_DIR);
  if (marsh.statAt(SESSION_DIR)?.kind !== "dir") return null;
  using sessions = marsh.openDir(SESSION_DIR);
  if (sessions.statAt(name)?.kind !== "dir") return null;
  return SessionPlace.open(root, name, locks, false);
}

/**
 * `session-open`: the project's snapshot exactly as `marsh split` takes it
 * (`splitfs/workspace/project_snapshot.ts`), pinned and shown in the view.
 * All or nothing: a failure removes the session dir.
 */
function openSession(
  req: Extract<SessionRequest, { t: "session-open" }>,
  ctx: SessionContext,
): { layers: string[]; rootId: string; files: number; bytes: number } {
  const place = SessionPlace.open(req.root, req.name, ctx.locks, true);
  try {
    using rootDir = Dir.openAbsolute(req.root);
    const gitKind = rootDir.statAt(".git")?.kind;
    if (gitKind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
    const isGit = gitKind === "dir";
    place.mode();
    if (isGit && place.marsh.statAt(".gitignore") === null) {
      place.marsh.writeNewFile(".gitignore", enc.encode("*\n"));
    }
    const ignore = projectIgnore(rootDir, req.root, isGit, req.env ?? {});
    const snap = snapshotProject(place.store(), rootDir, ignore, req.withIgnored, ctx.progress);
    const layers = [...snap.layers];
    mountView(place, layers);
    return { layers, rootId: snap.rootId, files: snap.stats.files, bytes: snap.stats.bytes };
  } catch (error) {
    try {
      closeSession(place);
    } catch (cause) {
      throw new RefusedError(
        `${
          error instanceof Error ? error.message : error
        }; the partial session ${req.name} could not be removed: ${cause}`,
        { cause: error },
      );
    }
    throw error;
  } finally {
    place.close();
  }
}

/** Unmounts the view and every op overlay (verified), then removes the session dir. */
function closeSession(place: SessionPlace): void {
  endCompactions(place);
  unmountUnder(place.path, place.path, `marsh session rm ${place.name}`);
  using sessions = place.marsh.openDir(SESSION_DIR);
  sessions.removeTree(place.name);
}

/** `op-capture`: unmount the op's overlay, normalise its upper dir, compute its root. */
function captureOp(
  place: SessionPlace,
  op: string,
  layers: readonly string[],
  rootId: string,
): SessionReply {
  let t = phaseStart();
  const store = place.store();
  const head = store.stackOf(layers);
  phaseEnd(PHASE.stack, t);
  if (head.top.rootId !== rootId) {
    throw new RefusedError(
      `the head's stack ${layers.join(",")} shows root ${head.top.rootId}, not ${rootId}`,
    );
  }
  using dir = openOpDir(place, op);
  if (dir === null || dir.statAt(UPPER)?.kind !== "dir") {
    throw new RefusedError(
      `operation ${op} of session ${place.name} has no upper dir to capture (never prepared, sealed or dropped)`,
    );
  }
  t = phaseStart();
  unmountOp(place, op);
  // Overlay links each whiteout to one shared inode in its work dir: removing
  // that dir later would change the whiteouts' link count and ctime under the seal.
  dir.removeTree(WORK);
  phaseEnd(PHASE.unmount, t);
  using upper = dir.openDir(UPPER);
  t = phaseStart();
  const c = captureUpper(upper, head, place.mode());
  phaseEnd(PHASE.capture, t);
  t = phaseStart();
  keepCapture(place.opPath(op), head.top.id, upper, c);
  phaseEnd(PHASE.keep, t);
  if (!c.changed) return { v: 1, t: "op-captured", kind: "no-change", rootId };
  return {
    v: 1,
    t: "op-captured",
    kind: "changed",
    layer: store.freshId(),
    rootId: c.rootId,
    digest: c.digest,
    changed: c.paths.length,
    paths: c.paths.slice(0, MAX_CAPTURED_PATHS),
    truncated: c.paths.length > MAX_CAPTURED_PATHS,
  };
}
