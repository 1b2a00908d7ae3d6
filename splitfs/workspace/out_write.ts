/**
 * What marsh writes under a split's `out/` besides capture's results
 * (docs/engine.md, "Publish, manifest and render"): each branch's status and
 * output files, and `out/manifest.json`, all created `O_EXCL` through the
 * held out/ descriptor so nothing planted there is followed or overwritten.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir, type FileHandle, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { RefusedError, RejectedError } from "../errors.ts";
import { checkSplit, type Held, outDir } from "./split_held.ts";
import { labelProblem } from "../../model/layout.ts";

/**
 * The files `publish` writes under `out/<label>/` (docs/guide.md "Results: out/ and the manifest").
 */
export const STATUS_FILE = "status";
export const STDOUT_FILE = "stdout";
export const STDERR_FILE = "stderr";
/** `out/manifest.json`, replaced atomically through a temporary file. */
export const MANIFEST_FILE = "manifest.json";
const MANIFEST_TMP = "manifest.json.tmp";

const enc = new TextEncoder();

/**
 * Writes a branch's `out/<label>/status` (the status and a newline) and
 * copies its attempt output files (absolute paths outside the project;
 * `null` for an empty file) to `out/<label>/stdout` and `stderr`, each
 * created `O_EXCL` through the held out/ descriptor and streamed, never
 * read whole. `out/<label>/` is made when the branch never had a fork. All
 * or nothing: on failure the files written here are removed.
 *
 * @throws {RejectedError} `out/<label> was tampered with` when something
 *   is planted in or at `out/<label>`
 * @throws {WorkspaceReplacedError} when the split dir was replaced
 * @throws {FsError} when an attempt file cannot be read
 */
export function publish(
  held: Held,
  label: string,
  status: string,
  outputs: { readonly stdout: string | null; readonly stderr: string | null },
): void {
  const problem = labelProblem(label);
  if (problem) throw new RefusedError(problem);
  checkSplit(held);
  const tampered = (cause: unknown) =>
    new RejectedError(`out/${label} was tampered with`, { cause });
  let dir: Dir;
  try {
    dir = outDir(held).ensureDir(label, 0o755);
  } catch (error) {
    if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
      throw tampered(error);
    }
    throw error;
  }
  using _dir = dir;
  const names = [STATUS_FILE, STDOUT_FILE, STDERR_FILE];
  for (const name of names) {
    if (dir.statAt(name) !== null) {
      throw tampered(new Error(`out/${label}/${name} existed before publish`));
    }
  }
  // Open both sources first: a missing attempt file fails before anything is written.
  const sources: (FileHandle | null)[] = [];
  const created: string[] = [];
  try {
    for (const path of [outputs.stdout, outputs.stderr]) {
      sources.push(path === null ? null : Dir.openAbsoluteFile(path));
    }
    const create = (name: string): FileHandle => {
      try {
        const file = dir.createFile(name, 0o644);
        created.push(name);
        return file;
      } catch (error) {
        if (
          error instanceof SymlinkRefusedError ||
          (error instanceof FsError && error.errno === E.EEXIST)
        ) throw tampered(error);
        throw error;
      }
    };
    {
      using file = create(STATUS_FILE);
      file.writeAll(enc.encode(`${status}\n`));
    }
    for (const [i, name] of [STDOUT_FILE, STDERR_FILE].entries()) {
      using file = create(name);
      sources[i]?.copyTo(file);
    }
  } catch (error) {
    undoCreated(dir, created, error);
    throw error;
  } finally {
    for (const s of sources) s?.close();
  }
}

/**
 * Writes `out/manifest.json` atomically: `manifest.json.tmp` is created
 * `O_EXCL`, written and synced, then renamed over `manifest.json`.
 *
 * @throws {RejectedError} `out/ was tampered with` when `manifest.json` is
 *   not a regular file (a planted symlink or directory)
 * @throws {WorkspaceReplacedError} when the split dir was replaced
 */
export function writeManifest(held: Held, json: string): void {
  checkSplit(held);
  const out = outDir(held);
  const tampered = (cause: unknown) => new RejectedError("out/ was tampered with", { cause });
  const current = out.statAt(MANIFEST_FILE);
  if (current !== null && current.kind !== "file") {
    throw tampered(new Error(`out/${MANIFEST_FILE} is a ${current.kind}`));
  }
  // A temporary file left by a crash mid-write; a directory there was planted.
  const stale = out.statAt(MANIFEST_TMP);
  if (stale !== null) {
    if (stale.kind === "dir") throw tampered(new Error(`out/${MANIFEST_TMP} is a directory`));
    out.unlink(MANIFEST_TMP);
  }
  let file: FileHandle;
  try {
    file = out.createFile(MANIFEST_TMP, 0o644);
  } catch (error) {
    if (
      error instanceof SymlinkRefusedError ||
      (error instanceof FsError && error.errno === E.EEXIST)
    ) throw tampered(error);
    throw error;
  }
  try {
    try {
      file.writeAll(enc.encode(json));
      file.sync();
    } finally {
      file.close();
    }
    out.renameReplacing(MANIFEST_TMP, out, MANIFEST_FILE);
  } catch (error) {
    undoCreated(out, [MANIFEST_TMP], error);
    throw error;
  }
}

/** Removes files this request created before it failed; a failure to do so is reported with the original. */
function undoCreated(dir: Dir, names: readonly string[], original: unknown): void {
  for (const name of names) {
    try {
      if (dir.statAt(name)?.kind === "file") dir.unlink(name);
    } catch (error) {
      throw new Error(`${original}; ${dir.path}/${name} could not be removed: ${error}`, {
        cause: original,
      });
    }
  }
}
