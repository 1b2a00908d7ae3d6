import assert from "node:assert/strict";
import type { SplitRecord } from "../journal/records.ts";
import { consumerEnv } from "./join_env.ts";
import { manifestOf } from "./manifest.ts";

const ROOT = "/work/p";

function split(over: Partial<SplitRecord> = {}): SplitRecord {
  const id = over.id ?? "s1";
  return {
    id,
    creator: { kind: "host" },
    session: "host",
    parent: null,
    depth: 1,
    root: ROOT,
    dir: `${ROOT}/.marsh/split/${id}`,
    cwd: "src",
    cap: `${id}/cap`,
    state: "await",
    status: 0,
    reason: null,
    identity: null,
    git: null,
    createdMs: 0,
    finishedMs: null,
    timing: {},
    withIgnored: false,
    rootId: null,
    ...over,
  };
}

const nested = split({
  id: "s2",
  creator: { kind: "session", id: "x" },
  parent: { split: "s1", label: "a" },
  depth: 2,
});

Deno.test({ name: "consumerEnv: a root split's root is the project's", permissions: {} }, () => {
  const s = split();
  assert.deepEqual(consumerEnv(s, manifestOf(s, []), null), {
    SPLIT_ID: "s1",
    SPLIT_DIR: `${ROOT}/.marsh/split/s1/out`,
    SPLIT_MANIFEST: `${ROOT}/.marsh/split/s1/out/manifest.json`,
    SPLIT_ROOT: ROOT,
    SPLIT_OBJECTS: `${ROOT}/.marsh/split/s1/store.git/objects`,
  });
});

Deno.test({
  name: "consumerEnv: a nested split's root is where its creator sees its fork",
  permissions: {},
}, () => {
  const m = manifestOf(nested, []);
  const fork = `${ROOT}/.marsh/split/s1/a`;
  // A shell branch with the project view sees its fork at the project's path.
  assert.equal(consumerEnv(nested, m, { view: "project", fork }).SPLIT_ROOT, ROOT);
  // One without (the fork view), and a Kit job (no view), see it at its own path.
  assert.equal(consumerEnv(nested, m, { view: "fork", fork }).SPLIT_ROOT, fork);
  assert.equal(consumerEnv(nested, m, { view: null, fork }).SPLIT_ROOT, fork);
  // The creator's record gone: its fork is still named by the parent.
  assert.equal(consumerEnv(nested, m, null).SPLIT_ROOT, fork);
  // A nested split's consumer uses its branch's own Git objects.
  assert.equal(consumerEnv(nested, m, { view: "project", fork }).SPLIT_OBJECTS, undefined);
});

Deno.test({
  name: "consumerEnv: a job's split from a project-view branch's fork is at the fork's own path",
  permissions: {},
}, () => {
  // A `marsh run` job a shell branch started sees the fork at its own path, whatever the branch's view.
  const byJob = split({ ...nested, creator: { kind: "job", id: "j1" } });
  const fork = `${ROOT}/.marsh/split/s1/a`;
  const m = manifestOf(byJob, []);
  assert.equal(consumerEnv(byJob, m, { view: "project", fork }).SPLIT_ROOT, fork);
  // A host `marsh run` job's split is of the project: its root is the project's.
  const root = split({ creator: { kind: "job", id: "j1" } });
  assert.equal(consumerEnv(root, manifestOf(root, []), null).SPLIT_ROOT, ROOT);
});
