/**
 * One resolution applied around the journal (docs/resolution.md, "The
 * applier"): the record is written `applying` before the split-filesystem
 * service is asked to change anything, then settled by its answer:
 *
 * - `applied` → `applied`, with the count of paths changed;
 * - `apply-refused` (the project moved on since the plan; nothing changed)
 *   → `failed`, with the paths: the record stays, so every attempt is on
 *   record with who asked;
 * - a refusal (`input`, `rejected`, `replaced`) → `failed`, nothing changed;
 * - any other failure (the apply failed part-way, or the service died): the
 *   service's recovery (`recover-resolutions`) decides, as at a restart:
 *   `post` → `applied`, `pre` → `failed` (the project is as it was). When
 *   even that cannot be asked, the record stays `applying` and the next
 *   daemon start settles it.
 *
 * @module
 */

import type { CheckoutOf, Creator, ResolutionRecord } from "../journal/records.ts";
import { countOps, type MergePlan } from "../model/resolution_plan.ts";
import { newResolutionId } from "../model/resolution_id.ts";
import type {
  AppliedReply,
  ApplyRefusedReply,
  RecoveredReply,
} from "../protocol/splitfs_resolve.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import { type Outcome, outcome, plural, type ResolveDeps } from "./resolve_context.ts";

/** What is being applied, with the service request that applies it. */
export interface Application {
  readonly split: string;
  readonly label: string;
  readonly kind: ResolutionRecord["kind"];
  readonly scope: ResolutionRecord["scope"];
  readonly root: string;
  readonly who: Creator;
  /** The plan (null for an undo: the service builds its inverse plan). */
  readonly plan: MergePlan | null;
  readonly undoes: string | null;
  /** For a checkout and its undo: the session and checkpoint (docs/checkpoints.md). */
  readonly checkout?: CheckoutOf | null;
  /** Asks the service; `resolution` is the journaled id. */
  readonly request: (resolution: string) => Promise<AppliedReply | ApplyRefusedReply>;
  /** `merged branch a of split s`: the start of the messages. */
  readonly done: string;
  /** What an `apply-refused` means to do next (`run it again to plan anew`). */
  readonly refusedHint: string;
}

function settle(d: ResolveDeps, id: string, state: "pre" | "post", fallback: number): void {
  d.journal.endResolution(
    id,
    state === "post" ? { state: "applied", finishedMs: d.now(), changed: fallback } : {
      state: "failed",
      finishedMs: d.now(),
      message: "interrupted; rolled back, nothing was changed",
    },
  );
}

/**
 * Journals `a` as `applying`, has the service apply it, and settles the
 * record by the answer (see the module doc).
 */
export async function applyResolution(d: ResolveDeps, a: Application): Promise<Outcome> {
  const counts = a.plan === null
    ? { take: 0, delete: 0, converged: 0, conflict: 0 }
    : countOps(a.plan);
  const rec: ResolutionRecord = {
    id: newResolutionId(d.now()),
    split: a.split,
    label: a.label,
    kind: a.kind,
    scope: a.scope,
    root: a.root,
    who: a.who,
    state: "applying",
    createdMs: d.now(),
    finishedMs: null,
    undoes: a.undoes,
    undoneBy: null,
    summary: counts,
    trees: a.plan?.trees ?? { base: null, source: null, branch: null, result: null },
    changed: null,
    message: null,
    checkout: a.checkout ?? null,
  };
  // Journaled before the service is asked: a crash from here on is settled at the next start.
  d.journal.addResolution(rec);
  await d.pause?.("resolve-journaled");
  const after = (): ResolutionRecord => d.journal.getResolution(rec.id)!;
  let reply: AppliedReply | ApplyRefusedReply;
  try {
    reply = await a.request(rec.id);
  } catch (error) {
    return await afterFailure(d, a, rec, error, counts.take + counts.delete);
  }
  if (reply.t === "applied") {
    await d.pause?.("resolve-answered");
    d.journal.endResolution(rec.id, {
      state: "applied",
      finishedMs: d.now(),
      changed: reply.changed,
    });
    return outcome({
      outcome: "applied",
      code: 0,
      message: `${a.done}: resolution ${rec.id}, ${
        plural(reply.changed, "path")
      } changed; undo it with: marsh undo ${rec.id}`,
      plan: a.plan,
      resolution: after(),
    });
  }
  const n = reply.changed.length;
  d.journal.endResolution(rec.id, {
    state: "failed",
    finishedMs: d.now(),
    message: `refused: ${reply.message}`,
  });
  return outcome({
    outcome: "refused",
    code: 1,
    message: `${reply.message}; ${
      plural(n, "path")
    } changed, nothing was changed: ${a.refusedHint}`,
    plan: a.plan,
    resolution: after(),
    changed: reply.changed,
  });
}

async function afterFailure(
  d: ResolveDeps,
  a: Application,
  rec: ResolutionRecord,
  error: unknown,
  planned: number,
): Promise<Outcome> {
  const why = error instanceof Error ? error.message : String(error);
  const refusal = error instanceof SplitfsError && error.kind !== "internal";
  if (refusal) {
    d.journal.endResolution(rec.id, {
      state: "failed",
      finishedMs: d.now(),
      message: `refused: ${why}; nothing was changed`,
    });
    return outcome({
      outcome: "failed",
      code: 125,
      message: `${why}; nothing was changed`,
      plan: a.plan,
      resolution: d.journal.getResolution(rec.id),
    });
  }
  d.log.info(`resolution ${rec.id}: ${why}; asking the service to recover ${rec.root}`);
  let state: "pre" | "post" | null = null;
  try {
    const r = await d.splitfs.request<RecoveredReply>({
      v: 1,
      t: "recover-resolutions",
      root: rec.root,
    });
    state = r.resolutions.find((x) => x.id === rec.id)?.state ?? "pre";
  } catch (again) {
    d.log.info(`resolution ${rec.id}: recovery not possible now: ${again}`);
  }
  if (state === null) {
    return outcome({
      outcome: "failed",
      code: 125,
      message: `${why}; the resolution ${rec.id} is unfinished: the next daemon start ` +
        `finishes it or rolls it back (marsh daemon stop, then any marsh command), see marsh resolutions`,
      plan: a.plan,
      resolution: d.journal.getResolution(rec.id),
    });
  }
  settle(d, rec.id, state, planned);
  if (state === "post") {
    // The commit point was passed: the apply is complete, whatever failed after it.
    return outcome({
      outcome: "applied",
      code: 0,
      message: `${a.done}: resolution ${rec.id} (completed by recovery after: ${why}); ` +
        `undo it with: marsh undo ${rec.id}`,
      plan: a.plan,
      resolution: d.journal.getResolution(rec.id),
    });
  }
  return outcome({
    outcome: "failed",
    code: 125,
    message: `${why}; rolled back: the project is as it was before`,
    plan: a.plan,
    resolution: d.journal.getResolution(rec.id),
  });
}

/**
 * At the daemon's start, before any request: every resolution still
 * `applying` (a crash came between its record and its end) is settled by
 * the service's recovery of its root. The service lists every resolution
 * directory it finds, a finished one as `post`; one it does not list has
 * no directory, so it never began or was rolled back: `pre`.
 *
 * @returns how many were settled; a root the service cannot recover now is
 *   logged and left `applying` for the next start
 */
export async function recoverResolutions(d: ResolveDeps): Promise<number> {
  const pending = d.journal.listResolutions({ state: "applying" });
  const roots = [...new Set(pending.map((r) => r.root))];
  let n = 0;
  for (const root of roots) {
    let states: Map<string, "pre" | "post">;
    try {
      const r = await d.splitfs.request<RecoveredReply>({ v: 1, t: "recover-resolutions", root });
      states = new Map(r.resolutions.map((x) => [x.id, x.state]));
    } catch (error) {
      d.log.info(`restart: resolutions of ${root} left applying: ${error}`);
      continue;
    }
    for (const rec of pending.filter((r) => r.root === root)) {
      const state = states.get(rec.id) ?? "pre";
      settle(d, rec.id, state, rec.summary.take + rec.summary.delete);
      d.log.info(`restart: resolution ${rec.id} ${state === "post" ? "applied" : "rolled back"}`);
      n++;
    }
  }
  return n;
}
