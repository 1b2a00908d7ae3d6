/**
 * The frames between a caller (the CLI for `marsh diff`, the daemon for
 * splits) and the split-filesystem service (`splitfs/main.ts`) over the
 * service's stdin and stdout. Requests are answered in order, one at a time.
 * The `out/` frames are in `splitfs_out.ts`, the objects export in
 * `splitfs_objects.ts`, promotion to Git and a checkpoint's patch in
 * `splitfs_export.ts`, the process frames in `processes.ts`; this module
 * holds the rest and parses every frame.
 *
 * @module
 */

import {
  parseProcessesReply,
  parseProcessRequest,
  type ProcessesReply,
  type ProcessRequest,
} from "./processes.ts";
import { type OutReadRequest, parseOutReadRequest } from "./out_read.ts";
import { ProtocolError } from "./protocol_error.ts";
import {
  parsePurgedReply,
  parsePurgeRequest,
  type PurgedReply,
  type PurgeRequest,
} from "./purge.ts";
import {
  type ExportedReply,
  type ExportObjectsRequest,
  parseExportedReply,
  parseExportObjectsRequest,
} from "./splitfs_objects.ts";
import {
  absPath,
  bool,
  isObject,
  list,
  num,
  optParent,
  optStr,
  type SplitParent,
  str,
} from "./splitfs_fields.ts";
import { DISCARD_REQUESTS, type DropForkRequest, parseDiscardRequest } from "./splitfs_discard.ts";
import {
  type BranchStatsReply,
  type BranchStatsRequest,
  type CompareDropRequest,
  type CompareForkedReply,
  type CompareForkRequest,
  type CompareOutRequest,
  parseBranchStatsReply,
  parseBranchStatsRequest,
  parseCompareDropRequest,
  parseCompareForkedReply,
  parseCompareForkRequest,
  parseCompareOutRequest,
} from "./splitfs_compare.ts";
import {
  parseResolveReply,
  parseResolveRequest,
  RESOLVE_REPLIES,
  RESOLVE_REQUESTS,
  resolveFrameToWire,
  type ResolveReply,
  type ResolveRequest,
} from "./splitfs_resolve.ts";
import {
  EXPORT_REPLIES,
  EXPORT_REQUESTS,
  type ExportReply,
  type ExportRequest,
  parseExportReply,
  parseExportRequest,
} from "./splitfs_export.ts";
import {
  isLayerId,
  parseSessionReply,
  parseSessionRequest,
  SESSION_REPLIES,
  SESSION_REQUESTS,
  type SessionReply,
  type SessionRequest,
} from "./splitfs_session.ts";
import {
  CHECKOUT_REPLIES,
  CHECKOUT_REQUESTS,
  checkoutFrameToWire,
  type CheckoutReply,
  type CheckoutRequest,
  parseCheckoutReply,
  parseCheckoutRequest,
} from "./splitfs_checkout.ts";
import {
  type OutCheckedReply,
  type OutRequest,
  parseOutCheckedReply,
  parseOutRequest,
} from "./splitfs_out.ts";

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

/**
 * Find the project of a cwd without changing anything: the nearest ancestor
 * of realpath(cwd) (cwd included) with a `.git` entry, else the cwd itself.
 * Answered with `located`; the same rules as `create`.
 *
 * With `parent`, the cwd must lie inside that branch's fork
 * `<root>/.marsh/split/<parent.split>/<parent.label>`; `root` is then the
 * original project root (the directory holding `.marsh`) and `cwd` is
 * relative to the fork. Without it, a cwd inside `.marsh` is refused.
 */
export interface LocateRequest {
  readonly v: 1;
  readonly t: "locate";
  /** The caller's cwd, absolute. */
  readonly cwd: string;
  /** For a nested split: the creator branch whose fork holds `cwd`. */
  readonly parent?: SplitParent;
}

/**
 * Locate the project of `cwd` (as `locate`), create
 * `<root>/.marsh/split/<id>/` and take the snapshot. `progress` replies may
 * come before `created`.
 *
 * With `parent` (a nested split), the split is still a sibling under
 * `<root>/.marsh/split/`, its snapshot is taken of the parent's fork, its Git
 * metadata comes from the parent's admin dir `.admin/<parent.label>/`, and
 * its forks are always copies (`forks` is not consulted).
 */
export interface CreateRequest {
  readonly v: 1;
  readonly t: "create";
  readonly id: string;
  /** The caller's cwd, absolute. */
  readonly cwd: string;
  /** Locates the caller's global Git excludes. */
  readonly env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
  /** Snapshot ignored files too (`--with-ignored`). */
  readonly withIgnored: boolean;
  /** `auto` picks the cheapest fork strategy this host allows; `copy` forces copy forks. */
  readonly forks: ForkPolicy;
  /** For a nested split: the creator branch whose fork is the source (and holds `cwd`). */
  readonly parent?: SplitParent;
}

/** Which fork strategies a split may use (the `MARSH_FORKS` setting). */
export type ForkPolicy = "auto" | "copy";

/**
 * Which fork strategy new splits under `dir` would use here, and why: a real
 * tiny mount is tried in a scratch dir. Answered with `probed`.
 */
export interface ProbeRequest {
  readonly v: 1;
  readonly t: "probe";
  /** An existing directory, absolute (the project's `.marsh` or the control dir). */
  readonly dir: string;
  readonly forks: ForkPolicy;
}

/**
 * Delete the project's snapshot layers that no split on disk and no chain
 * head needs (`marsh gc`). Answered with `collected`.
 */
export interface GcRequest {
  readonly v: 1;
  readonly t: "gc";
  /** The caller's cwd, absolute: the project is located from it. */
  readonly cwd: string;
  readonly dryRun: boolean;
  /**
   * Layer ids to keep besides those the project's directories pin (the
   * checkpoint stacks the daemon's journal still needs); each keeps its
   * stack below it. At most {@linkcode MAX_GC_KEEP}.
   */
  readonly keep?: readonly string[];
  /**
   * Layer ids to keep each alone, without the layers below it: every layer
   * of the checkpoint stacks the journal names, which may stand on a
   * compacted bottom (docs/checkpoints.md "Compaction"). At most
   * {@linkcode MAX_GC_KEEP}.
   */
  readonly keepExact?: readonly string[];
}

/** At most this many layer ids in a `gc` request's `keep` (and in its `keepExact`). */
export const MAX_GC_KEEP = 100_000;

/** Fork a created split for one branch. `progress` replies may come before `forked`. */
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

/**
 * Unmount the overlays marsh made for a split whose directory was removed or
 * replaced (so it cannot be opened): those at and below
 * `<root>/.marsh/split/<id>` in the service's mount table, each verified
 * gone. Anything else mounted there refuses it, unmounting nothing. The split
 * must not be open in the service (`release` first). Answered with `ok`.
 */
export interface UnmountRequest {
  readonly v: 1;
  readonly t: "unmount";
  readonly id: string;
  /** The project root as `created` gave it. */
  readonly root: string;
}

/**
 * After a daemon restart: open an existing split's directory through
 * no-follow descriptors and check its and each listed fork's identity, so
 * `remove`, `publish`, `manifest` and `render` work on it. `fork` and
 * `capture` are refused (the forks are untrusted). Answered with `ok`, or
 * `replaced` when a directory is missing or not the one journaled.
 */
export interface ReopenRequest {
  readonly v: 1;
  readonly t: "reopen";
  readonly id: string;
  /** The project root as `created` or `located` gave it. */
  readonly root: string;
  /** The split dir's identity from `created`. */
  readonly identity: WireIdentity;
  /**
   * The forks still expected, with their identities and strategies from
   * `forked` (a `userns-overlay` fork's identity is its upper dir's).
   */
  readonly forks: readonly {
    readonly label: string;
    readonly identity: WireIdentity;
    readonly strategy?: string;
  }[];
  readonly git: boolean;
}

/** Every request the service accepts. */
export type SplitfsRequest =
  | DiffRequest
  | LocateRequest
  | CreateRequest
  | ForkRequest
  | CaptureRequest
  | RemoveRequest
  | ReleaseRequest
  | UnmountRequest
  | OutRequest
  | ReopenRequest
  | ProbeRequest
  | GcRequest
  | ExportObjectsRequest
  | OutReadRequest
  | ProcessRequest
  | PurgeRequest
  | BranchStatsRequest
  | CompareForkRequest
  | CompareOutRequest
  | CompareDropRequest
  | ResolveRequest
  | ExportRequest
  | SessionRequest
  | CheckoutRequest
  | DropForkRequest;

/** A piece of `diff` output, base64 so any bytes fit in JSON. */
export interface ChunkReply {
  readonly v: 1;
  readonly t: "chunk";
  readonly data: string;
}

/**
 * Copying in progress (`create`, `fork`): files and bytes so far. Sent at
 * most every 250 ms, before the final reply.
 */
export interface ProgressReply {
  readonly v: 1;
  readonly t: "progress";
  readonly files: number;
  readonly bytes: number;
}

/** A `diff` or `render` finished. */
export interface DoneReply {
  readonly v: 1;
  readonly t: "done";
  readonly changed: number;
}

/** Where a project is. */
export interface LocatedReply {
  readonly v: 1;
  readonly t: "located";
  /** The project root, absolute and canonical. */
  readonly root: string;
  /** The cwd relative to `root`, `/`-separated; `""` at the root. */
  readonly cwd: string;
}

/** A split was created. */
export interface CreatedReply {
  readonly v: 1;
  readonly t: "created";
  /** The project root, absolute and canonical. */
  readonly root: string;
  /** The cwd relative to `root`, `/`-separated; `""` at the root. */
  readonly cwd: string;
  readonly dir: string;
  readonly identity: WireIdentity;
  readonly git: { readonly head: string | null; readonly objects: readonly string[] } | null;
  readonly snapshot: {
    readonly files: number;
    readonly bytes: number;
    readonly ms: number;
    readonly strategy: string;
    /** The Git tree id of the snapshot (layered snapshots only). */
    readonly rootId: string | null;
    /** Layers the base stacks; 0 for a copied base. */
    readonly layers: number;
    /** Files written for this snapshot (all of them for a copied base). */
    readonly copied: number;
    /**
     * Why the project's previous snapshot layers were not reused (one was
     * changed after it was sealed, or is missing or unsealed), so this
     * snapshot copied the tree afresh; absent when they were, or when there
     * were none.
     */
    readonly untrusted?: string;
  };
  /** The fork strategy this split's forks will use, and why. */
  readonly forks: { readonly strategy: string; readonly reason: string };
  readonly withIgnored: boolean;
}

/** The answer to `probe`. */
export interface ProbedReply {
  readonly v: 1;
  readonly t: "probed";
  readonly strategy: string;
  readonly reason: string;
}

/** The answer to `gc`. */
export interface CollectedReply {
  readonly v: 1;
  readonly t: "collected";
  readonly root: string;
  /** Layer ids deleted (or that would be, with `dryRun`). */
  readonly removed: readonly string[];
  readonly bytes: number;
  /** Layers kept because a split or a chain head needs them. */
  readonly kept: number;
}

/** A fork was made. */
export interface ForkedReply {
  readonly v: 1;
  readonly t: "forked";
  readonly label: string;
  readonly path: string;
  readonly strategy: string;
  /**
   * What to journal and pass back in `reopen`: the fork root's identity;
   * for `userns-overlay`, that of its upper dir `.overlay/<label>/upper`,
   * since its mount lives only as long as the service's namespace (after a
   * restart the fork's name shows the bare mount point).
   */
  readonly identity: WireIdentity;
  readonly ms: number;
}

/**
 * A fork was captured. With `rejected`, its Git metadata failed verification
 * (the reason, e.g. `admin file changed: config (core.fsmonitor)`): the patch
 * was still written, the fork kept with that metadata set aside; the branch
 * is `rejected: <reason>` and untrusted.
 */
export interface CapturedReply {
  readonly v: 1;
  readonly t: "captured";
  readonly label: string;
  readonly files: number;
  readonly changedBytes: number;
  readonly ms: number;
  readonly rejected?: string;
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
  | ProgressReply
  | DoneReply
  | LocatedReply
  | CreatedReply
  | ForkedReply
  | CapturedReply
  | ProbedReply
  | CollectedReply
  | PurgedReply
  | ExportedReply
  | ProcessesReply
  | OutCheckedReply
  | ResolveReply
  | ExportReply
  | SessionReply
  | CheckoutReply
  | BranchStatsReply
  | CompareForkedReply
  | OkReply
  | ErrorReply;

export { ProtocolError };

function forkPolicy(x: Record<string, unknown>): ForkPolicy {
  if (x.forks !== "auto" && x.forks !== "copy") {
    throw new ProtocolError(`malformed ${String(x.t)} frame: forks must be "auto" or "copy"`);
  }
  return x.forks;
}

const DECIMAL = /^(0|[1-9][0-9]{0,19})$/;

function wireIdentity(v: unknown, where: string): WireIdentity {
  if (
    !Array.isArray(v) || v.length !== 2 ||
    !v.every((p) => typeof p === "string" && DECIMAL.test(p))
  ) {
    throw new ProtocolError(`malformed ${where}: identity must be two decimal strings`);
  }
  return [v[0] as string, v[1] as string];
}

/**
 * A frame as it goes on the wire: the resolution frames carry plans and
 * signatures as their JSON documents; every other frame is its own wire form.
 */
export function splitfsToWire(f: SplitfsRequest | SplitfsReply): unknown {
  if (CHECKOUT_REQUESTS.has(f.t) || CHECKOUT_REPLIES.has(f.t)) {
    return checkoutFrameToWire(f as CheckoutRequest | CheckoutReply);
  }
  return RESOLVE_REQUESTS.has(f.t) || RESOLVE_REPLIES.has(f.t)
    ? resolveFrameToWire(f as ResolveRequest | ResolveReply)
    : f;
}

/** Validates a request frame. */
export function parseSplitfsRequest(x: unknown): SplitfsRequest {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  if (typeof x.t === "string" && RESOLVE_REQUESTS.has(x.t)) return parseResolveRequest(x);
  if (typeof x.t === "string" && DISCARD_REQUESTS.has(x.t)) return parseDiscardRequest(x);
  if (typeof x.t === "string" && EXPORT_REQUESTS.has(x.t)) return parseExportRequest(x);
  if (typeof x.t === "string" && SESSION_REQUESTS.has(x.t)) return parseSessionRequest(x);
  if (typeof x.t === "string" && CHECKOUT_REQUESTS.has(x.t)) return parseCheckoutRequest(x);
  switch (x.t) {
    case "diff":
      if (typeof x.files !== "boolean") throw new ProtocolError("malformed diff frame: files");
      return { v: 1, t: "diff", old: str(x, "old"), new: str(x, "new"), files: x.files };
    case "locate":
      return { v: 1, t: "locate", cwd: absPath(x, "cwd"), ...optParent(x) };
    case "create": {
      if (!isObject(x.env)) throw new ProtocolError("malformed create frame: env");
      const env = {
        HOME: optStr(x.env, "HOME"),
        XDG_CONFIG_HOME: optStr(x.env, "XDG_CONFIG_HOME"),
      };
      return {
        v: 1,
        t: "create",
        id: str(x, "id"),
        cwd: absPath(x, "cwd"),
        env,
        withIgnored: bool(x, "withIgnored"),
        forks: forkPolicy(x),
        ...optParent(x),
      };
    }
    case "probe":
      return { v: 1, t: "probe", dir: absPath(x, "dir"), forks: forkPolicy(x) };
    case "gc": {
      const ids = (key: "keep" | "keepExact"): string[] | undefined => {
        const v = x[key];
        if (
          v !== undefined &&
          (!Array.isArray(v) || v.length > MAX_GC_KEEP || !v.every(isLayerId))
        ) {
          throw new ProtocolError(
            `malformed gc frame: ${key} must be a list of at most ${MAX_GC_KEEP} layer ids`,
          );
        }
        return v;
      };
      const keep = ids("keep"), keepExact = ids("keepExact");
      return {
        v: 1,
        t: "gc",
        cwd: absPath(x, "cwd"),
        dryRun: bool(x, "dryRun"),
        ...(keep === undefined ? {} : { keep }),
        ...(keepExact === undefined ? {} : { keepExact }),
      };
    }
    case "publish":
    case "manifest":
    case "out-check":
    case "render":
      return parseOutRequest(x);
    case "reopen":
      return {
        v: 1,
        t: "reopen",
        id: str(x, "id"),
        root: absPath(x, "root"),
        identity: wireIdentity(x.identity, "reopen frame"),
        forks: list(x, "forks").map((f) => {
          const strategy = optStr(f, "strategy");
          return {
            label: str(f, "label"),
            identity: wireIdentity(f.identity, "reopen frame"),
            ...(strategy === undefined ? {} : { strategy }),
          };
        }),
        git: bool(x, "git"),
      };
    case "fork":
    case "capture":
      return { v: 1, t: x.t, id: str(x, "id"), label: str(x, "label") };
    case "export-objects":
      return parseExportObjectsRequest(x);
    case "branch-stats":
      return parseBranchStatsRequest(x);
    case "compare-fork":
      return parseCompareForkRequest(x);
    case "compare-out":
      return parseCompareOutRequest(x);
    case "compare-drop":
      return parseCompareDropRequest(x);
    case "remove":
    case "release":
      return { v: 1, t: x.t, id: str(x, "id") };
    case "unmount":
      return { v: 1, t: "unmount", id: str(x, "id"), root: absPath(x, "root") };
    case "proc-starts":
    case "proc-kill":
      return parseProcessRequest(x);
    case "out-read":
      return parseOutReadRequest(x);
    case "purge":
      return parsePurgeRequest(x);
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

function identity(x: Record<string, unknown>): WireIdentity {
  return wireIdentity(x.identity, `${String(x.t)} reply`);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Validates a reply frame. */
export function parseSplitfsReply(x: unknown): SplitfsReply {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
  if (typeof x.t === "string" && RESOLVE_REPLIES.has(x.t)) return parseResolveReply(x);
  if (typeof x.t === "string" && EXPORT_REPLIES.has(x.t)) return parseExportReply(x);
  if (typeof x.t === "string" && SESSION_REPLIES.has(x.t)) return parseSessionReply(x);
  if (typeof x.t === "string" && CHECKOUT_REPLIES.has(x.t)) return parseCheckoutReply(x);
  switch (x.t) {
    case "chunk":
      // A chunk carries up to 256 KiB, so it has the frame's bound, not a string's.
      if (typeof x.data !== "string" || !BASE64.test(x.data)) {
        throw new ProtocolError("malformed chunk reply: data must be base64");
      }
      return { v: 1, t: "chunk", data: x.data };
    case "progress":
      return { v: 1, t: "progress", files: num(x, "files"), bytes: num(x, "bytes") };
    case "done":
      return { v: 1, t: "done", changed: num(x, "changed") };
    case "located":
      return { v: 1, t: "located", root: str(x, "root"), cwd: str(x, "cwd") };
    case "created": {
      const snap = x.snapshot;
      if (!isObject(snap)) throw new ProtocolError("malformed created reply: snapshot");
      if (!isObject(x.forks)) throw new ProtocolError("malformed created reply: forks");
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
        root: str(x, "root"),
        cwd: str(x, "cwd"),
        dir: str(x, "dir"),
        identity: identity(x),
        git,
        snapshot: {
          files: num(snap, "files"),
          bytes: num(snap, "bytes"),
          ms: num(snap, "ms"),
          strategy: str(snap, "strategy"),
          rootId: snap.rootId === null ? null : str(snap, "rootId"),
          layers: num(snap, "layers"),
          copied: num(snap, "copied"),
          ...(snap.untrusted === undefined ? {} : { untrusted: str(snap, "untrusted") }),
        },
        forks: { strategy: str(x.forks, "strategy"), reason: str(x.forks, "reason") },
        withIgnored: bool(x, "withIgnored"),
      };
    }
    case "probed":
      return { v: 1, t: "probed", strategy: str(x, "strategy"), reason: str(x, "reason") };
    case "collected": {
      const removed = x.removed;
      if (!Array.isArray(removed) || !removed.every((r) => typeof r === "string")) {
        throw new ProtocolError("malformed collected reply: removed");
      }
      return {
        v: 1,
        t: "collected",
        root: str(x, "root"),
        removed,
        bytes: num(x, "bytes"),
        kept: num(x, "kept"),
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
        ...(x.rejected === undefined ? {} : { rejected: str(x, "rejected") }),
      };
    case "exported":
      return parseExportedReply(x);
    case "branch-stats":
      return parseBranchStatsReply(x);
    case "compare-forked":
      return parseCompareForkedReply(x);
    case "out-checked":
      return parseOutCheckedReply(x);
    case "ok":
      return { v: 1, t: "ok" };
    case "proc-starts":
      return parseProcessesReply(x);
    case "purged":
      return parsePurgedReply(x);
    case "error":
      if (
        x.kind !== "input" && x.kind !== "rejected" && x.kind !== "replaced" &&
        x.kind !== "internal"
      ) break;
      return { v: 1, t: "error", kind: x.kind, message: str(x, "message") };
  }
  throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
}
