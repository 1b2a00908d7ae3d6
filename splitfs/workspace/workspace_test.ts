import assert from "node:assert/strict";
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
import { RejectedError, SnapshotError } from "../errors.ts";
import { GITFILE_ROOT_REFUSAL } from "../git/git_source.ts";
import { type CreateOptions, SplitWorkspace } from "./workspace.ts";

// Real files, real git, real overlay mounts (the tests run as root). Git runs
// with a private HOME, no system config and (unless a test sets one on
// purpose) no global config. awk and umount: the sandbox's dispose unmounts
// whatever a test left mounted.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "cp", "touch", "awk", "umount"],
  env: ["PATH"],
};

/**
 * Both fork policies: `copy` (a copied base, copy forks) and `auto` (a
 * layered base mounted read-only, overlay forks).
 */
const POLICIES = ["copy", "auto"] as const;
type Policy = typeof POLICIES[number];

/**
 * `SplitWorkspace.create` under `forks`, checking that `auto` really took
 * overlay forks: a silent fallback to copies would test copies twice.
 */
function create(
  opts: Omit<CreateOptions, "id" | "forks"> & { id?: string },
  forks: Policy,
): SplitWorkspace {
  const ws = SplitWorkspace.create({ id: "s1", ...opts, forks });
  try {
    assert.equal(ws.forkChoice.strategy, forks === "auto" ? "overlay" : "copy");
  } catch (error) {
    ws.close();
    throw error;
  }
  return ws;
}

const MiB = 1024 * 1024;

function splitDir(root: string, id = "s1"): string {
  return `${root}/.marsh/split/${id}`;
}

function filesOf(root: string, label: string, id = "s1"): string[] {
  return text(`${splitDir(root, id)}/out/${label}/files`).split("\n").filter((l) => l !== "");
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.create snapshots a Git project as Git's ignore rules say (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const home = { home: sb.home, globalConfig: true };
    const lfsPointer = "version https://git-lfs.github.com/spec/v1\n" +
      "oid sha256:4d7a214614ab2935c943f9e0ff69d22eadbb8f32b1258daaa5e2ca24d17e2393\nsize 12345\n";
    await gitProject(sb, {
      ".gitignore": "*.log\n!keep.log\nbuild/\n!build/rescued.txt\ntracked-ignored.txt\n*.dat\n",
      ".gitattributes": "*.bin filter=lfs diff=lfs merge=lfs -text\nwin.txt text eol=crlf\n",
      "src/main.ts": "console.log(1);\n",
      "model.bin": lfsPointer,
      "win.txt": "line one\r\nline two\r\n",
    });
    put(sb.root, "exec.sh", "#!/bin/sh\n", 0o755);
    put(sb.root, "tracked-ignored.txt", "tracked, then ignored\n");
    await gitOk(sb.root, ["add", "-f", "tracked-ignored.txt", "exec.sh"], home);
    await gitOk(sb.root, ["commit", "-q", "-m", "more"], home);
    const head = (await gitOk(sb.root, ["rev-parse", "HEAD"], home)).trim();
    for (
      const rel of [
        "a.log",
        "keep.log",
        "build/out.o",
        "build/rescued.txt",
        "x.dat",
        "sub/important.dat",
        "sub/other.dat",
        "sub/t.tmp",
        "t.tmp",
        "info-excluded.txt",
        "deep/dir/info-excluded.txt",
        "z.globalignored",
        "sub/y.globalignored",
        ".marsh/notes",
      ]
    ) put(sb.root, rel, `${rel}\n`);
    put(sb.root, "sub/.gitignore", "!important.dat\n*.tmp\n");
    Deno.writeTextFileSync(`${sb.root}/.git/info/exclude`, "info-excluded.txt\n", { append: true });
    put(sb.home, ".gitconfig", "[core]\n\texcludesFile = ~/global-ignore\n");
    put(sb.home, "global-ignore", "*.globalignored\n");
    Deno.symlinkSync(sb.outside, `${sb.root}/link-out`);
    Deno.symlinkSync("src/main.ts", `${sb.root}/link-rel`);
    put(sb.outside, "secret", "outside\n");

    const expected = [
      ".gitattributes",
      ".gitignore",
      "exec.sh",
      "keep.log",
      "link-out",
      "link-rel",
      "model.bin",
      "src/main.ts",
      "sub/.gitignore",
      "sub/important.dat",
      "t.tmp",
      "win.txt",
    ];
    // The expectation is Git's own: everything it lists, minus tracked files it ignores.
    const listed = (await gitOk(sb.root, ["ls-files", "-co", "--exclude-standard"], home))
      .split("\n").filter((p) => p !== "" && !p.startsWith(".marsh/"));
    const trackedIgnored = (await gitOk(sb.root, ["ls-files", "-ci", "--exclude-standard"], home))
      .split("\n").filter((p) => p !== "");
    assert.deepEqual(trackedIgnored, ["tracked-ignored.txt"]);
    assert.deepEqual(listed.filter((p) => !trackedIgnored.includes(p)).sort(), expected);

    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const base = `${splitDir(sb.root)}/base`;
    assert.deepEqual(leaves(base), expected);
    assert.equal(exists(`${base}/build`), false, "an ignored directory is pruned whole");
    assert.equal(exists(`${base}/.marsh`), false);
    assert.equal(exists(`${base}/.git`), false);
    // Raw bytes and modes: the CRLF working-tree file, the LFS pointer, the symlinks as links.
    const src = fingerprint(sb.root, { skip: (rel) => rel === ".git" || rel === ".marsh" });
    for (const [rel, v] of fingerprint(base)) assert.equal(v, src.get(rel), rel);
    assert.equal(text(`${base}/win.txt`), "line one\r\nline two\r\n");
    assert.equal(text(`${base}/model.bin`), lfsPointer);
    assert.equal(Deno.readLinkSync(`${base}/link-out`), sb.outside);
    assert.equal(Deno.lstatSync(`${base}/link-out`).isSymlink, true);
    assert.equal(ws.git?.head, head);
    assert.equal(text(`${sb.root}/.marsh/.gitignore`), "*\n");
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.create refuses a project root whose .git is a gitfile and leaves nothing (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, ".git", `gitdir: ${sb.outside}/wt\n`);
    put(sb.root, "a.txt", "a\n");
    const before = fingerprint(sb.top, { times: true });
    const err = throwsA(
      () => create({ root: sb.root, env: {} }, forks),
      SnapshotError,
    );
    assert.equal(err.message, GITFILE_ROOT_REFUSAL);
    assert.deepEqual(fingerprintDiff(before, fingerprint(sb.top, { times: true })), []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace leaves the user's .git byte for byte unchanged from create to remove (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n", "dir/b.txt": "b\n" });
    put(sb.root, "a.txt", "worktree edit\n");
    await gitOk(sb.root, ["pack-refs", "--all"], { home: sb.home });
    const before = fingerprint(`${sb.root}/.git`, { times: true });
    const tree = fingerprint(sb.root, { times: true, skip: (r) => r === ".git" || r === ".marsh" });
    const ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "fork edit\n");
    put(fork.path, "new.txt", "new\n");
    Deno.removeSync(`${fork.path}/dir/b.txt`);
    const summary = ws.capture("a");
    assert.equal(summary.files, 3);
    ws.remove();
    assert.deepEqual(fingerprintDiff(before, fingerprint(`${sb.root}/.git`, { times: true })), []);
    assert.deepEqual(
      fingerprintDiff(
        tree,
        fingerprint(sb.root, { times: true, skip: (r) => r === ".git" || r === ".marsh" }),
      ),
      [],
    );
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.fork gives a branch a private copy where real git status, diff and commit work (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    const head = await gitProject(sb, { "a.txt": "old\n", "b.txt": "b\n", "dir/c.txt": "c\n" });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const a = ws.fork("a");
    const b = ws.fork("b");
    const strategies = forks === "auto" ? ["overlay"] : ["reflink", "copy_file_range", "copy"];
    assert.ok(strategies.includes(a.strategy), a.strategy);
    assert.equal(a.path, `${splitDir(sb.root)}/a`);
    assert.deepEqual(ws.labels, ["a", "b"]);
    const admin = `${splitDir(sb.root)}/.admin/a`;
    assert.equal(text(`${a.path}/.git`), `gitdir: ${admin}\n`);
    const headFile = Deno.readFileSync(`${admin}/HEAD`);
    // Git freshens (utime) an object it would write when an alternate already
    // has it, so the user's objects are compared by bytes and mode, not times.
    // An overlay fork's writes land in its upper layer, `.overlay/a`.
    const outsideFork = (rel: string) =>
      rel === ".marsh/split/s1/a" || rel === ".marsh/split/s1/.admin/a" ||
      rel === ".marsh/split/s1/.overlay/a" || rel === ".git/objects";
    const userObjects = `${sb.root}/.git/objects`;
    const before = fingerprint(sb.root, { times: true, skip: outsideFork });
    const objectsBefore = fingerprint(userObjects);

    // The branch edits in place (same inode), adds and deletes.
    Deno.writeTextFileSync(`${a.path}/a.txt`, "new\n");
    put(a.path, "new.txt", "added\n");
    Deno.removeSync(`${a.path}/b.txt`);
    assert.equal(
      await gitOk(a.path, ["status", "--porcelain"], opts),
      " M a.txt\n D b.txt\n?? new.txt\n",
    );
    const diff = await gitOk(a.path, ["diff"], opts);
    assert.match(diff, /^-old\n\+new$/m);
    await gitOk(a.path, ["add", "-A"], opts);
    await gitOk(a.path, ["commit", "-q", "-m", "from the fork"], opts);
    const commit = (await gitOk(a.path, ["rev-parse", "HEAD"], opts)).trim();
    assert.notEqual(commit, head);
    assert.equal((await gitOk(a.path, ["rev-parse", "HEAD^"], opts)).trim(), head);
    assert.equal(text(`${admin}/refs/heads/marsh-split`), `${commit}\n`);
    assert.deepEqual(Deno.readFileSync(`${admin}/HEAD`), headFile);
    assert.equal(await gitOk(a.path, ["status", "--porcelain"], opts), "");

    // Nothing outside the fork and its admin dir moved: not the user's tree or
    // .git, not the base, not the other fork, not the store.
    assert.deepEqual(
      fingerprintDiff(before, fingerprint(sb.root, { times: true, skip: outsideFork })),
      [],
    );
    assert.deepEqual(fingerprintDiff(objectsBefore, fingerprint(userObjects)), []);
    assert.equal(text(`${splitDir(sb.root)}/base/a.txt`), "old\n");
    assert.equal(text(`${b.path}/a.txt`), "old\n");
    assert.equal((await gitOk(sb.root, ["rev-parse", "HEAD"], opts)).trim(), head);

    // A fork that committed is still captured, from the snapshot to the fork's files.
    const summary = ws.capture("a");
    assert.equal(summary.files, 3);
    assert.deepEqual(filesOf(sb.root, "a"), ["M\ta.txt", "D\tb.txt", "A\tnew.txt"]);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.fork carries a split index, so Git works in a fork of such a repository (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitOk(sb.root, ["init", "-q", "-b", "main"], opts);
    await gitOk(sb.root, ["config", "core.splitIndex", "true"], opts);
    put(sb.root, "a.txt", "a\n");
    put(sb.root, "b.txt", "b\n");
    await gitOk(sb.root, ["add", "-A"], opts);
    await gitOk(sb.root, ["commit", "-q", "-m", "initial"], opts);
    assert.ok(
      [...Deno.readDirSync(`${sb.root}/.git`)].some((e) => e.name.startsWith("sharedindex.")),
    );
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "changed\n");
    assert.equal(await gitOk(fork.path, ["status", "--porcelain"], opts), " M a.txt\n");
    await gitOk(fork.path, ["commit", "-q", "-a", "-m", "in the fork"], opts);
    assert.equal(await gitOk(fork.path, ["status", "--porcelain"], opts), "");
    assert.equal(ws.capture("a").files, 1);
  });
}

/** The project the round-trip tests start from, and the branch's edits. */
const ROUND_TRIP_PROJECT: Record<string, string | Uint8Array> = {
  "mod.txt": "one\ntwo\nthree\n",
  "keep.txt": "same\n",
  "del.txt": "bye\n",
  "gone/sub/deep.txt": "deep\n",
  "tolink": "was a file\n",
  "exec.sh": "#!/bin/sh\necho hi\n",
  "unexec.sh": "#!/bin/sh\necho unexec\n",
  "d2f/inner.txt": "inner\n",
  "f2d": "file\n",
  "bin.dat": new Uint8Array([0, 1, 2, 3, 255, 0, 10, 13]),
  "crlf.txt": "a\r\nb\r\n",
  "nonl.txt": "no newline",
  "sp ace.txt": "space\n",
  "empty-gone": "",
};

function branchEdits(fork: string): void {
  put(fork, "mod.txt", "one\n2\nthree\n");
  Deno.removeSync(`${fork}/del.txt`);
  Deno.removeSync(`${fork}/gone`, { recursive: true });
  Deno.removeSync(`${fork}/empty-gone`);
  put(fork, "add.txt", "new\n");
  put(fork, "newdir/x/y.txt", "y\n");
  put(fork, "empty-new", "");
  Deno.removeSync(`${fork}/tolink`);
  Deno.symlinkSync("keep.txt", `${fork}/tolink`);
  Deno.removeSync(`${fork}/link`);
  put(fork, "link", "now a file\n");
  Deno.removeSync(`${fork}/relink`);
  Deno.symlinkSync("mod.txt", `${fork}/relink`);
  Deno.chmodSync(`${fork}/exec.sh`, 0o755);
  put(fork, "unexec.sh", "changed\n", 0o644);
  Deno.removeSync(`${fork}/d2f`, { recursive: true });
  put(fork, "d2f", "d2f is a file\n");
  Deno.removeSync(`${fork}/f2d`);
  put(fork, "f2d/inside.txt", "inside\n");
  put(fork, "bin.dat", new Uint8Array([0, 9, 8, 7, 0, 255]));
  put(fork, "crlf.txt", "a\r\nB\r\n");
  put(fork, "nonl.txt", "no newline!");
  put(fork, "sp ace.txt", "spaced out\n");
}

const ROUND_TRIP_FILES = [
  "A\tadd.txt",
  "A\td2f",
  "A\tempty-new",
  "A\tf2d/inside.txt",
  "A\tnewdir/x/y.txt",
  "D\td2f/inner.txt",
  "D\tdel.txt",
  "D\tempty-gone",
  "D\tf2d",
  "D\tgone/sub/deep.txt",
  "M\tbin.dat",
  "M\tcrlf.txt",
  "M\texec.sh",
  "M\tmod.txt",
  "M\tnonl.txt",
  "M\trelink",
  "M\tsp ace.txt",
  "M\tunexec.sh",
  "T\tlink",
  "T\ttolink",
];

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture writes a patch with which real git apply reproduces the fork (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, ROUND_TRIP_PROJECT);
    Deno.chmodSync(`${sb.root}/unexec.sh`, 0o755);
    Deno.symlinkSync("keep.txt", `${sb.root}/link`);
    Deno.symlinkSync("keep.txt", `${sb.root}/relink`);
    await gitOk(sb.root, ["add", "-A"], opts);
    await gitOk(sb.root, ["commit", "-q", "-m", "links"], opts);
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    branchEdits(fork.path);
    const summary = ws.capture("a");

    assert.deepEqual(filesOf(sb.root, "a").sort(), ROUND_TRIP_FILES);
    assert.equal(summary.files, ROUND_TRIP_FILES.length);
    const patch = `${splitDir(sb.root)}/out/a/diff.patch`;
    const consumer = `${sb.top}/consumer`;
    await run("cp", ["-a", sb.root, consumer], opts);
    Deno.removeSync(`${consumer}/.marsh`, { recursive: true });
    await gitOk(consumer, ["apply", "--check", patch], opts);
    await gitOk(consumer, ["apply", patch], opts);
    assert.deepEqual(fingerprintDiff(gitView(fork.path), gitView(consumer)), []);
    await gitOk(consumer, ["apply", "-R", patch], opts);
    assert.deepEqual(fingerprintDiff(gitView(sb.root), gitView(consumer)), []);

    // Every pre- and post-image on an index line is a blob in store.git.
    const ids = [...text(patch).matchAll(/^index ([0-9a-f]{40})\.\.([0-9a-f]{40})/gm)]
      .flatMap((m) => [m[1]!, m[2]!]).filter((id) => !/^0+$/.test(id));
    assert.ok(ids.length >= 20, `only ${ids.length} blob ids in the patch`);
    const store = `--git-dir=${splitDir(sb.root)}/store.git`;
    for (const id of ids) {
      const r = await git(sb.top, [store, "cat-file", "-e", id], opts);
      assert.equal(r.code, 0, `blob ${id} is not in store.git: ${r.stderr}`);
    }
    const modId = (await gitOk(fork.path, ["hash-object", "mod.txt"], opts)).trim();
    assert.equal(await gitOk(sb.top, [store, "cat-file", "blob", modId], opts), "one\n2\nthree\n");
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture's store lets git apply --3way merge into a diverged project (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`);
    await gitProject(sb, { "a.txt": lines.join("") });
    // The snapshot's a.txt is an uncommitted edit: its blob is in no repository but the store.
    const snap = ["line 1 edited in the worktree\n", ...lines.slice(1)];
    put(sb.root, "a.txt", snap.join(""));
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    const forked = snap.with(9, "line 10 from the fork\n");
    put(fork.path, "a.txt", forked.join(""));
    ws.capture("a");
    const patch = `${splitDir(sb.root)}/out/a/diff.patch`;

    // The consumer changed line 12, inside the hunk's context but not the same line.
    const consumer = `${sb.top}/consumer`;
    Deno.mkdirSync(consumer);
    await gitOk(consumer, ["init", "-q", "-b", "main"], opts);
    put(consumer, "a.txt", snap.with(11, "line 12 from the consumer\n").join(""));
    await gitOk(consumer, ["add", "-A"], opts);
    await gitOk(consumer, ["commit", "-q", "-m", "diverged"], opts);
    assert.notEqual((await git(consumer, ["apply", "--check", patch], opts)).code, 0);
    assert.notEqual((await git(consumer, ["apply", "--3way", patch], opts)).code, 0);
    assert.equal(await gitOk(consumer, ["status", "--porcelain"], opts), "");

    const env = { GIT_ALTERNATE_OBJECT_DIRECTORIES: ws.objectDirs[0]! };
    assert.equal(ws.objectDirs[0], `${splitDir(sb.root)}/store.git/objects`);
    await gitOk(consumer, ["apply", "--3way", patch], { ...opts, env });
    assert.equal(
      text(`${consumer}/a.txt`),
      forked.with(11, "line 12 from the consumer\n").join(""),
    );
  });
}

Deno.test({
  name:
    "SplitWorkspace.capture of an overlay fork and of a copy fork with the same edits writes byte-identical patches that git apply takes",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  const lines = Array.from({ length: 30 }, (_, i) => `line ${i + 1}\n`);
  await gitProject(sb, { ...ROUND_TRIP_PROJECT, "long.txt": lines.join("") });
  Deno.chmodSync(`${sb.root}/unexec.sh`, 0o755);
  Deno.symlinkSync("keep.txt", `${sb.root}/link`);
  Deno.symlinkSync("keep.txt", `${sb.root}/relink`);
  await gitOk(sb.root, ["add", "-A"], opts);
  await gitOk(sb.root, ["commit", "-q", "-m", "links"], opts);
  // An uncommitted edit: its blob is in no repository but each split's store.
  const snap = ["line 1 edited in the worktree\n", ...lines.slice(1)];
  put(sb.root, "long.txt", snap.join(""));
  using copied = create({ root: sb.root, id: "copy", env: { HOME: sb.home } }, "copy");
  using layered = create({ root: sb.root, id: "overlay", env: { HOME: sb.home } }, "auto");
  const forked = snap.with(9, "line 10 from the fork\n");
  for (const ws of [copied, layered]) {
    const fork = ws.fork("a");
    branchEdits(fork.path);
    put(fork.path, "long.txt", forked.join(""));
    ws.capture("a");
  }
  const out = (id: string) => `${splitDir(sb.root, id)}/out/a`;
  const patch = `${out("overlay")}/diff.patch`;
  assert.deepEqual(Deno.readFileSync(patch), Deno.readFileSync(`${out("copy")}/diff.patch`));
  assert.equal(text(`${out("overlay")}/files`), text(`${out("copy")}/files`));
  assert.deepEqual(
    filesOf(sb.root, "a", "overlay").sort(),
    [...ROUND_TRIP_FILES, "M\tlong.txt"].sort(),
  );

  // Plain apply onto a copy of the real repository reproduces the overlay fork.
  const consumer = `${sb.top}/consumer`;
  await run("cp", ["-a", sb.root, consumer], opts);
  Deno.removeSync(`${consumer}/.marsh`, { recursive: true });
  await gitOk(consumer, ["apply", "--check", patch], opts);
  await gitOk(consumer, ["apply", patch], opts);
  assert.deepEqual(
    fingerprintDiff(gitView(`${splitDir(sb.root, "overlay")}/a`), gitView(consumer)),
    [],
  );

  // --3way onto the real repository after it diverged; the preimage, the
  // uncommitted edit, is only in the split's store.
  put(sb.root, "long.txt", snap.with(11, "line 12 from the project\n").join(""));
  await gitOk(sb.root, ["add", "-A"], opts);
  assert.notEqual((await git(sb.root, ["apply", "--check", patch], opts)).code, 0);
  assert.notEqual((await git(sb.root, ["apply", "--3way", patch], opts)).code, 0);
  const env = { GIT_ALTERNATE_OBJECT_DIRECTORIES: layered.objectDirs[0]! };
  await gitOk(sb.root, ["apply", "--3way", patch], { ...opts, env });
  assert.equal(
    text(`${sb.root}/long.txt`),
    forked.with(11, "line 12 from the project\n").join(""),
  );
  assert.equal(text(`${sb.root}/mod.txt`), "one\n2\nthree\n");
});

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture sees a same-size edit whose mtime was put back (ctime rule) (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    put(sb.root, "same.txt", "aaaa\n");
    put(sb.root, "other.txt", "oooo\n");
    await run("touch", ["-d", "@1600000000", "same.txt", "other.txt"], { ...opts, cwd: sb.root });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    const baseSt = Deno.lstatSync(`${splitDir(sb.root)}/base/same.txt`);
    Deno.writeTextFileSync(`${fork.path}/same.txt`, "bbbb\n");
    await run("touch", ["-d", "@1600000000", "same.txt"], { ...opts, cwd: fork.path });
    const forkSt = Deno.lstatSync(`${fork.path}/same.txt`);
    assert.equal(forkSt.size, baseSt.size);
    assert.equal(forkSt.mtime?.getTime(), baseSt.mtime?.getTime());
    ws.capture("a");
    assert.deepEqual(filesOf(sb.root, "a"), ["M\tsame.txt"]);
    assert.match(text(`${splitDir(sb.root)}/out/a/diff.patch`), /^-aaaa\n\+bbbb$/m);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture skips new ignored paths but compares every snapshot path (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, {
      ".gitignore": "*.log\n",
      "sub/.gitignore": "*.cache\n",
      "sub/keep.txt": "keep\n",
      "tracked.out": "tracked\n",
    });
    Deno.writeTextFileSync(`${sb.root}/.git/info/exclude`, "*.tmp\nscratch/\n", { append: true });
    put(sb.home, ".gitconfig", "[core]\n\texcludesFile = ~/global-ignore\n");
    put(sb.home, "global-ignore", "*.glob\n");
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    const f = fork.path;
    Deno.writeTextFileSync(`${f}/.gitignore`, "builddir/\n*.out\n!wanted.log\n", { append: true });
    for (
      const rel of [
        "x.log",
        "sub/y.cache",
        "z.tmp",
        "scratch/a.txt",
        "w.glob",
        "sub/deeper/v.glob",
        "builddir/o.txt",
        "new.out",
        "newdir/secret",
      ]
    ) put(f, rel, "ignored\n");
    put(f, "wanted.log", "negated\n");
    put(f, "new.txt", "new\n");
    put(f, "sub/z.cache2", "not ignored\n");
    put(f, "newdir/.gitignore", "secret\n");
    put(f, "newdir/ok", "ok\n");
    put(f, "tracked.out", "changed, and matches a rule added in the fork\n");

    const summary = ws.capture("a");
    assert.deepEqual(filesOf(sb.root, "a"), [
      "M\t.gitignore",
      "A\tnew.txt",
      "A\tnewdir/.gitignore",
      "A\tnewdir/ok",
      "A\tsub/z.cache2",
      "M\ttracked.out",
      "A\twanted.log",
    ]);
    assert.ok(summary.skippedIgnored >= 8, `skipped ${summary.skippedIgnored}`);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture of an unchanged fork writes an empty files list and no patch (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n", "dir/b.txt": "b\n" });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    // Git's own writes (the index refresh) are in the admin dir, not the fork.
    assert.equal(await gitOk(fork.path, ["status", "--porcelain"], { home: sb.home }), "");
    const summary = ws.capture("a");
    assert.equal(summary.files, 0);
    const out = `${splitDir(sb.root)}/out/a`;
    assert.equal(exists(`${out}/diff.patch`), false);
    assert.equal(text(`${out}/files`), "");
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name: `SplitWorkspace.capture takes a 32 MiB file and rejects one byte more (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    put(sb.root, "small.txt", "small\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    const at = ws.fork("at");
    const over = ws.fork("over");
    const big = new Uint8Array(32 * MiB + 1);
    Deno.writeFileSync(`${at.path}/big.bin`, big.subarray(0, 32 * MiB));
    Deno.writeFileSync(`${over.path}/big.bin`, big);
    assert.equal(Deno.statSync(`${at.path}/big.bin`).size, 33554432);
    assert.equal(Deno.statSync(`${over.path}/big.bin`).size, 33554433);

    const err = throwsA(() => ws.capture("over"), RejectedError);
    assert.equal(err.reason, "capture limit");
    assert.equal(err.message, "rejected: capture limit");
    assert.deepEqual([...Deno.readDirSync(`${splitDir(sb.root)}/out/over`)], []);
    Deno.removeSync(`${over.path}/big.bin`);

    const summary = ws.capture("at");
    assert.equal(summary.changedBytes, 33554432);
    assert.deepEqual(filesOf(sb.root, "at"), ["A\tbig.bin"]);
    const consumer = `${sb.top}/consumer`;
    Deno.mkdirSync(consumer);
    put(consumer, "small.txt", "small\n");
    await gitOk(consumer, ["apply", `${splitDir(sb.root)}/out/at/diff.patch`], { home: sb.home });
    assert.equal(Deno.statSync(`${consumer}/big.bin`).size, 33554432);
    Deno.removeSync(`${at.path}/big.bin`);
    Deno.removeSync(`${consumer}/big.bin`);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.capture takes 256 MiB of changed bytes and rejects one byte more (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "small.txt", "small\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    const at = ws.fork("at");
    const over = ws.fork("over");
    const big = new Uint8Array(32 * MiB);
    try {
      for (let i = 0; i < 8; i++) {
        Deno.writeFileSync(`${at.path}/big${i}.bin`, big);
        Deno.writeFileSync(`${over.path}/big${i}.bin`, big);
      }
      put(over.path, "one-more", "x");

      const err = throwsA(() => ws.capture("over"), RejectedError);
      assert.equal(err.reason, "capture limit");
      assert.equal(exists(`${splitDir(sb.root)}/out/over/diff.patch`), false);

      const summary = ws.capture("at");
      assert.equal(summary.changedBytes, 256 * MiB);
      assert.equal(summary.files, 8);
      assert.equal(filesOf(sb.root, "at").length, 8);
    } finally {
      for (let i = 0; i < 8; i++) {
        Deno.removeSync(`${at.path}/big${i}.bin`);
        Deno.removeSync(`${over.path}/big${i}.bin`);
      }
    }
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.remove renames the split into .marsh/.trash and deletes it there (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n" });
    // An earlier split's removal made the trash; watch it and the splits.
    create({ root: sb.root, id: "s0", env: { HOME: sb.home } }, forks).remove();
    const ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "b\n");
    ws.capture("a");
    const seen: string[] = [];
    const watcher = Deno.watchFs(`${sb.root}/.marsh`, { recursive: true });
    const watching = (async () => {
      for await (const event of watcher) seen.push(...event.paths);
    })();
    try {
      ws.remove();
      assert.equal(exists(splitDir(sb.root)), false);
      assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);
      assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
      // Let the watcher deliver, then check the split passed through the trash.
      await new Promise((r) => setTimeout(r, 200));
    } finally {
      watcher.close();
      await watching;
    }
    const trash = `${sb.root}/.marsh/.trash/s1-`;
    assert.ok(seen.some((p) => p.startsWith(trash)), `no event under ${trash}: ${seen.join(", ")}`);
    ws.close();
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `SplitWorkspace.remove deletes read-only and locked directories of the project and branches (forks: ${forks})`,
    permissions: perms,
  }, () => {
    // Root may unlink in any directory; any other user needs write permission,
    // which the copies of a read-only project directory do not have.
    using sb = sandbox();
    put(sb.root, "ro/f.txt", "f\n");
    Deno.chmodSync(`${sb.root}/ro`, 0o555);
    const ws = create({ root: sb.root, env: {} }, forks);
    const fork = ws.fork("a");
    put(fork.path, "made-ro/g.txt", "g\n");
    Deno.chmodSync(`${fork.path}/made-ro`, 0o500);
    ws.capture("a");
    assert.deepEqual(filesOf(sb.root, "a"), ["A\tmade-ro/g.txt"]);
    // Branches lock directories too (tests of error paths do), even the fork's own root.
    const other = ws.fork("b");
    put(other.path, "locked/x/y.txt", "y\n");
    Deno.chmodSync(`${other.path}/locked/x`, 0o000);
    Deno.chmodSync(`${other.path}/locked`, 0o000);
    Deno.chmodSync(other.path, 0o000);
    const third = ws.fork("c");
    put(third.path, "locked/z.txt", "z\n");
    Deno.chmodSync(`${third.path}/locked`, 0o000);
    ws.remove();
    assert.equal(exists(splitDir(sb.root)), false);
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
    assert.equal(Deno.statSync(`${sb.root}/ro`).mode! & 0o777, 0o555);
  });
}
