/**
 * The splitfs frames that resolve a branch (part of `protocol/splitfs.ts`;
 * docs/resolution.md): the inputs of a `--git` merge plan, the plans the
 * service computes itself (`--filesystem`, `--paths`, promote), and the one
 * transactional applier (apply, undo, recovery). The service is the only
 * process that writes a project tree; the daemon journals each resolution
 * around these frames.
 *
 * @module
 */

import { labelProblem } from "../model/layout.ts";
import { type MergePlan, PlanError, type Signature } from "../model/resolution_plan.ts";
import {
  parsePlanJson,
  parseSignatureJson,
  type PlanJson,
  planToJson,
  type SignatureJson,
  signatureToJson,
} from "../model/resolution_plan_json.ts";
import { ProtocolError } from "./protocol_error.ts";
import {
  absPath,
  isObject,
  list,
  num,
  optParent,
  type SplitParent,
  str,
} from "./splitfs_fields.ts";

/** At most this many paths in a `--paths` request, a refusal's list, or promote's source changes. */
export const MAX_LISTED_PATHS = 10_000;

/**
 * For a `--git` merge of branch `label` of split `id`: every path its
 * `out/<label>/diff.patch` touches, with the base's and the branch's state
 * as the patch gives them (their blobs are in the split's `store.git`), and
 * the source's state now, read without following a symlink; each source
 * file's blob is written into `store.git` so Git can merge it. Answered
 * with `merge-inputs`.
 */
export interface MergeInputsRequest {
  readonly v: 1;
  readonly t: "merge-inputs";
  readonly id: string;
  readonly label: string;
  /** A nested split's creator branch, as journaled: the source is its fork. */
  readonly parent?: SplitParent;
}

/** One path of a `--git` merge's inputs. */
export interface PathInputs {
  readonly path: string;
  readonly base: Signature;
  readonly branch: Signature;
  readonly source: Signature;
  /**
   * Set when the source cannot hold the branch's state at this path whatever
   * the merge says: an ancestor is a file or a symlink, not a directory; or
   * the path is a directory in the source. The planner makes it a conflict
   * with this reason.
   */
  readonly blocked?: string;
}

/**
 * The `--git` planner (`daemon/git_planner.ts`, `runGitPlanner`): the merge
 * of a branch's inputs, computed with Git's own machinery. Throws, with a
 * message that says what to use instead, when it cannot plan.
 */
export type GitPlanner = (inputs: MergeInputsReply) => Promise<MergePlan>;

/** The answer to `merge-inputs`. */
export interface MergeInputsReply {
  readonly v: 1;
  readonly t: "merge-inputs";
  /** The split's `store.git/objects`, absolute: every blob the inputs name is there. */
  readonly objects: string;
  /** In UTF-8 byte order of `path`. */
  readonly paths: readonly PathInputs[];
}

/**
 * A plan the service computes from the trees on disk: `filesystem` (every
 * persistent path branch `label` changed, ignored ones too when the split
 * snapshotted them, by the conservative three-way rule), `paths` (the same,
 * narrowed to `paths`), or `promote` (the project's tree becomes the
 * branch's result wholesale). Answered with `planned`.
 */
export interface PlanFsRequest {
  readonly v: 1;
  readonly t: "plan-fs";
  readonly id: string;
  readonly label: string;
  readonly scope: "filesystem" | "paths" | "promote";
  /**
   * For `paths`: relative to the project root (the caller resolved them
   * against the user's cwd and refused one outside), normalised, at most
   * {@linkcode MAX_LISTED_PATHS}. A directory stands for everything under it.
   */
  readonly paths?: readonly string[];
  readonly parent?: SplitParent;
}

/** The answer to `plan-fs`. */
export interface PlannedReply {
  readonly v: 1;
  readonly t: "planned";
  readonly plan: MergePlan;
  /**
   * For `promote`: the paths the source changed since the snapshot (which
   * promote retires), the first {@linkcode MAX_LISTED_PATHS} in UTF-8 byte
   * order; empty for the other scopes.
   */
  readonly sourceChanges: readonly string[];
  /** How many more source changes there are than listed. */
  readonly sourceChangesMore: number;
}

/**
 * Apply a clean plan to the project `root` as resolution `resolution` (an id
 * the daemon made and journaled first), all or nothing. A taken file's
 * bytes come from split `id`'s `store.git` (`bytes: "store"`) or from
 * branch `label`'s fork (`bytes: "branch"`). Answered with `applied`, or
 * `apply-refused` when nothing was changed because the project moved on.
 */
export interface ApplyPlanRequest {
  readonly v: 1;
  readonly t: "apply-plan";
  readonly id: string;
  readonly label: string;
  /** The project root (or, for a nested split, the creator's fork) as `created` gave it. */
  readonly root: string;
  readonly resolution: string;
  readonly plan: MergePlan;
  readonly parent?: SplitParent;
}

/** Put back what resolution `resolution` changed in `root`, as resolution `by`. Answered with `applied` or `apply-refused`. */
export interface UndoResolutionRequest {
  readonly v: 1;
  readonly t: "undo-resolution";
  readonly root: string;
  readonly resolution: string;
  readonly by: string;
}

/**
 * Finish or roll back every resolution of `root` that a crash interrupted,
 * before any new one runs (the service also does this when it first locks
 * a project). Answered with `recovered`.
 */
export interface RecoverResolutionsRequest {
  readonly v: 1;
  readonly t: "recover-resolutions";
  readonly root: string;
}

/** One changed path of a refusal: what the plan expected there, and what was found. */
export interface ChangedPath {
  readonly path: string;
  readonly expected: string;
  readonly found: string;
}

/** The answer to `apply-plan` and `undo-resolution` when done. */
export interface AppliedReply {
  readonly v: 1;
  readonly t: "applied";
  readonly resolution: string;
  /** Paths changed (the plan's takes and deletes, and the directories they needed). */
  readonly changed: number;
}

/** Nothing was changed: the paths listed changed since the plan (or since the resolution, for an undo). */
export interface ApplyRefusedReply {
  readonly v: 1;
  readonly t: "apply-refused";
  readonly message: string;
  readonly changed: readonly ChangedPath[];
}

/**
 * The answer to `recover-resolutions`: every resolution directory of the
 * root and the state it was brought to, a finished one as `post`. One that
 * is not listed has no directory: it never began, or was rolled back.
 */
export interface RecoveredReply {
  readonly v: 1;
  readonly t: "recovered";
  readonly resolutions: readonly { readonly id: string; readonly state: "pre" | "post" }[];
}

/** Every request of this module. */
export type ResolveRequest =
  | MergeInputsRequest
  | PlanFsRequest
  | ApplyPlanRequest
  | UndoResolutionRequest
  | RecoverResolutionsRequest;

/** Every reply of this module. */
export type ResolveReply =
  | MergeInputsReply
  | PlannedReply
  | AppliedReply
  | ApplyRefusedReply
  | RecoveredReply;

/** The frame types of {@linkcode ResolveRequest}. */
export const RESOLVE_REQUESTS: ReadonlySet<string> = new Set([
  "merge-inputs",
  "plan-fs",
  "apply-plan",
  "undo-resolution",
  "recover-resolutions",
]);

/** The frame types of {@linkcode ResolveReply}. */
export const RESOLVE_REPLIES: ReadonlySet<string> = new Set([
  "merge-inputs",
  "planned",
  "applied",
  "apply-refused",
  "recovered",
]);

function label(x: Record<string, unknown>): string {
  const l = str(x, "label");
  const problem = labelProblem(l);
  if (problem !== null) throw new ProtocolError(`malformed ${String(x.t)} frame: ${problem}`);
  return l;
}

function pathList(x: Record<string, unknown>, key: string): string[] {
  const v = x[key];
  if (
    !Array.isArray(v) || v.length > MAX_LISTED_PATHS || !v.every((p) => typeof p === "string")
  ) {
    throw new ProtocolError(
      `malformed ${String(x.t)} frame: ${key} must be a list of at most ${MAX_LISTED_PATHS} paths`,
    );
  }
  return v;
}

/**
 * `merge-inputs`' paths: as many as the patch touches (`list` stops at a
 * split's branch count); the frame's size bounds them.
 */
function inputList(x: Record<string, unknown>): Record<string, unknown>[] {
  const v = x.paths;
  if (!Array.isArray(v) || !v.every(isObject)) {
    throw new ProtocolError(`malformed merge-inputs frame: paths must be a list of objects`);
  }
  return v;
}

function plan(x: Record<string, unknown>): MergePlan {
  try {
    return parsePlanJson(x.plan);
  } catch (error) {
    if (error instanceof PlanError) {
      throw new ProtocolError(`malformed ${String(x.t)} frame: ${error.message}`);
    }
    throw error;
  }
}

function signature(x: unknown, where: string): Signature {
  try {
    return parseSignatureJson(x, where);
  } catch (error) {
    if (error instanceof PlanError) throw new ProtocolError(`malformed frame: ${error.message}`);
    throw error;
  }
}

/** Validates a request of this module (its `v` is checked by the caller; `t` is one of {@linkcode RESOLVE_REQUESTS}). */
export function parseResolveRequest(x: Record<string, unknown>): ResolveRequest {
  switch (x.t) {
    case "merge-inputs":
      return { v: 1, t: "merge-inputs", id: str(x, "id"), label: label(x), ...optParent(x) };
    case "plan-fs": {
      const scope = x.scope;
      if (scope !== "filesystem" && scope !== "paths" && scope !== "promote") {
        throw new ProtocolError(`malformed plan-fs frame: unknown scope ${JSON.stringify(scope)}`);
      }
      if ((scope === "paths") !== (x.paths !== undefined)) {
        throw new ProtocolError(`malformed plan-fs frame: paths go with the paths scope only`);
      }
      return {
        v: 1,
        t: "plan-fs",
        id: str(x, "id"),
        label: label(x),
        scope,
        ...(scope === "paths" ? { paths: pathList(x, "paths") } : {}),
        ...optParent(x),
      };
    }
    case "apply-plan":
      return {
        v: 1,
        t: "apply-plan",
        id: str(x, "id"),
        label: label(x),
        root: absPath(x, "root"),
        resolution: str(x, "resolution"),
        plan: plan(x),
        ...optParent(x),
      };
    case "undo-resolution":
      return {
        v: 1,
        t: "undo-resolution",
        root: absPath(x, "root"),
        resolution: str(x, "resolution"),
        by: str(x, "by"),
      };
    case "recover-resolutions":
      return { v: 1, t: "recover-resolutions", root: absPath(x, "root") };
    default:
      throw new ProtocolError(`unknown splitfs frame type ${JSON.stringify(x.t)}`);
  }
}

/** Validates a reply of this module (`t` is one of {@linkcode RESOLVE_REPLIES}). */
export function parseResolveReply(x: Record<string, unknown>): ResolveReply {
  switch (x.t) {
    case "merge-inputs":
      return {
        v: 1,
        t: "merge-inputs",
        objects: absPath(x, "objects"),
        paths: inputList(x).map((p, i) => {
          const where = `paths[${i}]`;
          const blocked = p.blocked;
          if (blocked !== undefined && typeof blocked !== "string") {
            throw new ProtocolError(`malformed merge-inputs frame: ${where}.blocked`);
          }
          return {
            path: str(p, "path"),
            base: signature(p.base, `${where}.base`),
            branch: signature(p.branch, `${where}.branch`),
            source: signature(p.source, `${where}.source`),
            ...(blocked !== undefined ? { blocked } : {}),
          };
        }),
      };
    case "planned":
      return {
        v: 1,
        t: "planned",
        plan: plan(x),
        sourceChanges: pathList(x, "sourceChanges"),
        sourceChangesMore: num(x, "sourceChangesMore"),
      };
    case "applied":
      return {
        v: 1,
        t: "applied",
        resolution: str(x, "resolution"),
        changed: num(x, "changed"),
      };
    case "apply-refused":
      return {
        v: 1,
        t: "apply-refused",
        message: str(x, "message"),
        changed: list(x, "changed").map((c) => ({
          path: str(c, "path"),
          expected: str(c, "expected"),
          found: str(c, "found"),
        })),
      };
    case "recovered":
      return {
        v: 1,
        t: "recovered",
        resolutions: list(x, "resolutions").map((r) => {
          const state = r.state;
          if (state !== "pre" && state !== "post") {
            throw new ProtocolError(`malformed recovered frame: state must be "pre" or "post"`);
          }
          return { id: str(r, "id"), state };
        }),
      };
    default:
      throw new ProtocolError(`unknown splitfs reply type ${JSON.stringify(x.t)}`);
  }
}

/**
 * The wire form of a request or reply of this module: plans and signatures
 * as their JSON documents (`marsh.merge.plan/v1`). Frames are JSON; a
 * `MergePlan` or `Signature` object is not its own wire form.
 */
export function resolveFrameToWire(f: ResolveRequest | ResolveReply): Record<string, unknown> {
  switch (f.t) {
    case "apply-plan":
    case "planned":
      return { ...f, plan: planToJson(f.plan) };
    case "merge-inputs":
      if (!("paths" in f)) return { ...f };
      return {
        ...f,
        paths: f.paths.map((p) => ({
          ...p,
          base: signatureToJson(p.base),
          branch: signatureToJson(p.branch),
          source: signatureToJson(p.source),
        })),
      };
    default:
      return { ...f };
  }
}

/** Re-exported for callers that build frames. */
export type { PlanJson, SignatureJson };
