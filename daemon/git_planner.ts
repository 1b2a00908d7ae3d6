/**
 * The daemon's side of the git planner (docs/resolution.md, "Where Git
 * runs"): the `--git` plan of a branch is computed by a short-lived
 * `resolve/main.ts`, started through the entrypoint registry with read and
 * write on the split's objects dir and a private temp dir only, from the
 * split-filesystem service's `merge-inputs` answer.
 *
 * Needs `--allow-run=<deno>` (the daemon's) and write on `tmpDir`.
 *
 * @module
 */

import type { MergePlan } from "../model/resolution_plan.ts";
import { entryCommand } from "../protocol/entrypoints.ts";
import {
  GitPlannerError,
  gitPlanRequestToJson,
  parseGitPlanOutput,
} from "../protocol/git_planner.ts";
import type { MergeInputsReply } from "../protocol/splitfs_resolve.ts";

/** Options of {@linkcode runGitPlanner}. */
export interface GitPlannerOptions {
  /** Kills the planner; the promise then rejects. */
  readonly signal?: AbortSignal;
  /**
   * Where the run's private temp dir is made, and removed after however the
   * planner ended (default: the system temp dir). The daemon passes one in
   * its control dir, the only place it may write.
   */
  readonly tmpDir?: string;
}

const enc = new TextEncoder();
const dec = new TextDecoder();
/** At most this much of the planner's stderr goes into an error. */
const STDERR_SHOWN = 4000;

/**
 * The `--git` plan of the branch whose merge inputs are `inputs`, computed
 * by the git planner entrypoint.
 *
 * @throws {GitPlannerError} when the planner fails (its message and stderr,
 *   trimmed), or is killed through `signal`
 */
export async function runGitPlanner(
  inputs: MergeInputsReply,
  opts: GitPlannerOptions = {},
): Promise<MergePlan> {
  opts.signal?.throwIfAborted();
  const tmp = await Deno.makeTempDir({ prefix: "marsh-planner-", dir: opts.tmpDir });
  try {
    const child = entryCommand("planner", { objects: inputs.objects, tmp }, {
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
      signal: opts.signal,
    }).spawn();
    const request = enc.encode(JSON.stringify(gitPlanRequestToJson({
      v: 1,
      objects: inputs.objects,
      tmp,
      paths: inputs.paths,
    })));
    // Written while the output is read: a large request would otherwise fill both pipes.
    const writing = (async () => {
      const w = child.stdin.getWriter();
      try {
        await w.write(request);
        await w.close();
      } catch (error) {
        // The planner stopped reading: its exit status and stderr say why.
        return error;
      }
      return null;
    })();
    const [out, writeError] = await Promise.all([child.output(), writing]);
    const stderr = dec.decode(out.stderr).trim();
    const shown = stderr.length > STDERR_SHOWN ? `${stderr.slice(0, STDERR_SHOWN)}…` : stderr;
    if (opts.signal?.aborted) {
      throw new GitPlannerError("the git planner was stopped", { cause: opts.signal.reason });
    }
    try {
      const plan = parseGitPlanOutput(dec.decode(out.stdout), out.code);
      if (writeError !== null) {
        throw new GitPlannerError(`the git planner's request could not be written: ${writeError}`);
      }
      return plan;
    } catch (error) {
      if (error instanceof GitPlannerError && shown !== "") {
        throw new GitPlannerError(`${error.message} (stderr: ${shown})`, { cause: error });
      }
      throw error;
    }
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}
