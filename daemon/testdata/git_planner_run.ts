/**
 * Runs {@linkcode runGitPlanner} on the merge inputs given as JSON in
 * `Deno.args[0]`, with the temp dir `Deno.args[1]`, and prints the plan as
 * JSON: `daemon/git_planner_test.ts` runs it under the daemon's own flags.
 *
 * @module
 */

import { planToJson } from "../../model/resolution_plan_json.ts";
import { parseResolveReply } from "../../protocol/splitfs_resolve.ts";
import type { MergeInputsReply } from "../../protocol/splitfs_resolve.ts";
import { runGitPlanner } from "../git_planner.ts";

const inputs = parseResolveReply(JSON.parse(Deno.args[0]!)) as MergeInputsReply;
const plan = await runGitPlanner(inputs, { tmpDir: Deno.args[1]! });
console.log(JSON.stringify(planToJson(plan)));
