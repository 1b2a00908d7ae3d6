import assert from "node:assert/strict";
import { exists, gitOk, put, run, throwsA } from "../_testing.ts";
import { gitTree, type LayerProject, layerProject } from "../layers/_layers_testing.ts";
import { exportRoot, symlinkProblem } from "./export_root.ts";
import { ExportError, UnsupportedGitExport } from "./export_errors.ts";
import { writeStackPatch } from "./stack_patch.ts";
import { Dir } from "../fd/dir.ts";
import { LayerStore } from "../layers/layers.ts";

/** Every file under `.git/objects` (loose objects and packs), relative. */
function objectFiles(p: LayerProject): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory) walk(`${dir}/${e.name}`, r);
      else out.push(r);
    }
  };
  walk(`${p.sb.root}/.git/objects`, "");
  return out.sort();
}

function looseCount(p: LayerProject): number {
  return objectFiles(p).filter((f) => /^[0-9a-f]{2}\/[0-9a-f]{38}$/.test(f)).length;
}

async function gitProjectWithFiles(): Promise<LayerProject> {
  const p = layerProject("marsh-export-", {
    "a.txt": "alpha\n",
    "same1.txt": "same\n",
    "dir/same2.txt": "same\n",
    "sub/deep/d.txt": "deep\n",
    "sub/keep.txt": "keep\n",
  });
  put(p.sb.root, "bin/run.sh", "#!/bin/sh\necho run\n", 0o755);
  Deno.symlinkSync("../a.txt", `${p.sb.root}/bin/to-a`);
  // Over the whole-file bound: this one streams through the deflater.
  const big = new Uint8Array(9 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 2654435761) >>> 24;
  put(p.sb.root, "big.bin", big);
  await gitOk(p.sb.root, ["init", "-q"], { home: p.sb.home });
  return p;
}

async function lsTree(p: LayerProject, tree: string): Promise<string> {
  return await gitOk(p.sb.root, ["ls-tree", "-r", "--full-tree", tree], { home: p.sb.home });
}

Deno.test("export-root writes exactly the objects Git lacks, and Git reads the view from them", async () => {
  using p = await gitProjectWithFiles();
  const s1 = p.snap();
  const expected = await gitTree(p, `${p.sb.top}/expect.git`);
  assert.deepEqual(s1.rootId, expected);
  const before = looseCount(p);
  const r1 = exportRoot(p.root, s1.layers, s1.rootId);
  // Blobs: a, same (once), d, keep, run.sh, the link's target, big: 7. Trees: root, bin, dir, sub, sub/deep: 5.
  assert.deepEqual([r1.blobs, r1.trees, r1.present], [7, 5, 0]);
  assert.deepEqual(looseCount(p) - before, 12);
  assert.deepEqual(r1.objectsDir, `${p.sb.root}/.git/objects`);
  assert.deepEqual(
    await gitOk(p.sb.root, ["cat-file", "-t", s1.rootId], { home: p.sb.home }),
    "tree\n",
  );
  const listing = await lsTree(p, s1.rootId);
  assert.ok(listing.includes("100755 blob"), listing);
  assert.ok(listing.includes("120000 blob"), listing);
  assert.ok(/\tbin\/run\.sh\n/.test(listing), listing);
  const big = await new Deno.Command("git", {
    args: ["cat-file", "blob", `${s1.rootId}:big.bin`],
    cwd: p.sb.root,
    env: { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null", HOME: p.sb.home },
    stdout: "piped",
  }).output();
  assert.deepEqual(big.stdout, Deno.readFileSync(`${p.sb.root}/big.bin`));
  assert.deepEqual(
    await gitOk(p.sb.root, ["cat-file", "-p", `${s1.rootId}:bin/to-a`], { home: p.sb.home }),
    "../a.txt",
  );
  await gitOk(p.sb.root, ["fsck", "--full", "--strict", "--no-dangling"], { home: p.sb.home });

  // Again: nothing is written, the root tree is found.
  const again = exportRoot(p.root, s1.layers, s1.rootId);
  assert.deepEqual([again.blobs, again.trees, again.present], [0, 0, 1]);

  // A change on top: only its blobs and the trees on its paths.
  put(p.sb.root, "a.txt", "alpha 2\n");
  put(p.sb.root, "sub/new.txt", "new\n");
  const s2 = p.snap();
  assert.deepEqual(s2.layers.length, 2);
  const mid = looseCount(p);
  const r2 = exportRoot(p.root, s2.layers, s2.rootId);
  assert.deepEqual([r2.blobs, r2.trees], [2, 2]);
  assert.deepEqual(looseCount(p) - mid, 4);
  assert.deepEqual(s2.rootId, await gitTree(p, `${p.sb.top}/expect.git`));
  await gitOk(p.sb.root, ["fsck", "--full", "--strict", "--no-dangling"], { home: p.sb.home });
});

Deno.test("export-root finds objects in packs and writes none of them again", async () => {
  using p = await gitProjectWithFiles();
  const s = p.snap();
  const o = { home: p.sb.home };
  await gitOk(p.sb.root, ["add", "-A"], o);
  await gitOk(p.sb.root, ["-c", "core.hooksPath=/dev/null", "commit", "-qm", "all"], o);
  await gitOk(p.sb.root, ["repack", "-adq"], o);
  await gitOk(p.sb.root, ["prune-packed"], o);
  assert.deepEqual(looseCount(p), 0);
  const r = exportRoot(p.root, s.layers, s.rootId);
  assert.deepEqual([r.blobs, r.trees, r.present], [0, 0, 1]);
  assert.deepEqual(looseCount(p), 0);
});

Deno.test("export-root: each unsupported kind names its path and writes nothing", async (t) => {
  const cases: [string, (root: string) => void, string, string][] = [
    [
      "an empty directory",
      (r) => Deno.mkdirSync(`${r}/sub/empty/inner`, { recursive: true }),
      "sub/empty/inner",
      "empty-directory",
    ],
    [
      "an absolute symlink",
      (r) => Deno.symlinkSync("/etc/passwd", `${r}/sub/abs`),
      "sub/abs",
      "absolute-symlink",
    ],
    [
      "an escaping symlink",
      (r) => Deno.symlinkSync("../../outside", `${r}/sub/esc`),
      "sub/esc",
      "escaping-symlink",
    ],
  ];
  for (const [name, make, path, kind] of cases) {
    await t.step(name, async () => {
      using p = await gitProjectWithFiles();
      make(p.sb.root);
      const s = p.snap();
      const before = objectFiles(p);
      const e = throwsA(() => exportRoot(p.root, s.layers, s.rootId), UnsupportedGitExport);
      assert.deepEqual([e.path, e.kind], [path, kind]);
      assert.ok(e.message.includes(path), e.message);
      assert.deepEqual(objectFiles(p), before);
    });
  }
  await t.step("a FIFO where a layer's index has a file", async () => {
    using p = await gitProjectWithFiles();
    const s = p.snap();
    // What a layer holding a special file looks like: its data disagrees with its index.
    const data = `${p.layersPath}/${s.layers[0]}/data/sub`;
    Deno.chmodSync(data, 0o755);
    Deno.removeSync(`${data}/keep.txt`);
    await run("mkfifo", [`${data}/keep.txt`], { home: p.sb.home });
    const before = objectFiles(p);
    const e = throwsA(() => exportRoot(p.root, s.layers, s.rootId), UnsupportedGitExport);
    assert.deepEqual([e.path, e.kind], ["sub/keep.txt", "special-file"]);
    // Only the objects beside it that were already written may stay: loose, unreferenced.
    for (const f of objectFiles(p)) if (!before.includes(f)) assert.ok(/^[0-9a-f]{2}\//.test(f), f);
  });
});

Deno.test("symlink targets: inside the tree is admitted, leaving it is not", () => {
  symlinkProblem("a/b/l", "../c");
  symlinkProblem("a/l", "./x/../y");
  symlinkProblem("l", "a/b/../../c");
  assert.throws(() => symlinkProblem("a/l", "../../c"), UnsupportedGitExport);
  assert.throws(() => symlinkProblem("l", "a/../../c"), UnsupportedGitExport);
  assert.throws(() => symlinkProblem("l", ""), UnsupportedGitExport);
  assert.throws(() => symlinkProblem("l", "/abs"), UnsupportedGitExport);
});

Deno.test("export-root refuses a stack whose root is not the one asked for", async () => {
  using p = await gitProjectWithFiles();
  const s = p.snap();
  assert.throws(() => exportRoot(p.root, s.layers, "0".repeat(40)), /not 0000/);
});

Deno.test("checkpoint-patch applies to the parent's tree and gives the child's", async () => {
  using p = await gitProjectWithFiles();
  const o = { home: p.sb.home };
  const s1 = p.snap();
  put(p.sb.root, "a.txt", "alpha 2\n");
  Deno.removeSync(`${p.sb.root}/sub/deep`, { recursive: true });
  put(p.sb.root, "sub/deep", "now a file\n");
  Deno.chmodSync(`${p.sb.root}/bin/run.sh`, 0o644);
  Deno.removeSync(`${p.sb.root}/bin/to-a`);
  put(p.sb.root, "bin/to-a", "a file now\n");
  put(p.sb.root, "added/n.bin", new Uint8Array([0, 1, 2, 3, 255]));
  const s2 = p.snap();
  exportRoot(p.root, s1.layers, s1.rootId);
  const parts: Uint8Array[] = [];
  const r = writeStackPatch(p.root, s1.layers, s2.layers, (b) => parts.push(b.slice()), 1000);
  assert.deepEqual(
    r.paths.map((x) => `${x.status} ${x.path}`),
    ["M a.txt", "A added/n.bin", "M bin/run.sh", "T bin/to-a", "D sub/deep/d.txt", "A sub/deep"],
  );
  const patch = `${p.sb.top}/c.patch`;
  const all0 = new Uint8Array(parts.reduce((n, x) => n + x.length, 0));
  parts.reduce((at, x) => (all0.set(x, at), at + x.length), 0);
  Deno.writeFileSync(patch, all0);
  // A fresh work tree of the parent's root, its objects read from the project's store.
  const w = `${p.sb.top}/work`;
  Deno.mkdirSync(w);
  await gitOk(w, ["init", "-q"], o);
  Deno.writeTextFileSync(`${w}/.git/objects/info/alternates`, `${p.sb.root}/.git/objects\n`);
  await gitOk(w, ["read-tree", "--reset", "-u", s1.rootId], o);
  await gitOk(w, ["apply", "--index", patch], o);
  assert.deepEqual((await gitOk(w, ["write-tree"], o)).trim(), s2.rootId);
  // From the empty tree: the whole root, added.
  // The child's root, read through the upper layer's whiteouts and replacements, is Git's too.
  const r2 = exportRoot(p.root, s2.layers, s2.rootId);
  assert.ok(r2.blobs > 0 && r2.trees > 0);
  await gitOk(p.sb.root, ["fsck", "--full", "--strict", "--no-dangling"], o);
  assert.equal(
    await gitOk(p.sb.root, ["cat-file", "-p", `${s2.rootId}:sub/deep`], o),
    "now a file\n",
  );
  const all = writeStackPatch(p.root, [], s1.layers, null, 3);
  assert.deepEqual(all.changed, 8);
  assert.deepEqual(all.paths.length, 3);
});

Deno.test("export-root writes into the gitdir a gitfile names, and a linked worktree's common dir", async () => {
  using p = layerProject("marsh-export-gitfile-", { "a.txt": "a\n", "d/b.txt": "b\n" });
  const o = { home: p.sb.home };
  const gitDir = `${p.sb.top}/elsewhere.git`;
  await gitOk(p.sb.root, ["init", "-q", `--separate-git-dir=${gitDir}`], o);
  assert.ok(Deno.lstatSync(`${p.sb.root}/.git`).isFile);
  const s = p.snap();
  const r = exportRoot(p.root, s.layers, s.rootId);
  assert.deepEqual([r.gitDir, r.objectsDir], [gitDir, `${gitDir}/objects`]);
  assert.deepEqual([r.blobs, r.trees], [2, 2]);
  assert.equal(
    await gitOk(p.sb.root, ["cat-file", "-t", s.rootId], o),
    "tree\n",
  );
  // A linked worktree's gitdir names the main repository's objects through `commondir`.
  await gitOk(p.sb.root, ["commit", "-q", "--allow-empty", "-m", "x"], o);
  const wt = `${p.sb.top}/wt`;
  await gitOk(p.sb.root, ["-c", "core.hooksPath=/dev/null", "worktree", "add", "-q", wt], o);
  Deno.mkdirSync(`${wt}/.marsh`);
  put(wt, "c.txt", "only in the worktree\n");
  using wroot = Dir.openAbsolute(wt);
  const ws = (() => {
    using marsh = wroot.openDir(".marsh");
    using store = LayerStore.open(marsh);
    return store.snapshot({
      source: wroot,
      ignore: null,
      skipTop: new Set([".marsh"]),
      chain: "tracked",
    });
  })();
  const wr = exportRoot(wroot, ws.layers, ws.rootId);
  assert.equal(wr.objectsDir, `${gitDir}/objects`);
  assert.ok(wr.gitDir.startsWith(`${gitDir}/worktrees/`), wr.gitDir);
  assert.equal(await gitOk(wt, ["cat-file", "-t", ws.rootId], o), "tree\n");
});

Deno.test("export-root into a project without a repository says so and writes nothing", () => {
  using p = layerProject("marsh-export-nogit-", { "a.txt": "a\n" });
  const s = p.snap();
  assert.throws(
    () => exportRoot(p.root, s.layers, s.rootId),
    (e: Error) =>
      e instanceof ExportError &&
      /is not a Git repository \(no \.git\): run `git init`/.test(e.message),
  );
  assert.equal(exists(`${p.sb.root}/.git`), false);
});
