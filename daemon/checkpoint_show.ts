/**
 * `marsh show CHECKPOINT [--patch]` (docs/guide.md, "Committing a
 * checkpoint"): a checkpoint's record from the journal, the paths it
 * changed against its parent (a session's start: against the empty tree),
 * and with `--patch` its patch, streamed as `chunk` frames from the
 * service's patch writer, the one a split's capture uses.
 *
 * @module
 */

import type { CheckpointShowRequest } from "../protocol/daemon_checkpoint.ts";
import type { CheckpointPatchedReply } from "../protocol/splitfs_export.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { hostOnly } from "./checkpoint_commit.ts";
import { type CheckpointDeps, findCheckpoint, infoOf, projectOf } from "./checkpoint_find.ts";
import type { SplitConn } from "./split_context.ts";
import { RequestError } from "./request_error.ts";

/**
 * Answers `checkpoint.show` on `conn`: the patch's chunks (when asked),
 * then `checkpoint.shown`.
 *
 * @throws {RequestError} 2 for an unknown checkpoint or a stack that cannot be read
 */
export async function showCheckpoint(
  d: CheckpointDeps,
  conn: SplitConn,
  req: CheckpointShowRequest,
): Promise<void> {
  hostOnly(conn.authority, "show a checkpoint");
  const project = await projectOf(d, req.cwd);
  const found = findCheckpoint(d.checkpoints, project, null, req.checkpoint);
  const c = found.checkpoint;
  let from: readonly string[] = [];
  if (c.kind === "operation") {
    const parent = d.checkpoints.getCheckpoint(c.parent);
    if (parent === null) {
      throw new RequestError(2, `checkpoint ${c.id.slice(0, 12)}: its parent ${c.parent} is gone`);
    }
    from = parent.layers;
  }
  let r: CheckpointPatchedReply;
  try {
    r = await d.splitfs.request<CheckpointPatchedReply>(
      { v: 1, t: "checkpoint-patch", root: project, from, to: c.layers, patch: req.patch },
      async (bytes) => {
        await conn.send({ v: 1, t: "chunk", data: bytes.toBase64() });
      },
    );
  } catch (error) {
    if (error instanceof SplitfsError) {
      throw new RequestError(
        error.kind === "internal" ? 125 : 2,
        `checkpoint ${c.id.slice(0, 12)}: ${error.message}`,
      );
    }
    throw error;
  }
  await conn.send({
    v: 1,
    t: "checkpoint.shown",
    checkpoint: infoOf(d.checkpoints, found),
    changed: r.changed,
    paths: r.paths,
  });
}
