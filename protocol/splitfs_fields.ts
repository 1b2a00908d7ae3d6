/**
 * The field checks every splitfs frame module uses (`protocol/splitfs.ts`,
 * `splitfs_out.ts`, `splitfs_objects.ts`), and the fields they share: the
 * bound on a split's branches and a nested split's `parent`.
 *
 * @module
 */

import { labelProblem, splitIdProblem } from "../model/layout.ts";
import { MAX_BRANCHES } from "../model/limits.ts";
import { ProtocolError } from "./protocol_error.ts";

/**
 * The creator branch of a nested split: its fork
 * `<root>/.marsh/split/<split>/<label>` is the snapshot source.
 */
export interface SplitParent {
  /** The creator branch's split id. */
  readonly split: string;
  /** The creator branch's label in that split. */
  readonly label: string;
}

/** Whether `x` is a JSON object (not an array, not null). */
export function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

const MAX_STRING = 4096;

/** `x[key]`, a string of at most 4096 characters. @throws {ProtocolError} */
export function str(x: Record<string, unknown>, key: string): string {
  const v = x[key];
  if (typeof v !== "string" || v.length > MAX_STRING) {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be a string`);
  }
  return v;
}

/** `x[key]` as {@linkcode str}, or `undefined` when absent. @throws {ProtocolError} */
export function optStr(x: Record<string, unknown>, key: string): string | undefined {
  return x[key] === undefined ? undefined : str(x, key);
}

/** `x[key]`, an absolute path without NUL. @throws {ProtocolError} */
export function absPath(x: Record<string, unknown>, key: string): string {
  const v = str(x, key);
  if (!v.startsWith("/") || v.includes("\0")) {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be an absolute path`);
  }
  return v;
}

/** `x[key]` as {@linkcode absPath}, or `null`. @throws {ProtocolError} */
export function nullablePath(x: Record<string, unknown>, key: string): string | null {
  return x[key] === null ? null : absPath(x, key);
}

/** `x[key]`, a boolean. @throws {ProtocolError} */
export function bool(x: Record<string, unknown>, key: string): boolean {
  const v = x[key];
  if (typeof v !== "boolean") {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be a boolean`);
  }
  return v;
}

/** `x[key]`, a finite number (in a reply). @throws {ProtocolError} */
export function num(x: Record<string, unknown>, key: string): number {
  const v = x[key];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new ProtocolError(`malformed ${String(x.t)} reply: ${key} must be a number`);
  }
  return v;
}

/** `x[key]`, a list of at most {@linkcode MAX_BRANCHES} objects. @throws {ProtocolError} */
export function list(x: Record<string, unknown>, key: string): Record<string, unknown>[] {
  const v = x[key];
  if (!Array.isArray(v) || v.length > MAX_BRANCHES || !v.every(isObject)) {
    throw new ProtocolError(
      `malformed ${String(x.t)} frame: ${key} must be a list of at most ${MAX_BRANCHES} objects`,
    );
  }
  return v;
}

/**
 * An optional `parent`: a split id and a label, checked as the engine checks them.
 *
 * @throws {ProtocolError}
 */
export function optParent(x: Record<string, unknown>): { parent?: SplitParent } {
  if (x.parent === undefined) return {};
  const p = x.parent;
  if (!isObject(p) || typeof p.split !== "string" || typeof p.label !== "string") {
    throw new ProtocolError(
      `malformed ${String(x.t)} frame: parent must be an object with a split and a label`,
    );
  }
  const { split, label } = p;
  const problem = splitIdProblem(split) ?? labelProblem(label);
  if (problem) throw new ProtocolError(`malformed ${String(x.t)} frame: parent: ${problem}`);
  return { parent: { split, label } };
}
