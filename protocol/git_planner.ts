/**
 * The git planner entrypoint's contract (`resolve/main.ts`; docs/resolution.md,
 * "Where Git runs"): the daemon writes one request, as JSON, on its stdin and
 * closes it; the planner writes one line on stdout and exits. Exit 0: the
 * line is the plan, a `marsh.merge.plan/v1` document. Otherwise the line is
 * `{"error": "..."}`: {@linkcode EXIT_BAD_REQUEST} for a request it cannot
 * read, {@linkcode EXIT_FAILED} when planning failed.
 *
 * @module
 */

import { type MergePlan, PlanError } from "../model/resolution_plan.ts";
import {
  parsePlanJson,
  parseSignatureJson,
  signatureToJson,
} from "../model/resolution_plan_json.ts";
import { ProtocolError } from "./protocol_error.ts";
import type { PathInputs } from "./splitfs_resolve.ts";
import { absPath, isObject } from "./splitfs_fields.ts";

/** The planner refuses a request larger than this (bytes of JSON). */
export const MAX_PLANNER_REQUEST = 256 * 1024 * 1024;

/** Exit status: the request could not be read; nothing was written. */
export const EXIT_BAD_REQUEST = 2;
/** Exit status: planning failed (Git, a missing blob, inputs no tree can hold). */
export const EXIT_FAILED = 1;

/** What the planner is asked: the service's merge inputs, and where it may make its scratch repository. */
export interface GitPlanRequest {
  readonly v: 1;
  /** The split's `store.git/objects`, absolute: the blobs are read and the trees written there. */
  readonly objects: string;
  /** An existing dir, absolute, the planner may write (its scratch repository goes there). */
  readonly tmp: string;
  readonly paths: readonly PathInputs[];
}

/** The request as JSON: signatures as the plan document writes them. */
export function gitPlanRequestToJson(r: GitPlanRequest): Record<string, unknown> {
  return {
    v: 1,
    objects: r.objects,
    tmp: r.tmp,
    paths: r.paths.map((p) => ({
      ...p,
      base: signatureToJson(p.base),
      source: signatureToJson(p.source),
      branch: signatureToJson(p.branch),
    })),
  };
}

function signature(x: unknown, where: string) {
  try {
    return parseSignatureJson(x, where);
  } catch (error) {
    if (error instanceof PlanError) {
      throw new ProtocolError(`malformed git planner request: ${error.message}`);
    }
    throw error;
  }
}

/**
 * Validates a request (paths are checked by the planner itself, which
 * names the bad one).
 *
 * @throws {ProtocolError} naming the malformed field
 */
export function parseGitPlanRequest(x: unknown): GitPlanRequest {
  const bad = (what: string): never => {
    throw new ProtocolError(`malformed git planner request: ${what}`);
  };
  if (!isObject(x)) return bad("not a JSON object");
  if (x.v !== 1) bad(`unknown version ${JSON.stringify(x.v)}`);
  const o = { ...x, t: "git planner request" };
  const objects = absPath(o, "objects");
  const tmp = absPath(o, "tmp");
  if (!Array.isArray(x.paths)) return bad("paths must be a list");
  const paths = x.paths.map((p: unknown, i): PathInputs => {
    const where = `paths[${i}]`;
    if (!isObject(p)) return bad(`${where} must be an object`);
    if (typeof p.path !== "string") bad(`${where}.path must be a string`);
    if (p.blocked !== undefined && typeof p.blocked !== "string") {
      bad(`${where}.blocked must be a string`);
    }
    return {
      path: p.path as string,
      base: signature(p.base, `${where}.base`),
      source: signature(p.source, `${where}.source`),
      branch: signature(p.branch, `${where}.branch`),
      ...(p.blocked === undefined ? {} : { blocked: p.blocked as string }),
    };
  });
  return { v: 1, objects, tmp, paths };
}

/** The planner failed, or said something that is neither a plan nor an error. */
export class GitPlannerError extends Error {
  override name = "GitPlannerError";
}

/**
 * Reads what the planner printed on stdout with its exit status: the plan,
 * or its error as a {@linkcode GitPlannerError}.
 *
 * @throws {GitPlannerError} with the planner's message, or saying what was wrong with its output
 */
export function parseGitPlanOutput(stdout: string, code: number): MergePlan {
  let doc: unknown;
  try {
    doc = JSON.parse(stdout);
  } catch {
    // Not JSON: the caller adds the planner's stderr.
    throw new GitPlannerError(
      `the git planner exited ${code} without a JSON answer${
        stdout.trim() === "" ? "" : `: ${JSON.stringify(stdout.trim().slice(0, 200))}`
      }`,
    );
  }
  if (code !== 0) {
    const error = isObject(doc) && typeof doc.error === "string" ? doc.error : null;
    throw new GitPlannerError(
      error === null ? `the git planner exited ${code}` : `the git planner failed: ${error}`,
    );
  }
  try {
    return parsePlanJson(doc);
  } catch (error) {
    if (!(error instanceof PlanError)) throw error;
    throw new GitPlannerError(`the git planner's plan is malformed: ${error.message}`, {
      cause: error,
    });
  }
}
