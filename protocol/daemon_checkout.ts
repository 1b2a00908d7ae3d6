/**
 * The `marsh checkout` frame of the daemon protocol (part of
 * `protocol/daemon.ts`; docs/checkpoints.md "Checkout and commit",
 * docs/guide.md "Checking out a checkpoint"). It is answered like a
 * resolving request (`protocol/daemon_resolve.ts`): the plan document in
 * `resolve.plan` pieces, then one `resolved` frame, whose `sourceChanges`
 * are the paths the project changed since the session's line began.
 *
 * @module
 */

/** The longest session name or checkpoint id (or prefix) the frame may carry. */
const MAX_NAME = 256;

/**
 * Make the project's working tree checkpoint `checkpoint`'s root (an id or
 * a unique prefix), else the head of session `session`, else the head of
 * the project's one open session.
 */
export interface CheckoutRequest {
  readonly v: 1;
  readonly t: "checkout";
  /** The caller's cwd: the project is located from it. */
  readonly cwd: string;
  readonly session: string | null;
  readonly checkpoint: string | null;
  readonly dryRun: boolean;
  /** Apply even when the project changed since the session's line began (those changes go). */
  readonly retireProjectChanges: boolean;
  /** Locates the caller's global Git excludes, as `marsh split` does. */
  readonly env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string };
}

/** The client frame types this module parses. */
export const CHECKOUT_CLIENT_FRAMES: ReadonlySet<string> = new Set(["checkout"]);

/** A checkout frame that is malformed. */
export class CheckoutFrameError extends Error {
  override name = "CheckoutFrameError";
}

function text(x: Record<string, unknown>, key: string, max: number): string {
  const v = x[key];
  if (typeof v !== "string" || v.length === 0 || v.length > max) {
    throw new CheckoutFrameError(`malformed checkout frame: ${key}`);
  }
  return v;
}

function flag(x: Record<string, unknown>, key: string): boolean {
  if (typeof x[key] !== "boolean") throw new CheckoutFrameError(`malformed checkout frame: ${key}`);
  return x[key] as boolean;
}

function envOf(x: Record<string, unknown>): CheckoutRequest["env"] {
  const e = x.env;
  if (typeof e !== "object" || e === null || Array.isArray(e)) {
    throw new CheckoutFrameError("malformed checkout frame: env");
  }
  const out: { HOME?: string; XDG_CONFIG_HOME?: string } = {};
  for (const key of ["HOME", "XDG_CONFIG_HOME"] as const) {
    const v = (e as Record<string, unknown>)[key];
    if (v === undefined) continue;
    if (typeof v !== "string" || v.length > 4096) {
      throw new CheckoutFrameError(`malformed checkout frame: env.${key}`);
    }
    out[key] = v;
  }
  return out;
}

/** Validates the checkout frame (`v` is checked by the caller). */
export function parseCheckoutClientFrame(x: Record<string, unknown>): CheckoutRequest {
  if (x.t !== "checkout") {
    throw new CheckoutFrameError(`unknown frame type: ${JSON.stringify(x.t)}`);
  }
  return {
    v: 1,
    t: "checkout",
    cwd: text(x, "cwd", 4096),
    session: x.session === null ? null : text(x, "session", MAX_NAME),
    checkpoint: x.checkpoint === null ? null : text(x, "checkpoint", MAX_NAME),
    dryRun: flag(x, "dryRun"),
    retireProjectChanges: flag(x, "retireProjectChanges"),
    env: envOf(x),
  };
}
