/**
 * The split-filesystem service's `out-read` frame (part of
 * `protocol/splitfs.ts`): `marsh logs` of a branch whose output was
 * published reads `out/<label>/stdout` or `stderr`, which only the service
 * may open (the daemon reads no project file).
 *
 * @module
 */

import { labelProblem } from "../model/layout.ts";
import { ProtocolError } from "./protocol_error.ts";

/**
 * Stream `out/<label>/<name>` of an open split as `chunk` replies, then
 * `done` (`changed`: the bytes sent). Refused when the file is absent.
 */
export interface OutReadRequest {
  readonly v: 1;
  readonly t: "out-read";
  readonly id: string;
  readonly label: string;
  readonly name: "stdout" | "stderr";
}

/**
 * Validates an `out-read` frame.
 *
 * @throws {ProtocolError} naming the bad field
 */
export function parseOutReadRequest(x: Record<string, unknown>): OutReadRequest {
  if (typeof x.id !== "string" || x.id.length === 0 || x.id.length > 128) {
    throw new ProtocolError("malformed out-read frame: id");
  }
  if (typeof x.label !== "string" || labelProblem(x.label) !== null) {
    throw new ProtocolError("malformed out-read frame: label");
  }
  if (x.name !== "stdout" && x.name !== "stderr") {
    throw new ProtocolError('malformed out-read frame: name must be "stdout" or "stderr"');
  }
  return { v: 1, t: "out-read", id: x.id, label: x.label, name: x.name };
}
