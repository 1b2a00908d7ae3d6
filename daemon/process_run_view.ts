/**
 * Where a `marsh run` job runs (docs/rules.md "Running a registered command
 * as a job"): its parent and its view, decided by the socket the request
 * came on, never by a frame.
 *
 * | caller | parent | view |
 * |---|---|---|
 * | host CLI | `session:host` | the project (the Git top level of the cwd, or the cwd outside a repository) read-write at its own path; its `.git` and `.marsh` read-only |
 * | shell branch | `split:<id>/<label>` | the branch's fork and its Git metadata |
 * | Kit job | `job:<id>` | the job's own mounts, verbatim (never re-derived) |
 *
 * The child's cwd must lie inside its view's root.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { JobParent } from "../model/job_admission.ts";
import { isWithin } from "../protocol/kit_launch.ts";
import type { Authority, KitView } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import { branchCwd } from "./shell_view.ts";

/** The session a host CLI's jobs belong to (the operator's). */
export const HOST_SESSION = "host";

/** A run's place: who its parent is, which pool session it is in, what it sees, where it starts. */
export interface RunPlace {
  readonly parent: JobParent;
  /** The pool session (`host`, a branch's `<split>/<label>`, a job's own). */
  readonly session: string;
  readonly view: KitView;
  /** The child's cwd: inside `view.root`, the same path inside the container. */
  readonly cwd: string;
}

/** What deciding a place needs. */
export interface RunPlaceDeps {
  readonly journal: Pick<Journal, "getSplit" | "getBranch">;
  /** The project root of a host cwd (the split-filesystem service's `locate`). */
  locate(cwd: string): Promise<{ readonly root: string; readonly cwd: string }>;
}

/** The view of a split's branch: its fork, its admin dir and object dirs. */
function branchView(
  journal: RunPlaceDeps["journal"],
  split: string,
  label: string,
  fork: string,
): KitView {
  const s = journal.getSplit(split);
  return {
    root: fork,
    admin: s?.git ? `${s.dir}/.admin/${label}` : null,
    objectDirs: s?.git?.objects ?? [],
    readOnly: [],
  };
}

/**
 * The place of a run asked for on a connection of `auth` from `cwd`.
 *
 * @throws {RequestError} 2 when `cwd` lies outside the caller's view, or
 *   the project cannot be located; 125 when the caller's branch is gone
 */
export async function runPlace(d: RunPlaceDeps, auth: Authority, cwd: string): Promise<RunPlace> {
  let place: RunPlace;
  switch (auth.kind) {
    case "host": {
      let root: string, under: string;
      try {
        ({ root, cwd: under } = await d.locate(cwd));
      } catch (error) {
        throw new RequestError(2, error instanceof Error ? error.message : String(error));
      }
      place = {
        parent: { kind: "session", id: HOST_SESSION },
        session: HOST_SESSION,
        // A Kit must not plant hooks or an fsmonitor that the host's own Git then runs,
        // nor touch marsh's state: both are read-only inside (docs/rules.md).
        view: { root, admin: null, objectDirs: [], readOnly: [`${root}/.git`, `${root}/.marsh`] },
        // The real path: the container has the project at its real path only.
        cwd: under === "" ? root : `${root}/${under}`,
      };
      break;
    }
    case "branch": {
      const branch = d.journal.getBranch(auth.split, auth.label);
      const split = d.journal.getSplit(auth.split);
      if (branch === null || split === null) {
        throw new RequestError(125, `the branch ${auth.split}/${auth.label} is no longer recorded`);
      }
      place = {
        parent: { kind: "split", split: auth.split, label: auth.label },
        session: auth.session,
        view: branchView(d.journal, auth.split, auth.label, branch.fork),
        // A branch with the project view sees its fork at the project's path.
        cwd: branchCwd(cwd, branch, split.root),
      };
      break;
    }
    case "job":
      place = {
        parent: { kind: "job", id: auth.job },
        session: auth.session,
        view: auth.view ?? branchView(d.journal, auth.split, auth.label, auth.fork),
        cwd,
      };
      break;
  }
  if (!isWithin(place.cwd, place.view.root)) {
    throw new RequestError(
      2,
      `the current directory ${place.cwd} is outside what this caller sees (${place.view.root}): cd into it first`,
    );
  }
  return place;
}
