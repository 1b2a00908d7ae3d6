import assert from "node:assert/strict";
import {
  adminRule,
  configProblem,
  headProblem,
  isBranchName,
  packedRefsProblem,
} from "./admin_rules.ts";

const enc = new TextEncoder();
const ID = "0123456789abcdef0123456789abcdef01234567";
const ID256 = "0123456789abcdef".repeat(4);

/** The config marsh writes for a SHA-1 fork (see admin.ts `configText`). */
const OURS = [
  "[core]",
  "\trepositoryformatversion = 0",
  "\tfilemode = true",
  "\tbare = false",
  "\tlogallrefupdates = true",
  "\tfsmonitor = false",
  "\thooksPath = /dev/null",
  "[diff]",
  "\tignoreSubmodules = all",
  "",
].join("\n");

Deno.test("headProblem: a branch or a commit id, as Git writes them; nothing else", () => {
  const cases: [string, string, string | null][] = [
    ["ours", "ref: refs/heads/marsh-split\n", null],
    ["new branch", "ref: refs/heads/feature\n", null],
    ["nested branch name", "ref: refs/heads/fix/issue-10\n", null],
    ["unicode branch", "ref: refs/heads/ünïcode\n", null],
    ["detached", `${ID}\n`, null],
    ["no newline", "ref: refs/heads/feature", "not a branch or a commit id"],
    ["two lines", "ref: refs/heads/feature\n\n", "not a branch or a commit id"],
    ["outside heads", "ref: refs/remotes/origin/main\n", "points outside refs/heads/"],
    ["tag", "ref: refs/tags/v1\n", "points outside refs/heads/"],
    ["not under refs", "ref: HEAD\n", "points outside refs/heads/"],
    ["dotdot", "ref: refs/heads/../../config\n", "not a branch or a commit id"],
    ["empty branch", "ref: refs/heads/\n", "not a branch or a commit id"],
    ["lock name", "ref: refs/heads/x.lock\n", "not a branch or a commit id"],
    ["space", "ref: refs/heads/a b\n", "not a branch or a commit id"],
    ["uppercase id", `${ID.toUpperCase()}\n`, "not a branch or a commit id"],
    ["short id", `${ID.slice(1)}\n`, "not a branch or a commit id"],
    ["sha256 id in a sha1 repo", `${ID256}\n`, "not a branch or a commit id"],
    ["garbage", "gitdir: /etc\n", "not a branch or a commit id"],
    ["empty", "", "not a branch or a commit id"],
  ];
  for (const [name, text, want] of cases) {
    assert.equal(headProblem(enc.encode(text), "sha1"), want, name);
  }
  assert.equal(headProblem(enc.encode(`${ID256}\n`), "sha256"), null);
  assert.equal(headProblem(enc.encode(`${ID}\n`), "sha256"), "not a branch or a commit id");
  assert.equal(
    headProblem(new Uint8Array([0x72, 0x65, 0x66, 0xff, 0x0a]), "sha1"),
    "not a branch or a commit id",
  );
});

Deno.test("isBranchName follows git check-ref-format", () => {
  for (const ok of ["a", "feature/x", "x-1.2", "ü"]) assert.equal(isBranchName(ok), true, ok);
  for (const bad of ["", "/a", "a/", "a..b", ".a", "a/.b", "a.lock", "a@{1}", "a^", "a:b", "a b"]) {
    assert.equal(isBranchName(bad), false, bad);
  }
});

Deno.test("packedRefsProblem: Git's own format, every ref valid and under refs/", () => {
  const header = "# pack-refs with: peeled fully-peeled sorted \n";
  const cases: [string, string, string | null][] = [
    ["empty", "", null],
    ["header only", header, null],
    ["gc output", `${header}${ID} refs/heads/feature\n${ID} refs/tags/v1\n^${ID}\n`, null],
    ["no header", `${ID} refs/heads/marsh-split\n`, null],
    ["peel first", `^${ID}\n`, "unexpected line 1"],
    ["two peels", `${ID} refs/tags/v1\n^${ID}\n^${ID}\n`, "unexpected line 3"],
    ["outside refs", `${ID} HEAD\n`, "unexpected line 1"],
    ["bad ref", `${ID} refs/heads/a..b\n`, "unexpected line 1"],
    ["comment later", `${ID} refs/heads/a\n# x\n`, "unexpected line 2"],
    ["blank line", `${ID} refs/heads/a\n\n`, "unexpected line 2"],
    ["CRLF", `${ID} refs/heads/a\r\n`, "unexpected line 1"],
    ["no final newline", `${ID} refs/heads/a`, "no newline at the end"],
    ["short id", `${ID.slice(2)} refs/heads/a\n`, "unexpected line 1"],
  ];
  for (const [name, text, want] of cases) {
    assert.equal(packedRefsProblem(enc.encode(text), "sha1"), want, name);
  }
  assert.equal(packedRefsProblem(enc.encode(`${ID256} refs/heads/a\n`), "sha256"), null);
  assert.equal(packedRefsProblem(new Uint8Array([0xff, 0x0a]), "sha1"), "not UTF-8");
});

Deno.test("configProblem: only harmless keys may be added; ours must stay as written", () => {
  const cases: [string, string, string | null][] = [
    ["ours", OURS, null],
    ["identity", `${OURS}[user]\n\tname = bot\n\temail = bot@example.com\n`, null],
    ["identity with spaces and quotes", `${OURS}[user]\n\tname = "Bot; McBot # x"\n`, null],
    [
      "tracking (checkout -b --track)",
      `${OURS}[branch "feature"]\n\tremote = origin\n\tmerge = refs/heads/main\n`,
      null,
    ],
    [
      "tracking a local branch",
      `${OURS}[branch "f"]\n\tremote = .\n\tmerge = refs/heads/marsh-split\n`,
      null,
    ],
    ["comments and blank lines", `# hi\n\n${OURS}; more\n`, null],
    ["an empty section left by --unset", `${OURS}[user]\n`, null],
    ["same values, other layout", OURS.replaceAll("\t", "    ").replaceAll(" = ", "="), null],
    ["fsmonitor", `${OURS}[core]\n\tfsmonitor = /tmp/x\n`, "core.fsmonitor"],
    [
      "fsmonitor changed in place",
      OURS.replace("fsmonitor = false", "fsmonitor = true"),
      "core.fsmonitor",
    ],
    [
      "hooksPath",
      OURS.replace("hooksPath = /dev/null", "hooksPath = /tmp/hooks"),
      "core.hookspath",
    ],
    ["hooksPath removed", OURS.replace("\thooksPath = /dev/null\n", ""), "core.hookspath"],
    ["include", `${OURS}[include]\n\tpath = /tmp/evil\n`, "include.path"],
    ["includeIf", `${OURS}[includeIf "gitdir:/"]\n\tpath = /tmp/evil\n`, "includeif.gitdir:/.path"],
    ["alias", `${OURS}[alias]\n\tst = !touch /tmp/x\n`, "alias.st"],
    ["editor", `${OURS}[core]\n\teditor = vi\n`, "core.editor"],
    ["pager", `${OURS}[core]\n\tpager = less\n`, "core.pager"],
    ["sshCommand", `${OURS}[core]\n\tsshCommand = x\n`, "core.sshcommand"],
    ["worktree", `${OURS}[core]\n\tworktree = /\n`, "core.worktree"],
    ["filter", `${OURS}[filter "x"]\n\tclean = x\n`, "filter.x.clean"],
    ["textconv", `${OURS}[diff "x"]\n\ttextconv = x\n`, "diff.x.textconv"],
    ["extensions", `${OURS}[extensions]\n\tworktreeConfig = true\n`, "extensions.worktreeconfig"],
    ["signing key", `${OURS}[user]\n\tsigningkey = ABC\n`, "user.signingkey"],
    ["gpg program", `${OURS}[gpg]\n\tprogram = /tmp/x\n`, "gpg.program"],
    ["gc", `${OURS}[gc]\n\tauto = 0\n`, "gc.auto"],
    ["maintenance", `${OURS}[maintenance]\n\tauto = false\n`, "maintenance.auto"],
    ["remote url", `${OURS}[remote "origin"]\n\turl = /tmp/x\n`, "remote.origin.url"],
    ["user subsection", `${OURS}[user "x"]\n\tname = bot\n`, "user.x.name"],
    ["bare identity key", `${OURS}[user]\n\tname\n`, "user.name"],
    ["tracking a path", `${OURS}[branch "f"]\n\tremote = /tmp/repo\n`, "branch.f.remote"],
    ["tracking a URL", `${OURS}[branch "f"]\n\tremote = ext::sh -c x\n`, "branch.f.remote"],
    ["merge not a ref", `${OURS}[branch "f"]\n\tmerge = main\n`, "branch.f.merge"],
    ["bad branch name", `${OURS}[branch "a..b"]\n\tremote = origin\n`, "branch.a..b.remote"],
    ["branch rebase", `${OURS}[branch "f"]\n\trebase = interactive\n`, "branch.f.rebase"],
    ["a key of ours twice", `${OURS}[core]\n\tfsmonitor = false\n`, "core.fsmonitor"],
    ["key before any section", `fsmonitor = /tmp/x\n${OURS}`, "a key before any section at line 1"],
    ["malformed line", `${OURS}[user\n`, `bad config line ${OURS.split("\n").length}`],
    ["continued line", `${OURS}[user]\n\tname = a\\\n\tb\n`, null],
    ["byte order mark", `\uFEFF${OURS}`, "a byte order mark"],
    ["NUL", `${OURS}[user]\n\tname = a\0b\n`, "a NUL byte"],
  ];
  for (const [name, text, want] of cases) {
    assert.equal(configProblem(enc.encode(text), enc.encode(OURS)), want, name);
  }
  assert.equal(configProblem(new Uint8Array([0x5b, 0xff, 0x5d]), enc.encode(OURS)), "not UTF-8");
});

Deno.test("adminRule: Git's state and what gc writes are allowed; redirects and hooks are not", () => {
  const cases: [string, string | null][] = [
    ["HEAD", "head"],
    ["config", "config"],
    ["packed-refs", "packed-refs"],
    ["index", "state"],
    ["sharedindex." + ID, "state"],
    ["refs", "state"],
    ["refs/heads/feature", "state"],
    ["logs/refs/heads/feature", "state"],
    ["COMMIT_EDITMSG", "state"],
    ["ORIG_HEAD", "state"],
    ["gc.pid", "state"],
    ["gc.log", "state"],
    ["config.lock", "state"],
    ["info", "dir"],
    ["info/exclude", "fixed"],
    ["info/refs", "state"],
    ["objects", "open-dir"],
    ["objects/ab", "state"],
    ["objects/pack/pack-x.pack", "state"],
    ["objects/info", "dir"],
    ["objects/info/alternates", "fixed"],
    ["objects/info/packs", "state"],
    ["objects/info/commit-graph", "state"],
    ["objects/info/commit-graphs/graph-x.graph", "state"],
    ["commondir", null],
    ["gitdir", null],
    ["config.worktree", null],
    ["hooks", null],
    ["hooks/pre-commit", null],
    ["modules", null],
    ["worktrees", null],
    ["shallow", null],
    ["branches", null],
    ["remotes", null],
    ["info/attributes", null],
    ["info/sparse-checkout", null],
    ["info/grafts", null],
    ["objects/info/http-alternates", null],
    ["sharedindex.xyz", null],
  ];
  for (const [path, want] of cases) assert.equal(adminRule(path), want, path);
});
