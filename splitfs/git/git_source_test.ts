import assert from "node:assert/strict";
import { TooLargeError, WrongKindError } from "../fd/dir.ts";
import type { ReadFile } from "./git_reader.ts";
import {
  GITFILE_ROOT_REFUSAL,
  GitMetadataError,
  isValidRefName,
  MAX_INDEX_BYTES,
  parsePackedRefs,
  readGitSource,
} from "./git_source.ts";

// Real `git` builds the repositories; readGitSource must agree with
// `git rev-parse` about them.
const gitPerms: Deno.PermissionOptions = {
  read: true,
  write: true,
  run: ["git"],
  env: ["PATH"],
};

const dec = new TextDecoder();
const enc = new TextEncoder();

interface Repo extends AsyncDisposable {
  readonly root: string;
  git(...args: string[]): Promise<string>;
  /** Like `git`, but `null` when git fails. */
  tryGit(...args: string[]): Promise<string | null>;
}

async function repo(initArgs: string[] = []): Promise<Repo> {
  const top = await Deno.makeTempDir({ prefix: "marsh-git-source-test-" });
  const root = `${top}/repo`;
  await Deno.mkdir(`${top}/home`);
  await Deno.mkdir(root);
  const env = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: `${top}/home`,
    XDG_CONFIG_HOME: `${top}/home/xdg`,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "t",
    GIT_AUTHOR_EMAIL: "t@example.com",
    GIT_COMMITTER_NAME: "t",
    GIT_COMMITTER_EMAIL: "t@example.com",
  };
  const tryGit = async (...args: string[]) => {
    const out = await new Deno.Command("git", {
      args,
      cwd: root,
      clearEnv: true,
      env,
      stdout: "piped",
      stderr: "piped",
    }).output();
    return out.success ? dec.decode(out.stdout).trim() : null;
  };
  const r: Repo = {
    root,
    tryGit,
    async git(...args) {
      const out = await tryGit(...args);
      if (out === null) throw new Error(`git ${args.join(" ")} failed`);
      return out;
    },
    async [Symbol.asyncDispose]() {
      await Deno.remove(top, { recursive: true });
    },
  };
  await r.git("init", "-q", "-b", "main", ...initArgs);
  return r;
}

async function commit(r: Repo, name: string): Promise<void> {
  await Deno.writeTextFile(`${r.root}/${name}`, `${name}\n`);
  await r.git("add", name);
  await r.git("commit", "-q", "-m", name);
}

/**
 * A reader over a real directory with the contract of `dir.ts`; it records
 * every path asked for, and refuses any that could leave `.git/`.
 */
function fsReader(root: string, seen: string[] = []): ReadFile {
  return (rel, maxBytes) => {
    seen.push(rel);
    assert.ok(rel === ".git" || rel.startsWith(".git/"), `read outside .git: ${rel}`);
    assert.ok(!rel.split("/").some((c) => c === ".." || c === "."), `dot component: ${rel}`);
    let st: Deno.FileInfo;
    try {
      st = Deno.lstatSync(`${root}/${rel}`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return null;
      throw error;
    }
    if (st.isDirectory) throw new WrongKindError(rel, "dir", "file");
    if (!st.isFile) throw new WrongKindError(rel, "symlink", "file");
    if (st.size > maxBytes) throw new TooLargeError(rel, st.size, maxBytes);
    return Deno.readFileSync(`${root}/${rel}`);
  };
}

/** A reader over an in-memory `.git`. */
function memReader(files: Record<string, string | Uint8Array>): ReadFile {
  return (rel, maxBytes) => {
    const f = files[rel];
    if (f === undefined) return null;
    const bytes = typeof f === "string" ? enc.encode(f) : f;
    if (bytes.length > maxBytes) throw new TooLargeError(rel, bytes.length, maxBytes);
    return bytes;
  };
}

const ID1 = "0123456789abcdef0123456789abcdef01234567";
const ID2 = "89abcdef0123456789abcdef0123456789abcdef";

Deno.test("GITFILE_ROOT_REFUSAL is the spec's wording", () => {
  assert.equal(
    GITFILE_ROOT_REFUSAL,
    "project root has a gitfile .git (a linked worktree or submodule); run marsh from the main repository",
  );
});

Deno.test({
  name: "readGitSource returns null without .git",
  permissions: { read: true, write: true },
  fn() {
    const dir = Deno.makeTempDirSync({ prefix: "marsh-git-source-test-" });
    try {
      assert.equal(readGitSource(fsReader(dir)), null);
    } finally {
      Deno.removeSync(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "readGitSource reads a fresh repository as an unborn branch",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    const seen: string[] = [];
    const s = readGitSource(fsReader(r.root, seen))!;
    assert.equal(s.head, null);
    assert.equal(s.headRef, "refs/heads/main");
    assert.equal(s.index, null);
    assert.equal(s.packedRefs, null);
    assert.equal(s.objectFormat, "sha1");
    assert.equal(s.objectsDir, ".git/objects");
    assert.equal(s.config?.get("core", "repositoryformatversion"), "0");
    assert.equal(await r.tryGit("rev-parse", "--verify", "-q", "HEAD"), null);
    assert.ok(seen.every((p) => p.startsWith(".git/")));
  },
});

Deno.test({
  name: "readGitSource resolves HEAD and copies the index after commits",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    await commit(r, "a");
    await commit(r, "b");
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.head, await r.git("rev-parse", "HEAD"));
    assert.equal(s.headRef, await r.git("symbolic-ref", "HEAD"));
    assert.deepEqual(s.index, await Deno.readFile(`${r.root}/.git/index`));
    assert.equal(dec.decode(s.index!.subarray(0, 4)), "DIRC");
  },
});

Deno.test({
  name: "readGitSource reads a detached HEAD",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    await commit(r, "a");
    await commit(r, "b");
    await r.git("checkout", "-q", "--detach", "HEAD~1");
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.head, await r.git("rev-parse", "HEAD"));
    assert.equal(s.headRef, null);
  },
});

Deno.test({
  name: "readGitSource finds packed refs and skips peel lines",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    await commit(r, "a");
    await r.git("tag", "-a", "-m", "annotated", "v1");
    await r.git("branch", "other");
    await r.git("pack-refs", "--all");
    await assert.rejects(Deno.stat(`${r.root}/.git/refs/heads/main`), Deno.errors.NotFound);
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.head, await r.git("rev-parse", "HEAD"));
    assert.equal(s.headRef, "refs/heads/main");
    assert.deepEqual(s.packedRefs, await Deno.readFile(`${r.root}/.git/packed-refs`));
    const refs = parsePackedRefs(s.packedRefs!, "sha1");
    assert.equal(refs.get("refs/tags/v1"), await r.git("rev-parse", "refs/tags/v1"));
    assert.equal(refs.get("refs/heads/other"), s.head);
    // A loose ref written after packing wins over the packed one.
    await commit(r, "b");
    const t = readGitSource(fsReader(r.root))!;
    assert.equal(t.head, await r.git("rev-parse", "HEAD"));
    assert.notEqual(t.head, s.head);
  },
});

Deno.test({
  name: "readGitSource reads an orphan branch as unborn",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    await commit(r, "a");
    await r.git("checkout", "-q", "--orphan", "fresh");
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.head, null);
    assert.equal(s.headRef, "refs/heads/fresh");
    assert.notEqual(s.index, null);
  },
});

Deno.test({
  name: "readGitSource follows symbolic refs as deep as git does, and no deeper",
  permissions: gitPerms,
  async fn() {
    await using r = await repo();
    await commit(r, "a");
    // HEAD -> l1 -> l2 -> l3 -> main: five reads, git's limit.
    await r.git("symbolic-ref", "refs/heads/l3", "refs/heads/main");
    await r.git("symbolic-ref", "refs/heads/l2", "refs/heads/l3");
    await r.git("symbolic-ref", "refs/heads/l1", "refs/heads/l2");
    await r.git("symbolic-ref", "HEAD", "refs/heads/l1");
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.head, await r.git("rev-parse", "HEAD"));
    assert.equal(s.headRef, "refs/heads/main");
    assert.equal(await r.git("rev-parse", "--symbolic-full-name", "HEAD"), "refs/heads/main");
    // One more level and git gives up too.
    await r.git("symbolic-ref", "refs/heads/l0", "refs/heads/l1");
    await r.git("symbolic-ref", "HEAD", "refs/heads/l0");
    assert.equal(await r.tryGit("rev-parse", "--verify", "-q", "HEAD"), null);
    assert.throws(() => readGitSource(fsReader(r.root)), GitMetadataError);
  },
});

Deno.test({
  name: "readGitSource reads SHA-256 repositories",
  permissions: gitPerms,
  async fn() {
    await using r = await repo(["--object-format=sha256"]);
    await commit(r, "a");
    const s = readGitSource(fsReader(r.root))!;
    assert.equal(s.objectFormat, "sha256");
    assert.equal(s.head?.length, 64);
    assert.equal(s.head, await r.git("rev-parse", "HEAD"));
    await r.git("pack-refs", "--all");
    assert.equal(readGitSource(fsReader(r.root))!.head, s.head);
  },
});

Deno.test("readGitSource refuses ref names that could leave .git/refs", () => {
  const bad = [
    "ref: refs/heads/../../config",
    "ref: ../config",
    "ref: /etc/passwd",
    "ref: refs/heads/.hidden",
    "ref: refs/heads/x.lock",
    "ref: refs/heads/a//b",
    "ref: refs/heads/",
    "ref: refs/heads/a b",
    "ref: refs/heads/a\\b",
    "ref: refs/heads/x@{1}",
    "ref: refs/heads/x.",
    "ref: HEAD",
    "ref: config",
    "ref: ",
  ];
  for (const head of bad) {
    const seen: string[] = [];
    const read: ReadFile = (rel, max) => {
      seen.push(rel);
      return memReader({ ".git/HEAD": `${head}\n` })(rel, max);
    };
    assert.throws(() => readGitSource(read), GitMetadataError, head);
    assert.deepEqual(seen, [".git/HEAD", ".git/config", ".git/packed-refs"], head);
  }
  assert.equal(isValidRefName("refs/heads/feature/x-1"), true);
  assert.equal(isValidRefName("refs/heads/ünïcode"), true);
});

Deno.test("readGitSource refuses malformed HEAD and ref contents", () => {
  const cases: Record<string, string>[] = [
    { ".git/HEAD": "" },
    { ".git/HEAD": "not a ref\n" },
    { ".git/HEAD": `${ID1.slice(1)}\n` },
    { ".git/HEAD": `${ID1}x\n` },
    { ".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": "garbage\n" },
    // A SHA-1 id in a SHA-256 repository.
    {
      ".git/HEAD": `${ID1}\n`,
      ".git/config": "[core]\nrepositoryformatversion = 1\n[extensions]\nobjectformat = sha256\n",
    },
    { ".git/HEAD": "ref: refs/heads/main\n", ".git/packed-refs": "garbage line\n" },
  ];
  for (const files of cases) {
    assert.throws(() => readGitSource(memReader(files)), GitMetadataError, JSON.stringify(files));
  }
});

Deno.test("readGitSource accepts what git writes, whitespace included", () => {
  const s = readGitSource(memReader({
    ".git/HEAD": "ref:\trefs/heads/main \r\n",
    ".git/refs/heads/main": `${ID1.toUpperCase()}\n`,
  }))!;
  assert.equal(s.head, ID1);
  assert.equal(s.headRef, "refs/heads/main");
  const detached = readGitSource(memReader({ ".git/HEAD": `${ID2} trailing junk\n` }))!;
  assert.equal(detached.head, ID2);
  assert.equal(detached.headRef, null);
  const packed = readGitSource(memReader({
    ".git/HEAD": "ref: refs/heads/main\n",
    ".git/packed-refs": [
      "# pack-refs with: peeled fully-peeled sorted ",
      `${ID2} refs/heads/main`,
      `^${ID1}`,
      `${ID1} refs/tags/x`,
      "",
    ].join("\n"),
  }))!;
  assert.equal(packed.head, ID2);
});

Deno.test("readGitSource treats a directory where a loose ref would be as no ref", () => {
  const files: Record<string, string> = {
    ".git/HEAD": "ref: refs/heads/topic\n",
    ".git/packed-refs": `${ID1} refs/heads/topic\n`,
  };
  const read: ReadFile = (rel, max) => {
    if (rel === ".git/refs/heads/topic") throw new WrongKindError(rel, "dir", "file");
    return memReader(files)(rel, max);
  };
  assert.equal(readGitSource(read)!.head, ID1);
});

Deno.test("readGitSource bounds the index at 64 MiB", () => {
  const files = { ".git/HEAD": `${ID1}\n` };
  const tooLarge: ReadFile = (rel, max) => {
    if (rel === ".git/index") throw new TooLargeError(rel, MAX_INDEX_BYTES + 1, max);
    return memReader(files)(rel, max);
  };
  assert.throws(
    () => readGitSource(tooLarge),
    (e: unknown) =>
      e instanceof GitMetadataError &&
      e.message === `git index is larger than 64 MiB: ${MAX_INDEX_BYTES + 1} bytes` &&
      e.path === ".git/index" && e.cause instanceof TooLargeError,
  );
  // A reader that ignores its bound is caught too.
  const careless: ReadFile = (rel, max) =>
    rel === ".git/index" ? new Uint8Array(MAX_INDEX_BYTES + 5) : memReader(files)(rel, max);
  assert.throws(
    () => readGitSource(careless),
    { message: `git index is larger than 64 MiB: ${MAX_INDEX_BYTES + 5} bytes` },
  );
  const exact: ReadFile = (rel, max) =>
    rel === ".git/index" ? new Uint8Array(MAX_INDEX_BYTES) : memReader(files)(rel, max);
  assert.equal(readGitSource(exact)!.index?.length, MAX_INDEX_BYTES);
});

Deno.test("readGitSource refuses repository formats it cannot read", () => {
  const head = { ".git/HEAD": `${ID1}\n` };
  assert.throws(
    () =>
      readGitSource(memReader({
        ...head,
        ".git/config": "[extensions]\n\tobjectFormat = sha512\n",
      })),
    { message: 'unsupported git object format: "sha512"' },
  );
  assert.throws(
    () =>
      readGitSource(memReader({
        ".git/HEAD": "ref: refs/heads/.invalid\n",
        ".git/config": "[extensions]\n\trefStorage = reftable\n",
      })),
    { message: 'unsupported git ref storage: "reftable"' },
  );
});
