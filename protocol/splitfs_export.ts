/**
 * The splitfs frames of promotion to Git and of a checkpoint's patch (part
 * of `protocol/splitfs.ts`; docs/checkpoints.md "Checkout and commit"): the
 * root of a sealed layer stack exported into the project's Git object store,
 * and the patch between two stacks. The daemon names the stacks from its
 * journal; the service reads only `.marsh/layers/` and writes only the
 * repository's object dir.
 *
 * @module
 */

import { ProtocolError } from "./protocol_error.ts";
import { absPath, bool, isObject, num, str } from "./splitfs_fields.ts";

/** At most this many layers in a stack a request names. */
export const MAX_EXPORT_LAYERS = 64;
/** At most this many changed paths listed in a `checkpoint-patched` reply. */
export const MAX_PATCH_PATHS = 1000;

const LAYER = /^[a-z0-9]{8,24}$/;
const ROOT_ID = /^[0-9a-f]{40}$/;

/**
 * Make every blob and tree of the root of `layers` present in the project's
 * Git object store (`<root>/.git/objects`, or the gitdir a gitfile names),
 * writing only the objects Git lacks. Answered with `root-exported`, or
 * `export-unsupported` when the root holds something Git cannot store
 * (nothing is written then).
 */
export interface ExportRootRequest {
  readonly v: 1;
  readonly t: "export-root";
  /** The project root, absolute and canonical. */
  readonly root: string;
  /** The stack, bottom first; every layer sealed. */
  readonly layers: readonly string[];
  /** The stack's root id (its top layer's), checked. */
  readonly rootId: string;
}

/** The root is in the object store. */
export interface RootExportedReply {
  readonly v: 1;
  readonly t: "root-exported";
  readonly gitDir: string;
  readonly objectsDir: string;
  /** Blobs and trees written. */
  readonly blobs: number;
  readonly trees: number;
  /** Bytes of the blobs written. */
  readonly bytes: number;
  /** Objects found present (a present tree counts once). */
  readonly present: number;
}

/** The kinds of entry outside Git's admitted subset. */
export const UNSUPPORTED_KINDS = [
  "empty-directory",
  "absolute-symlink",
  "escaping-symlink",
  "special-file",
] as const;

/** `UnsupportedGitExport`: the path, its kind, and the message. Nothing was written. */
export interface ExportUnsupportedReply {
  readonly v: 1;
  readonly t: "export-unsupported";
  readonly path: string;
  readonly kind: typeof UNSUPPORTED_KINDS[number];
  readonly message: string;
}

/**
 * The patch that turns the view of stack `from` into that of stack `to`
 * (each bottom first; empty: the empty tree), streamed as `chunk` replies
 * when `patch` is set, then `checkpoint-patched`.
 */
export interface CheckpointPatchRequest {
  readonly v: 1;
  readonly t: "checkpoint-patch";
  readonly root: string;
  readonly from: readonly string[];
  readonly to: readonly string[];
  /** Stream the patch; without it only the counts and paths come back. */
  readonly patch: boolean;
}

/** One changed path: `A`, `M`, `D` or `T` (Git's name-status letters). */
export interface PatchedPath {
  readonly path: string;
  readonly status: "A" | "M" | "D" | "T";
}

/** The end of `checkpoint-patch`. */
export interface CheckpointPatchedReply {
  readonly v: 1;
  readonly t: "checkpoint-patched";
  readonly changed: number;
  /** The first {@linkcode MAX_PATCH_PATHS} changed paths. */
  readonly paths: readonly PatchedPath[];
  /** Bytes of patch text. */
  readonly bytes: number;
}

/** The requests of this module. */
export type ExportRequest = ExportRootRequest | CheckpointPatchRequest;
/** The replies of this module. */
export type ExportReply = RootExportedReply | ExportUnsupportedReply | CheckpointPatchedReply;

/** The request types this module parses. */
export const EXPORT_REQUESTS: ReadonlySet<string> = new Set(["export-root", "checkpoint-patch"]);
/** The reply types this module parses. */
export const EXPORT_REPLIES: ReadonlySet<string> = new Set([
  "root-exported",
  "export-unsupported",
  "checkpoint-patched",
]);

function layers(x: Record<string, unknown>, key: string): string[] {
  const v = x[key];
  if (
    !Array.isArray(v) || v.length > MAX_EXPORT_LAYERS ||
    !v.every((l) => typeof l === "string" && LAYER.test(l))
  ) {
    throw new ProtocolError(
      `malformed ${
        String(x.t)
      } frame: ${key} must be a list of at most ${MAX_EXPORT_LAYERS} layer ids`,
    );
  }
  return v;
}

/** Validates an export request (`v` checked by the caller). @throws {ProtocolError} */
export function parseExportRequest(x: Record<string, unknown>): ExportRequest {
  if (x.t === "export-root") {
    const rootId = str(x, "rootId");
    if (!ROOT_ID.test(rootId)) throw new ProtocolError("malformed export-root frame: rootId");
    const l = layers(x, "layers");
    return { v: 1, t: "export-root", root: absPath(x, "root"), layers: l, rootId };
  }
  if (x.t === "checkpoint-patch") {
    return {
      v: 1,
      t: "checkpoint-patch",
      root: absPath(x, "root"),
      from: layers(x, "from"),
      to: layers(x, "to"),
      patch: bool(x, "patch"),
    };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

/** Validates an export reply (`v` checked by the caller). @throws {ProtocolError} */
export function parseExportReply(x: Record<string, unknown>): ExportReply {
  switch (x.t) {
    case "root-exported":
      return {
        v: 1,
        t: "root-exported",
        gitDir: str(x, "gitDir"),
        objectsDir: str(x, "objectsDir"),
        blobs: num(x, "blobs"),
        trees: num(x, "trees"),
        bytes: num(x, "bytes"),
        present: num(x, "present"),
      };
    case "export-unsupported": {
      const kind = UNSUPPORTED_KINDS.find((k) => k === x.kind);
      if (kind === undefined) throw new ProtocolError("malformed export-unsupported reply: kind");
      return {
        v: 1,
        t: "export-unsupported",
        path: str(x, "path"),
        kind,
        message: str(x, "message"),
      };
    }
    case "checkpoint-patched": {
      const paths = x.paths;
      if (
        !Array.isArray(paths) || paths.length > MAX_PATCH_PATHS ||
        !paths.every((p) =>
          isObject(p) && typeof p.path === "string" &&
          (p.status === "A" || p.status === "M" || p.status === "D" || p.status === "T")
        )
      ) throw new ProtocolError("malformed checkpoint-patched reply: paths");
      return {
        v: 1,
        t: "checkpoint-patched",
        changed: num(x, "changed"),
        paths: paths as PatchedPath[],
        bytes: num(x, "bytes"),
      };
    }
  }
  throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
}
