/**
 * The splitfs frames of `marsh checkout` (part of `protocol/splitfs.ts`;
 * docs/checkpoints.md "Checkout and commit"): the plan that makes the
 * project's working tree a checkpoint's root, and its apply through the
 * transactional applier of docs/resolution.md. The daemon names the stacks
 * from its journal and journals the resolution between the two frames.
 * An apply is answered like `apply-plan` (`applied`, `apply-refused`).
 *
 * @module
 */

import { type MergePlan, PlanError } from "../model/resolution_plan.ts";
import { parsePlanJson, planToJson } from "../model/resolution_plan_json.ts";
import { ProtocolError } from "./protocol_error.ts";
import { absPath, bool, isObject, num, optStr, str } from "./splitfs_fields.ts";
import { MAX_LISTED_PATHS } from "./splitfs_resolve.ts";
import { MAX_EXPORT_LAYERS } from "./splitfs_export.ts";

const LAYER = /^[a-z0-9]{8,24}$/;
const ROOT_ID = /^[0-9a-f]{40}$/;

/** A sealed stack and its root id (checked against its top layer's seal). */
export interface StackRef {
  /** Bottom first; empty: the empty tree. */
  readonly layers: readonly string[];
  readonly rootId: string;
}

/**
 * Plan the checkout of `target` over the project `root`: every path whose
 * kind, permission bits or content differs between the working tree (the
 * paths a session's snapshot covers; ignored ones only `withIgnored`) and
 * the target, and the paths the project changed since `base` (where its
 * line began). Writes nothing. Answered with `checkout-planned`.
 */
export interface CheckoutPlanRequest {
  readonly v: 1;
  readonly t: "checkout-plan";
  /** The project root, absolute and canonical. */
  readonly root: string;
  readonly target: StackRef;
  readonly base: StackRef;
  readonly withIgnored: boolean;
  /** Locates the caller's global Git excludes, as `create` does (absent: none). */
  readonly env?: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
}

/** The answer to `checkout-plan`. */
export interface CheckoutPlannedReply {
  readonly v: 1;
  readonly t: "checkout-planned";
  /** Scope `checkout`; each taken file's bytes are the target stack's. */
  readonly plan: MergePlan;
  /** The first {@linkcode MAX_LISTED_PATHS} paths the project changed since the base. */
  readonly projectChanges: readonly string[];
  readonly projectChangesMore: number;
}

/**
 * Apply a clean checkout plan to `root` as resolution `resolution` (journaled
 * first), each taken file copied from the `target` stack's layers and
 * checked against its blob id. Answered with `applied` or `apply-refused`.
 */
export interface CheckoutApplyRequest {
  readonly v: 1;
  readonly t: "checkout-apply";
  readonly root: string;
  readonly target: StackRef;
  readonly resolution: string;
  readonly plan: MergePlan;
}

/** The requests of this module. */
export type CheckoutRequest = CheckoutPlanRequest | CheckoutApplyRequest;
/** The replies of this module (an apply's are `protocol/splitfs_resolve.ts`'s). */
export type CheckoutReply = CheckoutPlannedReply;

/** The request types this module parses. */
export const CHECKOUT_REQUESTS: ReadonlySet<string> = new Set(["checkout-plan", "checkout-apply"]);
/** The reply types this module parses. */
export const CHECKOUT_REPLIES: ReadonlySet<string> = new Set(["checkout-planned"]);

function stack(x: Record<string, unknown>, key: string): StackRef {
  const v = x[key];
  const where = `malformed ${String(x.t)} frame: ${key}`;
  if (!isObject(v)) throw new ProtocolError(where);
  const layers = v.layers;
  if (
    !Array.isArray(layers) || layers.length > MAX_EXPORT_LAYERS ||
    !layers.every((l) => typeof l === "string" && LAYER.test(l))
  ) {
    throw new ProtocolError(`${where}.layers must be at most ${MAX_EXPORT_LAYERS} layer ids`);
  }
  const rootId = str(v, "rootId");
  if (!ROOT_ID.test(rootId)) throw new ProtocolError(`${where}.rootId`);
  return { layers, rootId };
}

function plan(x: Record<string, unknown>): MergePlan {
  try {
    const p = parsePlanJson(x.plan);
    if (p.scope !== "checkout") throw new PlanError([`scope ${p.scope} is not checkout`]);
    return p;
  } catch (error) {
    if (error instanceof PlanError) {
      throw new ProtocolError(`malformed ${String(x.t)} frame: ${error.message}`);
    }
    throw error;
  }
}

function env(x: Record<string, unknown>): Pick<CheckoutPlanRequest, "env"> {
  if (x.env === undefined) return {};
  if (!isObject(x.env)) throw new ProtocolError("malformed checkout-plan frame: env");
  const home = optStr(x.env, "HOME"), xdg = optStr(x.env, "XDG_CONFIG_HOME");
  return {
    env: {
      ...(home === undefined ? {} : { HOME: home }),
      ...(xdg === undefined ? {} : { XDG_CONFIG_HOME: xdg }),
    },
  };
}

/** Validates a request of this module (`v` checked by the caller). @throws {ProtocolError} */
export function parseCheckoutRequest(x: Record<string, unknown>): CheckoutRequest {
  if (x.t === "checkout-plan") {
    return {
      v: 1,
      t: "checkout-plan",
      root: absPath(x, "root"),
      target: stack(x, "target"),
      base: stack(x, "base"),
      withIgnored: bool(x, "withIgnored"),
      ...env(x),
    };
  }
  if (x.t === "checkout-apply") {
    return {
      v: 1,
      t: "checkout-apply",
      root: absPath(x, "root"),
      target: stack(x, "target"),
      resolution: str(x, "resolution"),
      plan: plan(x),
    };
  }
  throw new ProtocolError(`unknown request type: ${JSON.stringify(x.t)}`);
}

/** Validates a reply of this module. @throws {ProtocolError} */
export function parseCheckoutReply(x: Record<string, unknown>): CheckoutReply {
  if (x.t !== "checkout-planned") {
    throw new ProtocolError(`malformed reply: ${JSON.stringify(x.t)}`);
  }
  const changes = x.projectChanges;
  if (
    !Array.isArray(changes) || changes.length > MAX_LISTED_PATHS ||
    !changes.every((p) => typeof p === "string")
  ) {
    throw new ProtocolError("malformed checkout-planned reply: projectChanges");
  }
  const more = num(x, "projectChangesMore");
  if (!Number.isSafeInteger(more) || more < 0) {
    throw new ProtocolError("malformed checkout-planned reply: projectChangesMore");
  }
  return {
    v: 1,
    t: "checkout-planned",
    plan: plan(x),
    projectChanges: changes,
    projectChangesMore: more,
  };
}

/** The wire form of a frame of this module: its plan as the plan document. */
export function checkoutFrameToWire(
  f: CheckoutRequest | CheckoutReply,
): Record<string, unknown> {
  return "plan" in f ? { ...f, plan: planToJson(f.plan) } : { ...f };
}
