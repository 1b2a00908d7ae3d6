/**
 * Acceptance (issue 14 §2, docs/guide.md "Committing a checkpoint"):
 * `marsh commit` and `marsh show` through the real CLI and daemon, on a
 * session made in the journal directly whose stacks are real snapshot
 * layers: a `start` checkpoint and one operation's checkpoint on top.
 */

import assert from "node:assert/strict";
import { ensureControlDir, JOURNAL_NAME } from "../protocol/control_dir.ts";
import { Journal } from "../journal/journal.ts";
import { Dir } from "../splitfs/fd/dir.ts";
import { LayerStore } from "../splitfs/layers/layers.ts";
import { type Result, Sandbox, show } from "./_acceptance.ts";

const PERMS: Deno.PermissionOptions = {
  run: true,
  read: true,
  write: true,
  env: true,
  ffi: true,
  sys: ["uid", "gid"],
};
const FILES = { "a.txt": "alpha\n", "sub/b.txt": "b\n", "keep.txt": "keep\n" };

/** A session "fix" whose start is the project and whose head is one operation's change. */
interface World extends AsyncDisposable {
  readonly sb: Sandbox;
  readonly start: { readonly id: string; readonly root: string; readonly layers: string[] };
  readonly child: { readonly id: string; readonly root: string; readonly layers: string[] };
  /** Adds an operation checkpoint on the head whose snapshot `change` makes; returns its id. */
  readonly add: (op: string, change: (project: string) => void) => string;
}

async function world(): Promise<World> {
  const sb = await Sandbox.create({ files: FILES });
  try {
    return setUp(sb);
  } catch (error) {
    await sb[Symbol.asyncDispose]();
    throw error;
  }
}

function setUp(sb: Sandbox): World {
  Deno.mkdirSync(`${sb.project}/.marsh`);
  const snap = () => {
    using root = Dir.openAbsolute(sb.project);
    using marsh = root.openDir(".marsh");
    using store = LayerStore.open(marsh);
    const s = store.snapshot({
      source: root,
      ignore: null,
      skipTop: new Set([".marsh"]),
      chain: "tracked",
    });
    return { root: s.rootId, layers: [...s.layers] };
  };
  const s1 = snap();
  ensureControlDir(sb.home);
  const journal = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
  const cp = journal.checkpoints;
  const session = cp.createSession({
    id: "sess1",
    project: sb.project,
    name: "fix",
    withIgnored: false,
    start: s1,
    createdMs: Date.now(),
  });
  journal.close();
  const add = (op: string, change: (project: string) => void): string => {
    const before = new Map(FILES_NOW(sb.project));
    change(sb.project);
    const s = snap();
    // The project's tree goes back: a commit is of the checkpoint, never of the working tree.
    restore(sb.project, before);
    const j = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
    try {
      const c = j.checkpoints;
      const head = c.getSession("sess1")!.head;
      const r = c.recordOperation({
        id: op,
        session: "sess1",
        expectedHead: head,
        argv: ["bash", "-c", `echo ${op} > a.txt; exit 3`],
        cwd: ".",
        createdMs: Date.now(),
      });
      assert.equal(r.kind, "recorded");
      assert.ok(c.launchOperation(op, Date.now()));
      assert.ok(c.drainOperation(op, { kind: "exited", code: 3 }, Date.now()));
      assert.ok(
        c.recordIntent(op, {
          root: s.root,
          layer: s.layers[s.layers.length - 1]!,
          changes: "d".repeat(64),
        }, Date.now()),
      );
      const b = c.bindCheckpoint(op, { createdMs: Date.now() });
      assert.equal(b.kind, "bound");
      if (b.kind !== "bound") throw new Error("not bound");
      assert.deepEqual(b.checkpoint.layers, s.layers);
      return b.checkpoint.id;
    } finally {
      j.close();
    }
  };
  const childId = add("op1", (p) => {
    Deno.writeTextFileSync(`${p}/a.txt`, "alpha 2\n");
    Deno.writeTextFileSync(`${p}/new.txt`, "new\n");
    Deno.removeSync(`${p}/keep.txt`);
  });
  const j = Journal.open(`${sb.home}/${JOURNAL_NAME}`);
  const child = j.checkpoints.getCheckpoint(childId)!;
  j.close();
  return {
    sb,
    start: { id: session.head, root: s1.root, layers: s1.layers },
    child: { id: childId, root: child.root, layers: [...child.layers] },
    add,
    [Symbol.asyncDispose]: () => sb[Symbol.asyncDispose](),
  };
}

/** The project's files (not `.git`, `.marsh`) and their bytes. */
function FILES_NOW(root: string): [string, Uint8Array][] {
  const out: [string, Uint8Array][] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of Deno.readDirSync(dir)) {
      if (rel === "" && (e.name === ".git" || e.name === ".marsh")) continue;
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory) walk(`${dir}/${e.name}`, r);
      else if (e.isFile) out.push([r, Deno.readFileSync(`${dir}/${e.name}`)]);
    }
  };
  walk(root, "");
  return out;
}

function restore(root: string, files: Map<string, Uint8Array>): void {
  for (const [rel] of FILES_NOW(root)) if (!files.has(rel)) Deno.removeSync(`${root}/${rel}`);
  for (const [rel, bytes] of files) {
    Deno.mkdirSync(`${root}/${rel}`.replace(/\/[^/]*$/, ""), { recursive: true });
    Deno.writeFileSync(`${root}/${rel}`, bytes);
  }
}

function ok(r: Result, what: string): void {
  assert.equal(r.code, 0, `${what}: ${show(r)}`);
}

async function revParse(sb: Sandbox, rev: string): Promise<string> {
  return (await sb.git("rev-parse", "--verify", rev)).trim();
}

Deno.test({
  name:
    "marsh commit: the head's root becomes a commit on a new ref; the working tree and HEAD stay",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const head = await revParse(sb, "HEAD");
  const r = await sb.marsh(["commit", "--ref", "refs/heads/agent", "--json"]);
  ok(r, "commit");
  const out = JSON.parse(r.stdout);
  assert.equal(out.root, w.child.root);
  assert.equal(out.checkpoint, w.child.id);
  // A new ref starts where HEAD is, as `git branch` starts one.
  assert.equal(out.parent, head);
  assert.equal(await revParse(sb, "refs/heads/agent"), out.commit);
  assert.equal(await revParse(sb, "refs/heads/agent^{tree}"), w.child.root);
  assert.equal(
    (await sb.git("rev-list", "--parents", "-n1", "refs/heads/agent")).trim(),
    `${out.commit} ${head}`,
  );
  assert.equal(await revParse(sb, "HEAD"), head);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "alpha\n");
  assert.equal(
    await sb.git("ls-tree", "-r", "--name-only", "refs/heads/agent"),
    "a.txt\nnew.txt\nsub/b.txt\n",
  );
  assert.equal(await sb.git("show", "refs/heads/agent:a.txt"), "alpha 2\n");
  const author = await sb.git("log", "-1", "--format=%an <%ae>%n%B", "refs/heads/agent");
  assert.match(
    author,
    /^Test <test@example\.invalid>\nmarsh checkpoint [0-9a-f]{12} of session fix\n/,
  );
  assert.match(author, /Operation: \["bash","-c","echo op1 > a.txt; exit 3"\]/);
  await sb.git("fsck", "--full", "--strict", "--no-dangling");
  // The same root again, on main, with a message: main's commit is its parent.
  const r2 = await sb.marsh(["commit", "--ref", "refs/heads/main", "-m", "from marsh"]);
  ok(r2, "commit main");
  const commit = r2.stdout.trim();
  assert.equal(await revParse(sb, "refs/heads/main"), commit);
  assert.equal(await revParse(sb, "refs/heads/main^"), head);
  assert.match(await sb.git("log", "-1", "--format=%B", "main"), /^from marsh\n/);
  // --orphan: a new ref gets a root commit; on an existing ref it is refused and nothing moves.
  const r3 = await sb.marsh(["commit", "--ref", "refs/heads/alone", "--orphan", "--json"]);
  ok(r3, "commit --orphan");
  const alone = JSON.parse(r3.stdout);
  assert.equal(alone.parent, null);
  assert.equal(
    (await sb.git("rev-list", "--parents", "-n1", "refs/heads/alone")).trim(),
    alone.commit,
  );
  const r4 = await sb.marsh(["commit", "--ref", "refs/heads/main", "--orphan"]);
  assert.equal(r4.code, 2, r4.stderr);
  assert.match(r4.stderr, /--orphan makes a new ref, and refs\/heads\/main exists/);
  assert.equal(await revParse(sb, "refs/heads/main"), commit);
});

Deno.test({
  name:
    "marsh commit leaves out what the root's .gitignore files ignore and the parent does not track; --include-ignored keeps it",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const head = await revParse(sb, "HEAD");
  w.add("op2", (p) => {
    Deno.writeTextFileSync(`${p}/.gitignore`, "build/\n*.log\n");
    Deno.writeTextFileSync(`${p}/sub/.gitignore`, "b.txt\n");
    Deno.mkdirSync(`${p}/build/deep`, { recursive: true });
    Deno.writeTextFileSync(`${p}/build/deep/out.o`, "obj\n");
    Deno.writeTextFileSync(`${p}/sub/x.log`, "log\n");
    // Tracked by HEAD, so kept although sub/.gitignore now ignores it.
    Deno.writeTextFileSync(`${p}/sub/b.txt`, "b 2\n");
  });
  const r = await sb.marsh(["commit", "--ref", "refs/heads/ign", "--json"]);
  ok(r, "commit");
  const out = JSON.parse(r.stdout);
  assert.equal(out.parent, head);
  assert.deepEqual(out.ignored, ["build/deep/out.o", "sub/x.log"]);
  assert.equal(out.ignored_count, 2);
  assert.notEqual(out.tree, out.root);
  assert.equal(await revParse(sb, "refs/heads/ign^{tree}"), out.tree);
  assert.equal(
    await sb.git("ls-tree", "-r", "--name-only", "refs/heads/ign"),
    ".gitignore\na.txt\nkeep.txt\nsub/.gitignore\nsub/b.txt\n",
  );
  assert.equal(await sb.git("show", "refs/heads/ign:sub/b.txt"), "b 2\n");
  // The text form names them on stderr.
  const t = await sb.marsh(["commit", "--ref", "refs/heads/ign-text"]);
  ok(t, "commit text");
  assert.match(
    t.stderr,
    /marsh commit: left out 2 paths Git ignores and the parent does not track: build\/deep\/out\.o, sub\/x\.log \(they stay in the checkpoint; --include-ignored commits them\)\n/,
  );
  assert.equal(await revParse(sb, "refs/heads/ign-text^{tree}"), out.tree);
  // --include-ignored: the checkpoint's root as it is.
  const all = await sb.marsh([
    "commit",
    "--ref",
    "refs/heads/ign-all",
    "--include-ignored",
    "--json",
  ]);
  ok(all, "commit --include-ignored");
  const a = JSON.parse(all.stdout);
  assert.equal(a.tree, a.root);
  assert.equal(a.ignored_count, 0);
  assert.equal(await revParse(sb, "refs/heads/ign-all^{tree}"), a.root);
  // Nothing is left in the control dir's scratch space.
  assert.deepEqual([...Deno.readDirSync(`${sb.home}/tmp`)], []);
  await sb.git("fsck", "--full", "--strict", "--no-dangling");
});

Deno.test({
  name: "marsh commit --checkpoint takes that root; a bad ref name or checkpoint changes nothing",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const r = await sb.marsh([
    "commit",
    "--checkpoint",
    w.start.id.slice(0, 8),
    "--ref",
    "refs/heads/base",
  ]);
  ok(r, "commit start");
  assert.equal(await revParse(sb, "refs/heads/base^{tree}"), w.start.root);
  const bad = await sb.marsh(["commit", "--ref", "main"]);
  assert.equal(bad.code, 2, show(bad));
  assert.match(bad.stderr, /not a full ref name; give one like refs\/heads\/my-branch/);
  const none = await sb.marsh(["commit", "--checkpoint", "ffffffff", "--ref", "refs/heads/x"]);
  assert.equal(none.code, 2, show(none));
  assert.match(none.stderr, /unknown checkpoint ffffffff/);
  const session = await sb.marsh(["commit", "--session", "nope", "--ref", "refs/heads/x"]);
  assert.equal(session.code, 2, show(session));
  assert.match(session.stderr, /no open session "nope".*open: fix/);
  assert.equal((await sb.runGit(["rev-parse", "--verify", "-q", "refs/heads/x"])).code, 1);
});

/** Every file under `.git/objects`, relative. */
function objectFiles(project: string): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of Deno.readDirSync(dir)) {
      const r = rel === "" ? e.name : `${rel}/${e.name}`;
      if (e.isDirectory) walk(`${dir}/${e.name}`, r);
      else out.push(r);
    }
  };
  walk(`${project}/.git/objects`, "");
  return out.sort();
}

Deno.test({
  name:
    "marsh commit: an unsupported entry is UnsupportedGitExport naming it; nothing is written or moved",
  permissions: PERMS,
}, async (t) => {
  await using w = await world();
  const { sb } = w;
  const main = await revParse(sb, "refs/heads/main");
  const cases: [string, (p: string) => void, string][] = [
    ["empty", (p) => Deno.mkdirSync(`${p}/sub/empty`), "sub/empty"],
    ["abs", (p) => Deno.symlinkSync("/etc/hostname", `${p}/abs-link`), "abs-link"],
    ["escape", (p) => Deno.symlinkSync("../../x", `${p}/sub/esc`), "sub/esc"],
  ];
  for (const [op, change, path] of cases) {
    await t.step(op, async () => {
      w.add(op, (p) => {
        change(p);
        Deno.writeTextFileSync(`${p}/a.txt`, `${op}\n`);
      });
      // What the working tree had is back; the layers keep the entry.
      Deno.removeSync(`${sb.project}/${path}`, { recursive: true });
      const before = objectFiles(sb.project);
      const r = await sb.marsh(["commit", "--ref", "refs/heads/main", "--json"]);
      assert.equal(r.code, 1, show(r));
      assert.equal(JSON.parse(r.stdout).error, "UnsupportedGitExport");
      assert.equal(JSON.parse(r.stdout).path, path);
      assert.match(
        r.stderr,
        new RegExp(`UnsupportedGitExport: ${path}: .*refs/heads/main was not moved`),
      );
      assert.deepEqual(objectFiles(sb.project), before);
      assert.equal(await revParse(sb, "refs/heads/main"), main);
    });
  }
});

/**
 * A `git` first on PATH that moves `ref` to `to` (once, with the real Git)
 * just before the first `update-ref` it is asked to run: another writer
 * between marsh's read of the ref and its swap.
 */
async function racingGit(sb: Sandbox, ref: string, to: string): Promise<string> {
  const real = (await sb.bash("command -v git")).stdout.trim();
  const dir = `${sb.scratch}/racing-bin`;
  Deno.mkdirSync(dir, { recursive: true });
  const once = `${sb.scratch}/raced-${ref.replaceAll("/", "-")}`;
  Deno.writeTextFileSync(
    `${dir}/git`,
    `#!/bin/sh\nfor a in "$@"; do\n  if [ "$a" = update-ref ] && [ ! -e '${once}' ]; then\n` +
      `    touch '${once}'\n    '${real}' update-ref '${ref}' '${to}' || exit 99\n  fi\ndone\n` +
      `exec '${real}' "$@"\n`,
  );
  Deno.chmodSync(`${dir}/git`, 0o755);
  return `${dir}:${sb.env.PATH}`;
}

Deno.test({
  name:
    "marsh commit: a ref moved between its read and the swap fails the swap; it stays where it was moved",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const main = await revParse(sb, "refs/heads/main");
  await sb.git("commit", "-q", "--allow-empty", "-m", "elsewhere");
  const elsewhere = await revParse(sb, "HEAD");
  await sb.git("update-ref", "refs/heads/main", main);
  const PATH = await racingGit(sb, "refs/heads/main", elsewhere);
  const r = await sb.marsh(["commit", "--ref", "refs/heads/main"], { env: { PATH } });
  assert.equal(r.code, 1, show(r));
  assert.match(
    r.stderr,
    /refs\/heads\/main moved meanwhile: it is [0-9a-f]{40}, not [0-9a-f]{40}; nothing was moved/,
  );
  assert.equal(r.stdout, "");
  assert.equal(await revParse(sb, "refs/heads/main"), elsewhere);
  // A new ref that appears meanwhile fails the same way (the zero id was expected).
  const PATH2 = await racingGit(sb, "refs/heads/fresh", main);
  const r2 = await sb.marsh(["commit", "--ref", "refs/heads/fresh"], { env: { PATH: PATH2 } });
  assert.equal(r2.code, 1, show(r2));
  assert.equal(await revParse(sb, "refs/heads/fresh"), main);
  // Without the race, the same command moves it.
  ok(await sb.marsh(["commit", "--ref", "refs/heads/main"]), "commit");
  assert.equal(await revParse(sb, "refs/heads/main^"), elsewhere);
});

/** An executable script that touches `marker`. */
function toucher(path: string, marker: string): void {
  Deno.writeTextFileSync(path, `#!/bin/sh\ntouch '${marker}'\ncat\n`);
  Deno.chmodSync(path, 0o755);
}

Deno.test({
  name:
    "marsh commit runs no hook, filter or fsmonitor of the repository or of the global config; identity comes from it",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const m = (n: string) => `${sb.scratch}/fired-${n}`;
  for (const h of ["pre-commit", "post-commit", "reference-transaction", "commit-msg"]) {
    toucher(`${sb.project}/.git/hooks/${h}`, m(`repo-${h}`));
  }
  const globalHooks = `${sb.scratch}/global-hooks`;
  Deno.mkdirSync(globalHooks);
  toucher(`${globalHooks}/reference-transaction`, m("global-hooks"));
  toucher(`${sb.scratch}/fsmonitor`, m("fsmonitor"));
  toucher(`${sb.scratch}/clean`, m("filter"));
  Deno.writeTextFileSync(`${sb.project}/.gitattributes`, "* filter=spy\n");
  const global = `${sb.scratch}/global.gitconfig`;
  Deno.writeTextFileSync(
    global,
    `[user]\n\tname = Global User\n\temail = global@example.invalid\n` +
      `[core]\n\thooksPath = ${globalHooks}\n\tfsmonitor = ${sb.scratch}/fsmonitor\n` +
      `[filter "spy"]\n\tclean = ${sb.scratch}/clean\n\tsmudge = ${sb.scratch}/clean\n` +
      `[commit]\n\tgpgSign = true\n[gpg]\n\tprogram = ${sb.scratch}/clean\n`,
  );
  // The hooks are live: Git itself runs the repository's on an update of a ref.
  await sb.git("update-ref", "refs/heads/probe", "HEAD");
  assert.ok(Deno.statSync(m("repo-reference-transaction")).isFile);
  Deno.removeSync(m("repo-reference-transaction"));
  const env = {
    GIT_CONFIG_GLOBAL: global,
    GIT_AUTHOR_NAME: "",
    GIT_AUTHOR_EMAIL: "",
    GIT_COMMITTER_NAME: "",
    GIT_COMMITTER_EMAIL: "",
  };
  const r = await sb.marsh(["commit", "--ref", "refs/heads/agent"], { env });
  ok(r, "commit");
  for (const n of ["pre-commit", "post-commit", "reference-transaction", "commit-msg"]) {
    assert.equal(exists(m(`repo-${n}`)), false, n);
  }
  for (const n of ["global-hooks", "fsmonitor", "filter"]) assert.equal(exists(m(n)), false, n);
  assert.equal(
    await sb.git("log", "-1", "--format=%an <%ae>|%cn <%ce>", "refs/heads/agent"),
    "Global User <global@example.invalid>|Global User <global@example.invalid>\n",
  );
  assert.equal(await revParse(sb, "refs/heads/agent^{tree}"), w.child.root);
  // The repository's own core.hooksPath is overridden too.
  await sb.git("config", "core.hooksPath", globalHooks);
  ok(await sb.marsh(["commit", "--ref", "refs/heads/agent2"], { env }), "commit 2");
  assert.equal(exists(m("global-hooks")), false);
});

function exists(p: string): boolean {
  try {
    Deno.lstatSync(p);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

Deno.test({
  name:
    "marsh show: the record and paths; --patch applies with git apply to the parent's tree and gives the child's",
  permissions: PERMS,
}, async () => {
  await using w = await world();
  const { sb } = w;
  const text = await sb.marsh(["show", w.child.id.slice(0, 8)]);
  ok(text, "show");
  assert.match(text.stdout, new RegExp(`checkpoint  ${w.child.id}\n`));
  for (
    const line of [
      "operation   bash -c 'echo op1 > a.txt; exit 3'",
      "exit        exited 3",
      "disposition sealed",
      "changed     3 paths\n  M a.txt\n  D keep.txt\n  A new.txt",
    ]
  ) assert.ok(text.stdout.includes(`${line}\n`), `${line} in ${text.stdout}`);
  const json = await sb.marsh(["show", w.child.id, "--json"]);
  ok(json, "show --json");
  const j = JSON.parse(json.stdout);
  assert.equal(j.checkpoint.parent, w.start.id);
  assert.equal(j.checkpoint.root, w.child.root);
  assert.deepEqual(j.paths.map((p: { status: string }) => p.status), ["M", "D", "A"]);
  const patch = await sb.marsh(["show", w.child.id, "--patch"]);
  ok(patch, "show --patch");
  Deno.writeTextFileSync(`${sb.scratch}/c.patch`, patch.stdout);
  // The parent's tree, checked out in a clone: the patch turns it into the child's.
  ok(
    await sb.marsh(["commit", "--checkpoint", w.start.id, "--ref", "refs/heads/base"]),
    "commit base",
  );
  const clone = `${sb.scratch}/clone`;
  await sb.git("clone", "-q", "--shared", "--no-checkout", sb.project, clone);
  const inClone = (args: string[]) => sb.bash(`cd '${clone}' && git ${args.join(" ")}`);
  ok(await inClone(["checkout", "-q", "--detach", "origin/base"]), "checkout");
  ok(await inClone(["apply", "--index", `${sb.scratch}/c.patch`]), "apply");
  const tree = await inClone(["write-tree"]);
  ok(tree, "write-tree");
  assert.equal(tree.stdout.trim(), w.child.root);
  // A start's patch is the whole root, added.
  const all = await sb.marsh(["show", w.start.id, "--json"]);
  ok(all, "show start");
  assert.deepEqual(JSON.parse(all.stdout).paths.map((p: { path: string }) => p.path), [
    "a.txt",
    "keep.txt",
    "sub/b.txt",
  ]);
});
