/**
 * The git planner entrypoint (docs/resolution.md, "Where Git runs"): a
 * short-lived process the daemon starts for each `--git` plan. It reads one
 * request (`protocol/git_planner.ts`) on stdin, plans the merge on small
 * trees ({@linkcode planSmallMerge}) and prints the plan document on one
 * line; on failure one `{"error": ...}` line and a non-zero exit.
 *
 * Its flags (`plannerFlags`, protocol/entry_flags.ts) let it run `git`,
 * read `PATH`, and read and write only the split's objects dir and the
 * temp dir it is given: it never sees a project tree.
 *
 * @module
 */

import { planToJson } from "../model/resolution_plan_json.ts";
import {
  EXIT_BAD_REQUEST,
  EXIT_FAILED,
  type GitPlanRequest,
  MAX_PLANNER_REQUEST,
  parseGitPlanRequest,
} from "../protocol/git_planner.ts";
import { planSmallMerge } from "./small_trees.ts";

const enc = new TextEncoder();

/** Reads stdin to its end, refusing more than `max` bytes. */
async function readAll(max: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let n = 0;
  for await (const c of Deno.stdin.readable) {
    n += c.length;
    if (n > max) throw new RangeError(`the request is larger than ${max} bytes`);
    chunks.push(c);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

async function answer(line: unknown, code: number): Promise<never> {
  const bytes = enc.encode(JSON.stringify(line) + "\n");
  // A pipe may take a large plan in several writes.
  for (let at = 0; at < bytes.length;) at += await Deno.stdout.write(bytes.subarray(at));
  Deno.exit(code);
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

async function main(): Promise<void> {
  let request: GitPlanRequest;
  try {
    const text = new TextDecoder("utf-8", { fatal: true }).decode(
      await readAll(MAX_PLANNER_REQUEST),
    );
    request = parseGitPlanRequest(JSON.parse(text));
  } catch (error) {
    return await answer({ error: `bad request: ${message(error)}` }, EXIT_BAD_REQUEST);
  }
  try {
    const plan = await planSmallMerge(request, { tmpDir: request.tmp });
    await answer(planToJson(plan), 0);
  } catch (error) {
    await answer({ error: message(error) }, EXIT_FAILED);
  }
}

if (import.meta.main) await main();
