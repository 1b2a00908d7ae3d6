import assert from "node:assert/strict";
import { branchCwd, chooseShellView, shellPlace } from "./shell_view.ts";

Deno.test({ name: "chooseShellView: root, userns, neither", permissions: "none" }, async () => {
  const ok = () => Promise.resolve(null);
  const refused = () => Promise.resolve("unshare --mount was refused (exit 1: nope)");
  assert.equal(
    (await chooseShellView({ root: true, serviceNamespace: false, probe: ok })).view,
    "project",
  );
  const rootRefused = await chooseShellView({
    root: true,
    serviceNamespace: false,
    probe: refused,
  });
  assert.equal(rootRefused.view, "fork");
  assert.match(
    rootRefused.reason,
    /^root, but no mount namespace can be made \(unshare --mount was refused/,
  );
  const userns = await chooseShellView({ root: false, serviceNamespace: true, probe: refused });
  assert.equal(userns.view, "project");
  assert.match(userns.reason, /^not root: .* in the split-filesystem service's user namespace$/);
  const none = await chooseShellView({
    root: false,
    serviceNamespace: false,
    why: "MARSH_FORKS=copy",
  });
  assert.equal(none.view, "fork");
  assert.match(
    none.reason,
    /^not root, and the split-filesystem service has no user namespace \(MARSH_FORKS=copy\): shell branches run in their fork's directory/,
  );
  // MARSH_SHELL_VIEW=fork: the fork view even where a namespace can be had.
  for (const root of [true, false]) {
    const asked = await chooseShellView({
      root,
      serviceNamespace: !root,
      probe: ok,
      refused: "MARSH_SHELL_VIEW=fork",
    });
    assert.equal(asked.view, "fork");
    assert.match(
      asked.reason,
      /^MARSH_SHELL_VIEW=fork: shell branches run in their fork's directory/,
    );
  }
});

Deno.test({ name: "shellPlace: the cwd and view of each choice", permissions: "none" }, () => {
  const split = { root: "/p", dir: "/p/.marsh/split/s1", cwd: "src" };
  const git = { objects: ["/p/.marsh/split/s1/store.git/objects", "/p/.git/objects"] };
  assert.deepEqual(shellPlace({ view: "fork", reason: "" }, split, git, "a", "/c"), {
    cwd: "/p/.marsh/split/s1/a/src",
  });
  assert.deepEqual(shellPlace({ view: "project", reason: "" }, split, git, "a", "/c"), {
    cwd: "/p/src",
    view: {
      root: "/p",
      fork: "/p/.marsh/split/s1/a",
      admin: "/p/.marsh/split/s1/.admin/a",
      objectDirs: git.objects,
      control: "/c",
    },
  });
  const top = shellPlace({ view: "project", reason: "" }, { ...split, cwd: "" }, null, "a", "/c");
  assert.equal(top.cwd, "/p");
  assert.equal(top.view?.admin, null);
  assert.deepEqual(top.view?.objectDirs, []);
});

Deno.test(
  { name: "branchCwd maps a project-view branch's cwd into its fork", permissions: "none" },
  () => {
    const fork = "/p/.marsh/split/s1/a";
    const project = { view: "project" as const, fork };
    assert.equal(branchCwd("/p", project, "/p"), fork);
    assert.equal(branchCwd("/p/src/x", project, "/p"), `${fork}/src/x`);
    // Outside the root, or in its .marsh: passed on (and refused by locate unless in the fork).
    assert.equal(branchCwd("/tmp", project, "/p"), "/tmp");
    assert.equal(branchCwd("/pq", project, "/p"), "/pq");
    assert.equal(branchCwd("/p/.marsh/split/s1", project, "/p"), "/p/.marsh/split/s1");
    // A fork-view branch reports its cwd in the fork already.
    assert.equal(branchCwd(`${fork}/src`, { view: "fork", fork }, "/p"), `${fork}/src`);
    assert.equal(branchCwd("/p/src", { view: null, fork }, "/p"), "/p/src");
  },
);
