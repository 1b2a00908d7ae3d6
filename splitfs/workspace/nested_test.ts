/**
 * Nested splits (docs/rules.md "Nested splits"): a split whose source is a
 * branch's fork, made as a sibling under `<root>/.marsh/split/`, with its Git
 * metadata from the creator fork's admin dir. Real files, real git.
 */
import assert from "node:assert/strict";
import { alternateOf } from "../../protocol/fork_view.ts";
import {
  exists,
  fingerprint,
  fingerprintDiff,
  git,
  gitOk,
  gitProject,
  gitView,
  leaves,
  put,
  run,
  sandbox,
  text,
  throwsA,
} from "../_testing.ts";
import { SnapshotError } from "../errors.ts";
import { locateProject } from "../project_root.ts";
import { NESTED_FORK_REASON, SplitWorkspace } from "./workspace.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "cp", "awk", "umount"],
  env: ["PATH"],
};

const POLICIES = ["copy", "auto"] as const;

const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`);

/** Everything but a top-level `.git` (a gitfile in a fork). */
const noGit = (rel: string) => rel === ".git";

for (const parentForks of POLICIES) {
  Deno.test({
    name:
      `a nested split snapshots its creator's fork and Git state, and its patch applies onto the fork's state (parent forks: ${parentForks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, {
      ".gitignore": "*.log\n",
      "a.txt": lines.join(""),
      "src/b.txt": "bee\n",
      "src/keep.txt": "keep\n",
    });
    Deno.writeTextFileSync(`${sb.root}/.git/info/exclude`, "excluded.txt\n", { append: true });
    using parent = SplitWorkspace.create({
      root: sb.root,
      id: "p1",
      env: { HOME: sb.home },
      forks: parentForks,
    });
    assert.equal(parent.forkChoice.strategy, parentForks === "auto" ? "overlay" : "copy");
    const fa = parent.fork("a");
    const fb = parent.fork("b");
    const F = fa.path;

    // The branch works in its fork: a commit (moving refs/heads/marsh-split in
    // its admin dir, objects in its admin dir's objects/), then more edits.
    put(F, "a.txt", lines.with(0, "line 1 committed in the fork\n").join(""));
    put(F, "src/new.txt", "new\n");
    await gitOk(F, ["add", "-A"], opts);
    await gitOk(F, ["commit", "-q", "-m", "in the fork"], opts);
    const forkHead = (await gitOk(F, ["rev-parse", "HEAD"], opts)).trim();
    assert.match(
      text(`${sb.root}/.marsh/split/p1/.admin/a/refs/heads/marsh-split`),
      new RegExp(`^${forkHead}`),
    );
    put(F, "src/b.txt", "bee, uncommitted\n");
    put(F, "src/.gitignore", "*.tmp\n");
    put(F, "src/t.tmp", "ignored by the fork's own .gitignore\n");
    put(F, "debug.log", "ignored\n");
    put(F, "excluded.txt", "info/exclude\n");
    put(F, "untracked.txt", "untracked\n");

    // locate: the original root, the cwd relative to the fork.
    const sub = `${F}/src`;
    assert.deepEqual(locateProject(sub, { split: "p1", label: "a" }), {
      root: sb.root,
      cwd: "src",
      git: true,
    });
    assert.deepEqual(locateProject(F, { split: "p1", label: "a" }), {
      root: sb.root,
      cwd: "",
      git: true,
    });
    // Without a parent a fork is still refused; with one, only its own fork is taken.
    assert.match(throwsA(() => locateProject(sub), SnapshotError).message, /inside \.marsh/);
    for (
      const cwd of [
        sb.root,
        `${sb.root}/src`,
        fb.path,
        `${sb.root}/.marsh/split/p1`,
        `${sb.root}/.marsh/split/p1/base`,
        `${sb.root}/.marsh/split/p1/.admin/a`,
        sb.outside,
      ]
    ) {
      const err = throwsA(() => locateProject(cwd, { split: "p1", label: "a" }), SnapshotError);
      assert.match(err.message, /is not inside the fork \.marsh\/split\/p1\/a/, cwd);
    }
    assert.match(
      throwsA(() => locateProject(F, { split: "p1", label: "b" }), SnapshotError).message,
      /not inside the fork/,
    );
    // A symlink into the fork is resolved first: its real path is what counts.
    Deno.symlinkSync(sub, `${sb.outside}/to-fork`);
    assert.equal(
      locateProject(`${sb.outside}/to-fork`, { split: "p1", label: "a" }).cwd,
      "src",
    );
    // A `.marsh/split/p1/a` the branch made inside its fork is fork content.
    Deno.mkdirSync(`${F}/deep/.marsh/split/p1/a`, { recursive: true });
    assert.deepEqual(locateProject(`${F}/deep/.marsh/split/p1/a`, { split: "p1", label: "a" }), {
      root: sb.root,
      cwd: "deep/.marsh/split/p1/a",
      git: true,
    });
    Deno.removeSync(`${F}/deep`, { recursive: true });

    // Git in the creator's fork refreshes its index: asked before anything is fingerprinted.
    const forkStatus = await gitOk(F, ["status", "--porcelain"], opts);
    const userGit = fingerprint(`${sb.root}/.git`, { times: true });
    const parentFork = fingerprint(F, { times: true });
    const parentAdmin = fingerprint(`${sb.root}/.marsh/split/p1/.admin/a`, { times: true });

    using nested = SplitWorkspace.create({
      root: sb.root,
      id: "n1",
      env: { HOME: sb.home },
      forks: "auto",
      parent: { split: "p1", label: "a" },
    });
    // A sibling, taking copies.
    assert.equal(nested.dirPath, `${sb.root}/.marsh/split/n1`);
    assert.equal(nested.root, sb.root);
    assert.deepEqual(nested.parent, { split: "p1", label: "a" });
    assert.deepEqual(nested.forkChoice, { strategy: "copy", reason: NESTED_FORK_REASON });
    assert.equal(exists(`${F}/.marsh`), false);
    // The snapshot is the fork as Git in the fork sees it: tracked and
    // untracked files, minus what .gitignore files and info/exclude ignore.
    const base = `${nested.dirPath}/base`;
    const listed = (await gitOk(F, ["ls-files", "-co", "--exclude-standard"], opts))
      .split("\n").filter((p) => p !== "").sort();
    assert.deepEqual(leaves(base), listed);
    assert.deepEqual(listed, [
      ".gitignore",
      "a.txt",
      "src/.gitignore",
      "src/b.txt",
      "src/keep.txt",
      "src/new.txt",
      "untracked.txt",
    ]);
    const src = fingerprint(F, { skip: noGit });
    for (const [rel, v] of fingerprint(base)) assert.equal(v, src.get(rel), rel);
    assert.equal(exists(`${base}/.git`), false);
    // HEAD is the fork's commit; the objects include the creator fork's own.
    assert.equal(nested.git?.head, forkHead);
    assert.deepEqual(nested.objectDirs, [
      `${nested.dirPath}/store.git/objects`,
      `${sb.root}/.marsh/split/p1/store.git/objects`,
      `${sb.root}/.git/objects`,
      `${sb.root}/.marsh/split/p1/.admin/a/objects`,
    ]);

    const x = nested.fork("x");
    assert.equal(x.path, `${sb.root}/.marsh/split/n1/x`);
    assert.ok(["reflink", "copy_file_range", "copy"].includes(x.strategy), x.strategy);
    // Git works in the nested fork and sees what it sees in the creator's fork.
    assert.equal(
      (await gitOk(x.path, ["rev-parse", "HEAD", "--abbrev-ref", "HEAD"], opts)).trim(),
      `${forkHead}\nmarsh-split`,
    );
    assert.equal(await gitOk(x.path, ["status", "--porcelain"], opts), forkStatus);
    assert.match(forkStatus, /^ M src\/b\.txt$/m);
    assert.equal(await gitOk(x.path, ["log", "-1", "--format=%s"], opts), "in the fork\n");
    assert.equal(
      text(`${sb.root}/.marsh/split/n1/.admin/x/objects/info/alternates`),
      nested.objectDirs.map((d) => `${alternateOf(d)}\n`).join(""),
    );

    // The nested branch's work.
    const nestedA = lines.with(0, "line 1 committed in the fork\n").with(9, "line 10 nested\n");
    put(x.path, "a.txt", nestedA.join(""));
    put(x.path, "src/c.txt", "sea\n");
    Deno.removeSync(`${x.path}/src/keep.txt`);
    put(x.path, "src/t.tmp", "still ignored\n");
    const summary = nested.capture("x");
    assert.equal(summary.files, 3);
    assert.equal(
      text(`${nested.dirPath}/out/x/files`),
      "M\ta.txt\nA\tsrc/c.txt\nD\tsrc/keep.txt\n",
    );
    const patch = `${nested.dirPath}/out/x/diff.patch`;

    // Nothing of the creator's (fork, admin dir) nor the user's .git changed.
    assert.deepEqual(fingerprintDiff(userGit, fingerprint(`${sb.root}/.git`, { times: true })), []);
    assert.deepEqual(fingerprintDiff(parentFork, fingerprint(F, { times: true })), []);
    assert.deepEqual(
      fingerprintDiff(
        parentAdmin,
        fingerprint(`${sb.root}/.marsh/split/p1/.admin/a`, { times: true }),
      ),
      [],
    );

    // git apply onto a checkout of the creator fork's state gives the nested fork's tree.
    const checkout = `${sb.top}/checkout`;
    Deno.mkdirSync(checkout);
    await run("cp", ["-a", `${F}/.`, checkout], opts);
    Deno.removeSync(`${checkout}/.git`);
    await gitOk(checkout, ["apply", "--check", patch], opts);
    await gitOk(checkout, ["apply", patch], opts);
    // Ignored files are the fork's own business: they stay out of snapshots and patches.
    const ignored = new Set(["debug.log", "excluded.txt", "src/t.tmp"]);
    const view = (dir: string) => new Map([...gitView(dir)].filter(([rel]) => !ignored.has(rel)));
    assert.deepEqual(fingerprintDiff(view(x.path), view(checkout)), []);

    // --3way onto a diverged copy of the fork's state, with the nested
    // split's object dirs: the preimage blob is in its store.
    const consumer = `${sb.top}/consumer`;
    Deno.mkdirSync(consumer);
    await run("cp", ["-a", `${F}/.`, consumer], opts);
    Deno.removeSync(`${consumer}/.git`);
    await gitOk(consumer, ["init", "-q", "-b", "main"], opts);
    const forkA = lines.with(0, "line 1 committed in the fork\n");
    assert.equal(text(`${F}/a.txt`), forkA.join(""));
    put(consumer, "a.txt", forkA.with(11, "line 12 from the consumer\n").join(""));
    await gitOk(consumer, ["add", "-A"], opts);
    await gitOk(consumer, ["commit", "-q", "-m", "diverged"], opts);
    assert.notEqual((await git(consumer, ["apply", "--3way", patch], opts)).code, 0);
    assert.equal(await gitOk(consumer, ["status", "--porcelain"], opts), "");
    const env = { GIT_ALTERNATE_OBJECT_DIRECTORIES: nested.objectDirs.join(":") };
    await gitOk(consumer, ["apply", "--3way", patch], { ...opts, env });
    assert.equal(
      text(`${consumer}/a.txt`),
      nestedA.with(11, "line 12 from the consumer\n").join(""),
    );
    assert.equal(text(`${consumer}/src/c.txt`), "sea\n");
    assert.equal(exists(`${consumer}/src/keep.txt`), false);

    nested.remove();
    assert.equal(exists(`${sb.root}/.marsh/split/n1`), false);
    assert.deepEqual(fingerprintDiff(parentFork, fingerprint(F, { times: true })), []);
    parent.remove();
  });
}

Deno.test({
  name: "a nested split of a nested split stacks its creators' object dirs",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n" });
  using p = SplitWorkspace.create({ root: sb.root, id: "p1", env: { HOME: sb.home } });
  const fa = p.fork("a");
  put(fa.path, "a.txt", "a from p1/a\n");
  await gitOk(fa.path, ["commit", "-q", "-am", "p1/a"], opts);
  using n = SplitWorkspace.create({
    root: sb.root,
    id: "n1",
    env: { HOME: sb.home },
    parent: { split: "p1", label: "a", objectDirs: p.objectDirs },
  });
  const fx = n.fork("x");
  put(fx.path, "a.txt", "a from n1/x\n");
  await gitOk(fx.path, ["commit", "-q", "-am", "n1/x"], opts);
  const xHead = (await gitOk(fx.path, ["rev-parse", "HEAD"], opts)).trim();
  using m = SplitWorkspace.create({
    root: sb.root,
    id: "m1",
    env: { HOME: sb.home },
    parent: { split: "n1", label: "x", objectDirs: n.objectDirs },
  });
  assert.equal(m.git?.head, xHead);
  assert.deepEqual(m.objectDirs, [
    `${sb.root}/.marsh/split/m1/store.git/objects`,
    ...n.objectDirs,
    `${sb.root}/.marsh/split/n1/.admin/x/objects`,
  ]);
  const fy = m.fork("y");
  assert.equal(text(`${fy.path}/a.txt`), "a from n1/x\n");
  // Both commits are reachable from the doubly nested fork.
  assert.equal(
    await gitOk(fy.path, ["log", "--format=%s"], opts),
    "n1/x\np1/a\ninitial\n",
  );
  assert.equal(await gitOk(fy.path, ["status", "--porcelain"], opts), "");
});

Deno.test({
  name: "a nested split of a project without Git copies the fork and has no Git metadata",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  put(sb.root, "debug.log", "no ignore rules without Git\n");
  using p = SplitWorkspace.create({ root: sb.root, id: "p1", env: {} });
  const fa = p.fork("a");
  put(fa.path, "b.txt", "b\n");
  using n = SplitWorkspace.create({
    root: sb.root,
    id: "n1",
    env: {},
    parent: { split: "p1", label: "a" },
  });
  assert.equal(n.git, null);
  assert.deepEqual(leaves(`${n.dirPath}/base`), ["a.txt", "b.txt", "debug.log"]);
  const fx = n.fork("x");
  assert.equal(exists(`${fx.path}/.git`), false);
  put(fx.path, "a.txt", "A\n");
  assert.equal(n.capture("x").files, 1);
  assert.match(text(`${n.dirPath}/out/x/diff.patch`), /^\+A$/m);
});

Deno.test({
  name:
    "SplitWorkspace.create refuses a nested split whose creator fork is missing, leaving nothing",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  using p = SplitWorkspace.create({ root: sb.root, id: "p1", env: { HOME: sb.home } });
  p.fork("a");
  const before = fingerprint(sb.top);
  for (
    const parent of [
      { split: "p1", label: "nope" },
      { split: "p2", label: "a" },
      { split: "p1", label: "out" },
      { split: "P1", label: "a" },
      { split: "n1", label: "a" },
    ]
  ) {
    throwsA(
      () => SplitWorkspace.create({ root: sb.root, id: "n1", env: {}, parent }),
      SnapshotError,
    );
  }
  // A symlink planted where the fork was is refused, not followed.
  Deno.renameSync(`${sb.root}/.marsh/split/p1/a`, `${sb.top}/moved`);
  Deno.symlinkSync(`${sb.top}/moved`, `${sb.root}/.marsh/split/p1/a`);
  const err = throwsA(
    () =>
      SplitWorkspace.create({
        root: sb.root,
        id: "n1",
        env: {},
        parent: { split: "p1", label: "a" },
      }),
    SnapshotError,
  );
  assert.match(err.message, /fork is missing or not a directory/);
  assert.equal(exists(`${sb.root}/.marsh/split/n1`), false);
  Deno.removeSync(`${sb.root}/.marsh/split/p1/a`);
  Deno.renameSync(`${sb.top}/moved`, `${sb.root}/.marsh/split/p1/a`);
  assert.deepEqual(fingerprintDiff(before, fingerprint(sb.top)), []);
});
