/**
 * Parsers for the NUL-separated output of the Git commands the `--git`
 * planner runs (docs/resolution.md, "Git as the merge engine"):
 * `merge-tree --write-tree -z`, `diff-tree -r -z --raw`, `ls-tree -z` and
 * `cat-file --batch`. Paths come back as UTF-8 text; a path that is not
 * UTF-8 is an error, as it is for a patch.
 *
 * Pure: needs no permission.
 *
 * @module
 */

import type { Signature } from "../model/resolution_plan.ts";
import { ResolveGitError } from "./git.ts";

const utf8 = new TextDecoder("utf-8", { fatal: true });
const latin1 = new TextDecoder("latin1");
const OID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const NUL = 0;

/** Splits on NUL; a trailing NUL ends the last field rather than starting an empty one. */
export function nulFields(bytes: Uint8Array): Uint8Array[] {
  const out: Uint8Array[] = [];
  let start = 0;
  for (let i = bytes.indexOf(NUL); i !== -1; i = bytes.indexOf(NUL, start)) {
    out.push(bytes.subarray(start, i));
    start = i + 1;
  }
  if (start < bytes.length) out.push(bytes.subarray(start));
  return out;
}

/**
 * A path from Git's output, as text.
 *
 * @throws {ResolveGitError} when it is not UTF-8
 */
export function pathText(bytes: Uint8Array): string {
  try {
    return utf8.decode(bytes);
  } catch (error) {
    throw new ResolveGitError(
      `path ${
        JSON.stringify(latin1.decode(bytes))
      } is not UTF-8; the --git scope handles UTF-8 paths only`,
      { cause: error },
    );
  }
}

/** One tree entry's mode and object id, as Git prints them, before symlink targets are read. */
export interface RawState {
  /** `000000` when absent. */
  readonly mode: string;
  readonly oid: string;
}

/** An absent side of a raw diff. */
export const RAW_ABSENT: RawState = Object.freeze({ mode: "000000", oid: "" });

/**
 * The signature of a raw state; a symlink's target comes from `targets`
 * (blob id → target).
 *
 * @throws {ResolveGitError} for a submodule (mode `160000`) or a mode Git does not write
 */
export function signatureOf(
  raw: RawState,
  path: string,
  targets: ReadonlyMap<string, string>,
): Signature {
  switch (raw.mode) {
    case "000000":
      return { kind: "absent" };
    case "100644":
    case "100664": // written by very old Git, read as 644 by every Git since
      return { kind: "file", mode: 0o644, blob: raw.oid };
    case "100755":
      return { kind: "file", mode: 0o755, blob: raw.oid };
    case "040000":
    case "40000":
      return { kind: "dir" };
    case "120000": {
      const target = targets.get(raw.oid);
      if (target === undefined) throw new ResolveGitError(`symlink ${path}: target not read`);
      return { kind: "symlink", target };
    }
    case "160000":
      throw new ResolveGitError(
        `${path} is a submodule: the --git scope does not merge submodules (use --filesystem or --paths)`,
      );
    default:
      throw new ResolveGitError(`${path} has a mode Git does not write: ${raw.mode}`);
  }
}

/** One path of `diff-tree -r -z --raw --no-renames`. */
export interface RawChange {
  readonly path: string;
  readonly src: RawState;
  readonly dst: RawState;
}

const RAW_META = /^:([0-7]{6}) ([0-7]{6}) ([0-9a-f]+) ([0-9a-f]+) ([ADMT])$/;

/**
 * Parses `git diff-tree -r -z --raw --no-renames` (full object ids).
 *
 * @throws {ResolveGitError} for a record that is not one
 */
export function parseRawDiff(bytes: Uint8Array): RawChange[] {
  const fields = nulFields(bytes);
  const out: RawChange[] = [];
  for (let i = 0; i < fields.length; i += 2) {
    const meta = latin1.decode(fields[i]!);
    const m = RAW_META.exec(meta);
    const path = fields[i + 1];
    if (m === null || path === undefined) {
      throw new ResolveGitError(`unexpected git diff-tree output: ${JSON.stringify(meta)}`);
    }
    const [, srcMode, dstMode, srcOid, dstOid] = m as unknown as [
      string,
      string,
      string,
      string,
      string,
    ];
    out.push({
      path: pathText(path),
      src: srcMode === "000000" ? RAW_ABSENT : { mode: srcMode, oid: srcOid },
      dst: dstMode === "000000" ? RAW_ABSENT : { mode: dstMode, oid: dstOid },
    });
  }
  return out;
}

const LS_TREE = /^([0-7]{5,6}) (blob|tree|commit) ([0-9a-f]+)\t/;

/**
 * Parses `git ls-tree -z` into path → state.
 *
 * @throws {ResolveGitError} for a record that is not one
 */
export function parseLsTree(bytes: Uint8Array): Map<string, RawState> {
  const out = new Map<string, RawState>();
  for (const field of nulFields(bytes)) {
    const tab = field.indexOf(0x09);
    const head = latin1.decode(field.subarray(0, tab + 1));
    const m = LS_TREE.exec(head);
    if (tab === -1 || m === null || !OID.test(m[3]!)) {
      throw new ResolveGitError(`unexpected git ls-tree output: ${JSON.stringify(head)}`);
    }
    out.set(pathText(field.subarray(tab + 1)), { mode: m[1]!.padStart(6, "0"), oid: m[3]! });
  }
  return out;
}

/** One conflicted path's stages (1 base, 2 source, 3 branch) from `merge-tree`. */
export interface ConflictStage {
  readonly path: string;
  readonly stage: 1 | 2 | 3;
  readonly state: RawState;
}

/** One informational message of `merge-tree -z`. */
export interface MergeMessage {
  readonly paths: readonly string[];
  /** A stable type, e.g. `Auto-merging` or `CONFLICT (contents)`. */
  readonly type: string;
  readonly text: string;
}

/** What `merge-tree --write-tree -z` printed. */
export interface MergeTreeOutput {
  readonly tree: string;
  readonly stages: readonly ConflictStage[];
  readonly messages: readonly MergeMessage[];
}

const STAGE = /^([0-7]{6}) ([0-9a-f]+) ([123])\t/;

/**
 * Parses `git merge-tree --write-tree -z --messages`: the tree id, then
 * `<mode> <oid> <stage>\t<path>` per conflicted stage, an empty field, then
 * messages as `<count>, <count paths>, <type>, <text>`.
 *
 * @throws {ResolveGitError} for output that is not that
 */
export function parseMergeTree(bytes: Uint8Array): MergeTreeOutput {
  const fields = nulFields(bytes);
  const bad = (what: string): never => {
    throw new ResolveGitError(`unexpected git merge-tree output: ${what}`);
  };
  const tree = latin1.decode(fields[0] ?? new Uint8Array()).trim();
  if (!OID.test(tree)) bad(`no tree id (${JSON.stringify(tree)})`);
  let i = 1;
  const stages: ConflictStage[] = [];
  for (; i < fields.length && fields[i]!.length > 0; i++) {
    const f = fields[i]!;
    const tab = f.indexOf(0x09);
    const m = STAGE.exec(latin1.decode(f.subarray(0, tab + 1)));
    if (tab === -1 || m === null || !OID.test(m[2]!)) {
      bad(`stage ${JSON.stringify(latin1.decode(f))}`);
    }
    stages.push({
      path: pathText(f.subarray(tab + 1)),
      stage: Number(m![3]) as 1 | 2 | 3,
      state: { mode: m![1]!, oid: m![2]! },
    });
  }
  i++; // the empty field before the messages
  const messages: MergeMessage[] = [];
  while (i < fields.length) {
    const count = latin1.decode(fields[i++]!);
    if (!/^\d{1,6}$/.test(count)) bad(`message path count ${JSON.stringify(count)}`);
    const n = Number(count);
    if (i + n + 2 > fields.length) bad("a message is cut short");
    const paths = fields.slice(i, i + n).map(pathText);
    i += n;
    const type = utf8Lossy(fields[i++]!);
    const text = utf8Lossy(fields[i++]!).trimEnd();
    messages.push({ paths, type, text });
  }
  return { tree, stages, messages };
}

function utf8Lossy(bytes: Uint8Array): string {
  return new TextDecoder().decode(bytes);
}

/**
 * Parses `git cat-file --batch` output for blobs: `<oid> blob <size>\n<bytes>\n`
 * per object, into oid → bytes.
 *
 * @throws {ResolveGitError} for a missing object or a record that is not one
 */
export function parseCatFileBatch(bytes: Uint8Array): Map<string, Uint8Array> {
  const out = new Map<string, Uint8Array>();
  let at = 0;
  while (at < bytes.length) {
    const nl = bytes.indexOf(0x0a, at);
    if (nl === -1) throw new ResolveGitError("unexpected git cat-file output: no header end");
    const header = latin1.decode(bytes.subarray(at, nl));
    const m = /^([0-9a-f]+) (\w+) (\d+)$/.exec(header);
    if (m === null) {
      throw new ResolveGitError(`git cat-file: ${header}`);
    }
    const size = Number(m[3]);
    const start = nl + 1;
    if (start + size + 1 > bytes.length || bytes[start + size] !== 0x0a) {
      throw new ResolveGitError("unexpected git cat-file output: object cut short");
    }
    out.set(m[1]!, bytes.slice(start, start + size));
    at = start + size + 1;
  }
  return out;
}
