/**
 * What `marsh merge`, `promote`, `choose` and `undo` share: one resolving
 * request to the daemon (the plan document in `resolve.plan` pieces, then
 * `resolved`; `protocol/daemon_resolve.ts`), and how its outcome is printed:
 *
 * - a dry run: the plan, one line per path (`renderPlanText`), or with
 *   `--json` the plan document `marsh.merge.plan/v1` alone;
 * - otherwise, with `--json`, one `marsh.resolution.result/v1` document;
 *   without, the result line on stdout when done, and on stderr the reason
 *   and every path that blocked it (each conflict, each path changed since
 *   the plan, each source change promote would retire).
 *
 * The exit status is the daemon's: 0 done, 1 conflict or refusal (nothing
 * changed), 125 failure (the message says what was restored).
 *
 * @module
 */

import { parsePlanJson, type PlanJson, renderPlanText } from "../model/resolution_plan_json.ts";
import type { MergePlan } from "../model/resolution_plan.ts";
import type { ClientFrame } from "../protocol/daemon.ts";
import type { ResolvedReply } from "../protocol/daemon_resolve.ts";
import { CliError } from "./cli_error.ts";
import { connectDaemon, type DaemonConnection, DaemonConnectionError } from "./daemon_connect.ts";
import type { CliIo } from "./io.ts";

const enc = new TextEncoder();

/** The schema of `--json` output of a resolving command that is not a dry run. */
export const RESULT_SCHEMA = "marsh.resolution.result/v1";

/** A resolving request's answer: the end frame, and the plan document when one came. */
export interface Resolved {
  readonly end: ResolvedReply;
  readonly plan: PlanJson | null;
}

/**
 * Sends one resolving request and collects its answer; notices go to
 * `io.error`.
 *
 * @throws {CliError} with the daemon's message and status when it refuses, or 2 when the connection fails
 */
export async function resolveRequest(
  frame: ClientFrame,
  who: string,
  io: CliIo,
  connect: () => Promise<DaemonConnection> = connectDaemon,
): Promise<Resolved> {
  await using conn = await connect();
  const pieces: string[] = [];
  try {
    await conn.send(frame);
    for await (const reply of conn) {
      switch (reply.t) {
        case "resolve.plan":
          pieces.push(reply.data);
          continue;
        case "resolved": {
          if (reply.plan !== (pieces.length > 0)) {
            throw new DaemonConnectionError("the plan the daemon announced did not come whole");
          }
          return {
            end: reply,
            plan: reply.plan ? JSON.parse(pieces.join("")) as PlanJson : null,
          };
        }
        case "notice":
          io.error(reply.message);
          continue;
        case "error":
          throw new CliError(`${who}: ${reply.message}`, reply.code);
        default:
          throw new DaemonConnectionError(`an unexpected ${reply.t} frame from the daemon`);
      }
    }
    throw new DaemonConnectionError("the daemon closed the connection without a reply");
  } catch (cause) {
    if (cause instanceof SyntaxError) {
      throw new CliError(`${who}: the daemon's plan is not JSON: ${cause.message}`, 125, { cause });
    }
    if (!(cause instanceof DaemonConnectionError)) throw cause;
    throw new CliError(`${who}: ${cause.message}`, 2, { cause });
  }
}

/** The plan of an answer, checked (`parsePlanJson`), or null. */
function planOf(r: Resolved, who: string): MergePlan | null {
  if (r.plan === null) return null;
  try {
    return parsePlanJson(r.plan);
  } catch (cause) {
    throw new CliError(`${who}: the daemon's plan is malformed: ${cause}`, 125, { cause });
  }
}

/** How an outcome is printed. */
export interface PrintOptions {
  readonly json: boolean;
  readonly dryRun: boolean;
  /** What a listed source change is called (`source change`; checkout: `project change`). */
  readonly changeWord?: string;
}

function more(n: number): string[] {
  return n > 0 ? [`  and ${n} more`] : [];
}

/** The lines on stderr that name what blocked a resolution. */
function blockers(
  end: ResolvedReply,
  plan: MergePlan | null,
  changeWord = "source change",
): string[] {
  const lines: string[] = [];
  for (const e of plan?.entries ?? []) {
    if (e.op === "conflict") lines.push(`  conflict ${e.path}: ${e.reason}`);
  }
  for (const c of end.changed) {
    lines.push(`  changed ${c.path}: expected ${c.expected}, found ${c.found}`);
  }
  lines.push(...more(end.changedMore));
  for (const p of end.sourceChanges) lines.push(`  ${changeWord} ${p}`);
  lines.push(...more(end.sourceChangesMore));
  return lines;
}

/**
 * Prints an answer as the module doc says and returns the exit status.
 *
 * @throws {CliError} when the daemon's plan is malformed
 */
export async function printResolved(
  r: Resolved,
  who: string,
  opts: PrintOptions,
  io: CliIo,
): Promise<number> {
  const plan = planOf(r, who);
  const { end } = r;
  if (opts.json) {
    const doc = opts.dryRun && r.plan !== null ? r.plan : {
      schema: RESULT_SCHEMA,
      outcome: end.outcome,
      code: end.code,
      message: end.message,
      resolution: end.resolution,
      plan: r.plan,
      changed: end.changed,
      changed_more: end.changedMore,
      source_changes: end.sourceChanges,
      source_changes_more: end.sourceChangesMore,
      discarded: end.discarded,
    };
    await io.write(enc.encode(`${JSON.stringify(doc)}\n`));
    if (end.code !== 0) io.error(`${who}: ${end.message}`);
    return end.code;
  }
  if (opts.dryRun && plan !== null) {
    await io.write(enc.encode(renderPlanText(plan)));
    for (const line of blockers({ ...end, changed: [] }, null, opts.changeWord)) io.error(line);
    if (end.sourceChanges.length > 0 || end.code !== 0) io.error(`${who}: ${end.message}`);
    return end.code;
  }
  if (end.code === 0) {
    await io.write(enc.encode(`${end.message}\n`));
    return 0;
  }
  io.error(`${who}: ${end.message}`);
  for (const line of blockers(end, plan, opts.changeWord)) io.error(line);
  return end.code;
}
