/**
 * The frames between a caller (the CLI for `marsh diff`, the daemon for
 * splits) and the split-filesystem service (`splitfs/main.ts`) over the
 * service's stdin and stdout. Requests are answered in order, one at a time.
 *
 * @module
 */

import { labelProblem, splitIdProblem } from "../splitfs/layout.ts";
import {
  parseProcessesReply,
  parseProcessRequest,
  type ProcessesReply,
  type ProcessRequest,
} from "./processes.ts";
import { ProtocolError } from "./protocol_error.ts";

/** Bumped when a frame's shape changes incompatibly. */
export const SPLITFS_PROTOCOL = 1;

/** `(dev, ino)` as decimal strings: JSON has no 64-bit integers. */
export type WireIdentity = readonly [string, string];

/** Branches per split (spec 000 §4); bounds `render` and `reopen`. */
export const MAX_SPLIT_BRANCHES = 16;

/** The largest `out/manifest.json` the service writes. */
export const MAX_MANIFEST_BYTES = 1024 * 1024;

/** Compare two directories and stream the patch (or the files list). */
export interface DiffRequest {
  readonly v: 1;
  readonly t: "diff";
  readonly old: string;
  readonly new: string;
  readonly files: boolean;
}

/**
 * The creator branch of a nested split (spec 000 §2, ChildFromParent): its
 * fork `<root>/.marsh/split/<split>/<label>` is the snapshot source.
 */
export interface SplitParent {
  /** The creator branch's split id. */
  readonly split: string;
  /** The creator branch's label in that split. */
  readonly label: string;
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
}

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
 * Stream the text rendering for a consumer (spec 000 §13 "Rendering") as
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

/**
 * Before join's consumer runs (and before a bare join's rendering): write
 * the blobs the patches of `labels` name (the `index` lines of each
 * `out/<label>/diff.patch`) from the split's `store.git` into the objects
 * dir the consumer's Git uses, so what `git apply --3way` stages outlives
 * the split. That is the project's `.git/objects` for a root split, and the
 * creator fork's `.admin/<parent.label>/objects` for a nested one (`parent`,
 * as journaled). Each object is verified against its id; existing ones are
 * left untouched. Answered with `exported`.
 */
export interface ExportObjectsRequest {
  readonly v: 1;
  readonly t: "export-objects";
  readonly id: string;
  /** The branches whose patches to read, at most {@linkcode MAX_SPLIT_BRANCHES}. */
  readonly labels: readonly string[];
  /** A nested split's creator branch, as journaled. */
  readonly parent?: SplitParent;
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
  | PublishRequest
  | ManifestRequest
  | OutCheckRequest
  | RenderRequest
  | ReopenRequest
  | ProbeRequest
  | GcRequest
  | ExportObjectsRequest
  | ProcessRequest;

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

/** The answer to `out-check`: the branches that lack files, with the names they lack. */
export interface OutCheckedReply {
  readonly v: 1;
  readonly t: "out-checked";
  readonly missing: readonly { readonly label: string; readonly files: readonly string[] }[];
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

/** The answer to `export-objects`. */
export interface ExportedReply {
  readonly v: 1;
  readonly t: "exported";
  /**
   * The objects dir written to, absolute; `null` when there was nothing to
   * do (a SHA-256 repository: the patches' ids are SHA-1).
   */
  readonly target: string | null;
  /** Objects written. */
  readonly written: number;
  /** Objects the target already held (left untouched). */
  readonly present: number;
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
  | ExportedReply
  | ProcessesReply
  | OutCheckedReply
  | OkReply
  | ErrorReply;

export { ProtocolError };

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

function absPath(x: Record<string, unknown>, key: string): string {
  const v = str(x, key);
  if (!v.startsWith("/") || v.includes("\0")) {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be an absolute path`);
  }
  return v;
}

function nullablePath(x: Record<string, unknown>, key: string): string | null {
  return x[key] === null ? null : absPath(x, key);
}

function bool(x: Record<string, unknown>, key: string): boolean {
  const v = x[key];
  if (typeof v !== "boolean") {
    throw new ProtocolError(`malformed ${String(x.t)} frame: ${key} must be a boolean`);
  }
  return v;
}

/** An optional `parent`: a split id and a label, checked as the engine checks them. */
function optParent(x: Record<string, unknown>): { parent?: SplitParent } {
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

function list(x: Record<string, unknown>, key: string): Record<string, unknown>[] {
  const v = x[key];
  if (!Array.isArray(v) || v.length > MAX_SPLIT_BRANCHES || !v.every(isObject)) {
    throw new ProtocolError(
      `malformed ${
        String(x.t)
      } frame: ${key} must be a list of at most ${MAX_SPLIT_BRANCHES} objects`,
    );
  }
  return v;
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

/** Validates a request frame. */
export function parseSplitfsRequest(x: unknown): SplitfsRequest {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
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
    case "gc":
      return { v: 1, t: "gc", cwd: absPath(x, "cwd"), dryRun: bool(x, "dryRun") };
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
    case "export-objects": {
      const labels = x.labels;
      if (
        !Array.isArray(labels) || labels.length > MAX_SPLIT_BRANCHES ||
        !labels.every((l) => typeof l === "string" && labelProblem(l) === null)
      ) {
        throw new ProtocolError(
          `malformed export-objects frame: labels must be a list of at most ${MAX_SPLIT_BRANCHES} labels`,
        );
      }
      return { v: 1, t: "export-objects", id: str(x, "id"), labels, ...optParent(x) };
    }
    case "remove":
    case "release":
      return { v: 1, t: x.t, id: str(x, "id") };
    case "unmount":
      return { v: 1, t: "unmount", id: str(x, "id"), root: absPath(x, "root") };
    case "proc-starts":
    case "proc-kill":
      return parseProcessRequest(x);
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
  return wireIdentity(x.identity, `${String(x.t)} reply`);
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** Validates a reply frame. */
export function parseSplitfsReply(x: unknown): SplitfsReply {
  if (!isObject(x) || x.v !== SPLITFS_PROTOCOL) {
    throw new ProtocolError("unsupported frame version");
  }
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
      return {
        v: 1,
        t: "exported",
        target: x.target === null ? null : str(x, "target"),
        written: num(x, "written"),
        present: num(x, "present"),
      };
    case "out-checked":
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
    case "ok":
      return { v: 1, t: "ok" };
    case "proc-starts":
      return parseProcessesReply(x);
    case "error":
      if (
        x.kind !== "input" && x.kind !== "rejected" && x.kind !== "replaced" &&
        x.kind !== "internal"
      ) break;
      return { v: 1, t: "error", kind: x.kind, message: str(x, "message") };
  }
  throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
}
