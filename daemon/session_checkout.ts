/**
 * `marsh checkout [--session NAME] [--checkpoint C] [--dry-run]
 * [--retire-project-changes]` (docs/guide.md, "Checking out a checkpoint";
 * docs/checkpoints.md, "Checkout and commit"): the project's working tree
 * becomes a checkpoint's root (default: the session's head), through the
 * transactional applier of docs/resolution.md, as a journaled resolution of
 * kind `checkout` that `marsh undo` takes back.
 *
 * The split-filesystem service plans (`checkout-plan`): only the paths
 * whose kind, permission bits or content differ between the working tree
 * and the root, and the paths the project changed since the session's line
 * began (its **base**: the checkpoint this session last checked out and
 * that was not undone, else the `start` checkpoint its log ends at).
 * Those changes would be retired, so checkout refuses, listing them,
 * unless `--retire-project-changes` says the checkpoint's side wins; their
 * prior bytes stay in the restore point either way.
 *
 * @module
 */

import type { CheckpointJournal } from "../journal/checkpoints.ts";
import type { Journal } from "../journal/journal.ts";
import type { CheckpointRecord, SessionRecord } from "../model/checkpoint.ts";
import { countOps, isClean } from "../model/resolution_plan.ts";
import type { CheckoutRequest } from "../protocol/daemon_checkout.ts";
import type { CheckoutPlannedReply, StackRef } from "../protocol/splitfs_checkout.ts";
import type { AppliedReply, ApplyRefusedReply } from "../protocol/splitfs_resolve.ts";
import { hostOnly } from "./checkpoint_commit.ts";
import { findCheckpoint, projectOf } from "./checkpoint_find.ts";
import type { Authority } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import { applyResolution } from "./resolve_apply.ts";
import {
  type Outcome,
  outcome,
  plural,
  type ResolveDeps,
  serviceRefusal,
} from "./resolve_context.ts";

/** How many of the project's resolutions are read to find the session's last checkout. */
const LAST_CHECKOUTS = 1000;

function short(id: string): string {
  return id.slice(0, 12);
}

function stackOf(c: CheckpointRecord): StackRef {
  return { layers: c.layers, rootId: c.root };
}

/**
 * Where session `s`'s line began in the project: the checkpoint of its
 * newest applied checkout, else the `start` checkpoint its log ends at.
 */
export function lineBase(j: Journal, s: SessionRecord): CheckpointRecord {
  const cp: CheckpointJournal = j.checkpoints;
  const done = j.listResolutions({ root: s.project, state: "applied", limit: LAST_CHECKOUTS });
  for (const r of done) {
    if (r.kind !== "checkout" || r.checkout?.session !== s.id) continue;
    const c = cp.getCheckpoint(r.checkout.checkpoint);
    if (c !== null) return c;
  }
  const log = cp.sessionLog(s.id);
  const start = log[log.length - 1]?.checkpoint;
  if (start === undefined || start.kind !== "start") {
    throw new RequestError(
      125,
      `session "${s.name}" has no start checkpoint at the end of its log; nothing was changed`,
    );
  }
  return start;
}

/**
 * Plans and, unless it is a dry run or refused, applies a checkout.
 *
 * @throws {RequestError} 2 for a caller that is not the host, an unknown
 *   project, session or checkpoint, or a tree the plan cannot take; 125 for a fault
 */
export async function checkout(
  d: ResolveDeps,
  auth: Authority,
  req: CheckoutRequest,
): Promise<Outcome> {
  hostOnly(auth, "check out a checkpoint");
  const cp = d.journal.checkpoints;
  const project = await projectOf({ checkpoints: cp, splitfs: d.splitfs }, req.cwd);
  const { checkpoint: c, session: s } = findCheckpoint(cp, project, req.session, req.checkpoint);
  const base = lineBase(d.journal, s);
  const target = stackOf(c);
  let planned: CheckoutPlannedReply;
  try {
    planned = await d.splitfs.request<CheckoutPlannedReply>({
      v: 1,
      t: "checkout-plan",
      root: project,
      target,
      base: stackOf(base),
      withIgnored: s.withIgnored,
      env: req.env,
    });
  } catch (error) {
    throw serviceRefusal(error, `checkpoint ${short(c.id)} could not be planned`);
  }
  const { plan, projectChanges, projectChangesMore } = planned;
  const what = `checkpoint ${short(c.id)} of session ${s.name}`;
  const retired = projectChanges.length + projectChangesMore;
  const blocked = retired > 0 && !req.retireProjectChanges;
  const counts = countOps(plan);
  const lists = { plan, sourceChanges: projectChanges, sourceChangesMore: projectChangesMore };
  const since = `since the session's line began at checkpoint ${short(base.id)}`;
  if (req.dryRun) {
    return outcome({
      outcome: "planned",
      code: blocked || !isClean(plan) ? 1 : 0,
      message:
        `dry run: checking out ${what} changes ${plural(counts.take + counts.delete, "path")}` +
        (retired > 0
          ? ` and retires ${plural(retired, "change")} the project made ${since}${
            blocked ? " (checkout refuses them without --retire-project-changes)" : ""
          }`
          : "") +
        "; nothing was changed",
      ...lists,
    });
  }
  if (blocked) {
    return outcome({
      outcome: "refused",
      code: 1,
      message:
        `the project changed ${
          plural(retired, "path")
        } ${since}; checking out ${what} would retire them, so nothing was changed: ` +
        `keep them (marsh op, or commit them yourself), or give --retire-project-changes ` +
        `(their prior state is saved; marsh undo puts it back)`,
      ...lists,
    });
  }
  if (counts.take + counts.delete === 0) {
    return outcome({
      outcome: "applied",
      code: 0,
      message: `nothing to check out: the project already is the root of ${what}`,
      plan,
    });
  }
  const applied = await applyResolution(d, {
    split: "",
    label: "",
    kind: "checkout",
    scope: "checkout",
    root: project,
    who: { kind: "host" },
    plan,
    undoes: null,
    checkout: { session: s.id, name: s.name, checkpoint: c.id },
    refusedHint: "they changed since the plan: run marsh checkout again to plan anew",
    done: `checked out ${what} (root ${short(c.root)}) over ${project}${
      retired > 0 ? ` (retiring ${plural(retired, "project change")})` : ""
    }`,
    request: (resolution) =>
      d.splitfs.request<AppliedReply | ApplyRefusedReply>({
        v: 1,
        t: "checkout-apply",
        root: project,
        target,
        resolution,
        plan,
      }),
  });
  // The changes it retired (or would have), whatever the end.
  return { ...applied, sourceChanges: projectChanges, sourceChangesMore: projectChangesMore };
}
