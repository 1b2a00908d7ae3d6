/**
 * `marsh fanout | marsh collect` (docs/guide.md, "marsh fanout and marsh collect"): the limits, the
 * `FANOUT_BRANCH` variable every branch gets, and the one line `fanout` writes for `collect`
 * (`marsh.fanout/v1`), with its one parser. Pure: needs no permission; the host CLI, the in-job
 * client and the daemon (a job's `lineage.fanout`) share it.
 *
 * The line, one JSON object and a newline:
 *
 * | field | value |
 * |---|---|
 * | `schema` | `"marsh.fanout/v1"` |
 * | `fanout_id` | the fanout's id ({@linkcode FANOUT_ID}) |
 * | `status` | the first nonzero branch exit in declaration order, else 0 |
 * | `signal` | the signal that stopped the fanout (`"SIGINT"`, ...), else `null` |
 * | `created_unix_ms`, `finished_unix_ms` | when the fanout started and when its last branch ended |
 * | `branches` | per branch, in declaration order: `label`; `kind` (`"shell"`: `string`, run with `bash -c`; `"argv"`: `argv`, run directly); `exit` (0-255, 128+N for signal N); `status` (`exited N`); `stdout`, `stderr` (base64); `started_unix_ms`, `finished_unix_ms` |
 *
 * @module
 */

import { labelProblem } from "./layout.ts";
import { MAX_BRANCHES, OUTPUT_LIMIT, SPOOL_LIMIT } from "./limits.ts";

/** The line's `schema`. */
export const FANOUT_SCHEMA = "marsh.fanout/v1";
/** The variable every branch gets: `<fanout id>/<label>` (a job it starts records `lineage.fanout`). */
export const FANOUT_BRANCH_ENV = "FANOUT_BRANCH";
/** Branches per fanout, as per split. */
export const MAX_FANOUT_BRANCHES = MAX_BRANCHES;
/** Bytes of stdin spooled for the branches, as a split's spool. */
export const FANOUT_INPUT_LIMIT = SPOOL_LIMIT;
/** Bytes of stdout and stderr of all branches together, as a split's. */
export const FANOUT_OUTPUT_LIMIT = OUTPUT_LIMIT;
/** From a forwarded signal to SIGKILL for a branch's process group that is still there. */
export const FANOUT_GRACE_MS = 10_000;
/** A fanout id: 12 of `[a-z0-9]`, so its first 8 (the listings' short id) are random too. */
export const FANOUT_ID = /^[a-z0-9]{12}$/;
/**
 * The longest line `collect` reads: the branches' output base64-encoded (4/3 of
 * {@linkcode FANOUT_OUTPUT_LIMIT}), with room for labels, commands and fields.
 */
export const FANOUT_LINE_LIMIT = 32 * 1024 * 1024;

/** How a branch runs. */
export type FanoutKind = "shell" | "argv";

/** One branch as declared. */
export type FanoutSpec =
  | { readonly kind: "shell"; readonly label: string; readonly string: string }
  | { readonly kind: "argv"; readonly label: string; readonly argv: readonly string[] };

/** One branch as it ended. */
export type FanoutBranch = FanoutSpec & {
  /** Its exit as a shell reports it: the code, or 128 + the signal's number. */
  readonly exit: number;
  /** `exited N`. */
  readonly status: string;
  readonly stdout: Uint8Array;
  readonly stderr: Uint8Array;
  readonly startedMs: number;
  readonly finishedMs: number;
};

/** A whole fanout, as its line carries it. */
export interface FanoutRecord {
  readonly id: string;
  /** The first nonzero branch exit in declaration order, else 0. */
  readonly status: number;
  /** The signal that stopped the fanout, or null. */
  readonly signal: string | null;
  readonly createdMs: number;
  readonly finishedMs: number;
  readonly branches: readonly FanoutBranch[];
}

/** A fresh fanout id ({@linkcode FANOUT_ID}). */
export function newFanoutId(): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  // 252 = 7 * 36: bytes above it are drawn again, so every character is as likely.
  let id = "";
  while (id.length < 12) {
    for (const b of crypto.getRandomValues(new Uint8Array(16))) {
      if (b < 252 && id.length < 12) id += alphabet[b % 36];
    }
  }
  return id;
}

/** `FANOUT_BRANCH`'s value for branch `label` of fanout `id`. */
export function fanoutBranchValue(id: string, label: string): string {
  return `${id}/${label}`;
}

/**
 * Reads a `FANOUT_BRANCH` value: `{fanout, label}`, or null when it is not one
 * (a job records `lineage.fanout` only from a well-formed value).
 */
export function parseFanoutBranch(value: string): { fanout: string; label: string } | null {
  const slash = value.indexOf("/");
  if (slash < 0) return null;
  const fanout = value.slice(0, slash), label = value.slice(slash + 1);
  if (!FANOUT_ID.test(fanout) || labelProblem(label) !== null) return null;
  return { fanout, label };
}

/** The first nonzero exit in declaration order, else 0. */
export function firstFailure(exits: readonly number[]): number {
  return exits.find((e) => e !== 0) ?? 0;
}

/** The line `fanout` writes, with its newline. */
export function fanoutLine(r: FanoutRecord): string {
  return `${
    JSON.stringify({
      schema: FANOUT_SCHEMA,
      fanout_id: r.id,
      status: r.status,
      signal: r.signal,
      created_unix_ms: r.createdMs,
      finished_unix_ms: r.finishedMs,
      branches: r.branches.map((b) => ({
        label: b.label,
        kind: b.kind,
        ...(b.kind === "shell" ? { string: b.string } : { argv: b.argv }),
        exit: b.exit,
        status: b.status,
        stdout: b.stdout.toBase64(),
        stderr: b.stderr.toBase64(),
        started_unix_ms: b.startedMs,
        finished_unix_ms: b.finishedMs,
      })),
    })
  }\n`;
}

/** What is wrong with a line that is not a `marsh.fanout/v1` line. */
export class FanoutLineError extends Error {
  override name = "FanoutLineError";
}

type Obj = Record<string, unknown>;

function isObj(x: unknown): x is Obj {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

function field<T>(o: Obj, key: string, at: string, ok: (x: unknown) => x is T, what: string): T {
  const x = o[key];
  if (!ok(x)) throw new FanoutLineError(`${at}${key} is not ${what}`);
  return x;
}

const isString = (x: unknown): x is string => typeof x === "string";
const isTime = (x: unknown): x is number => Number.isSafeInteger(x) && (x as number) >= 0;
const isExit = (x: unknown): x is number =>
  Number.isInteger(x) && (x as number) >= 0 && (x as number) <= 255;
const isStrings = (x: unknown): x is string[] =>
  Array.isArray(x) && x.length > 0 && x.every((w) => typeof w === "string");

function bytes(o: Obj, key: string, at: string): Uint8Array {
  const text = field(o, key, at, isString, "a base64 string");
  try {
    return Uint8Array.fromBase64(text);
  } catch (cause) {
    throw new FanoutLineError(`${at}${key} is not base64`, { cause });
  }
}

function parseBranch(x: unknown, i: number, seen: Set<string>): FanoutBranch {
  const at = `branches[${i}].`;
  if (!isObj(x)) throw new FanoutLineError(`branches[${i}] is not an object`);
  const label = field(x, "label", at, isString, "a string");
  const problem = labelProblem(label);
  if (problem !== null) throw new FanoutLineError(`${at}label: ${problem}`);
  if (seen.has(label)) throw new FanoutLineError(`${at}label "${label}" is given twice`);
  seen.add(label);
  const common = {
    label,
    exit: field(x, "exit", at, isExit, "an exit status (0-255)"),
    status: field(x, "status", at, isString, "a string"),
    stdout: bytes(x, "stdout", at),
    stderr: bytes(x, "stderr", at),
    startedMs: field(x, "started_unix_ms", at, isTime, "a time in ms"),
    finishedMs: field(x, "finished_unix_ms", at, isTime, "a time in ms"),
  };
  if (x.kind === "shell") {
    return { kind: "shell", string: field(x, "string", at, isString, "a string"), ...common };
  }
  if (x.kind === "argv") {
    return { kind: "argv", argv: field(x, "argv", at, isStrings, "a list of words"), ...common };
  }
  throw new FanoutLineError(`${at}kind is not "shell" or "argv"`);
}

/**
 * Parses one `marsh.fanout/v1` line (its newline optional).
 *
 * @throws {FanoutLineError} naming the first field that is wrong
 */
export function parseFanoutLine(line: string): FanoutRecord {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch (cause) {
    throw new FanoutLineError("it is not JSON", { cause });
  }
  if (!isObj(value)) throw new FanoutLineError("it is not a JSON object");
  if (value.schema !== FANOUT_SCHEMA) {
    throw new FanoutLineError(
      `schema is ${JSON.stringify(value.schema ?? null)}, not "${FANOUT_SCHEMA}"`,
    );
  }
  const id = field(value, "fanout_id", "", isString, "a string");
  if (!FANOUT_ID.test(id)) {
    throw new FanoutLineError(`fanout_id ${JSON.stringify(id)} is not an id`);
  }
  const list = value.branches;
  if (!Array.isArray(list) || list.length === 0 || list.length > MAX_FANOUT_BRANCHES) {
    throw new FanoutLineError(`branches is not a list of 1 to ${MAX_FANOUT_BRANCHES} branches`);
  }
  const seen = new Set<string>();
  const branches = list.map((b, i) => parseBranch(b, i, seen));
  const signal = value.signal;
  if (signal !== null && typeof signal !== "string") {
    throw new FanoutLineError("signal is not a signal name or null");
  }
  const status = field(value, "status", "", isExit, "an exit status (0-255)");
  return {
    id,
    status,
    signal,
    createdMs: field(value, "created_unix_ms", "", isTime, "a time in ms"),
    finishedMs: field(value, "finished_unix_ms", "", isTime, "a time in ms"),
    branches,
  };
}
