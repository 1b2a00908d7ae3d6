/**
 * Where a `marsh run` job runs (docs/rules.md "Running a registered command
 * as a job"): the parent and view come from the caller's socket, and the
 * cwd must lie in the view.
 */

import assert from "node:assert/strict";
import type { Authority } from "./conn.ts";
import { RequestError } from "./request_error.ts";
import { runPlace, type RunPlaceDeps } from "./process_run_view.ts";

const split = {
  root: "/p",
  dir: "/p/.marsh/split/s1",
  git: { objects: ["/p/.marsh/split/s1/store.git/objects"] },
};
const deps: RunPlaceDeps = {
  journal: {
    getSplit: (id: string) => id === "s1" ? split : null,
    getBranch: (s: string, l: string) =>
      s === "s1" && l === "b" ? { view: "project", fork: "/p/.marsh/split/s1/b" } : null,
  } as unknown as RunPlaceDeps["journal"],
  locate: (cwd: string) =>
    cwd.startsWith("/p")
      ? Promise.resolve({ root: "/p", cwd: cwd.slice(3) })
      : Promise.reject(new Error(`not a project: ${cwd}`)),
};

async function refused(auth: Authority, cwd: string): Promise<RequestError> {
  try {
    await runPlace(deps, auth, cwd);
  } catch (error) {
    assert.ok(error instanceof RequestError);
    return error;
  }
  throw new Error("not refused");
}

Deno.test("run place: the host runs in the project, .git and .marsh read-only", async () => {
  assert.deepEqual(await runPlace(deps, { kind: "host" }, "/p/src"), {
    parent: { kind: "session", id: "host" },
    session: "host",
    view: { root: "/p", admin: null, objectDirs: [], readOnly: ["/p/.git", "/p/.marsh"] },
    cwd: "/p/src",
  });
  const e = await refused({ kind: "host" }, "/elsewhere");
  assert.deepEqual([e.code, e.message], [2, "not a project: /elsewhere"]);
});

Deno.test("run place: a shell branch runs in its fork; its project-view cwd maps there", async () => {
  const auth: Authority = { kind: "branch", split: "s1", label: "b", session: "s1/b" };
  assert.deepEqual(await runPlace(deps, auth, "/p/src"), {
    parent: { kind: "split", split: "s1", label: "b" },
    session: "s1/b",
    view: {
      root: "/p/.marsh/split/s1/b",
      admin: "/p/.marsh/split/s1/.admin/b",
      objectDirs: split.git.objects,
      readOnly: [],
    },
    cwd: "/p/.marsh/split/s1/b/src",
  });
  const e = await refused(auth, "/tmp");
  assert.equal(e.code, 2);
  assert.match(e.message, /^the current directory \/tmp is outside what this caller sees/);
});

Deno.test("run place: a job's child gets the job's mounts verbatim", async () => {
  const view = { root: "/p", admin: null, objectDirs: [], readOnly: ["/p/.git"] };
  const auth: Authority = {
    kind: "job",
    job: "j1",
    attempt: "a",
    split: "",
    label: "",
    session: "host",
    fork: "/p",
    view,
  };
  const place = await runPlace(deps, auth, "/p/x");
  assert.deepEqual(place, {
    parent: { kind: "job", id: "j1" },
    session: "host",
    view,
    cwd: "/p/x",
  });
  assert.equal((await refused(auth, "/p2")).code, 2);
});
