/**
 * The Git-free `--git` plan (`model/resolution_one_sided.ts`) against Git's
 * own merge of the same small trees: random inputs where no path changed on
 * both sides must give exactly Git's entries (a property test; it prints
 * its seed), and a path changed on both sides must go to Git.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../tests/_property.ts";
import { oneSidedGitPlan } from "../model/resolution_one_sided.ts";
import type { PlanEntry, Signature } from "../model/resolution_plan.ts";
import { inputs, lines, NONE, TestStore } from "./_store_testing.ts";
import { planSmallMerge } from "./small_trees.ts";

type Side = "absent" | "v1" | "v2" | "exec" | "link";
const SIDES: Side[] = ["absent", "v1", "v2", "exec", "link"];

async function sig(s: TestStore, side: Side, path: string): Promise<Signature> {
  switch (side) {
    case "absent":
      return NONE;
    case "v1":
      return await s.file(lines(6, { 1: `${path} one` }));
    case "v2":
      return await s.file(lines(6, { 6: `${path} two` }));
    case "exec":
      return await s.file(lines(6, { 1: `${path} one` }), 0o755);
    case "link":
      return { kind: "symlink", target: `../${path}.target` };
  }
}

function shown(entries: readonly PlanEntry[]): string[] {
  return entries.map((e) => JSON.stringify(e));
}

Deno.test({
  name: "one-sided --git plans equal Git's merge of the same small trees",
  permissions: { read: true, write: true, run: ["git"], env: true },
}, async (t) => {
  using s = await TestStore.create();
  // Each path: its base and which side changed it (to what); the other side keeps the base.
  const pathArb = fc.record({
    base: fc.constantFrom(...SIDES),
    to: fc.constantFrom(...SIDES),
    converged: fc.boolean(),
  }).filter((p) => p.base !== p.to);
  await assertProperty(
    t,
    fc.asyncProperty(fc.array(pathArb, { minLength: 1, maxLength: 4 }), async (specs) => {
      const paths = [];
      for (const [i, p] of specs.entries()) {
        const name = `d${i}/f${i}`;
        const base = await sig(s, p.base, name);
        const to = await sig(s, p.to, name);
        // The branch always changed the path (it is in its patch); the source either kept the
        // base or made the branch's change too (converged).
        const source = p.converged ? to : base;
        paths.push(inputs(name, base, source, to));
      }
      const fast = oneSidedGitPlan(paths);
      const git = await planSmallMerge({ objects: s.objects, paths }, { tmpDir: s.tmp });
      if (fast === null) {
        // Only where a rename could pair a deletion with an addition the source touched.
        const adds = specs.some((p) => p.base === "absent");
        const dels = specs.some((p) => p.to === "absent");
        assert.ok(
          adds && dels &&
            specs.some((p) => p.converged && (p.base === "absent" || p.to === "absent")),
        );
        return;
      }
      assert.deepEqual(shown(fast.entries), shown(git.entries));
    }),
    { numRuns: 40 },
  );
});

Deno.test("a path changed on both sides, or blocked, goes to Git", async () => {
  using s = await TestStore.create();
  const base = await s.file(lines(6));
  const source = await s.file(lines(6, { 1: "source" }));
  const branch = await s.file(lines(6, { 6: "branch" }));
  assert.equal(oneSidedGitPlan([inputs("a", base, source, branch)]), null);
  assert.equal(oneSidedGitPlan([inputs("a", NONE, NONE, branch, "a file is in the way")]), null);
  const plan = oneSidedGitPlan([
    inputs("a", base, base, branch),
    inputs("b", base, branch, branch),
  ]);
  assert.deepEqual(plan?.entries.map((e) => `${e.op} ${e.path}`), ["take a", "converged b"]);
});
