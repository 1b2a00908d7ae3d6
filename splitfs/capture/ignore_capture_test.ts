/**
 * Capture applies the ignore rules Git applies in the source tree (issue 11
 * §1): a directory whose own `.gitignore` says `*` (`.pytest_cache`,
 * `.mypy_cache`, `.venv`, `.ruff_cache`) is snapshotted without that file,
 * yet what a branch writes there must stay out of its patch, as it stays out
 * of `git status` in the project. Real git is the oracle.
 */

import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { gitOk, gitProject, leaves, put, type Sandbox, sandbox, text } from "../_testing.ts";
import { type CreateOptions, SplitWorkspace } from "../workspace/workspace.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk", "umount"],
  env: ["PATH", "MARSH_SEED"],
};

/** Both fork policies: copies, and overlay forks over a layered base. */
const POLICIES = ["copy", "auto"] as const;
type Policy = typeof POLICIES[number];

function create(sb: Sandbox, forks: Policy, id: string): SplitWorkspace {
  const opts: CreateOptions = { id, root: sb.root, env: { HOME: sb.home }, forks };
  const ws = SplitWorkspace.create(opts);
  if (ws.forkChoice.strategy !== (forks === "auto" ? "overlay" : "copy")) {
    ws.close();
    throw new Error(`forks: ${forks} took ${ws.forkChoice.strategy} forks`);
  }
  return ws;
}

/** The `files` lines of a capture, as `<status>\t<path>`. */
function capturedFiles(sb: Sandbox, id: string, label: string): string[] {
  const lines = text(`${sb.root}/.marsh/split/${id}/out/${label}/files`).split("\n");
  return lines.filter((l) => l !== "");
}

/**
 * What `git status --porcelain -uall --ignored` in the project lists as
 * changed (untracked, modified, deleted), and what it lists as ignored.
 */
async function gitStatus(sb: Sandbox): Promise<{ changed: string[]; ignored: string[] }> {
  const out = await gitOk(
    sb.root,
    ["status", "--porcelain=v1", "-z", "-uall", "--ignored"],
    { home: sb.home },
  );
  const changed: string[] = [], ignored: string[] = [];
  for (const entry of out.split("\0")) {
    if (entry === "") continue;
    const path = entry.slice(3);
    if (path === ".marsh/" || path.startsWith(".marsh/")) continue;
    (entry.startsWith("!! ") ? ignored : changed).push(path);
  }
  return { changed: changed.sort(), ignored: ignored.sort() };
}

/** What `git add -A --dry-run` would stage. */
async function gitAddDryRun(sb: Sandbox): Promise<string[]> {
  const out = await gitOk(sb.root, ["add", "-A", "--dry-run"], { home: sb.home });
  return out.split("\n").filter((l) => l !== "").map((l) => {
    const m = /^(?:add|remove) '(.*)'$/.exec(l);
    assert.ok(m, `unexpected git add --dry-run line: ${l}`);
    return m[1]!;
  }).sort();
}

/** The caches a Python project's tools make, each with the `.gitignore` the tool writes. */
const CACHES: Record<string, string> = {
  ".pytest_cache/.gitignore": "# Created by pytest automatically.\n*\n",
  ".pytest_cache/README.md": "# pytest cache directory #\n",
  ".pytest_cache/CACHEDIR.TAG": "Signature: 8a477f597d28d172789f06886806bc55\n",
  ".pytest_cache/v/cache/lastfailed": "{}\n",
  ".mypy_cache/.gitignore": "# Automatically created by mypy\n*\n",
  ".mypy_cache/3.12/app.meta.json": "{}\n",
  ".venv/.gitignore": "*\n",
  ".venv/pyvenv.cfg": "home = /usr/bin\n",
  ".venv/lib/python3.12/site-packages/x.py": "x = 1\n",
  ".ruff_cache/.gitignore": "# Automatically created by ruff.\n*\n",
  ".ruff_cache/0.6.0/123": "ruff\n",
};

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture leaves out what a branch writes in self-ignoring caches, split after split (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "src/app.py": "def f():\n    return 1\n", ".gitignore": "*.pyc\n" });
    // Made after the commit, as the tools make them: Git ignores each whole.
    for (const [rel, data] of Object.entries(CACHES)) put(sb.root, rel, data);
    assert.deepEqual((await gitStatus(sb)).changed, []);
    // The second split's layered snapshot finds these directories unchanged and walks none of them.
    for (const id of ["s1", "s2"]) {
      using ws = create(sb, forks, id);
      const base = `${sb.root}/.marsh/split/${id}/base`;
      assert.deepEqual(leaves(base), [".gitignore", "src/app.py"]);
      const fork = ws.fork("a");
      // What pytest does in a project that has .pytest_cache already: no new .gitignore.
      put(fork.path, ".pytest_cache/v/cache/nodeids", '["test_app.py::test_f"]\n');
      put(fork.path, ".pytest_cache/v/cache/lastfailed", '{"test_app.py::test_f": true}\n');
      put(fork.path, ".mypy_cache/3.12/app.data.json", "{}\n");
      put(fork.path, ".venv/lib/python3.12/site-packages/new.py", "y = 2\n");
      put(fork.path, ".ruff_cache/0.6.0/456", "ruff\n");
      put(fork.path, "src/app.py", "def f():\n    return 2\n");
      const summary = ws.capture("a");
      assert.deepEqual(capturedFiles(sb, id, "a"), ["M\tsrc/app.py"]);
      assert.equal(summary.skippedIgnored, 4, "each cache's new directory was skipped whole");
      ws.remove();
    }
    // The same writes in the project: git shows the edit alone.
    put(sb.root, ".pytest_cache/v/cache/nodeids", '["test_app.py::test_f"]\n');
    put(sb.root, ".mypy_cache/3.12/app.data.json", "{}\n");
    put(sb.root, "src/app.py", "def f():\n    return 2\n");
    assert.deepEqual((await gitStatus(sb)).changed, ["src/app.py"]);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture applies a self-ignoring directory's negations and its own rewritten .gitignore (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n" });
    put(sb.root, "cache/.gitignore", "*\n!keep.txt\n");
    put(sb.root, "cache/old.bin", "old\n");
    put(sb.root, "gen/.gitignore", "*\n");
    using ws = create(sb, forks, "s1");
    const fork = ws.fork("a");
    put(fork.path, "cache/keep.txt", "kept\n");
    put(fork.path, "cache/new.bin", "new\n");
    put(fork.path, "cache/sub/keep.txt", "kept below\n");
    // The branch writes a `.gitignore` of its own: that one applies, as it would in the project.
    put(fork.path, "gen/.gitignore", "*.o\n");
    put(fork.path, "gen/x.o", "o\n");
    put(fork.path, "gen/x.c", "c\n");
    ws.capture("a");
    const ours = capturedFiles(sb, "s1", "a");
    for (const [rel, data] of Object.entries({ "gen/.gitignore": "*.o\n", "gen/x.o": "o\n" })) {
      put(sb.root, rel, data);
    }
    for (const rel of ["cache/keep.txt", "cache/new.bin", "cache/sub/keep.txt", "gen/x.c"]) {
      put(sb.root, rel, "x\n");
    }
    const theirs = await gitStatus(sb);
    // `*` ignores the directory cache/sub too: nothing below it can be re-included.
    assert.deepEqual(theirs.changed, ["cache/keep.txt", "gen/.gitignore", "gen/x.c"]);
    assert.deepEqual(ours.map((l) => l.slice(2)), theirs.changed);
    ws.remove();
  });
}

// ---------------------------------------------------------------------------
// Random trees against real git

const DIRS = [
  "",
  "src",
  "src/pkg",
  ".pytest_cache",
  ".pytest_cache/v",
  ".venv",
  ".venv/lib",
  "cache",
  "cache/sub",
  "build",
  "build/out",
  "keepers",
];
const IGNORES = [
  "*",
  "# Created by pytest automatically.\n*",
  "*\n!keep.txt",
  "*\n!.gitignore",
  "*.log",
  "!*.log",
  "build/",
  "/build",
  "sub/",
  "*\n!*/",
  "*\n!*/\n!keep.txt",
  "keep.txt",
  "!keep.txt",
  "*.tmp\n!important.tmp",
  "v/",
  "!sub/",
  "lib/",
  "*.py\n!a.py",
];
const NAMES = [
  "keep.txt",
  "x.log",
  "a.py",
  "b.py",
  "a.tmp",
  "important.tmp",
  "README.md",
  "sub/deep.txt",
  "v/cache/nodeids",
  "lib/m.py",
];

const fixtureArb = fc.record({
  ignores: fc.uniqueArray(fc.tuple(fc.nat(DIRS.length - 1), fc.nat(IGNORES.length - 1)), {
    selector: ([d]) => d,
    maxLength: 6,
  }),
  files: fc.uniqueArray(fc.tuple(fc.nat(DIRS.length - 1), fc.nat(NAMES.length - 1)), {
    maxLength: 14,
  }),
  writes: fc.array(
    fc.oneof(
      fc.record({
        op: fc.constant("write" as const),
        dir: fc.nat(DIRS.length - 1),
        name: fc.nat(NAMES.length - 1),
      }),
      fc.record({ op: fc.constant("delete" as const), which: fc.nat(50) }),
      // A tool making its cache again: the same `.gitignore` bytes written anew.
      fc.record({ op: fc.constant("rewrite-ignore" as const), which: fc.nat(10) }),
    ),
    { minLength: 1, maxLength: 10 },
  ),
});

function isFile(path: string): boolean {
  try {
    return Deno.lstatSync(path).isFile;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

function pathIn(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture's file list equals git status after the same writes, on random ignore trees (forks: ${forks})`,
    permissions: perms,
  }, async (t) => {
    await assertProperty(
      t,
      fc.asyncProperty(fixtureArb, async (c) => {
        using sb = sandbox();
        for (const d of DIRS) Deno.mkdirSync(pathIn(sb.root, d), { recursive: true });
        const ignoreFiles = new Map<string, string>();
        for (const [d, t] of c.ignores) {
          const rel = pathIn(DIRS[d]!, ".gitignore");
          ignoreFiles.set(rel, `${IGNORES[t]}\n`);
          put(sb.root, rel, `${IGNORES[t]}\n`);
        }
        for (const [d, n] of c.files) put(sb.root, pathIn(DIRS[d]!, NAMES[n]!), "pre\n");
        const home = { home: sb.home };
        await gitOk(sb.root, ["init", "-q", "-b", "main"], home);
        await gitOk(sb.root, ["add", "-A"], home);
        await gitOk(sb.root, ["commit", "-q", "--allow-empty", "-m", "fixture"], home);
        const tracked = (await gitOk(sb.root, ["ls-files", "-z"], home)).split("\0")
          .filter((p) => p !== "").sort();
        const deletable = tracked.filter((p) => !p.endsWith(".gitignore"));
        const theirsBefore = await gitStatus(sb);
        assert.deepEqual(theirsBefore.changed, [], "everything Git sees is committed");

        using ws = create(sb, forks, "s1");
        // The snapshot holds what Git tracks, and nothing it ignores.
        assert.deepEqual(leaves(`${sb.root}/.marsh/split/s1/base`), tracked);
        const fork = ws.fork("a");
        const apply = (root: string) => {
          c.writes.forEach((w, i) => {
            if (w.op === "write") {
              put(root, pathIn(DIRS[w.dir]!, NAMES[w.name]!), `write ${i}\n`);
            } else if (w.op === "delete") {
              const rel = deletable[w.which % Math.max(deletable.length, 1)];
              if (rel !== undefined && isFile(`${root}/${rel}`)) Deno.removeSync(`${root}/${rel}`);
            } else {
              const all = [...ignoreFiles];
              const picked = all[w.which % Math.max(all.length, 1)];
              if (picked) {
                const full = `${root}/${picked[0]}`;
                try {
                  Deno.removeSync(full);
                } catch (error) {
                  if (!(error instanceof Deno.errors.NotFound)) throw error;
                }
                put(root, picked[0], picked[1]);
              }
            }
          });
        };
        apply(fork.path);
        ws.capture("a");
        const ours = capturedFiles(sb, "s1", "a").map((l) => l.slice(2)).sort();
        ws.remove();
        apply(sb.root);
        const theirs = await gitStatus(sb);
        assert.deepEqual(ours, theirs.changed);
        assert.deepEqual(ours, await gitAddDryRun(sb));
      }),
      { numRuns: 25 },
    );
  });
}
