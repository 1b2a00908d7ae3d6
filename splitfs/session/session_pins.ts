/**
 * The layers a project's checkpoint sessions pin (docs/checkpoints.md, "The
 * model"): each session dir's `layers` (its view's stack) and each op dir's
 * (the stack an operation in flight runs on, or the one it sealed), for
 * `marsh gc` to keep.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { SESSION_DIR } from "../../model/checkpoint.ts";
import { LAYERS_FILE } from "../../model/layout.ts";

const OP_DIR = "op";
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
    if (session.statAt(OP_DIR)?.kind !== "dir") continue;
    using ops = session.openDir(OP_DIR);
    for (const o of ops.entries()) {
      if (ops.statAt(o.name)?.kind !== "dir") continue;
      using op = ops.openDir(o.name);
      add(op);
    }
  }
  return out;
}
