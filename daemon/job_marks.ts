/**
 * The display marks a `marsh run` offers for its job's lineage
 * (docs/rules.md, "Lineage"), as the daemon accepts them: `fanout` as the
 * caller sent it (the frame parser checked its form), `consumes` only for
 * a split this caller was handed by `marsh join`.
 *
 * A `SPLIT_ID` is an environment variable any process can set, so the
 * daemon checks it against the journal: the split exists, was created by
 * the caller (the host's for the host, a session's for that session's shell
 * branches, as only a split's creator may join it), and reached the join
 * (awaiting while its consumer runs, or joined or kept after). A value that
 * fails is dropped without an error. Both marks stay display only: a forged
 * `FANOUT_BRANCH` groups the caller's own jobs under a fanout node of that
 * name and nothing else; no mark gives or takes any authority.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { OfferedMarks } from "../model/lineage_marks.ts";
import type { ProcessRunRequest } from "../protocol/process_run.ts";
import type { Authority } from "./conn.ts";
import { creatorOf, sameCreator } from "./creator.ts";

/** Split states a join's consumer runs in (`await`) or leaves (`joined`, `kept`). */
const HANDED_OVER: ReadonlySet<string> = new Set(["await", "joined", "kept"]);

/**
 * Whether split `id` was handed to `auth` by `marsh join`: it exists, `auth`
 * created it, and its join began.
 */
export function joinedBy(journal: Pick<Journal, "getSplit">, auth: Authority, id: string): boolean {
  const s = journal.getSplit(id);
  if (s === null || !HANDED_OVER.has(s.state)) return false;
  return sameCreator(creatorOf(auth), s.creator);
}

/** The marks `req` offers that the daemon accepts (`model/lineage_marks.ts` decides which are recorded). */
export function offeredMarks(
  journal: Pick<Journal, "getSplit">,
  auth: Authority,
  req: Pick<ProcessRunRequest, "fanout" | "consumes">,
): OfferedMarks {
  return {
    ...(req.fanout === undefined ? {} : { fanout: req.fanout }),
    ...(req.consumes !== undefined && joinedBy(journal, auth, req.consumes)
      ? { consumes: req.consumes }
      : {}),
  };
}
