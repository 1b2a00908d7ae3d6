/**
 * The small-tree planner against real Git: blobs written into a bare store
 * with `git hash-object -w`, merge inputs as the split-filesystem service
 * gives them, and the plan Git's merge of the three small trees makes.
 */

import assert from "node:assert/strict";
import { isClean, type PlanEntry } from "../model/resolution_plan.ts";
import { ResolveGitError, ScratchGit } from "./git.ts";
import { inputs, lines, NONE, TestStore } from "./_store_testing.ts";
import { gitSignature, planSmallMerge, writeSmallTrees } from "./small_trees.ts";
import { MKTREE_MAX_ENTRIES } from "./small_tree_write.ts";

function entry(entries: readonly PlanEntry[], path: string): PlanEntry {
  const e = entries.find((x) => x.path === path);
  assert.ok(e, `no plan entry for ${path}: ${JSON.stringify(entries.map((x) => x.path))}`);
  return e;
}

function ops(entries: readonly PlanEntry[]): string[][] {
  return entries.map((e) => [e.path, e.op]);
}

Deno.test("a clean text merge: the source changed other lines of the file the branch changed", async () => {
  using s = await TestStore.create();
  const source = await s.file(lines(10, { 1: "one (source)" }));
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs(
        "src/a.txt",
        await s.file(lines(10)),
        source,
        await s.file(lines(10, { 10: "ten (branch)" })),
      ),
    ],
  }, { tmpDir: s.tmp });
  assert.ok(isClean(plan));
  assert.notEqual(plan.trees.result, null);
  const a = entry(plan.entries, "src/a.txt");
  assert.ok(a.op === "take" && a.after.kind === "file" && a.bytes === "store");
  assert.deepEqual(a.before, source);
  // Only the right merge base gives both edits with no conflict.
  assert.equal(await s.cat(a.after.blob), lines(10, { 1: "one (source)", 10: "ten (branch)" }));
  assert.deepEqual([...Deno.readDirSync(s.tmp)], [], "the scratch repository was left behind");
});

Deno.test("the same line edited on both sides is a conflict, and the plan is not clean", async () => {
  using s = await TestStore.create();
  const base = await s.file(lines(5));
  const source = await s.file(lines(5, { 3: "three (source)" }));
  const branch = await s.file(lines(5, { 3: "three (branch)" }));
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs("a.txt", base, source, branch),
      inputs("b.txt", NONE, NONE, await s.file("new\n")),
    ],
  });
  assert.ok(!isClean(plan));
  assert.equal(plan.trees.result, null);
  // A conflicted merge changes nothing: only the conflicts are planned.
  assert.deepEqual(ops(plan.entries), [["a.txt", "conflict"]]);
  const a = entry(plan.entries, "a.txt");
  assert.ok(a.op === "conflict");
  assert.deepEqual([a.base, a.source, a.branch], [base, source, branch]);
  assert.match(a.reason, /CONFLICT \(content\)/);
});

Deno.test("add, delete, chmod and symlinks are taken with the source's state as before", async () => {
  using s = await TestStore.create();
  const gone = await s.file("gone\n");
  const script = await s.blob("#!/bin/sh\n");
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs("new/deep/file.txt", NONE, NONE, await s.file("new\n")),
      inputs("d.txt", gone, gone, NONE),
      // The source's group and other bits do not matter to Git: 0664 is 644.
      inputs(
        "run.sh",
        { kind: "file", mode: 0o644, blob: script },
        { kind: "file", mode: 0o664, blob: script },
        { kind: "file", mode: 0o755, blob: script },
      ),
      inputs("link", NONE, NONE, { kind: "symlink", target: "run.sh" }),
      inputs(
        "moved",
        { kind: "symlink", target: "old/place" },
        { kind: "symlink", target: "old/place" },
        { kind: "symlink", target: "new/place" },
      ),
    ],
  });
  assert.ok(isClean(plan));
  assert.deepEqual(ops(plan.entries), [
    ["d.txt", "delete"],
    ["link", "take"],
    ["moved", "take"],
    ["new/deep/file.txt", "take"],
    ["run.sh", "take"],
  ]);
  const run = entry(plan.entries, "run.sh");
  assert.ok(run.op === "take");
  assert.deepEqual(run.before, { kind: "file", mode: 0o644, blob: script });
  assert.deepEqual(run.after, { kind: "file", mode: 0o755, blob: script });
  const moved = entry(plan.entries, "moved");
  assert.ok(moved.op === "take");
  assert.deepEqual(moved.before, { kind: "symlink", target: "old/place" });
  assert.deepEqual(moved.after, { kind: "symlink", target: "new/place" });
  const link = entry(plan.entries, "link");
  assert.ok(link.op === "take");
  assert.deepEqual(link.after, { kind: "symlink", target: "run.sh" });
  assert.deepEqual(entry(plan.entries, "d.txt"), { op: "delete", path: "d.txt", before: gone });
});

Deno.test("a binary file changed on both sides is a conflict", async () => {
  using s = await TestStore.create();
  const bin = (b: number) => new Uint8Array([0, 1, 2, b, 0, 255, 0, 7]);
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [inputs("db.sqlite", await s.file(bin(1)), await s.file(bin(2)), await s.file(bin(3)))],
  });
  assert.ok(!isClean(plan));
  const e = entry(plan.entries, "db.sqlite");
  assert.ok(e.op === "conflict");
  assert.match(e.reason, /binary|content/i);
});

Deno.test("a blocked path is a conflict with the service's reason; the rest of the plan stays", async () => {
  using s = await TestStore.create();
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs("a.txt", NONE, NONE, await s.file("a\n")),
      inputs(
        "cfg/x.txt",
        NONE,
        NONE,
        await s.file("x\n"),
        '"cfg" is a file in the source, not a directory',
      ),
    ],
  });
  assert.ok(!isClean(plan));
  assert.equal(plan.trees.result, null);
  assert.deepEqual(ops(plan.entries), [["a.txt", "take"], ["cfg/x.txt", "conflict"]]);
  const e = entry(plan.entries, "cfg/x.txt");
  assert.ok(e.op === "conflict");
  assert.equal(e.reason, '"cfg" is a file in the source, not a directory');
  assert.deepEqual(e.source, NONE);
});

Deno.test("a dirty source that already equals the branch is converged", async () => {
  using s = await TestStore.create();
  const same = await s.file("the branch's\n", 0o755);
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs("same.txt", await s.file("old\n"), { ...same, mode: 0o775 } as typeof same, same),
    ],
  });
  assert.ok(isClean(plan));
  assert.deepEqual(plan.entries, [{
    op: "converged",
    path: "same.txt",
    state: gitSignature(same),
  }]);
});

Deno.test("the small trees hold exactly the inputs' paths", async () => {
  using s = await TestStore.create();
  const f = await s.file("f\n");
  await using git = await ScratchGit.create({ write: s.objects });
  const t = await writeSmallTrees(git, [
    inputs("a/b/c.txt", f, NONE, { kind: "symlink", target: "../x" }),
    inputs("a", { kind: "dir" }, NONE, { kind: "dir" }),
    inputs("z.sh", NONE, { ...(f as { blob: string; kind: "file" }), mode: 0o700 }, NONE),
  ]);
  const ls = async (tree: string) =>
    new TextDecoder().decode(await git.ok(["ls-tree", "-r", "--full-tree", tree])).trim();
  const id = f.kind === "file" ? f.blob : "";
  assert.equal(await ls(t.base), `100644 blob ${id}\ta/b/c.txt`);
  assert.equal(await ls(t.source), `100755 blob ${id}\tz.sh`);
  assert.match(await ls(t.branch), /^120000 blob [0-9a-f]{40}\ta\/b\/c\.txt$/);
});

Deno.test("both ways of writing the trees give the same ids, in Git's tree order", async () => {
  using s = await TestStore.create();
  const f = await s.file("f\n");
  const x = await s.file("#!/bin/sh\n", 0o755);
  const names = ["a/x", "a.b", "a-b", "a0", "a b", "é/x", "z", "Z", "a/b/c", "a.b.c/d"];
  const paths = [
    ...names.map((n) => inputs(n, f, NONE, x)),
    inputs("l", NONE, { kind: "symlink", target: "a b" }, { kind: "symlink", target: "z" }),
  ];
  await using git = await ScratchGit.create({ write: s.objects });
  // mktree's ids are checked against the ones computed; write-tree computes its own.
  const byMktree = await writeSmallTrees(git, paths, "mktree");
  const byIndex = await writeSmallTrees(git, paths, "index");
  assert.deepEqual(byMktree, byIndex);
  const ls = new TextDecoder().decode(await git.ok(["ls-tree", "-r", "--name-only", byIndex.base]));
  assert.deepEqual(ls.trim().split("\n").sort(), [...names].sort());
  // Large inputs take the index way, small ones mktree: the same trees.
  const many = Array.from({ length: MKTREE_MAX_ENTRIES }, (_, i) => inputs(`m/${i}`, f, f, x));
  assert.deepEqual(
    await writeSmallTrees(git, many),
    await writeSmallTrees(git, many, "mktree"),
  );
  for (const way of ["mktree", "index"] as const) {
    await assert.rejects(
      writeSmallTrees(
        git,
        [inputs("m", NONE, NONE, { ...x, blob: "1".repeat(40) } as typeof x)],
        way,
      ),
      /the small trees cannot be written \(a blob the merge inputs name is not in the split's objects\?\)/,
    );
  }
});

Deno.test("inputs no tree can hold, and a blob missing from the store, are refused clearly", async () => {
  using s = await TestStore.create();
  const f = await s.file("f\n");
  const refused = (paths: Parameters<typeof planSmallMerge>[0]["paths"], re: RegExp) =>
    assert.rejects(planSmallMerge({ objects: s.objects, paths }), (e: unknown) => {
      assert.ok(e instanceof ResolveGitError, String(e));
      assert.match(e.message, re);
      return true;
    });
  await refused([inputs("a", f, f, f), inputs("a/b", NONE, NONE, f)], /"a" is a file/);
  await refused([inputs("x", NONE, NONE, f), inputs("x", NONE, NONE, f)], /appears twice/);
  await refused([inputs("../x", NONE, NONE, f)], /not normalised/);
  await refused([inputs(".git/config", NONE, NONE, f)], /Git directory/);
  await refused(
    [inputs("m.txt", NONE, NONE, { kind: "file", mode: 0o644, blob: "1".repeat(40) })],
    /not in the split's objects/,
  );
});

Deno.test("a file the branch renamed and changed takes the source's edit along", async () => {
  using s = await TestStore.create();
  const base = await s.file(lines(20));
  const source = await s.file(lines(20, { 2: "two (source)" }));
  const plan = await planSmallMerge({
    objects: s.objects,
    paths: [
      inputs("old.txt", base, source, NONE),
      inputs("new.txt", NONE, NONE, await s.file(lines(20, { 19: "nineteen (branch)" }))),
    ],
  });
  assert.ok(isClean(plan));
  assert.deepEqual(ops(plan.entries), [["new.txt", "take"], ["old.txt", "delete"]]);
  const n = entry(plan.entries, "new.txt");
  assert.ok(n.op === "take" && n.after.kind === "file");
  assert.equal(
    await s.cat(n.after.blob),
    lines(20, { 2: "two (source)", 19: "nineteen (branch)" }),
  );
});
