/**
 * `marsh choose ID LABEL (--merge [SCOPE] | --promote)` (docs/guide.md,
 * "marsh choose"): resolves a split's group in one step: the winner is
 * merged or promoted, and only once that is done (or there was nothing to
 * change) are the other branches discarded, with the winner named as the
 * reason. A conflict or a refusal changes nothing and discards nothing.
 *
 * @module
 */

import type { ResolveChooseRequest } from "../protocol/daemon_resolve.ts";
import type { Authority } from "./conn.ts";
import { creatorOf } from "./creator.ts";
import { authorize, type Outcome, type ResolveDeps } from "./resolve_context.ts";
import { merge } from "./resolve_merge.ts";
import { promote } from "./resolve_promote.ts";

/**
 * Merges or promotes the winner, then discards its siblings.
 *
 * @throws {RequestError} as `merge` and `promote` do
 */
export async function choose(
  d: ResolveDeps,
  auth: Authority,
  req: Omit<ResolveChooseRequest, "v" | "t">,
): Promise<Outcome> {
  // Refused in choose's own words; merge and promote check again (and the rest).
  const s = d.journal.getSplit(req.id);
  if (s !== null) authorize(auth, s.creator, "choose", `split ${req.id}`);
  const won = req.how === "promote"
    ? await promote(d, auth, { ...req, dryRun: false })
    : await merge(d, auth, { ...req, scope: req.how, dryRun: false });
  if (won.outcome !== "applied") return won;
  const others = d.journal.branches(req.id).map((b) => b.label).filter((l) => l !== req.label);
  if (others.length === 0) return won;
  const verb = req.how === "promote" ? "promoted" : "merged";
  const by = won.resolution === null ? "" : ` (resolution ${won.resolution.id})`;
  const reason = req.reason ?? `not chosen: branch ${req.label} was ${verb}${by}`;
  try {
    await d.discard(req.id, others, reason, creatorOf(auth));
  } catch (error) {
    return {
      ...won,
      code: 125,
      message: `${won.message}; but discarding ${others.join(", ")} failed: ${
        error instanceof Error ? error.message : error
      }; discard them with: marsh discard ${req.id} ${others.join(" ")}`,
    };
  }
  return {
    ...won,
    discarded: others,
    message: `${won.message}; discarded ${others.join(", ")}`,
  };
}
