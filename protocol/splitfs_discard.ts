/**
 * The splitfs frame that discards one branch's fork (part of
 * `protocol/splitfs.ts`; docs/guide.md "Discarding branches"): `marsh discard
 * ID LABEL` keeps the split and its other forks, so the service removes that
 * one fork alone. A whole split's discard is the `remove` frame.
 *
 * @module
 */

import { labelProblem } from "../model/layout.ts";
import { ProtocolError } from "./protocol_error.ts";
import { str } from "./splitfs_fields.ts";

/**
 * Remove fork `label` of open split `id`: its overlay unmounted (verified
 * gone) or its copy deleted, with `.overlay/<label>/` and its Git metadata
 * (`.admin/<label>/`, and `.admin/.rejected-<label>/` when capture set one
 * aside). `out/<label>/` stays. Any mount marsh did not make there refuses
 * it before anything changes. Answered with `ok`; a fork already gone is
 * `ok` too.
 */
export interface DropForkRequest {
  readonly v: 1;
  readonly t: "drop-fork";
  readonly id: string;
  readonly label: string;
}

/** The request types of this module. */
export const DISCARD_REQUESTS: ReadonlySet<string> = new Set(["drop-fork"]);

/** Validates a request of this module (`v` is checked by the caller; `t` is in {@linkcode DISCARD_REQUESTS}). */
export function parseDiscardRequest(x: Record<string, unknown>): DropForkRequest {
  if (x.t !== "drop-fork") throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
  const label = str(x, "label");
  const problem = labelProblem(label);
  if (problem !== null) throw new ProtocolError(`malformed drop-fork frame: ${problem}`);
  return { v: 1, t: "drop-fork", id: str(x, "id"), label };
}
