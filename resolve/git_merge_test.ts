/**
 * The `--git` planner against real Git: a real project repository (with a
 * dirty working tree as the source), a branch's result made in a copy, and
 * a bare store standing in for the split's `store.git`. Every test also
 * proves that the project (its `.git` included) is byte-identical, with the
 * same modes and mtimes, after planning.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { renderPlanText } from "../model/resolution_plan_json.ts";
import { type PlanEntry, type Signature } from "../model/resolution_plan.ts";
import { gitOk, put, run, type Sandbox, sandbox } from "../splitfs/_testing.ts";
import { ResolveGitError, ScratchGit } from "./git.ts";
import { type GitMergeOutcome, planGitMerge } from "./git_merge.ts";
import { sourceTreeOf } from "./source_tree.ts";

const NO_EXCLUDES = { globalExcludes: null, infoExclude: null };

/** Every entry under `dir` (lstat'd: kind, mode, size, mtime, content or target), as one digest. */
function treeDigest(dir: string): string {
  const h = createHash("sha256");
  const walk = (rel: string) => {
    const names = [...Deno.readDirSync(`${dir}/${rel}`)].map((e) => e.name).sort();
    for (const name of names) {
      const p = rel === "" ? name : `${rel}/${name}`;
      const st = Deno.lstatSync(`${dir}/${p}`);
      h.update(`${p}\0${st.mode}\0${st.size}\0${st.mtime?.getTime()}\0`);
      if (st.isSymlink) h.update(Deno.readLinkSync(`${dir}/${p}`));
      else if (st.isFile) h.update(Deno.readFileSync(`${dir}/${p}`));
      else if (st.isDirectory) walk(p);
    }
  };
  walk("");
  return h.digest("hex");
}

interface World {
  readonly sb: Sandbox;
  readonly store: string;
  /** Runs git in the project. */
  git(args: string[], cwd?: string): Promise<string>;
}

async function world(files: Record<string, string | Uint8Array>): Promise<World> {
  const sb = sandbox("marsh-resolve-test-");
  const g = (args: string[], cwd = sb.root) => gitOk(cwd, args, { home: sb.home });
  await g(["init", "-q", "-b", "main"]);
  for (const [p, data] of Object.entries(files)) put(sb.root, p, data);
  await g(["add", "-A"]);
  await g(["commit", "-q", "-m", "start"]);
  const store = `${sb.top}/store.git`;
  await g(["init", "-q", "--bare", store], sb.top);
  return { sb, store, git: g };
}

function scratch(w: World): Promise<ScratchGit> {
  // Not the project's objects as alternates: Git freshens (touches) an object it finds there.
  return ScratchGit.create({ write: `${w.store}/objects` });
}

async function treeOf(w: World, dir: string): Promise<string> {
  await using git = await scratch(w);
  return await sourceTreeOf(git, dir, NO_EXCLUDES);
}

/**
 * The base is the project now; `branch` edits a copy (the branch's fork),
 * `source` edits the project itself afterwards (left dirty, uncommitted).
 * Returns the outcome, having checked that planning left the project as it was.
 */
async function scenario(
  w: World,
  branch: (fork: string) => void | Promise<void>,
  source: (root: string) => void | Promise<void>,
): Promise<GitMergeOutcome & { trees: { base: string; source: string; branch: string } }> {
  const base = await treeOf(w, w.sb.root);
  const fork = `${w.sb.top}/fork`;
  await run("cp", ["-a", w.sb.root, fork], { home: w.sb.home });
  await Deno.remove(`${fork}/.git`, { recursive: true });
  await branch(fork);
  const branchTree = await treeOf(w, fork);
  await source(w.sb.root);
  const before = treeDigest(w.sb.root);
  await using git = await scratch(w);
  const sourceTree = await sourceTreeOf(git, w.sb.root, NO_EXCLUDES);
  const t = { base, source: sourceTree, branch: branchTree };
  const outcome = await planGitMerge(git, t);
  assert.equal(treeDigest(w.sb.root), before, "planning changed the project");
  return { ...outcome, trees: t };
}

const lines = (n: number, edit: Record<number, string> = {}) =>
  Array.from({ length: n }, (_, i) => edit[i + 1] ?? `line ${i + 1}`).join("\n") + "\n";

function entry(entries: readonly PlanEntry[], path: string): PlanEntry {
  const e = entries.find((x) => x.path === path);
  assert.ok(e, `no plan entry for ${path}: ${JSON.stringify(entries.map((x) => x.path))}`);
  return e;
}

async function blobText(w: World, id: string): Promise<string> {
  return await gitOk(w.sb.root, ["cat-file", "blob", id], {
    home: w.sb.home,
    env: { GIT_ALTERNATE_OBJECT_DIRECTORIES: `${w.store}/objects` },
  });
}

Deno.test("a clean merge: both sides' edits of one file, an add, a delete, a converged path", async () => {
  const w = await world({ "a.txt": lines(10), "d.txt": "gone\n", "c.txt": "old\n" });
  using _ = w.sb;
  const r = await scenario(
    w,
    (fork) => {
      put(fork, "a.txt", lines(10, { 10: "ten (branch)" }));
      put(fork, "new.txt", "new\n");
      Deno.removeSync(`${fork}/d.txt`);
      put(fork, "c.txt", "same\n");
    },
    async (root) => {
      put(root, "a.txt", lines(10, { 1: "one (source)" }));
      put(root, "c.txt", "same\n");
      await w.git(["add", "c.txt"]); // a staged change: the user's index must stay as it is
      put(root, "untracked.txt", "the source's own\n");
    },
  );
  assert.ok(r.clean);
  const a = entry(r.plan.entries, "a.txt");
  assert.ok(a.op === "take" && a.after.kind === "file" && a.bytes === "store");
  // Only the right merge base gives both edits with no conflict.
  assert.equal(
    await blobText(w, a.after.blob),
    lines(10, { 1: "one (source)", 10: "ten (branch)" }),
  );
  assert.deepEqual(
    r.plan.entries.map((e) => [e.path, e.op]),
    [["a.txt", "take"], ["c.txt", "converged"], ["d.txt", "delete"], ["new.txt", "take"]],
  );
  assert.equal(r.plan.trees.result, r.result);
  // The result tree is the source plus the branch's changes, untracked file included.
  const ls = await gitOk(w.sb.root, ["ls-tree", "--name-only", r.result], {
    home: w.sb.home,
    env: { GIT_ALTERNATE_OBJECT_DIRECTORIES: `${w.store}/objects` },
  });
  assert.deepEqual(ls.trim().split("\n"), ["a.txt", "c.txt", "new.txt", "untracked.txt"]);
  assert.match(renderPlanText(r.plan), /^take {6}a\.txt \(file 0644 [0-9a-f]{10}\)$/m);
});

Deno.test("the same line edited on both sides is a conflict, and nothing is planned but the conflicts", async () => {
  const deep = "dir/sub dir/é x.txt";
  const w = await world({ "a.txt": lines(10), "b.txt": "b\n", [deep]: lines(3), "t.txt": "t\n" });
  using _ = w.sb;
  Deno.symlinkSync("t.txt", `${w.sb.root}/link`);
  const r = await scenario(
    w,
    (fork) => {
      put(fork, "a.txt", lines(10, { 5: "five (branch)" }));
      put(fork, "b.txt", "b from the branch\n");
      put(fork, deep, lines(3, { 2: "branch" }));
      Deno.removeSync(`${fork}/link`);
      Deno.symlinkSync("branch-target", `${fork}/link`);
    },
    (root) => {
      put(root, "a.txt", lines(10, { 5: "five (source)" }));
      put(root, deep, lines(3, { 2: "source" }));
      Deno.removeSync(`${root}/link`);
      Deno.symlinkSync("source-target", `${root}/link`);
    },
  );
  assert.ok(!r.clean);
  assert.deepEqual(r.conflicts.map((c) => c.path), ["a.txt", deep, "link"]);
  assert.match(r.conflicts[0]!.reasons.join(), /CONFLICT \(content\): Merge conflict in a\.txt/);
  const e = entry(r.plan.entries, "a.txt");
  assert.ok(e.op === "conflict");
  assert.equal(e.base.kind, "file");
  assert.notDeepEqual(e.source, e.branch);
  const d = entry(r.plan.entries, deep);
  assert.ok(d.op === "conflict" && d.base.kind === "file" && d.source.kind === "file");
  const l = entry(r.plan.entries, "link");
  assert.ok(l.op === "conflict");
  assert.deepEqual([l.base, l.source, l.branch], [
    { kind: "symlink", target: "t.txt" },
    { kind: "symlink", target: "source-target" },
    { kind: "symlink", target: "branch-target" },
  ]);
  // b.txt merged cleanly, but a conflicted merge plans nothing else.
  assert.deepEqual(r.plan.entries.map((x) => x.op), ["conflict", "conflict", "conflict"]);
  assert.equal(r.plan.trees.result, null);
});

Deno.test("a file the branch deleted and the source modified is a conflict naming both sides", async () => {
  const w = await world({ "m.txt": "m\n", "keep.txt": "k\n" });
  using _ = w.sb;
  const r = await scenario(
    w,
    (fork) => Deno.removeSync(`${fork}/m.txt`),
    (root) => put(root, "m.txt", "m, edited by the source\n"),
  );
  assert.ok(!r.clean);
  assert.deepEqual(r.conflicts.map((c) => c.path), ["m.txt"]);
  assert.match(
    r.conflicts[0]!.reasons.join(),
    /m\.txt deleted in the branch and modified in the source/,
  );
  const e = entry(r.plan.entries, "m.txt");
  assert.ok(e.op === "conflict" && e.branch.kind === "absent" && e.source.kind === "file");
});

Deno.test("a binary file: taken when only the branch changed it, a conflict when both did", async () => {
  const bin = (n: number) => new Uint8Array(256).map((_, i) => (i * n) % 256);
  const w = await world({ "img.bin": bin(1), "db.bin": bin(3) });
  using _ = w.sb;
  const r = await scenario(
    w,
    (fork) => {
      put(fork, "img.bin", bin(5));
      put(fork, "db.bin", bin(7));
    },
    (root) => put(root, "db.bin", bin(11)),
  );
  assert.ok(!r.clean);
  assert.deepEqual(r.conflicts.map((c) => c.path), ["db.bin"]);
  // The same branch change alone merges, with the branch's exact blob.
  const w2 = await world({ "img.bin": bin(1) });
  using _2 = w2.sb;
  const r2 = await scenario(w2, (fork) => put(fork, "img.bin", bin(5)), () => {});
  assert.ok(r2.clean);
  const e = entry(r2.plan.entries, "img.bin");
  assert.ok(e.op === "take" && e.after.kind === "file");
  const hashed = await run("git", ["hash-object", `${w2.sb.top}/fork/img.bin`], {
    home: w2.sb.home,
  });
  assert.equal(e.after.blob, hashed.trim());
});

Deno.test("symlinks: a new link and a retargeted one are taken with their targets", async () => {
  const w = await world({ "target.txt": "t\n" });
  using _ = w.sb;
  Deno.symlinkSync("target.txt", `${w.sb.root}/old-link`);
  await w.git(["add", "-A"]);
  await w.git(["commit", "-q", "-m", "link"]);
  const r = await scenario(
    w,
    (fork) => {
      Deno.symlinkSync("target.txt", `${fork}/new-link`);
      Deno.removeSync(`${fork}/old-link`);
      Deno.symlinkSync("../elsewhere", `${fork}/old-link`);
    },
    () => {},
  );
  assert.ok(r.clean);
  assert.deepEqual(entry(r.plan.entries, "new-link"), {
    op: "take",
    path: "new-link",
    before: { kind: "absent" },
    after: { kind: "symlink", target: "target.txt" },
  });
  const old = entry(r.plan.entries, "old-link");
  assert.ok(old.op === "take");
  assert.deepEqual(old.before, { kind: "symlink", target: "target.txt" });
  assert.deepEqual(old.after, { kind: "symlink", target: "../elsewhere" });
});

Deno.test("a mode change alone is a take of the same blob with mode 755", async () => {
  const w = await world({ "run.sh": "#!/bin/sh\necho hi\n" });
  using _ = w.sb;
  const r = await scenario(w, (fork) => Deno.chmodSync(`${fork}/run.sh`, 0o755), () => {});
  assert.ok(r.clean);
  const e = entry(r.plan.entries, "run.sh");
  assert.ok(e.op === "take" && e.before.kind === "file" && e.after.kind === "file");
  assert.equal(e.before.mode, 0o644);
  assert.equal(e.after.mode, 0o755);
  assert.equal(e.before.blob, e.after.blob);
});

Deno.test("a file that becomes a directory and a directory that becomes a file are planned explicitly", async () => {
  const w = await world({ "x": "file x\n", "d/f": "in d\n", "d/g": "also in d\n" });
  using _ = w.sb;
  const r = await scenario(
    w,
    (fork) => {
      Deno.removeSync(`${fork}/x`);
      put(fork, "x/inner.txt", "now a dir\n");
      Deno.removeSync(`${fork}/d`, { recursive: true });
      put(fork, "d", "now a file\n");
    },
    () => {},
  );
  assert.ok(r.clean);
  const dir: Signature = { kind: "dir" };
  const got = r.plan.entries.map((e) => [e.path, e.op]);
  assert.deepEqual(got, [
    ["d", "take"],
    ["d/f", "delete"],
    ["d/g", "delete"],
    ["x", "take"],
    ["x/inner.txt", "take"],
  ]);
  const d = entry(r.plan.entries, "d"), x = entry(r.plan.entries, "x");
  assert.ok(d.op === "take" && x.op === "take");
  assert.deepEqual(d.before, dir);
  assert.equal(d.after.kind, "file");
  assert.equal(x.before.kind, "file");
  assert.deepEqual(x.after, dir);
});

Deno.test("the source side honours .gitignore and info/exclude, and never takes .marsh", async () => {
  const w = await world({ ".gitignore": "*.log\n", "a.txt": "a\n" });
  using _ = w.sb;
  put(w.sb.root, "debug.log", "ignored\n");
  put(w.sb.root, "secret.env", "excluded by info/exclude\n");
  put(w.sb.root, ".marsh/split/x/file", "marsh state\n");
  put(w.sb.root, "sub/.gitignore", "!keep.log\n");
  put(w.sb.root, "sub/keep.log", "re-included\n");
  // A .gitattributes filter or eol rule must not change the hashed bytes.
  put(w.sb.root, ".gitattributes", "*.txt text eol=crlf filter=evil\n");
  put(w.sb.root, "crlf.txt", "one\r\ntwo\n");
  const before = treeDigest(w.sb.root);
  await using git = await scratch(w);
  const tree = await sourceTreeOf(git, w.sb.root, {
    globalExcludes: null,
    infoExclude: new TextEncoder().encode("*.env\n"),
  });
  assert.equal(treeDigest(w.sb.root), before);
  const ls = await gitOk(w.sb.root, ["ls-tree", "-r", tree], {
    home: w.sb.home,
    env: { GIT_ALTERNATE_OBJECT_DIRECTORIES: `${w.store}/objects` },
  });
  const names = ls.trim().split("\n").map((l) => l.split("\t")[1]);
  assert.deepEqual(names, [
    ".gitattributes",
    ".gitignore",
    "a.txt",
    "crlf.txt",
    "sub/.gitignore",
    "sub/keep.log",
  ]);
  const crlf = ls.split("\n").find((l) => l.endsWith("\tcrlf.txt"))!.split(/\s/)[2]!;
  const raw = (await run("sh", ["-c", `git hash-object --no-filters ${w.sb.root}/crlf.txt`], {
    home: w.sb.home,
  })).trim();
  assert.equal(crlf, raw);
});

Deno.test("a nested repository and a missing tree are refused with what to do", async () => {
  const w = await world({ "a.txt": "a\n" });
  using _ = w.sb;
  await gitOk(w.sb.root, ["init", "-q", "inner"], { home: w.sb.home });
  put(w.sb.root, "inner/f", "f\n");
  await gitOk(`${w.sb.root}/inner`, ["add", "f"], { home: w.sb.home });
  await gitOk(`${w.sb.root}/inner`, ["commit", "-q", "-m", "i"], { home: w.sb.home });
  await using git = await scratch(w);
  await assert.rejects(
    sourceTreeOf(git, w.sb.root, NO_EXCLUDES),
    (e: unknown) =>
      e instanceof ResolveGitError &&
      /inner is a nested Git repository.*--filesystem/.test(e.message),
  );
  await Deno.remove(`${w.sb.root}/inner`, { recursive: true });
  const tree = await sourceTreeOf(git, w.sb.root, NO_EXCLUDES);
  for (const id of ["HEAD", "--help", tree.toUpperCase()]) {
    await assert.rejects(
      planGitMerge(git, { base: tree, source: id, branch: tree }),
      (e: unknown) =>
        e instanceof ResolveGitError &&
        /the source tree id .* is not a hex object id/.test(e.message),
    );
  }
  const missing = "0123456789012345678901234567890123456789";
  await assert.rejects(
    planGitMerge(git, { base: tree, source: tree, branch: missing }),
    (e: unknown) =>
      e instanceof ResolveGitError &&
      /the branch tree 0123456789.* is not in the object store/.test(e.message),
  );
  const blob = new TextDecoder().decode(
    await git.ok(["hash-object", "-w", "--stdin"], { stdin: new TextEncoder().encode("x\n") }),
  ).trim();
  await assert.rejects(
    planGitMerge(git, { base: blob, source: tree, branch: tree }),
    (e: unknown) =>
      e instanceof ResolveGitError &&
      /the base tree [0-9a-f]+ is not in the object store \(it is a blob\)/.test(e.message),
  );
});

Deno.test("a branch tree that would write into .marsh or .git is refused, not planned", async () => {
  const w = await world({ "a.txt": "a\n" });
  using _ = w.sb;
  const env = { GIT_OBJECT_DIRECTORY: `${w.store}/objects` };
  const opts = { home: w.sb.home, env, cwd: w.sb.root };
  const blob = (await run("sh", ["-c", "echo evil | git hash-object -w --stdin"], opts)).trim();
  const mk = async (lines: string) =>
    (await run("sh", ["-c", `printf '${lines}' | git mktree`], opts)).trim();
  await using git = await scratch(w);
  const base = await sourceTreeOf(git, w.sb.root, NO_EXCLUDES);
  const a = (await run("git", ["rev-parse", `${base}:a.txt`], opts)).trim();
  for (const name of [".marsh", ".GIT"]) {
    const inner = await mk(`100644 blob ${blob}\\tx\\n`);
    const branch = await mk(`100644 blob ${a}\\ta.txt\\n040000 tree ${inner}\\t${name}\\n`);
    await assert.rejects(
      planGitMerge(git, { base, source: base, branch }),
      (e: unknown) =>
        e instanceof Error && /invalid resolution plan: path "\.(marsh|GIT)\/x"/.test(e.message),
      name,
    );
  }
});

Deno.test("the project's own Git config runs nothing: no filter, fsmonitor or hook, and its config is not read", async () => {
  const w = await world({ "a.txt": "a\n" });
  using _ = w.sb;
  const marker = `${w.sb.outside}/ran`;
  const script = `${w.sb.outside}/evil.sh`;
  Deno.writeTextFileSync(script, `#!/bin/sh\necho "$0 $*" >> ${marker}\ncat\n`);
  Deno.chmodSync(script, 0o755);
  for (
    const [k, v] of [
      ["filter.evil.clean", script],
      ["filter.evil.required", "true"],
      ["core.fsmonitor", script],
      ["core.hooksPath", w.sb.outside],
      ["core.autocrlf", "true"],
    ] as const
  ) await w.git(["config", k, v]);
  put(w.sb.root, ".gitattributes", "* filter=evil\n");
  put(w.sb.root, "b.txt", "one\r\n");
  for (const hook of ["pre-commit", "post-index-change", "reference-transaction"]) {
    Deno.copyFileSync(script, `${w.sb.outside}/${hook}`);
  }
  const before = treeDigest(w.sb.root);
  await using git = await scratch(w);
  const tree = await sourceTreeOf(git, w.sb.root, NO_EXCLUDES);
  const r = await planGitMerge(git, { base: tree, source: tree, branch: tree });
  assert.ok(r.clean);
  assert.deepEqual(r.plan.entries, []);
  assert.equal(treeDigest(w.sb.root), before);
  assert.equal(await Deno.stat(marker).then(() => true, () => false), false, "a command ran");
  // autocrlf was not applied either: the blob is the bytes on disk.
  const ls = await gitOk(w.sb.root, ["ls-tree", tree, "b.txt"], {
    home: w.sb.home,
    env: { GIT_ALTERNATE_OBJECT_DIRECTORIES: `${w.store}/objects` },
  });
  const raw = await run("git", ["hash-object", "--no-filters", `${w.sb.root}/b.txt`], {
    home: w.sb.home,
  });
  assert.equal(ls.split(/\s/)[2], raw.trim());
  // Negative control: the project's own git does run that filter.
  await w.git(["add", "b.txt"]);
  assert.match(Deno.readTextFileSync(marker), /evil\.sh/);
});

Deno.test("the project's .gitattributes do not steer the merge: merge=union still conflicts", async () => {
  const w = await world({ ".gitattributes": "*.txt merge=union\n", "a.txt": lines(3) });
  using _ = w.sb;
  const r = await scenario(
    w,
    (fork) => put(fork, "a.txt", lines(3, { 2: "branch" })),
    (root) => put(root, "a.txt", lines(3, { 2: "source" })),
  );
  assert.ok(!r.clean);
  assert.deepEqual(r.conflicts.map((c) => c.path), ["a.txt"]);
});

Deno.test("a kept index gives the tree a fresh one gives, edit after edit, and survives corruption", async () => {
  const w = await world({ "a.txt": "aaaa\n", "b/c.txt": "c\n", "build/out.o": "o\n" });
  using _ = w.sb;
  const cache = `${w.sb.top}/source.index`;
  const fresh = () => treeOf(w, w.sb.root);
  const cached = async () => {
    await using git = await scratch(w);
    return await sourceTreeOf(git, w.sb.root, NO_EXCLUDES, { indexCache: cache });
  };
  const root = w.sb.root;
  const edits: [string, () => void][] = [
    ["nothing yet", () => {}],
    ["same size, same second", () => put(root, "a.txt", "bbbb\n")],
    ["added", () => put(root, "new.txt", "n\n")],
    ["removed", () => Deno.removeSync(`${root}/b/c.txt`)],
    ["chmod +x", () => Deno.chmodSync(`${root}/a.txt`, 0o755)],
    ["a directory now ignored", () => put(root, ".gitignore", "build/\n")],
    ["a symlink", () => Deno.symlinkSync("a.txt", `${root}/l`)],
    ["a file becomes a directory", () => {
      Deno.removeSync(`${root}/new.txt`);
      put(root, "new.txt/inner", "i\n");
    }],
    ["a corrupt cache", () => Deno.writeTextFileSync(cache, "not an index")],
  ];
  const seen = new Set<string>();
  for (const [what, edit] of edits) {
    edit();
    const want = await fresh();
    assert.equal(await cached(), want, what);
    seen.add(want);
  }
  assert.equal(seen.size, edits.length - 1, "every edit but the corruption changes the tree");
  assert.ok(Deno.statSync(cache).isFile);
});
