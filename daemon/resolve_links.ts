/**
 * The links of the resolution verbs that are built apart from them: the
 * `--git` planner (`daemon/git_planner.ts`, `runGitPlanner`) and
 * `marsh discard` of a split's branches. Until they are wired in
 * `daemon/main.ts`, these stand-ins refuse with what to use instead, and
 * change nothing.
 *
 * @module
 */

import type { GitPlanner } from "./resolve_context.ts";

/** Refuses every `--git` plan: the planner is not wired into this daemon. */
export const plannerNotWired: GitPlanner = () =>
  Promise.reject(
    new Error("the --git planner is not part of this daemon; use --filesystem or --paths"),
  );
