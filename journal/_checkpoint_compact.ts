/**
 * The journal's side of compaction (docs/checkpoints.md "Compaction"): every
 * checkpoint stack of a project that starts with a compacted prefix is
 * rewritten to the compacted layer followed by the rest, in one
 * transaction. Root ids, checkpoint ids, heads and operations are not
 * touched: the compacted layer shows the same content as the prefix.
 * `CheckpointJournal.compactStacks` (checkpoints.ts) is its public face.
 *
 * @module
 */

import { check } from "./_checkpoint_rows.ts";
import type { Connection } from "./_connection.ts";

/** See `CheckpointJournal.compactStacks`. */
export function compactStacks(
  c: Connection,
  project: string,
  prefix: readonly string[],
  layer: string,
): number {
  check(
    prefix.length > 0 && prefix.every((l) => typeof l === "string" && l.length > 0),
    "A compacted prefix names at least one layer",
  );
  check(typeof layer === "string" && layer.length > 0, "A compacted layer has an id");
  check(!prefix.includes(layer), `Layer "${layer}" cannot replace a prefix that holds it`);
  // The stored text is JSON.stringify's: the prefix's text without its `]`,
  // then `]` (the whole stack) or `,` (more layers); each match is parsed again below.
  const head = JSON.stringify(prefix).slice(0, -1);
  return c.write("compact checkpoint stacks", () => {
    const rows = c.all(
      `SELECT id, layers FROM checkpoints WHERE project = :project
         AND substr(layers, 1, :n) = :head AND substr(layers, :n + 1, 1) IN (']', ',')`,
      { project, head, n: head.length },
    );
    let n = 0;
    for (const row of rows) {
      const layers = JSON.parse(String(row.layers)) as string[];
      if (!prefix.every((l, i) => layers[i] === l)) continue;
      const next = JSON.stringify([layer, ...layers.slice(prefix.length)]);
      n += c.run("UPDATE checkpoints SET layers = :next WHERE id = :id", {
        next,
        id: String(row.id),
      });
    }
    return n;
  });
}
