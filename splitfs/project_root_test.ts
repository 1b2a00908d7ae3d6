import assert from "node:assert/strict";
import { exists, gitOk, gitProject, put, sandbox, throwsA } from "./_testing.ts";
import { SnapshotError } from "./errors.ts";
import { isGitDirectory, locateProject } from "./project_root.ts";

// Real repositories made by real Git: what Git calls a repository without a
// worktree is refused before anything is made in it.
const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk"],
  env: ["PATH"],
};

Deno.test({
  name: "locateProject refuses a bare repository, from its top and from below, and makes nothing",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n" });
  const bare = `${sb.outside}/repo.git`;
  await gitOk(sb.outside, ["clone", "-q", "--bare", sb.root, bare], opts);
  const mirror = `${sb.outside}/mirror`;
  await gitOk(sb.outside, ["clone", "-q", "--mirror", sb.root, mirror], opts);
  const empty = `${sb.outside}/empty.git`;
  await gitOk(sb.outside, ["init", "-q", "--bare", empty], opts);
  for (const repo of [bare, mirror, empty]) {
    for (const cwd of [repo, `${repo}/refs/heads`, `${repo}/objects`]) {
      const error = throwsA(() => locateProject(cwd), SnapshotError);
      assert.equal(
        error.message,
        `cannot split a bare Git repository: ${repo}; run marsh split in a worktree of it (git worktree add, or git clone)`,
      );
    }
    assert.ok(!exists(`${repo}/.marsh`), "nothing is created in it");
  }
});

Deno.test({
  name: "locateProject refuses a cwd inside a worktree's .git and names the worktree",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  for (const cwd of [`${sb.root}/.git`, `${sb.root}/.git/refs/heads`]) {
    const error = throwsA(() => locateProject(cwd), SnapshotError);
    assert.equal(
      error.message,
      `cannot split from inside a Git directory: ${sb.root}/.git; run marsh split in its worktree ${sb.root}`,
    );
  }
  // The worktree itself, and a directory in it, are the project as before.
  assert.deepEqual(locateProject(`${sb.root}`), { root: sb.root, cwd: "", git: true });
  Deno.mkdirSync(`${sb.root}/src`);
  assert.deepEqual(locateProject(`${sb.root}/src`), { root: sb.root, cwd: "src", git: true });
});

Deno.test({
  name: "a directory that only looks like a repository (HEAD, objects/, refs/) is a plain project",
  permissions: perms,
}, () => {
  using sb = sandbox();
  Deno.mkdirSync(`${sb.root}/objects`);
  Deno.mkdirSync(`${sb.root}/refs`);
  put(sb.root, "HEAD", "the head of the document\n");
  assert.equal(isGitDirectory(sb.root), false);
  assert.deepEqual(locateProject(sb.root), { root: sb.root, cwd: "", git: false });
  // Without objects/ (or refs/), even a real HEAD does not make one.
  put(sb.root, "HEAD", "ref: refs/heads/main\n");
  assert.equal(isGitDirectory(sb.root), true);
  Deno.removeSync(`${sb.root}/objects`);
  assert.equal(isGitDirectory(sb.root), false);
  Deno.mkdirSync(`${sb.root}/objects`);
  Deno.removeSync(`${sb.root}/HEAD`);
  Deno.symlinkSync("refs/heads/main", `${sb.root}/HEAD`);
  assert.equal(isGitDirectory(sb.root), true, "a HEAD symlink into refs/, as old Git made");
  Deno.removeSync(`${sb.root}/HEAD`);
  put(sb.root, "HEAD", `${"a".repeat(40)}\n`);
  assert.equal(isGitDirectory(sb.root), true, "a detached HEAD");
});
