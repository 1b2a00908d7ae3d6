/**
 * Join's first step with a Git project: the blobs the split's patches need
 * go into the objects dir the consumer's Git uses, before the consumer runs
 * or the rendering is sent (docs/guide.md, "Applying a branch's patch").
 * Otherwise `GIT_ALTERNATE_OBJECT_DIRECTORIES="$SPLIT_OBJECTS" git apply --3way`
 * stages blobs that live only in the split's store, and removing the split
 * leaves the user's index naming missing objects.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { SplitRecord } from "../journal/records.ts";
import type { ExportedReply } from "../protocol/splitfs_objects.ts";
import { SplitfsError, type SplitfsService } from "../protocol/splitfs_client.ts";
import type { Log } from "./log.ts";

/**
 * Where the consumer's Git keeps its objects, as the journal says: the
 * project's `.git/objects` for a root split; for a nested split, its
 * creator fork's admin dir (the `.git` the creator branch's Git uses).
 */
export function joinObjectsDir(s: SplitRecord): string {
  return s.parent === null
    ? `${s.root}/.git/objects`
    : `${s.root}/.marsh/split/${s.parent.split}/.admin/${s.parent.label}/objects`;
}

/**
 * Writes the objects of every branch's patch (an open split's) through the
 * splitfs service. Returns `null` when done (or nothing was needed: no Git),
 * else the message join refuses with; the caller keeps the split.
 *
 * @throws {SplitfsError} `replaced`: the workspace was replaced
 */
export async function writeJoinObjects(
  d: {
    readonly journal: Journal;
    readonly splitfs: Pick<SplitfsService, "request">;
    readonly log: Log;
  },
  s: SplitRecord,
): Promise<string | null> {
  if (s.git === null) return null;
  const labels = d.journal.branches(s.id).map((b) => b.label);
  let r: ExportedReply;
  try {
    r = await d.splitfs.request<ExportedReply>({
      v: 1,
      t: "export-objects",
      id: s.id,
      labels,
      ...(s.parent ? { parent: s.parent } : {}),
    });
  } catch (error) {
    if (error instanceof SplitfsError && error.kind === "replaced") throw error;
    const why = error instanceof Error ? error.message : String(error);
    d.log.info(`split ${s.id}: objects not written into ${joinObjectsDir(s)}: ${why}`);
    return `split ${s.id}: the objects its patches need could not be written into ${
      joinObjectsDir(s)
    }: ${why}; nothing was handed to a consumer and the split is kept: fix that and join again, or remove it with: marsh splits rm ${s.id}`;
  }
  if (r.target !== null && r.written > 0) {
    d.log.info(`split ${s.id}: wrote ${r.written} objects into ${r.target} (${r.present} there)`);
  }
  return null;
}
