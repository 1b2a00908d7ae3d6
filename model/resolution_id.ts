/**
 * Resolution ids (docs/resolution.md, "On disk"): the daemon makes one and
 * journals it before the split-filesystem service applies anything; the
 * service names the resolution's directory `.marsh/resolve/<id>` with it
 * and accepts only ids of this shape (`checkId` in
 * `splitfs/apply/resolution_dir.ts`, which makes them the same way).
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** What a resolution id looks like: 1-64 lowercase letters, digits or `-`, not starting with `-`. */
export const RESOLUTION_ID = /^[a-z0-9][a-z0-9-]{0,63}$/;

/** A fresh resolution id: time-ordered (base 36 ms), then 8 random hex digits. */
export function newResolutionId(nowMs: number = Date.now()): string {
  const rand = crypto.getRandomValues(new Uint8Array(4));
  return `${nowMs.toString(36)}-${
    Array.from(rand, (b) => b.toString(16).padStart(2, "0")).join("")
  }`;
}
