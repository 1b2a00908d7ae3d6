/**
 * The layers a project's checkpoint sessions pin (docs/checkpoints.md, "The
 * model"): each session dir's `layers` (its view's stack), each op dir's
 * (the stack an operation in flight runs on, or the one it sealed) and each
 * compaction dir's (the stack being merged, "Compaction"), for `marsh gc`
 * to keep. Each is a whole stack, bottom first.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { SESSION_DIR } from "../../model/checkpoint.ts";
import { LAYERS_FILE } from "../../model/layout.ts";

const OP_DIR = "op";
/** Under a session's directory: one directory per compaction in progress (`compact.ts`). */
export const COMPACT_DIR = "compact";
const MAX_PIN = 64 * 1024;
const dec = new TextDecoder();

/** Every layer id a session dir or op dir under `marsh` (the open `.marsh`) pins. */
export function sessionPins(marsh: Dir): Set<string> {
  const out = new Set<string>();
  const add = (dir: Dir) => {
    const bytes = dir.readFileIfExists(LAYERS_FILE, MAX_PIN);
    if (bytes === null) return;
    for (const id of dec.decode(bytes).split("\n")) if (id) out.add(id);
  };
  if (marsh.statAt(SESSION_DIR)?.kind !== "dir") return out;
  using sessions = marsh.openDir(SESSION_DIR);
  for (const e of sessions.entries()) {
    if (sessions.statAt(e.name)?.kind !== "dir") continue;
    using session = sessions.openDir(e.name);
    add(session);
    // Op dirs pin their stacks, compaction dirs the stack being merged.
    for (const sub of [OP_DIR, COMPACT_DIR]) {
      if (session.statAt(sub)?.kind !== "dir") continue;
      using ops = session.openDir(sub);
      for (const o of ops.entries()) {
        if (ops.statAt(o.name)?.kind !== "dir") continue;
        using op = ops.openDir(o.name);
        add(op);
      }
    }
  }
  return out;
}
