/**
 * Start-up recovery of checkpoint operations (docs/checkpoints.md
 * "Recovery"): every operation the journal shows live (`recorded`,
 * `launched`, `drained`, `sealing`) is settled by `decideRecovery`
 * (`model/operation_state.ts`), each authority read back on its own: the
 * root by the intent's exact layer and root id (`layer-check`), the head
 * from the journal. A command is never run again; running it twice settles
 * nothing more (the first run left nothing live).
 *
 * @module
 */

import { createHash } from "node:crypto";
import { checkpointPreimage, type OperationRecord } from "../model/checkpoint.ts";
import {
  decideRecovery,
  headVisibility,
  type RecoveryEvidence,
  type RootDurability,
} from "../model/operation_state.ts";
import {
  bindSealed,
  captureAndPublish,
  dropOp,
  type Publish,
  sealAndBind,
} from "./session_seal.ts";
import type { Published, SealDeps } from "./session_seal.ts";

/** What one operation's recovery did, for the daemon's log. */
export interface Recovered {
  readonly operation: string;
  readonly from: string;
  readonly action: string;
  readonly to: string;
}

const ROOT_OF: Readonly<Record<string, RootDurability>> = {
  durable: "requested-root-durable",
  absent: "requested-root-absent",
  conflicting: "conflicting-root-record",
  ambiguous: "ambiguous-root-durability",
};

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("hex");
}

/**
 * The evidence of one operation. Processes: a `recorded` or `launched`
 * one's are unknown (the last daemon's worker was ended, but a launch it
 * was sent may have started a tree this daemon cannot see); a `drained` or
 * `sealing` one's are gone (its drain was journaled). The upper dir is taken
 * as intact: the capture or the seal reads it back, and a failure there
 * fails the operation.
 */
async function evidence(o: OperationRecord, d: SealDeps, root: string): Promise<RecoveryEvidence> {
  const processes = o.state === "recorded" || o.state === "launched" ? "unknown" : "none";
  if (o.state !== "sealing" || o.intent === null) {
    return { processes, upper: "intact", root: null, head: null };
  }
  let rootState: RootDurability;
  try {
    const r = await d.store.checkLayer(root, o.intent.layer, o.intent.root);
    rootState = ROOT_OF[r.state] ?? "ambiguous-root-durability";
  } catch (error) {
    d.log.info(`recovery: op ${o.id}: layer-check failed: ${error}`);
    rootState = "ambiguous-root-durability";
  }
  const session = d.journal.checkpoints.getSession(o.session);
  const requested = sha256(checkpointPreimage({
    kind: "operation",
    operation: o.id,
    parent: o.expectedHead,
    root: o.intent.root,
    changes: o.intent.changes,
  }));
  return {
    processes,
    upper: "intact",
    root: rootState,
    head: headVisibility(session?.head ?? null, o.expectedHead, requested),
  };
}

/** A published operation's op dir goes; a failed one's stays as evidence. */
async function dropIfBound(p: Publish, r: Published, d: SealDeps): Promise<void> {
  if (r.kind === "bound") await dropOp(p, d);
}

/**
 * Settles every live operation; returns what it did. `remount` shows a
 * session's new head in its view.
 */
export async function recoverOperations(d: SealDeps): Promise<Recovered[]> {
  const j = d.journal.checkpoints;
  const out: Recovered[] = [];
  for (const o of j.liveOperations()) {
    const session = j.getSession(o.session);
    const head = j.getCheckpoint(o.expectedHead);
    if (session === null || head === null) continue;
    const p: Publish = {
      id: o.id,
      at: { root: session.project, name: session.name },
      head: { layers: head.layers, root: head.root },
    };
    const ev = await evidence(o, d, session.project);
    const outcome = decideRecovery(o.state, ev);
    const now = d.now();
    switch (outcome.action) {
      case "keep":
        break;
      case "capture":
        await dropIfBound(p, await captureAndPublish(p, d), d);
        break;
      case "reseal":
        await dropIfBound(
          p,
          await sealAndBind(p, { layer: o.intent!.layer, root: o.intent!.root }, d),
          d,
        );
        break;
      case "bind":
      case "settle":
      case "stale":
        // The journal's bind does the head's compare-and-swap: a moved head ends it `stale`.
        await dropIfBound(p, await bindSealed(p, d), d);
        break;
      case "fail":
        j.failOperation(o.id, `recovery: ${outcome.reason}`, now);
        await dropOp(p, d);
        break;
      case "escape":
        if (!j.escapeOperation(o.id, `recovery: ${outcome.reason}`, now)) {
          j.requireRecovery(o.id, `recovery: ${outcome.reason}`, now);
        }
        break;
      case "require":
        // Its op dir stays: the evidence a person settles it by.
        j.requireRecovery(o.id, `recovery: ${outcome.reason}`, now);
        break;
    }
    out.push({
      operation: o.id,
      from: o.state,
      action: outcome.action,
      to: j.getOperation(o.id)?.state ?? "?",
    });
  }
  return out;
}
