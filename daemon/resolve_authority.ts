/**
 * Who may resolve a split (docs/resolution.md, "Authority"): only its
 * creator: the host for the host's splits, the branch's session or the job
 * that made a nested split. A branch can never resolve itself or its
 * siblings, since its authority is never its split's creator.
 *
 * @module
 */

import type { SplitRecord } from "../journal/records.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";
import { RequestError } from "./request_error.ts";

/** The verbs that resolve a split, as the CLI names them. */
export type ResolveVerb = "compare" | "merge" | "promote" | "discard" | "choose" | "undo";

/** Who created a split, in words, for a refusal. */
function creatorWords(s: SplitRecord): string {
  switch (s.creator.kind) {
    case "host":
      return "the host user who ran marsh split";
    case "job":
      return `Kit job ${s.creator.id}, which created it`;
    case "session":
      return "the branch that created it";
  }
}

/**
 * Refuses `verb` on split `s` unless `auth` is its creator.
 *
 * @throws {RequestError} 2 naming who may
 */
export function authorizeResolution(auth: Authority, s: SplitRecord, verb: ResolveVerb): void {
  if (sameCreator(creatorOf(auth), s.creator)) return;
  const caller = auth.kind === "host"
    ? "the host did not create it"
    : "a branch or a Kit job cannot resolve its own split or its siblings";
  throw new RequestError(
    2,
    `marsh ${verb} refused: only the creator of split ${s.id} may ${verb} it (${
      creatorWords(s)
    }); ${caller}`,
  );
}
