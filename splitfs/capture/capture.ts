/**
 * Capture (docs/engine.md "Capture and verification"): compare a fork with its base and write the
 * result as `out/<label>/diff.patch` and `files`, storing pre- and post-image
 * blobs in `store.git`. One file pair is in memory at a time; the patch is
 * streamed to disk as it is produced.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { ChangeStatus, FileChange } from "../../patch/change.ts";
import { filesLine, rawLine, writeFilePatch } from "../../patch/writer.ts";
import { type CompareOptions, type CompareStats, compareTrees } from "./compare.ts";
import { type PhaseClock, timed } from "./capture_phases.ts";
import type { Dir, FileHandle } from "../fd/dir.ts";
import type { ObjectStore } from "../git/store.ts";

/** The result file names under `out/<label>/`. */
export const PATCH_FILE = "diff.patch";
export const FILES_FILE = "files";
/**
 * Every changed path's modes and blob ids, as `git diff --raw --full-index
 * --no-renames` lists them: what a `--git` merge needs of the patch, without
 * reading it (docs/resolution.md, "In the service").
 */
export const RAW_FILE = "raw";

/** What a capture found. */
export interface CaptureSummary {
  /** Changed paths. */
  readonly files: number;
  readonly counts: Readonly<Record<ChangeStatus, number>>;
  /** Bytes of the new sides of changed paths (old sides for deletions). */
  readonly changedBytes: number;
  readonly patchBytes: number;
  readonly skippedIgnored: number;
  readonly skippedSpecial: number;
}

/**
 * A fork's capture: the counts, and why its result is untrusted. With
 * `rejected` set (`admin file changed: config (core.fsmonitor)`), the fork's
 * Git metadata failed verification, yet its tree's patch was written: the
 * branch is `rejected: <why>`, its fork and patch kept for recovery.
 */
export interface CaptureResult extends CaptureSummary {
  readonly rejected: string | null;
}

/** Where the patch and the files list go. */
export interface CaptureSink {
  patch(bytes: Uint8Array): void;
  files(line: string): void;
  /** The raw list's line (`rawLine`), when the sink keeps one. */
  raw?(line: string): void;
}

/**
 * Writes each change to the sink (and its blobs to the store), returning the
 * counts. With a `clock`, the time spent producing changes is `compare`.
 */
export function writeChanges(
  changes: Iterable<FileChange>,
  sink: CaptureSink,
  store: ObjectStore | null,
  stats: CompareStats,
  textDiffTimeoutMs?: number,
  clock?: PhaseClock,
): CaptureSummary {
  const counts: Record<ChangeStatus, number> = { A: 0, M: 0, D: 0, T: 0 };
  let files = 0, patchBytes = 0;
  for (const change of clock ? timedChanges(changes, clock) : changes) {
    if (store) {
      timed(clock, "store blobs", () => {
        if (change.old) store.writeBlob(change.old.bytes);
        if (change.new) store.writeBlob(change.new.bytes);
      });
    }
    const out = timed(clock, "patch text", () => writeFilePatch(change, { textDiffTimeoutMs }));
    timed(clock, "out files", () => {
      sink.patch(out.patch);
      sink.files(filesLine(out.status, change.path));
      sink.raw?.(rawLine(out.status, change.path, change.old, change.new, out.oldId, out.newId));
    });
    counts[out.status]++;
    files++;
    patchBytes += out.patch.length;
  }
  return {
    files,
    counts,
    changedBytes: stats.changedBytes,
    patchBytes,
    skippedIgnored: stats.skippedIgnored,
    skippedSpecial: stats.skippedSpecial,
  };
}

/** `changes`, each step of the comparison timed as `compare`; closing it closes theirs. */
function* timedChanges(changes: Iterable<FileChange>, clock: PhaseClock): Generator<FileChange> {
  const it = changes[Symbol.iterator]();
  try {
    for (;;) {
      const next = clock.time("compare", () => it.next());
      if (next.done) return;
      yield next.value;
    }
  } finally {
    it.return?.();
  }
}

const enc = new TextEncoder();

/**
 * Captures a fork into `out` (the empty `out/<label>/` directory): `files`
 * always, `diff.patch` and `raw` only when something changed. On any error the partial
 * results are removed and the error is rethrown. A `clock` is given each
 * phase's time (`capture_phases.ts`).
 */
export function captureToDir(
  compare: CompareOptions,
  out: Dir,
  store: ObjectStore | null,
  textDiffTimeoutMs?: number,
  clock?: PhaseClock,
): CaptureSummary {
  const stats: CompareStats = { changedBytes: 0, skippedIgnored: 0, skippedSpecial: 0 };
  let patch: FileHandle | null = null;
  let files: FileHandle | null = null;
  let raw: FileHandle | null = null;
  try {
    patch = timed(clock, "out files", () => out.createFile(PATCH_FILE, 0o644));
    files = timed(clock, "out files", () => out.createFile(FILES_FILE, 0o644));
    raw = timed(clock, "out files", () => out.createFile(RAW_FILE, 0o644));
    const p = patch, f = files, r = raw;
    const summary = writeChanges(
      compareTrees(compare, stats),
      {
        patch: (b) => p.writeAll(b),
        files: (line) => f.writeAll(enc.encode(line)),
        raw: (line) => r.writeAll(enc.encode(line)),
      },
      store,
      stats,
      textDiffTimeoutMs,
      clock,
    );
    timed(clock, "out files", () => {
      p.close();
      f.close();
      r.close();
      if (summary.files === 0) {
        out.unlink(PATCH_FILE);
        out.unlink(RAW_FILE);
      }
    });
    return summary;
  } catch (error) {
    patch?.close();
    files?.close();
    raw?.close();
    for (const name of [PATCH_FILE, FILES_FILE, RAW_FILE]) {
      if (out.statAt(name)?.kind === "file") out.unlink(name);
    }
    throw error;
  }
}
