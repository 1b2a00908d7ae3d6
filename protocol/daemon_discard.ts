/**
 * The `marsh discard` frames of the daemon protocol (part of
 * `protocol/daemon.ts`; docs/guide.md "Discarding branches").
 *
 * @module
 */

import type { ManifestDiscard } from "./manifest.ts";

/** The longest `--reason`. */
export const MAX_REASON = 4096;

/**
 * `marsh discard ID [LABEL...] [--reason TEXT]`: without labels the whole
 * split, else those branches only.
 */
export interface DiscardRequest {
  readonly v: 1;
  readonly t: "split.discard";
  readonly id: string;
  /** Empty: the whole split. */
  readonly labels: readonly string[];
  readonly reason: string | null;
}

/** One branch a discard moved (or found discarded already). */
export interface DiscardedBranch {
  readonly label: string;
  /** The state it had ended in (`cancelled` for one this discard stopped). */
  readonly after: ManifestDiscard["after"];
  /** Its status: what it did before it was discarded. */
  readonly status: string | null;
  /** Whether this discard stopped it (it was pending or running). */
  readonly stopped: boolean;
  /** Whether it was discarded before this request (its fork is now gone). */
  readonly already: boolean;
}

/** What a discard did: `--json` prints it without `v` and `t`. */
export interface DiscardedReply {
  readonly v: 1;
  readonly t: "split.discarded";
  readonly id: string;
  /** `split`: the whole split (its directory removed); `branches`: the labels given. */
  readonly scope: "split" | "branches";
  readonly reason: string | null;
  /** `host`, `session:<id>` or `job:<id>`. */
  readonly by: string;
  readonly at_unix_ms: number;
  readonly branches: readonly DiscardedBranch[];
  /** The split's state after it. */
  readonly state: string;
  readonly message: string;
}

/** A discard frame that is malformed. */
export class DiscardFrameError extends Error {
  override name = "DiscardFrameError";
}

/** Validates a `split.discard` frame (`v` is checked by the caller). */
export function parseDiscardRequest(x: Record<string, unknown>): DiscardRequest {
  const id = x.id;
  if (typeof id !== "string" || id.length === 0 || id.length > 128) {
    throw new DiscardFrameError("malformed split.discard frame: id");
  }
  const labels = x.labels;
  if (
    !Array.isArray(labels) || labels.length > 1024 ||
    !labels.every((l) => typeof l === "string" && l.length > 0 && l.length <= 4096)
  ) {
    throw new DiscardFrameError("malformed split.discard frame: labels");
  }
  const reason = x.reason;
  if (reason !== null && (typeof reason !== "string" || reason.length > MAX_REASON)) {
    throw new DiscardFrameError("malformed split.discard frame: reason");
  }
  return { v: 1, t: "split.discard", id, labels: labels as string[], reason };
}

/** Whether a `split.discarded` reply has its shape. */
export function discardedReplyOk(x: Record<string, unknown>): boolean {
  return typeof x.id === "string" && (x.scope === "split" || x.scope === "branches") &&
    Array.isArray(x.branches) && typeof x.message === "string" && typeof x.state === "string";
}
