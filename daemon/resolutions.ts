/**
 * The resolution verbs' face for the server (docs/guide.md, "Resolving a
 * branch"): `marsh merge`, `promote`, `choose`, `undo` and `resolutions`,
 * each answered with the plan document in pieces (`resolve.plan`) and one
 * `resolved` frame (`protocol/daemon_resolve.ts`). Each verb is its own
 * module (`resolve_merge.ts`, `resolve_promote.ts`, `resolve_choose.ts`,
 * `resolve_undo.ts`); the journal around an apply is `resolve_apply.ts`.
 *
 * @module
 */

import { planToJson } from "../model/resolution_plan_json.ts";
import {
  MAX_LISTED,
  PLAN_PIECE,
  type ResolutionsReply,
  type ResolveClientFrame,
} from "../protocol/daemon_resolve.ts";
import type { Authority } from "./conn.ts";
import { creatorOf } from "./creator.ts";
import { recoverResolutions } from "./resolve_apply.ts";
import { choose } from "./resolve_choose.ts";
import { infoOf, type Outcome, type ResolveDeps } from "./resolve_context.ts";
import { merge } from "./resolve_merge.ts";
import { promote } from "./resolve_promote.ts";
import { undo } from "./resolve_undo.ts";
import type { SplitConn } from "./split_context.ts";

import { compareSplit, type CompareTestRun } from "./resolve_compare.ts";
import { checkout } from "./session_checkout.ts";
import type { CheckoutRequest } from "../protocol/daemon_checkout.ts";
import type { CompareReply } from "../protocol/daemon_compare.ts";

export type { DiscardBranches, GitPlanner, ResolveDeps } from "./resolve_context.ts";

/** How many resolutions `marsh resolutions` lists at most (the newest). */
export const MAX_RESOLUTIONS_LISTED = 2_000;

/** The most JSON one reply's lists may hold together: well under a frame's limit. */
const LIST_BYTES = 512 * 1024;

/**
 * The first items of `list`, at most `max` and about `bytes` of JSON
 * (a reply is one frame), and how many were left out.
 */
export function capList<T>(list: readonly T[], max: number, bytes: number): [T[], number] {
  const out: T[] = [];
  let size = 0;
  for (const item of list) {
    size += JSON.stringify(item).length + 1;
    if (out.length >= max || size > bytes) break;
    out.push(item);
  }
  return [out, list.length - out.length];
}

/** Runs the resolution verbs. */
export class Resolutions {
  readonly #d: ResolveDeps;

  constructor(deps: ResolveDeps) {
    this.#d = deps;
  }

  /**
   * Settles every resolution a crash left `applying` (`resolve_apply.ts`):
   * call once at start, before the host socket listens.
   */
  recover(): Promise<number> {
    return recoverResolutions(this.#d);
  }

  /** `marsh compare` (`resolve_compare.ts`): one row per branch, changing nothing. */
  compare(auth: Authority, id: string, test?: CompareTestRun): Promise<CompareReply> {
    return compareSplit(this.#d, auth, id, test);
  }

  /** `marsh resolutions`: the host sees every one; a branch or a job the ones it asked for. */
  list(auth: Authority): Omit<ResolutionsReply, "v" | "t"> {
    const who = auth.kind === "host" ? {} : { who: creatorOf(auth) };
    const found = this.#d.journal.listResolutions({ ...who, limit: MAX_RESOLUTIONS_LISTED + 1 });
    const [resolutions, more] = capList(found.map(infoOf), MAX_RESOLUTIONS_LISTED, LIST_BYTES);
    return { resolutions, more };
  }

  /** Runs one resolving request (everything but the listing) and says how it ended. */
  run(
    auth: Authority,
    frame: Exclude<ResolveClientFrame, { t: "resolutions.list" }>,
  ): Promise<Outcome> {
    switch (frame.t) {
      case "resolve.merge":
        return merge(this.#d, auth, frame);
      case "resolve.promote":
        return promote(this.#d, auth, frame);
      case "resolve.choose":
        return choose(this.#d, auth, frame);
      case "resolve.undo":
        return undo(this.#d, auth, frame.resolution);
    }
  }

  /** `marsh checkout` (`session_checkout.ts`), answered as a resolving request is. */
  async serveCheckout(conn: SplitConn, frame: CheckoutRequest): Promise<void> {
    await send(conn, await checkout(this.#d, conn.authority, frame));
  }

  /**
   * Answers `frame` on `conn`.
   *
   * @throws {RequestError} when the request is refused (the server sends it as an error)
   */
  async serve(conn: SplitConn, frame: ResolveClientFrame): Promise<void> {
    if (frame.t === "resolutions.list") {
      await conn.send({ v: 1, t: "resolutions", ...this.list(conn.authority) });
      return;
    }
    await send(conn, await this.run(conn.authority, frame));
  }
}

/** Sends an outcome: the plan document in pieces, then `resolved`. */
async function send(conn: SplitConn, o: Outcome): Promise<void> {
  const text = o.plan === null ? null : JSON.stringify(planToJson(o.plan));
  if (text !== null) {
    for (let at = 0; at < text.length; at += PLAN_PIECE) {
      await conn.send({ v: 1, t: "resolve.plan", data: text.slice(at, at + PLAN_PIECE) });
    }
  }
  const [changed, changedMore] = capList(o.changed, MAX_LISTED, LIST_BYTES);
  const [sourceChanges, sourceMore] = capList(o.sourceChanges, MAX_LISTED, LIST_BYTES);
  await conn.send({
    v: 1,
    t: "resolved",
    outcome: o.outcome,
    code: o.code,
    message: o.message,
    plan: text !== null,
    resolution: o.resolution === null ? null : infoOf(o.resolution),
    changed,
    changedMore,
    sourceChanges,
    sourceChangesMore: sourceMore + o.sourceChangesMore,
    discarded: o.discarded,
  });
}
