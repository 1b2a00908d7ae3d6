/**
 * The splitfs frames that write and read a split's `out/` for the daemon
 * (part of `protocol/splitfs.ts`): each branch's status and output, the
 * manifest, the check before a join hands `out/` over, and the rendering.
 *
 * @module
 */

import { bool, isObject, list, nullablePath, str } from "./splitfs_fields.ts";
import { ProtocolError } from "./protocol_error.ts";

/** The largest `out/manifest.json` the service writes. */
export const MAX_MANIFEST_BYTES = 1024 * 1024;

/**
 * Write a branch's `out/<label>/status` (`status` plus a newline) and copy
 * its attempt output to `out/<label>/stdout` and `stderr`, all created
 * `O_EXCL`; `out/<label>/` is made when the branch has no fork. Once per
 * label. Answered with `ok`.
 */
export interface PublishRequest {
  readonly v: 1;
  readonly t: "publish";
  readonly id: string;
  readonly label: string;
  readonly status: string;
  /** Absolute path of the attempt's stdout file (daemon's control dir); `null`: empty. */
  readonly stdout: string | null;
  /** Absolute path of the attempt's stderr file; `null`: empty. */
  readonly stderr: string | null;
}

/** Replace `out/manifest.json` atomically with `json`. Answered with `ok`. */
export interface ManifestRequest {
  readonly v: 1;
  readonly t: "manifest";
  readonly id: string;
  /** The manifest text, a JSON object, at most {@linkcode MAX_MANIFEST_BYTES}. */
  readonly json: string;
}

/**
 * Before a join hands `out/` to a consumer: which of these branches lack a
 * file under `out/<label>/` (`status`, `stdout`, `stderr`; `files` when
 * captured; `diff.patch` when captured with changes). Answered with
 * `out-checked`.
 */
export interface OutCheckRequest {
  readonly v: 1;
  readonly t: "out-check";
  readonly id: string;
  readonly branches: readonly {
    readonly label: string;
    readonly captured: boolean;
    readonly changed: boolean;
  }[];
}

/** One branch of a rendering, in declaration order. */
export interface RenderBranchSpec {
  readonly label: string;
  readonly status: string;
  /** Changed paths; 0 renders `(no changes)`. */
  readonly files: number;
  /** A rejected branch's patch: named, never shown, so a consumer cannot apply it unread. */
  readonly untrusted?: true;
}

/**
 * Stream the text rendering for a consumer (docs/engine.md "Publish, manifest and render") as
 * `chunk` replies, then `done` (`changed`: the sum of `files`).
 */
export interface RenderRequest {
  readonly v: 1;
  readonly t: "render";
  readonly id: string;
  readonly branches: readonly RenderBranchSpec[];
  /** Escape control bytes other than `\n` and `\t` (the output is a terminal). */
  readonly terminal: boolean;
}

/** The `out/` requests. */
export type OutRequest = PublishRequest | ManifestRequest | OutCheckRequest | RenderRequest;

/** The answer to `out-check`: the branches that lack files, with the names they lack. */
export interface OutCheckedReply {
  readonly v: 1;
  readonly t: "out-checked";
  readonly missing: readonly { readonly label: string; readonly files: readonly string[] }[];
}

function manifestJson(x: Record<string, unknown>): string {
  const v = x.json;
  if (typeof v !== "string" || v.length > MAX_MANIFEST_BYTES) {
    throw new ProtocolError(
      `malformed manifest frame: json must be a string of at most ${MAX_MANIFEST_BYTES} bytes`,
    );
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(v);
  } catch (cause) {
    throw new ProtocolError("malformed manifest frame: json is not JSON", { cause });
  }
  if (!isObject(parsed)) throw new ProtocolError("malformed manifest frame: json is not an object");
  return v;
}

/** Validates an `out/` request (its `v` is checked by the caller). */
export function parseOutRequest(x: Record<string, unknown>): OutRequest {
  switch (x.t) {
    case "publish":
      return {
        v: 1,
        t: "publish",
        id: str(x, "id"),
        label: str(x, "label"),
        status: str(x, "status"),
        stdout: nullablePath(x, "stdout"),
        stderr: nullablePath(x, "stderr"),
      };
    case "manifest":
      return { v: 1, t: "manifest", id: str(x, "id"), json: manifestJson(x) };
    case "out-check":
      return {
        v: 1,
        t: "out-check",
        id: str(x, "id"),
        branches: list(x, "branches").map((b) => ({
          label: str(b, "label"),
          captured: bool(b, "captured"),
          changed: bool(b, "changed"),
        })),
      };
    case "render":
      return {
        v: 1,
        t: "render",
        id: str(x, "id"),
        terminal: bool(x, "terminal"),
        branches: list(x, "branches").map((b) => {
          const files = b.files;
          if (typeof files !== "number" || !Number.isSafeInteger(files) || files < 0) {
            throw new ProtocolError("malformed render frame: files must be a count");
          }
          if (b.untrusted !== undefined && b.untrusted !== true) {
            throw new ProtocolError("malformed render frame: untrusted must be true or absent");
          }
          return {
            label: str(b, "label"),
            status: str(b, "status"),
            files,
            ...(b.untrusted ? { untrusted: true as const } : {}),
          };
        }),
      };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

/** Validates an `out-checked` reply. */
export function parseOutCheckedReply(x: Record<string, unknown>): OutCheckedReply {
  return {
    v: 1,
    t: "out-checked",
    missing: list(x, "missing").map((m) => {
      const files = m.files;
      if (!Array.isArray(files) || !files.every((f) => typeof f === "string")) {
        throw new ProtocolError("malformed out-checked reply: files");
      }
      return { label: str(m, "label"), files };
    }),
  };
}
