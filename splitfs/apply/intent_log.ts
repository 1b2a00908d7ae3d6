/**
 * The applier's intent log (docs/resolution.md, "The log"): one file,
 * appended to and `fsync`'d record by record, each record a line
 * `<checksum> <json>` where the checksum is the first 16 hex digits of the
 * SHA-256 of the JSON. A crash mid-append leaves a torn last line, which the
 * reader drops; a bad line anywhere else is corruption and refuses.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import type { Dir, FileHandle } from "../fd/dir.ts";
import { fsyncDir, openAppend } from "./fs_extra.ts";
import { check, libc } from "../fd/ffi.ts";
import type { Signature } from "../../model/resolution_plan.ts";

/** The log's file name in a resolution's directory. */
export const LOG_FILE = "log";
/** The longest log marsh reads back (a plan of ~100k paths). */
export const MAX_LOG_BYTES = 256 << 20;

/** What a path held before the apply, with its full permission bits: the restore point. */
export type Prior =
  | { readonly kind: "absent" }
  | { readonly kind: "file"; readonly perm: number; readonly blob: string }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "dir"; readonly perm: number };

/** One path the applier changes. `n` names its staged (`s<n>`) and backed-up (`b<n>`) entries. */
export interface Op {
  readonly n: number;
  readonly path: string;
  /** What the plan was computed against (compared with the scope's signature). */
  readonly before: Signature;
  /** What the path holds afterwards. */
  readonly after: Signature;
  /** A parent directory no plan entry names, made because a taken path needs it. */
  readonly implicit?: boolean;
  /** Exact permission bits for a directory made (an undo restores the prior ones). */
  readonly dirMode?: number;
}

/** The steps, in the order they run: backups (deepest path first), directories, placements. */
export type StepKind = "backup" | "mkdir" | "place";

/** A log record. */
export type LogRecord =
  | {
    readonly t: "begin";
    readonly v: 1;
    readonly id: string;
    readonly scope: string;
    /** Compare file modes as Git does (the executable bit only). */
    readonly gitModes: boolean;
    readonly ops: readonly Op[];
    /** For an undo: the resolution it takes back. */
    readonly undoes?: string;
  }
  /** Every destination checked; `prior[i]` is what `ops[i].path` held. */
  | { readonly t: "ready"; readonly prior: readonly Prior[] }
  /** About to run one step on `ops[n]`. */
  | { readonly t: "step"; readonly kind: StepKind; readonly n: number }
  /** Every step ran and was flushed: from here recovery rolls forward. */
  | { readonly t: "commit" }
  /** The staging is gone; the restore point stays. */
  | { readonly t: "done" }
  /** The tree is back at the pre-state; the resolution's directory may go. */
  | { readonly t: "rolled-back"; readonly reason: string }
  /** An undo (`by`) put back what this resolution changed. */
  | { readonly t: "undone"; readonly by: string };

/** A log that is damaged before its last line. */
export class LogCorruptError extends Error {
  override name = "LogCorruptError";
  constructor(readonly path: string, readonly line: number) {
    super(
      `resolution log ${path} is damaged at line ${line}: ` +
        "marsh cannot tell what was applied; restore the listed paths by hand from its backup/",
    );
  }
}

function checksum(json: string): string {
  return createHash("sha256").update(json).digest("hex").slice(0, 16);
}

/** One record as its line. */
export function encodeRecord(r: LogRecord): string {
  const json = JSON.stringify(r);
  return `${checksum(json)} ${json}\n`;
}

/** A log's records and how many of its bytes hold them (a torn tail follows). */
export interface DecodedLog {
  readonly records: LogRecord[];
  readonly validBytes: number;
}

/**
 * The records of a log's bytes. A last line without its newline or with a
 * wrong checksum is a torn append and is dropped.
 *
 * @throws {LogCorruptError} for a bad line before the last
 */
export function decodeLog(bytes: Uint8Array, path: string): DecodedLog {
  const records: LogRecord[] = [];
  const dec = new TextDecoder();
  let start = 0, line = 0;
  for (;;) {
    const nl = bytes.indexOf(0x0a, start);
    // Whatever follows the last newline never finished its append.
    if (nl === -1) break;
    line++;
    const text = dec.decode(bytes.subarray(start, nl));
    const json = text.slice(17);
    if (text[16] !== " " || checksum(json) !== text.slice(0, 16)) {
      if (nl === bytes.length - 1) break;
      throw new LogCorruptError(path, line);
    }
    records.push(JSON.parse(json) as LogRecord);
    start = nl + 1;
  }
  return { records, validBytes: start };
}

/** Reads a resolution directory's log; `[]` when there is none. */
export function readLog(dir: Dir): LogRecord[] {
  const bytes = dir.readFileIfExists(LOG_FILE, MAX_LOG_BYTES);
  if (bytes === null) return [];
  return decodeLog(bytes, `${dir.path}/${LOG_FILE}`).records;
}

/** An open log, appended to record by record. */
export class IntentLog implements Disposable {
  #file: FileHandle;

  private constructor(file: FileHandle) {
    this.#file = file;
  }

  /**
   * Opens (creating) the log in `dir`; a new log's name is flushed into
   * `dir`, and a torn tail is cut off first, so the next record starts a line.
   */
  static open(dir: Dir): IntentLog {
    const existing = dir.readFileIfExists(LOG_FILE, MAX_LOG_BYTES);
    const file = openAppend(dir, LOG_FILE);
    if (existing === null) fsyncDir(dir);
    else {
      const { validBytes } = decodeLog(existing, file.path);
      if (validBytes < existing.length) {
        check(libc().ftruncate(file.fd, BigInt(validBytes)), "ftruncate", file.path);
        file.sync();
      }
    }
    return new IntentLog(file);
  }

  /** Appends a record and flushes it: when this returns, the record survives a crash. */
  append(r: LogRecord): void {
    this.appendAll([r]);
  }

  /**
   * Appends records in one write and flushes them once: when this returns,
   * each survives a crash. A crash before may keep the first few whole (a
   * torn last line is dropped, as for one record).
   */
  appendAll(records: readonly LogRecord[]): void {
    this.#file.writeAll(new TextEncoder().encode(records.map(encodeRecord).join("")));
    this.#file.sync();
  }

  close(): void {
    this.#file.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
