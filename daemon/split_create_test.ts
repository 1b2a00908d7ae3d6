/**
 * What a caller's split is taken of (docs/rules.md "Nested splits"): the
 * branch whose fork the caller sees, or the project.
 */

import assert from "node:assert/strict";
import type { Authority, KitView } from "./conn.ts";
import { sourceOf } from "./split_create.ts";

const job = (split: string, label: string, view?: KitView): Authority => ({
  kind: "job",
  job: "j1",
  attempt: "j1-a",
  split,
  label,
  session: "host",
  fork: view?.root ?? `/p/.marsh/split/${split}/${label}`,
  ...(view ? { view } : {}),
});

const project: KitView = { root: "/p", admin: null, objectDirs: [], readOnly: [], branch: null };
const fork: KitView = {
  root: "/p/.marsh/split/s1/b",
  admin: "/p/.marsh/split/s1/.admin/b",
  objectDirs: [],
  readOnly: [],
  branch: { split: "s1", label: "b" },
};

Deno.test("sourceOf: the host and a host run job's tree split the project", () => {
  assert.equal(sourceOf({ kind: "host" }), null);
  // A host `marsh run` job, and any child of it (its view copied verbatim).
  assert.equal(sourceOf(job("", "", project)), null);
});

Deno.test("sourceOf: a branch, a branch job and a run job in a fork split that fork", () => {
  const branch = { split: "s1", label: "b" };
  assert.deepEqual(sourceOf({ kind: "branch", ...branch, session: "s1/b" }), branch);
  assert.deepEqual(sourceOf(job("s1", "b", fork)), branch);
  // A run job from shell branch s1/b, or a child of branch job s1/b: its view is the fork.
  assert.deepEqual(sourceOf(job("", "", fork)), branch);
});
