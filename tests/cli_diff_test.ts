/**
 * `marsh diff` through the real launcher, the real CLI and the real
 * split-filesystem service, checked against real `git apply`.
 */
import assert from "node:assert/strict";

const root = new URL("../", import.meta.url).pathname;
const dec = new TextDecoder();
const perms: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };

async function marsh(args: string[], cwd?: string) {
  const out = await new Deno.Command(`${root}marsh`, {
    args,
    cwd,
    stdout: "piped",
    stderr: "piped",
  })
    .output();
  return { code: out.code, stdout: out.stdout, stderr: dec.decode(out.stderr) };
}

async function git(args: string[], cwd: string) {
  const out = await new Deno.Command("git", {
    args,
    cwd,
    env: { GIT_CONFIG_NOSYSTEM: "1", GIT_CONFIG_GLOBAL: "/dev/null" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

function tree(dir: string, files: Record<string, string | Uint8Array>) {
  for (const [path, content] of Object.entries(files)) {
    const full = `${dir}/${path}`;
    Deno.mkdirSync(full.slice(0, full.lastIndexOf("/")), { recursive: true });
    if (typeof content === "string") Deno.writeTextFileSync(full, content);
    else Deno.writeFileSync(full, content);
  }
}

Deno.test(
  { name: "marsh diff: identical trees exit 0 with no output", permissions: perms },
  async () => {
    const tmp = Deno.makeTempDirSync({ prefix: "marsh-cli-" });
    try {
      tree(`${tmp}/a`, { "x.txt": "same\n", "d/y": "y\n" });
      tree(`${tmp}/b`, { "x.txt": "same\n", "d/y": "y\n" });
      const r = await marsh(["diff", "a", "b"], tmp);
      assert.equal(r.code, 0, r.stderr);
      assert.equal(r.stdout.length, 0);
    } finally {
      Deno.removeSync(tmp, { recursive: true });
    }
  },
);

Deno.test(
  { name: "marsh diff: a patch that git apply turns OLD into NEW", permissions: perms },
  async () => {
    const tmp = Deno.makeTempDirSync({ prefix: "marsh-cli-" });
    try {
      tree(`${tmp}/old`, {
        "keep.txt": "a\nb\nc\n",
        "gone.txt": "bye\n",
        "bin.dat": new Uint8Array([0, 1, 2, 3]),
        "dir/file": "in dir\n",
        ".git/config": "ignored\n",
      });
      tree(`${tmp}/new`, {
        "keep.txt": "a\nB\nc",
        "bin.dat": new Uint8Array([0, 1, 2, 4, 5]),
        "added with space.txt": "new\n",
        "dir": "now a file\n",
        "sub/.git/HEAD": "nested git is skipped\n",
      });
      const r = await marsh(["diff", `${tmp}/old`, `${tmp}/new`]);
      assert.equal(r.code, 1, r.stderr);
      Deno.writeFileSync(`${tmp}/p.patch`, r.stdout);
      Deno.removeSync(`${tmp}/old/.git`, { recursive: true });
      const check = await git(["apply", "--check", `${tmp}/p.patch`], `${tmp}/old`);
      assert.equal(check.code, 0, check.stderr);
      const apply = await git(["apply", `${tmp}/p.patch`], `${tmp}/old`);
      assert.equal(apply.code, 0, apply.stderr);
      Deno.removeSync(`${tmp}/new/sub`, { recursive: true });
      const again = await marsh(["diff", `${tmp}/old`, `${tmp}/new`]);
      assert.equal(again.code, 0, dec.decode(again.stdout));

      const files = await marsh(["diff", "--files", `${tmp}/new`, `${tmp}/new`]);
      assert.equal(files.code, 0);
    } finally {
      Deno.removeSync(tmp, { recursive: true });
    }
  },
);

Deno.test(
  { name: "marsh diff --files lists A/M/D/T with C-quoted paths", permissions: perms },
  async () => {
    const tmp = Deno.makeTempDirSync({ prefix: "marsh-cli-" });
    try {
      tree(`${tmp}/a`, { "m": "1\n", "d": "x\n", "t": "file\n" });
      tree(`${tmp}/b`, { "m": "2\n", 'q"uote\ttab': "n\n" });
      Deno.symlinkSync("m", `${tmp}/b/t`);
      const r = await marsh(["diff", "--files", `${tmp}/a`, `${tmp}/b`]);
      assert.equal(r.code, 1, r.stderr);
      assert.equal(dec.decode(r.stdout), 'D\td\nM\tm\nA\t"q\\"uote\\ttab"\nT\tt\n');
    } finally {
      Deno.removeSync(tmp, { recursive: true });
    }
  },
);

Deno.test({
  name: "marsh diff: bad input exits 2 with a message and writes nothing",
  permissions: perms,
}, async () => {
  const tmp = Deno.makeTempDirSync({ prefix: "marsh-cli-" });
  try {
    Deno.mkdirSync(`${tmp}/a`);
    const missing = await marsh(["diff", `${tmp}/a`, `${tmp}/nope`]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /marsh diff: .*nope.*no such file or directory/);
    assert.equal(missing.stdout.length, 0);
    const usage = await marsh(["diff", `${tmp}/a`]);
    assert.equal(usage.code, 2);
    assert.match(usage.stderr, /missing required argument/);
    Deno.writeTextFileSync(`${tmp}/file`, "x");
    const notDir = await marsh(["diff", `${tmp}/a`, `${tmp}/file`]);
    assert.equal(notDir.code, 2);
    assert.match(notDir.stderr, /not a directory/);
    const help = await marsh(["diff", "--help"]);
    assert.equal(help.code, 0);
    assert.match(dec.decode(help.stdout), /Exit status: 0 identical, 1 different, 2 error/);
    assert.deepEqual([...Deno.readDirSync(tmp)].map((e) => e.name).sort(), ["a", "file"]);
  } finally {
    Deno.removeSync(tmp, { recursive: true });
  }
});
