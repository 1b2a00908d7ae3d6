/**
 * Where a resolution keeps its transaction (docs/resolution.md, "On disk"):
 * `<root>/.marsh/resolve/<id>/` with `log`, `stage/` (new files, `s<n>`)
 * and `backup/` (what the apply moved away, `b<n>`: the restore point).
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { MARSH_DIR } from "../../model/layout.ts";
import { fsyncDir } from "./fs_extra.ts";
import { ResolutionStateError } from "./errors.ts";

/** Under `.marsh`: one directory per resolution. */
export const RESOLVE_DIR = "resolve";
/** Under a resolution: staged new files and symlinks. */
export const STAGE_DIR = "stage";
/** Under a resolution: the restore point. */
export const BACKUP_DIR = "backup";

const ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** Refuses an id that is not a resolution id (it names a directory). */
export function checkId(id: string): string {
  if (!ID.test(id)) {
    throw new ResolutionStateError(
      `invalid resolution id ${
        JSON.stringify(id.slice(0, 70))
      }: use 1-64 lowercase letters, digits or "-"`,
    );
  }
  return id;
}

/** A fresh resolution id: time-ordered, then random. */
export function newId(): string {
  const rand = crypto.getRandomValues(new Uint8Array(4));
  return `${Date.now().toString(36)}-${
    Array.from(rand, (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
}

/** A staged entry's name. */
export const stageName = (n: number): string => `s${n}`;
/** A backed-up entry's name. */
export const backupName = (n: number): string => `b${n}`;

/** Opens `.marsh/resolve` under the project root, making it (and `.marsh`) when asked. */
export function openResolveRoot(root: Dir, create: boolean): Dir | null {
  if (!create) {
    if (root.statAt(MARSH_DIR)?.kind !== "dir") return null;
    using marsh = root.openDir(MARSH_DIR);
    if (marsh.statAt(RESOLVE_DIR)?.kind !== "dir") return null;
    return marsh.openDir(RESOLVE_DIR);
  }
  const made = root.statAt(MARSH_DIR) === null;
  using marsh = root.ensureDir(MARSH_DIR, 0o755);
  if (made) fsyncDir(root);
  const madeResolve = marsh.statAt(RESOLVE_DIR) === null;
  const dir = marsh.ensureDir(RESOLVE_DIR, 0o700);
  if (madeResolve) fsyncDir(marsh);
  return dir;
}

/**
 * Makes a new resolution's directory with empty `stage/` and `backup/`, its
 * name flushed. Its own entries are flushed with its log's name, which is
 * made next (`IntentLog.open`): nothing is written before that.
 */
export function makeResolutionDir(resolveRoot: Dir, id: string): Dir {
  resolveRoot.mkdir(checkId(id), 0o700);
  const dir = resolveRoot.openDir(id);
  dir.mkdir(STAGE_DIR, 0o700);
  dir.mkdir(BACKUP_DIR, 0o700);
  fsyncDir(resolveRoot);
  return dir;
}
