import assert from "node:assert/strict";
import fc from "fast-check";
import { assertProperty } from "../../tests/_property.ts";
import { type GitConfig, parseGitBool, parseGitConfig } from "./git_config.ts";

const gitPerms: Deno.PermissionOptions = {
  read: true,
  write: true,
  run: ["git"],
  env: ["PATH"],
};

/** `section[.sub].key\nvalue` per entry, as `git config --list -z` prints them. */
function listed(config: GitConfig): string[] {
  return config.entries.map((e) => {
    const name = e.subsection === null
      ? `${e.section}.${e.key}`
      : `${e.section}.${e.subsection}.${e.key}`;
    return e.value === null ? name : `${name}\n${e.value}`;
  });
}

/** Git's own reading of a config file: its entries and whether it refused the file. */
async function gitList(dir: string, text: string): Promise<{ entries: string[]; ok: boolean }> {
  const file = `${dir}/config`;
  await Deno.writeTextFile(file, text);
  const out = await new Deno.Command("git", {
    args: ["config", "--file", file, "--list", "-z"],
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", HOME: dir, GIT_CONFIG_NOSYSTEM: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  const records = new TextDecoder().decode(out.stdout).split("\0");
  records.pop();
  // Git lists a key written before any section under its bare name; no
  // lookup can name it, and parseGitConfig drops it.
  const named = records.filter((r) => /^[^\n]*\./.test(r));
  return { entries: named, ok: out.success };
}

Deno.test("parseGitConfig reads sections, subsections, and case-insensitive names", () => {
  const c = parseGitConfig(
    [
      "# comment",
      "; another",
      "[Core]",
      "\tBare = false",
      "\tFileMode",
      '[remote "Origin"]',
      "\turl = https://example.com/a.git",
      "\tfetch = +refs/heads/*:refs/remotes/origin/*",
      "[Branch.Main]",
      "\tremote = origin",
      "[core] ignorecase = true",
      "",
    ].join("\n"),
  );
  assert.equal(c.error, null);
  assert.equal(c.get("core", "bare"), "false");
  assert.equal(c.get("CORE", "BARE"), "false");
  assert.equal(c.get("core", "filemode"), null);
  assert.equal(c.getBool("core", "filemode"), true);
  assert.equal(c.get("remote", "url", "Origin"), "https://example.com/a.git");
  assert.equal(c.get("remote", "url", "origin"), undefined);
  assert.equal(c.get("remote", "url"), undefined);
  assert.equal(c.get("branch", "remote", "main"), "origin");
  assert.equal(c.getBool("core", "ignorecase"), true);
  assert.equal(c.get("core", "missing"), undefined);
});

Deno.test("parseGitConfig resolves quotes, escapes, comments, and continuations", () => {
  const c = parseGitConfig(
    [
      "[s]",
      '\ta = "  spaced  " # comment',
      '\tb = one\\ttab\\nnewline \\"q\\" back\\\\slash',
      "\tc = x ; comment",
      '\td = "x ; not a comment"',
      "\te = part one \\",
      "   part two",
      "\tf = a   b\t c   ",
      "\tg =",
      '\th = a"b c"d',
      "\ti = \\b",
      "",
    ].join("\r\n"),
  );
  assert.equal(c.error, null);
  assert.equal(c.get("s", "a"), "  spaced  ");
  assert.equal(c.get("s", "b"), 'one\ttab\nnewline "q" back\\slash');
  assert.equal(c.get("s", "c"), "x");
  assert.equal(c.get("s", "d"), "x ; not a comment");
  assert.equal(c.get("s", "e"), "part one    part two");
  assert.equal(c.get("s", "f"), "a   b  c");
  assert.equal(c.get("s", "g"), "");
  assert.equal(c.getBool("s", "g"), false);
  assert.equal(c.get("s", "h"), "ab cd");
  assert.equal(c.get("s", "i"), "\b");
});

Deno.test("parseGitConfig keeps every value and lets the last one win", () => {
  const c = parseGitConfig("[a]\nk = 1\n[b]\nk = x\n[A]\nK = 2\nk\n");
  assert.deepEqual(c.getAll("a", "k"), ["1", "2", null]);
  assert.equal(c.get("a", "k"), null);
  assert.deepEqual(c.getAll("a", "nope"), []);
});

Deno.test("parseGitConfig stops at the first malformed line and keeps what came before", () => {
  const cases: [string, string][] = [
    ["[a]\nk = 1\n[bad\nk = 2\n", "bad config line 3"],
    ['[a]\nk = 1\nk = "open\n', "bad config line 3"],
    ["[a]\nk = 1\nk = bad \\q escape\n", "bad config line 3"],
    ["[a]\nk = 1\n9key = x\n", "bad config line 3"],
    ["[a]\nk = 1\nk # comment after a bare key\n", "bad config line 3"],
    ['[a]\nk = 1\n[remote"x"]\n', "bad config line 3"],
    ['[a]\nk = 1\n[remote "x" ]\n', "bad config line 3"],
    ["[a]\nk = 1\n[]\n", "bad config line 3"],
  ];
  for (const [text, error] of cases) {
    const c = parseGitConfig(text);
    assert.equal(c.error, error, text);
    assert.equal(c.get("a", "k"), "1", text);
  }
});

Deno.test("parseGitConfig does not follow includes", () => {
  const c = parseGitConfig(
    '[include]\n\tpath = /etc/passwd\n[includeIf "gitdir:~/"]\n\tpath = x\n',
  );
  assert.equal(c.error, null);
  assert.equal(c.get("include", "path"), "/etc/passwd");
  assert.equal(c.get("includeif", "path", "gitdir:~/"), "x");
  assert.equal(c.entries.length, 2);
});

Deno.test("parseGitConfig decodes bytes and drops a BOM", () => {
  const bytes = new TextEncoder().encode("\uFEFF[core]\n\texcludesFile = ~/ignore\n");
  assert.equal(parseGitConfig(bytes).get("core", "excludesfile"), "~/ignore");
});

Deno.test("parseGitBool reads Git booleans", () => {
  const cases: [string | null, boolean | undefined][] = [
    [null, true],
    ["", false],
    ["TRUE", true],
    ["yes", true],
    ["On", true],
    ["false", false],
    ["no", false],
    ["off", false],
    ["1", true],
    ["0", false],
    ["-3", true],
    ["2k", true],
    ["0x0", false],
    ["0x10", true],
    ["07", true],
    ["08", undefined],
    ["maybe", undefined],
  ];
  for (const [value, expected] of cases) assert.equal(parseGitBool(value), expected, `${value}`);
});

Deno.test("parseGitConfig never throws on random text", (t) => {
  assertProperty(
    t,
    fc.property(fc.string({ unit: "binary", maxLength: 300 }), (text) => {
      const c = parseGitConfig(text);
      assert.ok(c.error === null || c.error.startsWith("bad config line "));
    }),
    { numRuns: 2000 },
  );
});

const configText = fc.array(
  fc.constantFrom(
    "[",
    "]",
    "[core]",
    '[remote "o\\"x"]',
    "[a.B]",
    '"',
    "\\",
    "\\n",
    "\\t",
    "\\\n",
    "\n",
    "\r\n",
    "\r",
    "=",
    " = ",
    "#",
    ";",
    " ",
    "\t",
    "key",
    "Key2",
    "-",
    "x",
    "9",
    "é",
  ),
  { maxLength: 40 },
).map((parts) => parts.join(""));

Deno.test({
  name: "parseGitConfig reads what git config --list reads (fixed cases)",
  permissions: gitPerms,
  async fn() {
    const dir = await Deno.makeTempDir({ prefix: "marsh-config-test-" });
    try {
      const texts = [
        '[core]\n\tbare\n\tx = "a b" ; c\n[remote "Origin"] url = u\\\n v\n[A.Bc]\nk=1\n',
        '[s]\n\tf = a   b\t c   \n\tg = ""\n\th = a"b c"d\n',
        "[a]\nk = 1\n[bad\nk = 2\n",
        "[a]\nk = 1\nk = \\",
        '[a "x\\y\\"z"]\nk = 1\n',
        "k = before any section\n[a]\nk = 1\n",
        "[a]\r\nk = 1\r\nj=2\r",
      ];
      for (const text of texts) {
        const ours = parseGitConfig(text);
        const git = await gitList(dir, text);
        assert.deepEqual(listed(ours), git.entries, JSON.stringify(text));
        assert.equal(ours.error === null, git.ok, JSON.stringify(text));
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});

Deno.test({
  name: "parseGitConfig reads what git config --list reads (random texts)",
  permissions: gitPerms,
  async fn(t) {
    const dir = await Deno.makeTempDir({ prefix: "marsh-config-test-" });
    try {
      await assertProperty(
        t,
        fc.asyncProperty(configText, async (text) => {
          const ours = parseGitConfig(text);
          const git = await gitList(dir, text);
          assert.deepEqual(listed(ours), git.entries);
          assert.equal(ours.error === null, git.ok);
        }),
        { numRuns: 150 },
      );
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  },
});
