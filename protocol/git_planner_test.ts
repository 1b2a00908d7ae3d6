/**
 * The git planner's request and answer, and the `merge-inputs` reply it is
 * built from: parsed back as written, and refused with a clear message
 * when malformed.
 */

import assert from "node:assert/strict";
import { planToJson } from "../model/resolution_plan_json.ts";
import type { MergePlan } from "../model/resolution_plan.ts";
import {
  GitPlannerError,
  gitPlanRequestToJson,
  parseGitPlanOutput,
  parseGitPlanRequest,
} from "./git_planner.ts";
import { ProtocolError } from "./protocol_error.ts";
import { type MergeInputsReply, parseResolveReply, resolveFrameToWire } from "./splitfs_resolve.ts";

const FILE = { kind: "file", mode: 0o644, blob: "a".repeat(40) } as const;

function reply(n: number): MergeInputsReply {
  return {
    v: 1,
    t: "merge-inputs",
    objects: "/p/.marsh/split/s/store.git/objects",
    paths: Array.from({ length: n }, (_, i) => ({
      path: `f${String(i).padStart(4, "0")}.txt`,
      base: FILE,
      source: { ...FILE, mode: 0o664 },
      branch: i % 2 === 0 ? { kind: "absent" } : { kind: "symlink", target: "x" },
      ...(i === 3 ? { blocked: '"f0003.txt" is a directory in the source' } : {}),
    })),
  };
}

Deno.test("a merge-inputs reply of more paths than a split has branches parses back", () => {
  const r = reply(2_000);
  const wire = JSON.parse(JSON.stringify(resolveFrameToWire(r)));
  assert.deepEqual(parseResolveReply(wire), r);
});

Deno.test("the planner's request round-trips, and a malformed one is refused by field", () => {
  const r = reply(20);
  const req = {
    v: 1 as const,
    objects: r.objects,
    tmp: "/home/u/.local/state/marsh/tmp/x",
    paths: r.paths,
  };
  assert.deepEqual(parseGitPlanRequest(JSON.parse(JSON.stringify(gitPlanRequestToJson(req)))), req);
  const bad = (x: unknown, re: RegExp) =>
    assert.throws(() => parseGitPlanRequest(x), (e: unknown) => {
      assert.ok(e instanceof ProtocolError, String(e));
      assert.match(e.message, re);
      return true;
    });
  const good = gitPlanRequestToJson(req);
  bad([], /not a JSON object/);
  bad({ ...good, v: 2 }, /unknown version 2/);
  bad({ ...good, tmp: "tmp" }, /tmp must be an absolute path/);
  bad({ ...good, paths: {} }, /paths must be a list/);
  bad({ ...good, paths: [{ path: 1 }] }, /paths\[0\]\.path must be a string/);
  bad(
    { ...good, paths: [{ path: "a", base: { type: "file", mode: "9", blob: "x" } }] },
    /paths\[0\]\.base/,
  );
});

Deno.test("the planner's answer: a plan, its error, or a clear word on what it printed", () => {
  const plan: MergePlan = {
    scope: "git",
    trees: { base: "b".repeat(40), source: "c".repeat(40), branch: "d".repeat(40), result: null },
    entries: [{ op: "delete", path: "x", before: FILE }],
  };
  assert.deepEqual(parseGitPlanOutput(JSON.stringify(planToJson(plan)) + "\n", 0), plan);
  const fails = (out: string, code: number, re: RegExp) =>
    assert.throws(() => parseGitPlanOutput(out, code), (e: unknown) => {
      assert.ok(e instanceof GitPlannerError, String(e));
      assert.match(e.message, re);
      return true;
    });
  fails(`{"error":"no git"}\n`, 1, /^the git planner failed: no git$/);
  fails("", 1, /^the git planner exited 1 without a JSON answer$/);
  fails("{}", 0, /the git planner's plan is malformed/);
  fails("{}", 134, /^the git planner exited 134$/);
});
