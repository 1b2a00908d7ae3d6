import assert from "node:assert/strict";
import { join } from "node:path";
import { HardenedGit } from "./_git.ts";
import { generateTree } from "./tree_gen.ts";
import {
  applySmallChange,
  backupSmallChange,
  planSmallChange,
  restoreSmallChange,
  smallChange,
} from "./small_change.ts";

// Unscoped read/write: Deno.symlink refuses path-scoped grants. git reads
// PATH (HardenedGit passes it on to the child).
const permissions: Deno.PermissionOptions = {
  read: true,
  write: true,
  run: ["git"],
  env: ["PATH"],
};

/** Every non-directory entry under `root` (outside .git): path, kind, mode bits, and content or target. */
async function listing(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const entries: Deno.DirEntry[] = [];
    for await (const e of Deno.readDir(join(root, rel))) entries.push(e);
    entries.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    for (const e of entries) {
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      if (path === ".git") continue;
      const abs = join(root, path);
      if (e.isSymlink) {
        out.push(`${path} -> ${await Deno.readLink(abs)}`);
      } else if (e.isDirectory) {
        await walk(path);
      } else {
        const info = await Deno.lstat(abs);
        const bytes = await Deno.readFile(abs);
        const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
        const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
        out.push(`${path} ${((info.mode ?? 0) & 0o111) !== 0 ? "x" : "-"} ${bytes.length} ${hex}`);
      }
    }
  };
  await walk("");
  return out;
}

Deno.test({
  name: "generateTree is deterministic, committed, and smallChange is 10 M / 5 A / 5 D",
  permissions,
  async fn() {
    await using git = await HardenedGit.create();
    const tmp = await Deno.makeTempDir({ prefix: "marsh-tree-gen-test-" });
    try {
      const a = join(tmp, "a");
      const b = join(tmp, "b");
      const c = join(tmp, "c");
      const statsA = await generateTree(a, 200, 7, { git });
      const statsB = await generateTree(b, 200, 7, { git });
      await generateTree(c, 200, 8, { git });

      assert.equal(statsA.files, 200);
      assert.deepEqual(statsA, statsB);
      const listA = await listing(a);
      assert.equal(listA.length, 200);
      assert.deepEqual(listA, await listing(b));
      assert.notDeepEqual(listA, await listing(c));
      assert.ok(listA.some((l) => l.includes(" -> ")), "some symlinks");
      assert.ok(listA.some((l) => / x \d+ /.test(l)), "some executables");
      assert.ok(listA.some((l) => l.startsWith(".gitignore ")), "a root .gitignore");
      assert.ok(statsA.bytes > 1e6, `about 23 KB a file on average, got ${statsA.bytes}`);

      // A real repository with one commit; equal seeds give the same commit.
      const headA = (await git.run(a, ["rev-parse", "HEAD"])).trim();
      assert.match(headA, /^[0-9a-f]{40}$/);
      assert.equal((await git.run(b, ["rev-parse", "HEAD"])).trim(), headA);
      assert.equal((await git.run(a, ["rev-list", "--count", "HEAD"])).trim(), "1");
      assert.equal(await git.run(a, ["status", "--porcelain", "--untracked-files=all"]), "");
      const ignored = await git.run(a, [
        "status",
        "--porcelain",
        "--ignored",
        "--untracked-files=all",
      ]);
      assert.ok(ignored.split("\n").some((l) => l.startsWith("!! ")), "some ignored files");

      const change = await smallChange(a, 7, git);
      assert.equal(change.modified.length, 10);
      assert.equal(change.added.length, 5);
      assert.equal(change.deleted.length, 5);
      const status = (await git.run(a, ["status", "--porcelain", "--untracked-files=all"]))
        .split("\n").filter((l) => l !== "");
      const count = (code: string) => status.filter((l) => l.slice(0, 2) === code).length;
      assert.deepEqual(
        { M: count(" M"), A: count("??"), D: count(" D"), total: status.length },
        { M: 10, A: 5, D: 5, total: 20 },
      );
      const sameChange = await smallChange(b, 7, git);
      assert.deepEqual(sameChange, change);
      assert.deepEqual(await listing(a), await listing(b));
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
});

/** Path, kind, mode, mtime (ms) and content of every entry under `root` outside .git, directories included. */
async function fullListing(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const names: string[] = [];
    for await (const e of Deno.readDir(join(root, rel))) names.push(e.name);
    names.sort();
    for (const name of names) {
      const path = rel === "" ? name : `${rel}/${name}`;
      if (path === ".git") continue;
      const abs = join(root, path);
      const info = await Deno.lstat(abs);
      const head = `${path} ${((info.mode ?? 0) & 0o7777).toString(8)} ${info.mtime?.getTime()}`;
      if (info.isDirectory) {
        out.push(`${head} dir`);
        await walk(path);
      } else if (info.isSymlink) {
        out.push(`${head} -> ${await Deno.readLink(abs)}`);
      } else {
        const bytes = await Deno.readFile(abs);
        const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
        out.push(`${head} ${Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("")}`);
      }
    }
  };
  await walk("");
  return out;
}

Deno.test({
  name: "restoreSmallChange puts a tree back: bytes, modes, times, and a clean git status",
  permissions,
  async fn() {
    await using git = await HardenedGit.create();
    const tmp = await Deno.makeTempDir({ prefix: "marsh-tree-gen-test-" });
    try {
      const dir = join(tmp, "t");
      await generateTree(dir, 200, 3, { git });
      const before = await fullListing(dir);
      const plan = await planSmallChange(dir, 3, git);
      const backup = await backupSmallChange(dir, plan);
      await applySmallChange(dir, plan);
      assert.notEqual(
        await git.run(dir, ["status", "--porcelain", "--untracked-files=all"]),
        "",
      );
      await restoreSmallChange(backup);
      assert.deepEqual(await fullListing(dir), before);
      assert.equal(await git.run(dir, ["status", "--porcelain", "--untracked-files=all"]), "");
      // Backing up a change already applied fails: the added paths exist.
      await applySmallChange(dir, plan);
      await assert.rejects(() => backupSmallChange(dir, plan), /already exists/);
    } finally {
      await Deno.remove(tmp, { recursive: true });
    }
  },
});
