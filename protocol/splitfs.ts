/**
 * The frames between a caller (the CLI for `marsh diff`, the daemon for
 * splits) and the split-filesystem service (`splitfs/main.ts`) over the
 * service's stdin and stdout. Requests are answered in order, one at a time.
 *
 * @module
 */

/** Bumped when a frame's shape changes incompatibly. */
export const SPLITFS_PROTOCOL = 1;

/** `(dev, ino)` as decimal strings: JSON has no 64-bit integers. */
export type WireIdentity = readonly [string, string];

/** Compare two directories and stream the patch (or the files list). */
export interface DiffRequest {
  readonly v: 1;
  readonly t: "diff";
  readonly old: string;
  readonly new: string;
  readonly files: boolean;
}

/** Create `<root>/.marsh/split/<id>/` and take the snapshot. */
export interface CreateRequest {
  readonly v: 1;
  readonly t: "create";
  readonly id: string;
  readonly root: string;
  /** Locates the caller's global Git excludes. */
  readonly env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
}

/** Fork a created split for one branch. */
export interface ForkRequest {
  readonly v: 1;
  readonly t: "fork";
  readonly id: string;
  readonly label: string;
}

/** Verify and capture one fork into `out/<label>/`. */
export interface CaptureRequest {
  readonly v: 1;
  readonly t: "capture";
  readonly id: string;
  readonly label: string;
}

/** Remove a rejected fork (its out/ stays). */
export interface RemoveForkRequest {
  readonly v: 1;
  readonly t: "remove-fork";
  readonly id: string;
  readonly label: string;
}

/** Remove the whole split through its descriptors. */
export interface RemoveRequest {
  readonly v: 1;
  readonly t: "remove";
  readonly id: string;
}

/** Close the split's descriptors and keep everything on disk. */
export interface ReleaseRequest {
  readonly v: 1;
  readonly t: "release";
  readonly id: string;
}

/** Every request the service accepts. */
export type SplitfsRequest =
  | DiffRequest
  | CreateRequest
  | ForkRequest
  | CaptureRequest
  | RemoveForkRequest
  | RemoveRequest
  | ReleaseRequest;

/** A piece of `diff` output, base64 so any bytes fit in JSON. */
export interface ChunkReply {
  readonly v: 1;
  readonly t: "chunk";
  readonly data: string;
}

/** A `diff` finished. */
export interface DoneReply {
  readonly v: 1;
  readonly t: "done";
  readonly changed: number;
}

/** A split was created. */
export interface CreatedReply {
  readonly v: 1;
  readonly t: "created";
  readonly dir: string;
  readonly identity: WireIdentity;
  readonly git: { readonly head: string | null; readonly objects: readonly string[] } | null;
  readonly snapshot: {
    readonly files: number;
    readonly bytes: number;
    readonly ms: number;
    readonly strategy: string;
  };
}

/** A fork was made. */
export interface ForkedReply {
  readonly v: 1;
  readonly t: "forked";
  readonly label: string;
  readonly path: string;
  readonly strategy: string;
  readonly identity: WireIdentity;
  readonly ms: number;
}

/** A fork was captured. */
export interface CapturedReply {
  readonly v: 1;
  readonly t: "captured";
  readonly label: string;
  readonly files: number;
  readonly changedBytes: number;
  readonly ms: number;
}

/** A request that returns nothing finished. */
export interface OkReply {
  readonly v: 1;
  readonly t: "ok";
}

/**
 * The request failed. `input`: the caller's input or the file system said no;
 * `rejected`: the fork's result is not trusted (`reason` is the status text);
 * `replaced`: a directory marsh made was replaced (`workspace replaced`);
 * `internal`: a fault in marsh.
 */
export interface ErrorReply {
  readonly v: 1;
  readonly t: "error";
  readonly kind: "input" | "rejected" | "replaced" | "internal";
  readonly message: string;
}

/** Every reply the service sends. */
export type SplitfsReply =
  | ChunkReply
  | DoneReply
  | CreatedReply
  | ForkedReply
  | CapturedReply
  | OkReply
  | ErrorReply;

/** A value that is not a valid frame of this protocol. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

const MAX_STRING = 4096;

function str(x: Record<string, unknown>, key: string): string {
  const v = x[key];
  if (typeof v !== "string" || v.length > MAX_STRING) {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be a string`);
  }
  return v;
}

function optStr(x: Record<string, unknown>, key: string): string | undefined {
  return x[key] === undefined ? undefined : str(x, key);
}

/** Validates a request frame. */
export function parseSplitfsRequest(x: unknown): SplitfsRequest {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "diff":
      if (typeof x.files !== "boolean") throw new ProtocolError("malformed diff frame: files");
      return { v: 1, t: "diff", old: str(x, "old"), new: str(x, "new"), files: x.files };
    case "create": {
      if (!isObject(x.env)) throw new ProtocolError("malformed create frame: env");
      const env = {
        HOME: optStr(x.env, "HOME"),
        XDG_CONFIG_HOME: optStr(x.env, "XDG_CONFIG_HOME"),
      };
      return { v: 1, t: "create", id: str(x, "id"), root: str(x, "root"), env };
    }
    case "fork":
    case "capture":
    case "remove-fork":
      return { v: 1, t: x.t, id: str(x, "id"), label: str(x, "label") };
    case "remove":
    case "release":
      return { v: 1, t: x.t, id: str(x, "id") };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

function num(x: Record<string, unknown>, key: string): number {
  const v = x[key];
  if (typeof v !== "number" || !Number.isFinite(v)) {
    throw new ProtocolError(`malformed ${String(x.t)} reply: ${key} must be a number`);
  }
  return v;
}

function identity(x: Record<string, unknown>): WireIdentity {
  const v = x.identity;
  if (!Array.isArray(v) || v.length !== 2 || !v.every((p) => typeof p === "string")) {
    throw new ProtocolError(`malformed ${String(x.t)} reply: identity`);
  }
  return [v[0] as string, v[1] as string];
}

/** Validates a reply frame. */
export function parseSplitfsReply(x: unknown): SplitfsReply {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  switch (x.t) {
    case "chunk":
      return { v: 1, t: "chunk", data: str({ ...x, t: "chunk" }, "data") };
    case "done":
      return { v: 1, t: "done", changed: num(x, "changed") };
    case "created": {
      const snap = x.snapshot;
      if (!isObject(snap)) throw new ProtocolError("malformed created reply: snapshot");
      let git: CreatedReply["git"] = null;
      if (x.git !== null) {
        if (!isObject(x.git) || !Array.isArray(x.git.objects)) {
          throw new ProtocolError("malformed created reply: git");
        }
        const head = x.git.head === null ? null : str(x.git, "head");
        git = { head, objects: x.git.objects.map((o) => String(o)) };
      }
      return {
        v: 1,
        t: "created",
        dir: str(x, "dir"),
        identity: identity(x),
        git,
        snapshot: {
          files: num(snap, "files"),
          bytes: num(snap, "bytes"),
          ms: num(snap, "ms"),
          strategy: str(snap, "strategy"),
        },
      };
    }
    case "forked":
      return {
        v: 1,
        t: "forked",
        label: str(x, "label"),
        path: str(x, "path"),
        strategy: str(x, "strategy"),
        identity: identity(x),
        ms: num(x, "ms"),
      };
    case "captured":
      return {
        v: 1,
        t: "captured",
        label: str(x, "label"),
        files: num(x, "files"),
        changedBytes: num(x, "changedBytes"),
        ms: num(x, "ms"),
      };
    case "ok":
      return { v: 1, t: "ok" };
    case "error":
      if (
        x.kind !== "input" && x.kind !== "rejected" && x.kind !== "replaced" &&
        x.kind !== "internal"
      ) break;
      return { v: 1, t: "error", kind: x.kind, message: str(x, "message") };
  }
  throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
}
