import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { parseGitConfig } from "./git_config.ts";
import {
  globalConfigPaths,
  IgnoreRules,
  type IgnoreScope,
  resolveGlobalExcludesPath,
} from "./ignore_rules.ts";

// Real git is the oracle. It runs with a temporary HOME and XDG_CONFIG_HOME
// and without the system config, so the host's settings cannot leak in.
const gitPerms: Deno.PermissionOptions = {
  read: true,
  write: true,
  run: ["git"],
  env: ["PATH"],
};

const enc = new TextEncoder();
const dec = new TextDecoder();

interface Sandbox extends AsyncDisposable {
  /** The repository's worktree. */
  readonly repo: string;
  /** The temporary HOME; XDG_CONFIG_HOME is `<home>/xdg`. */
  readonly home: string;
  readonly env: Record<string, string>;
}

async function sandbox(): Promise<Sandbox> {
  const top = await Deno.makeTempDir({ prefix: "marsh-ignore-test-" });
  const home = `${top}/home`;
  const repo = `${top}/repo`;
  await Deno.mkdir(`${home}/xdg`, { recursive: true });
  await Deno.mkdir(repo);
  const env = {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: home,
    XDG_CONFIG_HOME: `${home}/xdg`,
    GIT_CONFIG_NOSYSTEM: "1",
  };
  const box: Sandbox = {
    repo,
    home,
    env,
    async [Symbol.asyncDispose]() {
      await Deno.remove(top, { recursive: true });
    },
  };
  await git(box, ["init", "-q", "-b", "main"]);
  return box;
}

async function git(box: Sandbox, args: string[], stdin?: Uint8Array): Promise<Uint8Array> {
  const child = new Deno.Command("git", {
    args,
    cwd: box.repo,
    clearEnv: true,
    env: box.env,
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(stdin);
    await w.close();
  }
  const out = await child.output();
  // check-ignore exits 1 when nothing is ignored.
  if (!out.success && !(args[0] === "check-ignore" && out.code === 1)) {
    throw new Error(`git ${args.join(" ")} failed: ${dec.decode(out.stderr)}`);
  }
  return out.stdout;
}

/** Writes files (`"path": "text"`), empty directories (`"path/": ""`), and symlinks (`"path": {link}`). */
async function writeTree(root: string, tree: Record<string, string | { link: string }>) {
  for (const [path, content] of Object.entries(tree)) {
    const full = `${root}/${path}`;
    if (path.endsWith("/")) {
      await Deno.mkdir(full, { recursive: true });
      continue;
    }
    await Deno.mkdir(full.slice(0, full.lastIndexOf("/")), { recursive: true });
    if (typeof content === "string") await Deno.writeTextFile(full, content);
    else await Deno.symlink(content.link, full);
  }
}

async function readOrNull(path: string): Promise<Uint8Array | null> {
  try {
    return await Deno.readFile(path);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
}

/** Loads the rules the way the daemon does, from the files git would read. */
async function loadRules(box: Sandbox): Promise<IgnoreRules> {
  const repoConfigBytes = await readOrNull(`${box.repo}/.git/config`);
  const repoConfig = repoConfigBytes === null ? null : parseGitConfig(repoConfigBytes);
  const globalConfigs = [];
  for (const path of globalConfigPaths(box.env)) {
    const bytes = await readOrNull(path);
    if (bytes !== null) globalConfigs.push(parseGitConfig(bytes));
  }
  const excludesPath = resolveGlobalExcludesPath({
    repoConfig,
    globalConfigs,
    env: box.env,
    projectRoot: box.repo,
  });
  return IgnoreRules.load({
    globalExcludes: excludesPath === null ? null : await readOrNull(excludesPath),
    infoExclude: await readOrNull(`${box.repo}/.git/info/exclude`),
    ignoreCase: repoConfig?.getBool("core", "ignorecase") ?? false,
  });
}

/**
 * Walks the worktree like the snapshot walker, but also into ignored
 * directories (whose scopes ignore everything), recording a verdict for
 * every path. Symlinks are not directories, as for Git.
 */
async function ourVerdicts(box: Sandbox): Promise<Map<string, boolean>> {
  const rules = await loadRules(box);
  const verdicts = new Map<string, boolean>();
  const walk = async (rel: string, scope: IgnoreScope) => {
    const dir = rel === "" ? box.repo : `${box.repo}/${rel}`;
    const names = [];
    for await (const e of Deno.readDir(dir)) names.push(e);
    names.sort((a, b) => a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
    for (const e of names) {
      if (rel === "" && e.name === ".git") continue;
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      const ignored = scope.isIgnored(path, e.isDirectory);
      verdicts.set(path, ignored);
      if (e.isDirectory) {
        const gitignore = ignored ? null : await readOrNull(`${box.repo}/${path}/.gitignore`);
        await walk(path, scope.enter(path, gitignore));
      }
    }
  };
  await walk("", rules.enter("", await readOrNull(`${box.repo}/.gitignore`)));
  return verdicts;
}

/** `git check-ignore --no-index -v -n` on every path: tracked or not, what do the rules say? */
async function gitVerdicts(box: Sandbox, paths: string[]): Promise<Map<string, string | null>> {
  const input = enc.encode(paths.map((p) => `${p}\0`).join(""));
  const out = await git(box, ["check-ignore", "--no-index", "-v", "-n", "-z", "--stdin"], input);
  const fields = dec.decode(out).split("\0");
  const verdicts = new Map<string, string | null>();
  for (let i = 0; i + 3 < fields.length; i += 4) {
    const [source, line, pattern, path] = fields.slice(i, i + 4) as [
      string,
      string,
      string,
      string,
    ];
    // A matching negative pattern is reported too; it means "not ignored".
    const ignored = source !== "" && !pattern.startsWith("!");
    verdicts.set(path, ignored ? `${source}:${line}:${pattern}` : null);
  }
  return verdicts;
}

async function assertMatchesGit(box: Sandbox): Promise<Map<string, boolean>> {
  const ours = await ourVerdicts(box);
  const theirs = await gitVerdicts(box, [...ours.keys()]);
  const diffs = [];
  for (const [path, ignored] of ours) {
    const why = theirs.get(path);
    assert.notEqual(why, undefined, `git reported nothing for ${path}`);
    if (ignored !== (why !== null)) {
      diffs.push(`${path}: ours ${ignored}, git ${why ?? "not ignored"}`);
    }
  }
  assert.deepEqual(diffs, []);
  return ours;
}

function ignoredPaths(verdicts: Map<string, boolean>): string[] {
  return [...verdicts].filter(([, v]) => v).map(([p]) => p).sort();
}

Deno.test({
  name: "IgnoreRules agrees with git on negations, nesting, anchors, ** and directories",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.repo, {
      ".gitignore": [
        "*.log",
        "!keep.log",
        "build/",
        "/top-only",
        "**/cache",
        "docs/**/draft.md",
        "vendor/**",
        "!vendor/keep/",
        "logs/",
        "!logs/important.txt",
        "# a comment",
        "\\#hash",
        "trailing-space\\ ",
        "tmp*",
        "!tmp-keep",
      ].join("\n") + "\n",
      "a.log": "",
      "keep.log": "",
      "build/out.o": "",
      "src/build/out.o": "",
      "src/build.c": "",
      "top-only": "",
      "src/top-only": "",
      "cache/x": "",
      "src/deep/cache/x": "",
      "docs/draft.md": "",
      "docs/a/b/draft.md": "",
      "docs/a/final.md": "",
      "vendor/lib.c": "",
      "vendor/keep/lib.c": "",
      "logs/important.txt": "",
      "logs/other.txt": "",
      "#hash": "",
      "trailing-space ": "",
      "tmp-file": "",
      "tmp-keep": "",
      "src/.gitignore": "!debug.log\n/generated/\n*.tmp\n",
      "src/debug.log": "",
      "src/sub/debug.log": "",
      "src/generated/g.c": "",
      "src/sub/generated/g.c": "",
      "src/sub/.gitignore": "*.log\n!*.tmp\n",
      "src/sub/x.tmp": "",
      "src/y.tmp": "",
      "empty-build-dir/build/": "",
      "link-build/target/": "",
      "link-build/build": { link: "target" },
    });
    const verdicts = await assertMatchesGit(box);
    // Spot-check the interesting ones, so a shared mistake cannot hide.
    assert.equal(verdicts.get("keep.log"), false);
    assert.equal(verdicts.get("src/debug.log"), false);
    assert.equal(verdicts.get("src/sub/debug.log"), true);
    assert.equal(verdicts.get("src/sub/x.tmp"), false);
    assert.equal(verdicts.get("src/y.tmp"), true);
    assert.equal(verdicts.get("src/build.c"), false);
    assert.equal(verdicts.get("src/top-only"), false);
    assert.equal(verdicts.get("logs/important.txt"), true, "no re-include under an ignored dir");
    assert.equal(verdicts.get("vendor/keep/lib.c"), true, "vendor/** ignores vendor/keep/ too");
    assert.equal(verdicts.get("link-build/build"), false, "a symlink is not a directory");
    assert.equal(verdicts.get("empty-build-dir/build"), true);
  },
});

Deno.test({
  name: "IgnoreRules ignores tracked files the rules exclude, like git ls-files -c -i",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.repo, {
      ".gitignore": "*.o\nout/\n",
      "main.c": "",
      "main.o": "",
      "out/bin": "",
      "lib/x.o": "",
    });
    await git(box, ["add", "-f", "."]);
    const verdicts = await assertMatchesGit(box);
    const tracked = dec.decode(await git(box, ["ls-files", "-c", "-i", "--exclude-standard"]))
      .split("\n").filter((l) => l !== "").sort();
    assert.deepEqual(tracked, ["lib/x.o", "main.o", "out/bin"]);
    for (const path of tracked) {
      const parent = path.includes("/") ? path.slice(0, path.indexOf("/")) : path;
      assert.equal(verdicts.get(path) || verdicts.get(parent), true, path);
    }
  },
});

Deno.test({
  name: "IgnoreRules ranks .gitignore over info/exclude over core.excludesFile",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.home, {
      ".gitconfig": "[core]\n\texcludesFile = ~/global-ignore\n",
      "global-ignore": "*.g\n*.both\n*.all\nshared/\n",
      // Not read: core.excludesFile replaces the XDG default.
      "xdg/git/ignore": "*.xdg\n",
    });
    await writeTree(box.repo, {
      ".git/info/exclude": "*.i\n!*.both\n*.all\n",
      ".gitignore": "!*.all\n!shared/\n",
      "a.g": "",
      "a.i": "",
      "a.both": "",
      "a.all": "",
      "a.xdg": "",
      "shared/f": "",
      "d/a.g": "",
    });
    const verdicts = await assertMatchesGit(box);
    assert.deepEqual(ignoredPaths(verdicts), ["a.g", "a.i", "d/a.g"]);
  },
});

Deno.test({
  name: "IgnoreRules reads the XDG ignore file when core.excludesFile is unset",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.home, { "xdg/git/ignore": "*.xdg\n" });
    await writeTree(box.repo, { "a.xdg": "", "b.txt": "" });
    const verdicts = await assertMatchesGit(box);
    assert.deepEqual(ignoredPaths(verdicts), ["a.xdg"]);
  },
});

Deno.test({
  name: "IgnoreRules takes core.excludesFile from the repository config first",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.home, {
      ".gitconfig": "[core]\n\texcludesFile = ~/from-home\n",
      "from-home": "*.home\n",
    });
    await writeTree(box.repo, { "repo-ignore": "*.repo\n", "a.home": "", "a.repo": "" });
    await git(box, ["config", "core.excludesFile", "repo-ignore"]);
    const verdicts = await assertMatchesGit(box);
    assert.deepEqual(ignoredPaths(verdicts), ["a.repo"]);
  },
});

Deno.test({
  name: "IgnoreRules lets a deeper source re-include what a shallower source ignores",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.home, { "xdg/git/ignore": "build/\nnode_modules/\n" });
    await writeTree(box.repo, {
      ".gitignore": "!build/\nsub/\nz*\n",
      "build/out.o": "",
      "build/inner/build/x": "",
      "node_modules/m.js": "",
      "d/.gitignore": "!sub/\n",
      "d/sub/f": "",
      "d/sub/deeper/f": "",
      "d/sub/deeper/sub/f": "",
      "d/sub/zeta": "",
      "e/sub/f": "",
    });
    const verdicts = await assertMatchesGit(box);
    assert.equal(verdicts.get("d/sub/f"), false);
    assert.equal(verdicts.get("d/sub/deeper/f"), false);
    // d/.gitignore's `!sub/` has no slash inside, so it re-includes at every depth below d.
    assert.equal(verdicts.get("d/sub/deeper/sub"), false);
    assert.equal(verdicts.get("d/sub/zeta"), true);
    assert.equal(verdicts.get("e/sub"), true);
    assert.equal(verdicts.get("build/out.o"), false);
  },
});

Deno.test({
  name: "IgnoreRules matches case-insensitively when core.ignorecase is true",
  permissions: gitPerms,
  async fn() {
    await using box = await sandbox();
    await writeTree(box.repo, { ".gitignore": "*.LOG\nBuild/\n", "a.log": "", "build/x": "" });
    await git(box, ["config", "core.ignorecase", "true"]);
    assert.deepEqual(ignoredPaths(await assertMatchesGit(box)), ["a.log", "build", "build/x"]);
    await git(box, ["config", "core.ignorecase", "false"]);
    assert.deepEqual(ignoredPaths(await assertMatchesGit(box)), []);
  },
});

const names = ["a", "b", "sub", "build", "tmp", "keep.log", "x.log", "A.LOG", ".hidden", "c d"];
const patternPool = [
  "*.log",
  "!keep.log",
  "!*.log",
  "build/",
  "/build",
  "build",
  "!build/",
  "**/tmp",
  "tmp/",
  "a/**/b",
  "a/**",
  "**/a/**",
  "sub/",
  "!sub/",
  "sub/*",
  "!sub/keep.log",
  "b",
  "!b",
  "*",
  "!*/",
  "/a/b",
  "a/b",
  "*/b",
  "a/*/",
  "?.log",
  "[ab]",
  "[!a]",
  "!/a",
  "/*",
  ".hidden",
  "!.hidden",
  "x.log ",
  "A.LOG",
  "c d",
  "c\\ d",
  "**/sub/**",
  "#comment",
  "",
  "\\!b",
  "**",
  "/**",
  "a/**/",
  "**/b/",
  "*/",
  "!a/**",
  "[a-c]*",
  "!/*/",
  "sub/**/",
  "**/*.log",
  "/a/*",
  "b/",
  "!b/",
  "*.LOG",
];

const treeArb = fc.uniqueArray(
  fc.array(fc.constantFrom(...names), { minLength: 1, maxLength: 3 }).map((p) => p.join("/")),
  { minLength: 1, maxLength: 14 },
);
const linesArb = fc.array(fc.constantFrom(...patternPool), { maxLength: 5 });
const caseArb = fc.record({
  paths: treeArb,
  emptyDirs: fc.array(fc.boolean(), { minLength: 14, maxLength: 14 }),
  gitignores: fc.array(fc.tuple(fc.nat(20), linesArb), { maxLength: 5 }),
  info: linesArb,
  global: linesArb,
  globalViaConfig: fc.boolean(),
});

Deno.test({
  name: "IgnoreRules agrees with git on random trees and patterns",
  permissions: gitPerms,
  async fn(t) {
    await assertProperty(
      t,
      fc.asyncProperty(caseArb, async (c) => {
        await using box = await sandbox();
        // Every proper prefix is a directory; a leaf is a file or an empty directory.
        const dirs = new Set([""]);
        for (const p of c.paths) {
          const parts = p.split("/");
          for (let i = 1; i < parts.length; i++) dirs.add(parts.slice(0, i).join("/"));
        }
        const tree: Record<string, string> = {};
        c.paths.forEach((p, i) => {
          if (dirs.has(p)) return;
          if (c.emptyDirs[i]) dirs.add(p);
          else tree[p] = "";
        });
        for (const d of dirs) if (d !== "") tree[`${d}/`] = "";
        const dirList = [...dirs].sort();
        for (const [which, lines] of c.gitignores) {
          const d = dirList[which % dirList.length]!;
          tree[d === "" ? ".gitignore" : `${d}/.gitignore`] = lines.join("\n") + "\n";
        }
        tree[".git/info/exclude"] = c.info.join("\n") + "\n";
        await writeTree(box.repo, tree);
        const global = c.global.join("\n") + "\n";
        if (c.globalViaConfig) {
          await writeTree(box.home, {
            ".gitconfig": "[core]\n\texcludesFile = ~/global\n",
            global,
          });
        } else {
          await writeTree(box.home, { "xdg/git/ignore": global });
        }
        await assertMatchesGit(box);
      }),
      { numRuns: 30 },
    );
  },
});

Deno.test("IgnoreScope rejects paths that are not entries of its directory", () => {
  const rules = IgnoreRules.load({ globalExcludes: null, infoExclude: null });
  assert.throws(() => rules.enter("src", null), RangeError);
  assert.throws(() => rules.isIgnored("a", false), RangeError);
  assert.equal(rules.isIgnored("", true), false);
  const root = rules.enter("", enc.encode("*.o\n"));
  assert.equal(root.isIgnored("a.o", false), true);
  assert.throws(() => root.isIgnored("src/a.o", false), RangeError);
  assert.throws(() => root.isIgnored("", false), RangeError);
  assert.throws(() => root.isIgnored("..", false), RangeError);
  const src = root.enter("src", null);
  assert.equal(src.isIgnored("src/a.o", false), true);
  assert.throws(() => src.isIgnored("srcx/a.o", false), RangeError);
  assert.throws(() => src.isIgnored("a.o", false), RangeError);
  assert.throws(() => src.enter("src/a/b", null), RangeError);
});

Deno.test("IgnoreScope ignores everything below an ignored directory", () => {
  const rules = IgnoreRules.load({ globalExcludes: null, infoExclude: null });
  const root = rules.enter("", enc.encode("out/\n!out/keep\n"));
  assert.equal(root.isIgnored("out", true), true);
  const out = root.enter("out", enc.encode("!*\n"));
  assert.equal(out.isIgnored("out/keep", false), true);
  assert.equal(out.enter("out/d", null).isIgnored("out/d/x", false), true);
});

Deno.test("IgnoreScope stays fast on a large tree with many .gitignore files", () => {
  const rules = IgnoreRules.load({
    globalExcludes: enc.encode(".DS_Store\n*.swp\nnode_modules/\n"),
    infoExclude: enc.encode("/local/\n"),
  });
  const root = rules.enter("", enc.encode("*.o\n*.log\n!important.log\nbuild/\n/dist\n"));
  const started = performance.now();
  let tested = 0, ignored = 0;
  // 400 directories with a .gitignore each, 250 entries apiece: 100k tests.
  for (let i = 0; i < 20; i++) {
    const top = `pkg${i}`;
    const topScope = root.enter(top, enc.encode(`gen-${i}/\n*.tmp\n`));
    for (let j = 0; j < 20; j++) {
      const dir = `${top}/m${j}`;
      const scope = topScope.enter(dir, j % 2 === 0 ? enc.encode("!keep.o\n*.cache\n") : null);
      for (let k = 0; k < 250; k++) {
        const ext = ["c", "o", "log", "tmp", "cache", "h"][k % 6];
        if (scope.isIgnored(`${dir}/f${k}.${ext}`, false)) ignored++;
        tested++;
      }
    }
  }
  const ms = performance.now() - started;
  assert.equal(tested, 100_000);
  assert.ok(ignored > 0);
  assert.ok(ms < 5_000, `100k tests took ${ms.toFixed(0)} ms`);
});

Deno.test("resolveGlobalExcludesPath follows Git's precedence and expansion", () => {
  const cfg = (text: string) => parseGitConfig(text);
  const env = { HOME: "/home/u", XDG_CONFIG_HOME: "/xdg" };
  const base = { repoConfig: null, globalConfigs: [], env, projectRoot: "/p" };
  assert.equal(resolveGlobalExcludesPath(base), "/xdg/git/ignore");
  assert.equal(
    resolveGlobalExcludesPath({ ...base, env: { HOME: "/home/u" } }),
    "/home/u/.config/git/ignore",
  );
  assert.equal(
    resolveGlobalExcludesPath({ ...base, env: { HOME: "/home/u", XDG_CONFIG_HOME: "" } }),
    "/home/u/.config/git/ignore",
  );
  assert.equal(resolveGlobalExcludesPath({ ...base, env: {} }), null);
  const xdg = cfg("[core]\nexcludesFile = ~/from-xdg\n");
  const home = cfg("[core]\nexcludesFile = ~/from-home\n");
  assert.equal(
    resolveGlobalExcludesPath({ ...base, globalConfigs: [xdg, home] }),
    "/home/u/from-home",
  );
  assert.equal(
    resolveGlobalExcludesPath({ ...base, globalConfigs: [xdg, cfg("[user]\nname = x\n")] }),
    "/home/u/from-xdg",
  );
  assert.equal(
    resolveGlobalExcludesPath({
      ...base,
      repoConfig: cfg("[core]\nexcludesfile = rel/ignore\n"),
      globalConfigs: [home],
    }),
    "/p/rel/ignore",
  );
  const one = (text: string, e: { HOME?: string } = env) =>
    resolveGlobalExcludesPath({ ...base, env: e, globalConfigs: [cfg(text)] });
  assert.equal(one("[core]\nexcludesFile = /abs\n"), "/abs");
  assert.equal(one("[core]\nexcludesFile = ~\n"), "/home/u");
  assert.equal(one("[core]\nexcludesFile =\n"), null);
  assert.equal(one("[core]\nexcludesFile = ~other/x\n"), null);
  assert.equal(one("[core]\nexcludesFile = ~/x\n", {}), null);
  assert.equal(one("[core]\nexcludesFile\n"), "/xdg/git/ignore");
});

Deno.test("globalConfigPaths lists the XDG config before ~/.gitconfig", () => {
  assert.deepEqual(globalConfigPaths({ HOME: "/h", XDG_CONFIG_HOME: "/x" }), [
    "/x/git/config",
    "/h/.gitconfig",
  ]);
  assert.deepEqual(globalConfigPaths({ HOME: "/h" }), ["/h/.config/git/config", "/h/.gitconfig"]);
  assert.deepEqual(globalConfigPaths({}), []);
});
