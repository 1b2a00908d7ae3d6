/**
 * The frames between a caller and the split-filesystem service
 * (`splitfs/main.ts`) over the service's stdin and stdout.
 *
 * @module
 */

/** Bumped when a frame's shape changes incompatibly. */
export const SPLITFS_PROTOCOL = 1;

/** Compare two directories and stream the patch (or the files list). */
export interface DiffRequest {
  readonly v: 1;
  readonly t: "diff";
  readonly old: string;
  readonly new: string;
  readonly files: boolean;
}

/** Every request the service accepts. */
export type SplitfsRequest = DiffRequest;

/** A piece of output, base64 so any bytes fit in JSON. */
export interface ChunkReply {
  readonly v: 1;
  readonly t: "chunk";
  readonly data: string;
}

/** The request finished. */
export interface DoneReply {
  readonly v: 1;
  readonly t: "done";
  readonly changed: number;
}

/** The request failed; `kind` says whether it was the caller's input or a fault. */
export interface ErrorReply {
  readonly v: 1;
  readonly t: "error";
  readonly kind: "input" | "rejected" | "internal";
  readonly message: string;
}

/** Every reply the service sends. */
export type SplitfsReply = ChunkReply | DoneReply | ErrorReply;

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** A value that is not a valid frame of this protocol. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/** Validates a request frame. */
export function parseSplitfsRequest(x: unknown): SplitfsRequest {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  if (x.t === "diff") {
    if (typeof x.old !== "string" || typeof x.new !== "string" || typeof x.files !== "boolean") {
      throw new ProtocolError("malformed diff request");
    }
    return { v: 1, t: "diff", old: x.old, new: x.new, files: x.files };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

/** Validates a reply frame. */
export function parseSplitfsReply(x: unknown): SplitfsReply {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "chunk":
      if (typeof x.data !== "string") break;
      return { v: 1, t: "chunk", data: x.data };
    case "done":
      if (typeof x.changed !== "number") break;
      return { v: 1, t: "done", changed: x.changed };
    case "error":
      if (typeof x.message !== "string") break;
      if (x.kind !== "input" && x.kind !== "rejected" && x.kind !== "internal") break;
      return { v: 1, t: "error", kind: x.kind, message: x.message };
  }
  throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
}
