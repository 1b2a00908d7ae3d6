/**
 * The splitfs frames of checkpoint sessions and operations (part of
 * `protocol/splitfs.ts`; docs/checkpoints.md "An operation"): a session's
 * snapshot and view, an operation's private overlay, its capture into a
 * layer and that layer's seal, and the read-back recovery uses. The daemon
 * journals around these frames; the service only touches the project's
 * `.marsh/session/` and `.marsh/layers/`, never its working tree.
 *
 * @module
 */

import { isDigest, isRecordId, isRootId, sessionNameProblem } from "../model/checkpoint.ts";
import { ProtocolError } from "./protocol_error.ts";
import { absPath, bool, isObject, num, optStr, str } from "./splitfs_fields.ts";

/** At most this many layers in a session's stack (a request naming more is refused). */
export const MAX_SESSION_LAYERS = 64;
/** At most this many changed paths listed in an `op-captured` reply; `truncated` says there were more. */
export const MAX_CAPTURED_PATHS = 1000;

/** Layer ids (the same rule as `splitfs/layers/layer_seal.ts`'s `LAYER_ID`). */
export const SESSION_LAYER_ID = /^[a-z0-9]{8,24}$/;

/** Whether `x` is a layer id. */
export function isLayerId(x: unknown): x is string {
  return typeof x === "string" && SESSION_LAYER_ID.test(x);
}

/**
 * Take a layered snapshot of the project at `root` exactly as `marsh split`
 * does (no `.git`, no `.marsh`; ignored files only with `withIgnored`), pin
 * its stack under `<root>/.marsh/session/<name>/` so `marsh gc` keeps it, and
 * mount the session's view. All or nothing. Refused when the session has a
 * directory already (a crash's leftover: `session-close` it first).
 * Answered with `session-opened`.
 */
export interface SessionOpenRequest {
  readonly v: 1;
  readonly t: "session-open";
  /** The project root, absolute and canonical (as `located` gave it). */
  readonly root: string;
  readonly name: string;
  readonly withIgnored: boolean;
  /** Locates the caller's global Git excludes, as `create` does (absent: none). */
  readonly env?: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
}

/** The answer to `session-open`. */
export interface SessionOpenedReply {
  readonly v: 1;
  readonly t: "session-opened";
  /** The snapshot's stack, bottom first. */
  readonly layers: readonly string[];
  /** The Git tree id of the snapshot. */
  readonly rootId: string;
  readonly files: number;
  readonly bytes: number;
}

/**
 * (Re)mount the read-only overlay of `layers` at the session's stable view
 * path `<root>/.marsh/session/<name>/view` and pin `layers`. A view already
 * mounted there is replaced: the new one is mounted over it and the old one
 * is detached lazily (a process with a cwd or open file in it keeps seeing
 * the old stack until it lets go). Answered with `view-mounted`.
 */
export interface ViewMountRequest {
  readonly v: 1;
  readonly t: "view-mount";
  readonly root: string;
  readonly name: string;
  /** Bottom first; every layer sealed. */
  readonly layers: readonly string[];
  /**
   * A forked session's first mount (`marsh fork`): make its directory
   * first (refused when one is there). Absent: the directory must exist.
   */
  readonly create?: boolean;
}

/** How a view shows its stack: an overlay mount, or a copy where no overlay can be had. */
export type ViewClass = "virtual" | "copy_fallback";

/** The answer to `view-mount`. */
export interface ViewMountedReply {
  readonly v: 1;
  readonly t: "view-mounted";
  /** The view's absolute path. */
  readonly view: string;
  /** The top layer's root id, read back from its sealed meta. */
  readonly rootId: string;
  readonly class: ViewClass;
}

/**
 * Make `<root>/.marsh/session/<name>/op/<op>/` with `upper/`, `work/` and a
 * read-write overlay of `layers` (lower) and `upper/` mounted at `merged/`.
 * Answered with `op-prepared`. Prepared again (same op, same layers) it
 * answers the same without touching the upper dir.
 */
export interface OpPrepareRequest {
  readonly v: 1;
  readonly t: "op-prepare";
  readonly root: string;
  readonly name: string;
  /** The operation id (the journal's). */
  readonly op: string;
  /** The head's stack, bottom first. */
  readonly layers: readonly string[];
}

/** The answer to `op-prepare`. */
export interface OpPreparedReply {
  readonly v: 1;
  readonly t: "op-prepared";
  /** The read-write overlay the command runs in. */
  readonly merged: string;
  readonly upper: string;
}

/**
 * Once the operation's process tree is drained: unmount `merged`, read the
 * upper dir (only what changed), normalise it into the layer format, drop
 * entries equal to the head's, and compute the requested root id from the
 * head's index. `layers` and `rootId` are the head's (`rootId` is checked
 * against the top layer's). Answered with `op-captured`; nothing is sealed.
 */
export interface OpCaptureRequest {
  readonly v: 1;
  readonly t: "op-capture";
  readonly root: string;
  readonly name: string;
  readonly op: string;
  readonly layers: readonly string[];
  readonly rootId: string;
}

/** How a path changed against the head. */
export type PathChange = "added" | "modified" | "deleted" | "type";

/** One changed path (relative to the project root, `/`-separated). */
export interface CapturedPath {
  readonly path: string;
  readonly change: PathChange;
}

/** The answer to `op-capture`. */
export type OpCapturedReply = { readonly v: 1; readonly t: "op-captured" } & OpCaptured;

/** What `op-capture` found: no change, or a changed set to seal. */
export type OpCaptured =
  | {
    /** Nothing differs from the head: `rootId` is the head's; the op dir stays until `op-drop`. */
    readonly kind: "no-change";
    readonly rootId: string;
  }
  | {
    readonly kind: "changed";
    /** A fresh layer id, not yet sealed: journal it (intent), then `op-seal`. */
    readonly layer: string;
    /** The requested root id: the Git tree id of the head with the changes applied. */
    readonly rootId: string;
    /** SHA-256 (hex) of the normalised changed set. */
    readonly digest: string;
    /** How many paths changed. */
    readonly changed: number;
    /** The first {@linkcode MAX_CAPTURED_PATHS} changed paths, in UTF-8 byte order. */
    readonly paths: readonly CapturedPath[];
    readonly truncated: boolean;
  };

/**
 * Rename the captured upper dir of `op` into `.marsh/layers/<layer>/data`
 * (no file content copied) and seal it on top of `layers` as any layer is
 * sealed. Idempotent: a layer sealed already with `rootId` answers the same;
 * sealed with another root id is an error. The op dir then holds only its
 * pin of the new stack (so `marsh gc` keeps it until the view or the
 * caller's `keep` does): `op-drop` it once the head is bound. Answered with
 * `op-sealed`.
 */
export interface OpSealRequest {
  readonly v: 1;
  readonly t: "op-seal";
  readonly root: string;
  readonly name: string;
  readonly op: string;
  readonly layer: string;
  readonly rootId: string;
  /** The head's stack the layer goes on, bottom first. */
  readonly layers: readonly string[];
}

/** The answer to `op-seal`. */
export interface OpSealedReply {
  readonly v: 1;
  readonly t: "op-sealed";
  /** The new stack, bottom first: `layers` then `layer`. */
  readonly layers: readonly string[];
}

/** Unmount and remove `op`'s directory (a discarded, failed or sealed op). Answered with `op-dropped`; one already gone is dropped too. */
export interface OpDropRequest {
  readonly v: 1;
  readonly t: "op-drop";
  readonly root: string;
  readonly name: string;
  readonly op: string;
}

/** The answer to `op-drop`. */
export interface OpDroppedReply {
  readonly v: 1;
  readonly t: "op-dropped";
}

/** Read back layer `layer` by its id and the root id it should hold (recovery's root evidence). */
export interface LayerCheckRequest {
  readonly v: 1;
  readonly t: "layer-check";
  readonly root: string;
  readonly layer: string;
  readonly rootId: string;
}

/**
 * What `layer-check` found: `durable` (sealed, and its root id is the one
 * asked), `absent` (no sealed layer by that id; an unsealed leftover is
 * absent), `conflicting` (sealed with another root id), `ambiguous` (it
 * could not be read: a broken seal, an I/O error).
 */
export type LayerState = "durable" | "absent" | "conflicting" | "ambiguous";

/** The answer to `layer-check`. */
export interface LayerCheckedReply {
  readonly v: 1;
  readonly t: "layer-checked";
  readonly state: LayerState;
  /** Why, for `conflicting` and `ambiguous`. */
  readonly detail?: string;
}

/** Unmount the session's view and any op overlay, and remove its directory (its layers stay until `marsh gc`). Answered with `session-closed`. */
export interface SessionCloseRequest {
  readonly v: 1;
  readonly t: "session-close";
  readonly root: string;
  readonly name: string;
}

/** The answer to `session-close`. */
export interface SessionClosedReply {
  readonly v: 1;
  readonly t: "session-closed";
}

/**
 * One step of the compaction of `layers` (a session's stack, bottom first)
 * into one new sealed bottom layer holding their merged view, with the same
 * root id (docs/checkpoints.md "Compaction"). Each step copies for about
 * `budgetMs` and answers `compacting` (ask again with its `layer`) until the
 * last seals the layer and answers `compacted`; the layer stays pinned in
 * the session's directory until `compact-drop`. Asked again once sealed, it
 * answers `compacted` again.
 */
export interface CompactRequest {
  readonly v: 1;
  readonly t: "compact";
  readonly root: string;
  readonly name: string;
  readonly layers: readonly string[];
  /** The layer a `compacting` answer named; absent on the first step. */
  readonly layer?: string;
  /** How long a step may copy, in ms (absent: {@linkcode COMPACT_STEP_MS}). */
  readonly budgetMs?: number;
}

/** A compaction step's default length, ms: short enough that other requests are not held up for long. */
export const COMPACT_STEP_MS = 50;

/** The answer to `compact`. */
export type CompactedReply =
  & { readonly v: 1; readonly t: "compacted"; readonly layer: string; readonly files: number }
  & (
    | { readonly state: "compacting" }
    | { readonly state: "sealed"; readonly rootId: string; readonly bytes: number }
  );

/** Unpin (and, unsealed, remove) the compaction into `layer`: the journal names it now, or it was given up. */
export interface CompactDropRequest {
  readonly v: 1;
  readonly t: "compact-drop";
  readonly root: string;
  readonly name: string;
  readonly layer: string;
}

/** The answer to `compact-drop`. */
export interface CompactDroppedReply {
  readonly v: 1;
  readonly t: "compact-dropped";
}

/** Every request of this module. */
export type SessionRequest =
  | SessionOpenRequest
  | ViewMountRequest
  | OpPrepareRequest
  | OpCaptureRequest
  | OpSealRequest
  | OpDropRequest
  | LayerCheckRequest
  | SessionCloseRequest
  | CompactRequest
  | CompactDropRequest;

/** Every reply of this module. */
export type SessionReply =
  | SessionOpenedReply
  | ViewMountedReply
  | OpPreparedReply
  | OpCapturedReply
  | OpSealedReply
  | OpDroppedReply
  | LayerCheckedReply
  | SessionClosedReply
  | CompactedReply
  | CompactDroppedReply;

/** The frame types of {@linkcode SessionRequest}. */
export const SESSION_REQUESTS: ReadonlySet<string> = new Set([
  "session-open",
  "view-mount",
  "op-prepare",
  "op-capture",
  "op-seal",
  "op-drop",
  "layer-check",
  "session-close",
  "compact",
  "compact-drop",
]);

/** The frame types of {@linkcode SessionReply}. */
export const SESSION_REPLIES: ReadonlySet<string> = new Set([
  "session-opened",
  "view-mounted",
  "op-prepared",
  "op-captured",
  "op-sealed",
  "op-dropped",
  "layer-checked",
  "session-closed",
  "compacted",
  "compact-dropped",
]);

function bad(x: Record<string, unknown>, what: string): ProtocolError {
  return new ProtocolError(`malformed ${String(x.t)} frame: ${what}`);
}

function name(x: Record<string, unknown>): string {
  const n = str(x, "name");
  const problem = sessionNameProblem(n);
  if (problem !== null) throw bad(x, problem);
  return n;
}

function opId(x: Record<string, unknown>): string {
  const v = x.op;
  if (!isRecordId(v)) throw bad(x, "op must be an operation id (1-64 of a-z, 0-9, -)");
  return v;
}

function layerId(x: Record<string, unknown>, key: string): string {
  const v = x[key];
  if (!isLayerId(v)) throw bad(x, `${key} must be a layer id`);
  return v;
}

function rootId(x: Record<string, unknown>): string {
  const v = x.rootId;
  if (!isRootId(v)) throw bad(x, "rootId must be a Git tree id (40 hex digits)");
  return v;
}

/** A stack: 1 to {@linkcode MAX_SESSION_LAYERS} distinct layer ids. */
function layers(x: Record<string, unknown>, max = MAX_SESSION_LAYERS): string[] {
  const v = x.layers;
  if (
    !Array.isArray(v) || v.length === 0 || v.length > max || !v.every(isLayerId) ||
    new Set(v).size !== v.length
  ) {
    throw bad(x, `layers must be a list of 1-${max} distinct layer ids`);
  }
  return v;
}

/** Validates a request of this module (`v` is checked by the caller; `t` is in {@linkcode SESSION_REQUESTS}). */
export function parseSessionRequest(x: Record<string, unknown>): SessionRequest {
  switch (x.t) {
    case "session-open": {
      let env: SessionOpenRequest["env"];
      if (x.env !== undefined) {
        if (!isObject(x.env)) throw bad(x, "env must be an object");
        const HOME = optStr(x.env, "HOME"), XDG_CONFIG_HOME = optStr(x.env, "XDG_CONFIG_HOME");
        env = {
          ...(HOME === undefined ? {} : { HOME }),
          ...(XDG_CONFIG_HOME === undefined ? {} : { XDG_CONFIG_HOME }),
        };
      }
      return {
        v: 1,
        t: "session-open",
        root: absPath(x, "root"),
        name: name(x),
        withIgnored: bool(x, "withIgnored"),
        ...(env === undefined ? {} : { env }),
      };
    }
    case "view-mount":
      return {
        v: 1,
        t: "view-mount",
        root: absPath(x, "root"),
        name: name(x),
        layers: layers(x),
        ...(x.create === undefined ? {} : { create: bool(x, "create") }),
      };
    case "op-prepare":
      return {
        v: 1,
        t: "op-prepare",
        root: absPath(x, "root"),
        name: name(x),
        op: opId(x),
        layers: layers(x),
      };
    case "op-capture":
      return {
        v: 1,
        t: "op-capture",
        root: absPath(x, "root"),
        name: name(x),
        op: opId(x),
        layers: layers(x),
        rootId: rootId(x),
      };
    case "op-seal": {
      // The sealed stack is `layers` plus one: it must stay within the bound.
      const below = layers(x, MAX_SESSION_LAYERS - 1);
      const layer = layerId(x, "layer");
      if (below.includes(layer)) throw bad(x, `layer ${layer} is already in layers`);
      return {
        v: 1,
        t: "op-seal",
        root: absPath(x, "root"),
        name: name(x),
        op: opId(x),
        layer,
        rootId: rootId(x),
        layers: below,
      };
    }
    case "op-drop":
      return { v: 1, t: "op-drop", root: absPath(x, "root"), name: name(x), op: opId(x) };
    case "layer-check":
      return {
        v: 1,
        t: "layer-check",
        root: absPath(x, "root"),
        layer: layerId(x, "layer"),
        rootId: rootId(x),
      };
    case "session-close":
      return { v: 1, t: "session-close", root: absPath(x, "root"), name: name(x) };
    case "compact": {
      const budget = x.budgetMs === undefined ? undefined : num(x, "budgetMs");
      if (budget !== undefined && (budget < 1 || budget > 60_000)) {
        throw bad(x, "budgetMs must be 1 to 60000");
      }
      return {
        v: 1,
        t: "compact",
        root: absPath(x, "root"),
        name: name(x),
        layers: layers(x),
        ...(x.layer === undefined ? {} : { layer: layerId(x, "layer") }),
        ...(budget === undefined ? {} : { budgetMs: budget }),
      };
    }
    case "compact-drop":
      return {
        v: 1,
        t: "compact-drop",
        root: absPath(x, "root"),
        name: name(x),
        layer: layerId(x, "layer"),
      };
    default:
      throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
  }
}

const CHANGES: ReadonlySet<string> = new Set(["added", "modified", "deleted", "type"]);
const STATES: ReadonlySet<string> = new Set(["durable", "absent", "conflicting", "ambiguous"]);

function capturedPaths(x: Record<string, unknown>): CapturedPath[] {
  const v = x.paths;
  if (!Array.isArray(v) || v.length > MAX_CAPTURED_PATHS || !v.every(isObject)) {
    throw bad(x, `paths must be a list of at most ${MAX_CAPTURED_PATHS} objects`);
  }
  return v.map((p) => {
    const change = p.change;
    if (typeof change !== "string" || !CHANGES.has(change)) throw bad(x, "unknown path change");
    return { path: str(p, "path"), change: change as PathChange };
  });
}

function digest(x: Record<string, unknown>): string {
  const v = x.digest;
  if (!isDigest(v)) throw bad(x, "digest must be 64 hex digits");
  return v;
}

/** Validates a reply of this module (`t` is in {@linkcode SESSION_REPLIES}). */
export function parseSessionReply(x: Record<string, unknown>): SessionReply {
  switch (x.t) {
    case "session-opened":
      return {
        v: 1,
        t: "session-opened",
        layers: layers(x),
        rootId: rootId(x),
        files: num(x, "files"),
        bytes: num(x, "bytes"),
      };
    case "view-mounted": {
      const cls = x.class;
      if (cls !== "virtual" && cls !== "copy_fallback") {
        throw bad(x, `class must be "virtual" or "copy_fallback"`);
      }
      return { v: 1, t: "view-mounted", view: absPath(x, "view"), rootId: rootId(x), class: cls };
    }
    case "op-prepared":
      return {
        v: 1,
        t: "op-prepared",
        merged: absPath(x, "merged"),
        upper: absPath(x, "upper"),
      };
    case "op-captured":
      if (x.kind === "no-change") {
        return { v: 1, t: "op-captured", kind: "no-change", rootId: rootId(x) };
      }
      if (x.kind !== "changed") throw bad(x, `kind must be "no-change" or "changed"`);
      return {
        v: 1,
        t: "op-captured",
        kind: "changed",
        layer: layerId(x, "layer"),
        rootId: rootId(x),
        digest: digest(x),
        changed: num(x, "changed"),
        paths: capturedPaths(x),
        truncated: bool(x, "truncated"),
      };
    case "op-sealed":
      return { v: 1, t: "op-sealed", layers: layers(x) };
    case "op-dropped":
      return { v: 1, t: "op-dropped" };
    case "layer-checked": {
      const state = x.state;
      if (typeof state !== "string" || !STATES.has(state)) throw bad(x, "unknown layer state");
      const detail = x.detail === undefined ? undefined : str(x, "detail");
      return {
        v: 1,
        t: "layer-checked",
        state: state as LayerState,
        ...(detail === undefined ? {} : { detail }),
      };
    }
    case "session-closed":
      return { v: 1, t: "session-closed" };
    case "compacted": {
      const head = { v: 1, t: "compacted", layer: layerId(x, "layer"), files: num(x, "files") };
      if (x.state === "compacting") return { ...head, state: "compacting" } as CompactedReply;
      if (x.state !== "sealed") throw bad(x, `state must be "compacting" or "sealed"`);
      return {
        ...head,
        state: "sealed",
        rootId: rootId(x),
        bytes: num(x, "bytes"),
      } as CompactedReply;
    }
    case "compact-dropped":
      return { v: 1, t: "compact-dropped" };
    default:
      throw new ProtocolError(`unknown splitfs reply type ${JSON.stringify(x.t)}`);
  }
}
