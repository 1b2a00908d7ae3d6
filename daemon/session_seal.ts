/**
 * The publication of a drained operation (docs/checkpoints.md "An
 * operation", steps 4-6): its capture, then a no-change bind, or the three
 * durability steps (intent, the layer's seal, the bind with the head's
 * compare-and-swap). Shared by `marsh op` (`session_op.ts`) and start-up
 * recovery (`session_recovery.ts`), which resumes at the step the journal
 * shows. Never runs the command.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { BindResult } from "../journal/checkpoints.ts";
import type { Log } from "./log.ts";
import type { SessionAt, SessionStore } from "./session_context.ts";

/** The digest of an empty changed set (a no-change checkpoint's): SHA-256 of nothing. */
export const EMPTY_CHANGES = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/** What publishing needs. */
export interface SealDeps {
  readonly journal: Journal;
  readonly store: SessionStore;
  readonly now: () => number;
  readonly log: Log;
  /** Test-only: stops at a step until the daemon is killed (`MARSH_TEST_PAUSE_AT`). */
  readonly pause: (step: string) => Promise<void>;
}

/**
 * Each publication step's time in ms, filled in as the steps run (`op.done`'s
 * and `marsh log --json`'s `timing_ms`; `deno task bench --checkpoints`).
 */
export type PhaseTimes = Partial<
  Record<"prepare" | "drain" | "capture" | "intent" | "seal" | "bind" | "drop" | "view", number>
>;

/** One drained operation to publish. */
export interface Publish {
  readonly id: string;
  readonly at: SessionAt;
  /** The head's stack and root (the operation's expected head). */
  readonly head: { readonly layers: readonly string[]; readonly root: string };
  /** Where to note each step's time (absent: not timed, as in recovery). */
  readonly timing?: PhaseTimes;
}

/** Adds the time since `since` to `phase` of `o.timing`; returns now. */
function lap(o: Publish, phase: keyof PhaseTimes, since: number): number {
  const now = performance.now();
  if (o.timing !== undefined) o.timing[phase] = (o.timing[phase] ?? 0) + now - since;
  return now;
}

/** How publishing ended. */
export type Published =
  | { readonly kind: "bound"; readonly result: BindResult; readonly changed: number }
  | { readonly kind: "failed"; readonly why: string };

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Unmounts and removes the op's directory; a failure is logged (its evidence stays). */
export async function dropOp(o: Publish, d: SealDeps): Promise<void> {
  const t = performance.now();
  try {
    await d.store.dropOp(o.at, o.id);
  } catch (error) {
    d.log.info(`op ${o.id}: its directory could not be removed: ${message(error)}`);
  }
  lap(o, "drop", t);
}

/** Marks the operation failed with `why` (from drained or sealing). */
function failed(o: Publish, why: string, d: SealDeps): Published {
  d.journal.checkpoints.failOperation(o.id, why, d.now());
  return { kind: "failed", why };
}

/**
 * Capture, then a no-change bind or intent, seal and bind (steps 4-6). A
 * failed capture drops the op dir; otherwise the caller drops it once done.
 */
export async function captureAndPublish(o: Publish, d: SealDeps): Promise<Published> {
  const j = d.journal.checkpoints;
  let cap;
  let t = performance.now();
  try {
    cap = await d.store.captureOp(o.at, o.id, { layers: o.head.layers, rootId: o.head.root });
  } catch (error) {
    await dropOp(o, d);
    return failed(o, `its changes could not be captured: ${message(error)}`, d);
  }
  t = lap(o, "capture", t);
  if (cap.kind === "no-change") {
    const result = j.bindCheckpoint(o.id, {
      createdMs: d.now(),
      noChange: { changes: EMPTY_CHANGES },
    });
    lap(o, "bind", t);
    return { kind: "bound", result, changed: 0 };
  }
  // One transaction: the intent, and the paths the capture listed (for marsh log).
  j.recordIntent(
    o.id,
    { root: cap.rootId, layer: cap.layer, changes: cap.digest },
    d.now(),
    { changed: cap.changed, truncated: cap.truncated, paths: cap.paths },
  );
  lap(o, "intent", t);
  await d.pause("op-intent");
  return await sealAndBind(o, { layer: cap.layer, root: cap.rootId }, d);
}

/** The layer's seal (idempotent in the service), then the bind: from the intent on. */
export async function sealAndBind(
  o: Publish,
  intent: { readonly layer: string; readonly root: string },
  d: SealDeps,
): Promise<Published> {
  const t = performance.now();
  try {
    await d.store.sealOp(o.at, o.id, {
      layer: intent.layer,
      rootId: intent.root,
      layers: o.head.layers,
    });
  } catch (error) {
    return failed(o, `layer ${intent.layer} could not be sealed: ${message(error)}`, d);
  }
  lap(o, "seal", t);
  await d.pause("op-sealed");
  return await bindSealed(o, d);
}

/**
 * The bind of a sealed layer (the head's compare-and-swap). The op dir stays
 * until the caller's {@linkcode dropOp}, after the head moved and the view
 * followed: its removal is not on the way to either.
 */
export async function bindSealed(o: Publish, d: SealDeps): Promise<Published> {
  const j = d.journal.checkpoints;
  const t = performance.now();
  const result = j.bindCheckpoint(o.id, { createdMs: d.now() });
  lap(o, "bind", t);
  await d.pause("op-bound");
  return { kind: "bound", result, changed: j.changesOf(o.id)?.changed ?? 0 };
}
