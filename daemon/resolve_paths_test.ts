import assert from "node:assert/strict";
import { RequestError } from "./request_error.ts";
import { projectPaths } from "./resolve_paths.ts";

function refused(fn: () => unknown, pattern: RegExp): void {
  assert.throws(fn, (e: unknown) => {
    assert.ok(e instanceof RequestError);
    assert.equal(e.code, 2);
    assert.match(e.message, pattern);
    return true;
  });
}

Deno.test({
  name: "projectPaths: relative to the cwd, normalised, inside the project",
  permissions: {},
}, () => {
  const root = "/w/p";
  assert.deepEqual(projectPaths(root, "/w/p/src", ["a.ts", "./b/../c.ts", "/w/p/README.md"]), [
    "README.md",
    "src/a.ts",
    "src/c.ts",
  ]);
  // A directory stands for what is under it; duplicates go.
  assert.deepEqual(projectPaths(root, "/w/p", ["d/x", "d", "d/", "d-x", "d"]), ["d", "d-x"]);
  refused(
    () => projectPaths(root, "/w/p/src", ["../../q/x"]),
    /is outside the project \/w\/p \(it is \/w\/q\/x\)/,
  );
  // A sibling whose name starts like the project is outside it.
  refused(() => projectPaths(root, "/w", ["p2/x"]), /outside the project/);
  refused(() => projectPaths(root, "/w/p/src", [".."]), /is the whole project: use --filesystem/);
  refused(() => projectPaths(root, "/w/p", [".marsh/split"]), /marsh's own state/);
  refused(() => projectPaths(root, "/w/p", ["sub/.git/HEAD"]), /inside a Git directory/);
  refused(() => projectPaths(root, "/w/p", ["a\0b"]), /NUL/);
  refused(() => projectPaths(root, "/w/p", []), /at least one path/);
});
