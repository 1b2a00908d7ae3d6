/**
 * The daemon's half of `marsh commit` (docs/guide.md, "Committing a
 * checkpoint"): resolve the checkpoint from the journal, then have the
 * split-filesystem service export its root into the project's Git object
 * store. The commit object and the ref's compare-and-swap are the CLI's
 * (it runs as the user and may run Git; the daemon may not), so nothing
 * here moves a ref, and nothing here is journaled: an export only adds
 * objects Git could prune.
 *
 * @module
 */

import type {
  CheckpointExportedReply,
  CheckpointExportRequest,
} from "../protocol/daemon_checkpoint.ts";
import type { ExportUnsupportedReply, RootExportedReply } from "../protocol/splitfs_export.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import type { Authority } from "./conn.ts";
import { type CheckpointDeps, findCheckpoint, infoOf, projectOf } from "./checkpoint_find.ts";
import { RequestError } from "./request_error.ts";

/** Refused for a caller that is not the host. */
export function hostOnly(auth: Authority, verb: string): void {
  if (auth.kind !== "host") {
    throw new RequestError(2, `only the host may ${verb}; run it outside the branch`);
  }
}

/**
 * `checkpoint.export`: the checkpoint's root in the project's object store,
 * or `unsupported` naming the path Git cannot store (nothing written).
 *
 * @throws {RequestError} 2 for an unknown project, session or checkpoint,
 *   no repository, or a stack that is not sealed and whole; 125 for a fault
 */
export async function exportCheckpoint(
  d: CheckpointDeps,
  auth: Authority,
  req: CheckpointExportRequest,
): Promise<Omit<CheckpointExportedReply, "v" | "t">> {
  hostOnly(auth, "commit a checkpoint to Git");
  const project = await projectOf(d, req.cwd);
  const found = findCheckpoint(d.checkpoints, project, req.session, req.checkpoint);
  const c = found.checkpoint;
  let r: RootExportedReply | ExportUnsupportedReply;
  try {
    r = await d.splitfs.request<RootExportedReply | ExportUnsupportedReply>({
      v: 1,
      t: "export-root",
      root: project,
      layers: c.layers,
      rootId: c.root,
    });
  } catch (error) {
    if (error instanceof SplitfsError) {
      throw new RequestError(
        error.kind === "internal" ? 125 : 2,
        `checkpoint ${c.id.slice(0, 12)}: ${error.message}; nothing was committed`,
      );
    }
    throw error;
  }
  const checkpoint = infoOf(d.checkpoints, found);
  if (r.t === "export-unsupported") {
    return {
      project,
      checkpoint,
      git_dir: "",
      objects_dir: "",
      blobs: 0,
      trees: 0,
      bytes: 0,
      present: 0,
      unsupported: { path: r.path, kind: r.kind, message: r.message },
    };
  }
  return {
    project,
    checkpoint,
    git_dir: r.gitDir,
    objects_dir: r.objectsDir,
    blobs: r.blobs,
    trees: r.trees,
    bytes: r.bytes,
    present: r.present,
    unsupported: null,
  };
}
