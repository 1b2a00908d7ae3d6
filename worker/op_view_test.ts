/**
 * A checkpoint operation's project view (docs/containment.md "A checkpoint
 * operation"), through the real worker and supervisor, on a real overlay
 * (the shape op-prepare mounts: `<root>/.marsh/session/<name>/op/<op>/`
 * with `upper/`, `work/` and `merged/`) over a real Git project: writes by
 * absolute path land in the op's upper dir, the user's `.git` is there
 * read-only, `.marsh` shows nothing of the layers or the sessions.
 */
import assert from "node:assert/strict";
import type { ShellWorkerEvent as WorkerEvent } from "../protocol/worker.ts";
import {
  fingerprint,
  fingerprintDiff,
  gitEnv,
  gitOk,
  gitProject,
  mountsBelow,
  mountTool,
  type Sandbox,
  unmountBelow,
} from "../splitfs/_testing.ts";
import { makeFifos, withCli, WorkerClient } from "./_testing.ts";

const perms: Deno.PermissionOptions = { ffi: true, read: true, write: true, run: true, env: true };
const dec = new TextDecoder();

/** A Git project with one layer of its files and an operation's overlay mounted over it. */
interface OpSandbox extends Sandbox {
  readonly control: string;
  readonly opDir: string;
  readonly merged: string;
}

async function opSandbox(): Promise<OpSandbox> {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-op-view-test-" }));
  const root = `${top}/w/project`;
  for (const d of [root, `${top}/home`, `${top}/outside`, `${top}/control`]) {
    Deno.mkdirSync(d, { recursive: true });
  }
  const sb: OpSandbox = {
    top,
    root,
    home: `${top}/home`,
    outside: `${top}/outside`,
    control: `${top}/control`,
    opDir: `${root}/.marsh/session/fix/op/op-1`,
    merged: `${root}/.marsh/session/fix/op/op-1/merged`,
    [Symbol.dispose]() {
      unmountBelow(top);
      Deno.removeSync(top, { recursive: true });
    },
  };
  try {
    await gitProject(sb, { "a.txt": "a\n", "b.txt": "b\n", "sub/c.txt": "c\n" });
    const data = `${root}/.marsh/layers/l1/data`;
    Deno.mkdirSync(`${data}/sub`, { recursive: true });
    for (const f of ["a.txt", "b.txt", "sub/c.txt"]) {
      Deno.copyFileSync(`${root}/${f}`, `${data}/${f}`);
    }
    Deno.mkdirSync(`${root}/.marsh/session/fix/view`, { recursive: true });
    for (const d of ["upper", "work", "merged"]) {
      Deno.mkdirSync(`${sb.opDir}/${d}`, { recursive: true });
    }
    mountTool("mount", [
      "-t",
      "overlay",
      "overlay",
      "-o",
      `lowerdir=${data},upperdir=${sb.opDir}/upper,workdir=${sb.opDir}/work`,
      sb.merged,
    ]);
  } catch (error) {
    sb[Symbol.dispose]();
    throw error;
  }
  return sb;
}

/** Runs `script` as an operation in `sb`'s view, from `<root>/sub`. */
async function runOp(
  sb: OpSandbox,
  script: string,
  namespace?: number,
): Promise<{ stdout: string; stderr: string; events: WorkerEvent[] }> {
  await using w = WorkerClient.start(sb.control);
  const attempt = `opview-${Deno.pid}-${crypto.randomUUID().slice(0, 8)}`;
  const fifos = makeFifos(sb.control, attempt);
  await w.send({
    v: 1,
    t: "launch",
    attempt,
    argv: ["sh", "-c", script],
    cwd: `${sb.root}/sub`,
    env: gitEnv({ home: sb.home }),
    stdio: fifos,
    view: { root: sb.root, fork: sb.merged, admin: null, objectDirs: [], control: sb.control },
    ...(namespace ? { namespace: { pid: namespace } } : {}),
  });
  const r = await withCli(w, attempt, fifos, new Uint8Array());
  return { stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr), events: r.events };
}

/** The upper dir's entries: path, then `dir`, `file:<text>` or `whiteout`. */
function upper(sb: OpSandbox): string[] {
  const out: string[] = [];
  const walk = (dir: string, rel: string) => {
    for (const e of [...Deno.readDirSync(dir)].sort((a, b) => a.name < b.name ? -1 : 1)) {
      const p = `${dir}/${e.name}`, r = rel ? `${rel}/${e.name}` : e.name;
      const st = Deno.lstatSync(p);
      if (e.isDirectory) {
        out.push(`${r} dir`);
        walk(p, r);
      } else if (st.isCharDevice) out.push(`${r} whiteout`);
      else out.push(`${r} file:${Deno.readTextFileSync(p)}`);
    }
  };
  walk(`${sb.opDir}/upper`, "");
  return out;
}

const SCRIPT = (sb: OpSandbox) =>
  [
    `echo abs >> ${sb.root}/a.txt`,
    "echo rel >> ../b.txt",
    `echo new > ${sb.root}/new.txt`,
    `rm ${sb.root}/sub/c.txt`,
    'echo "pwd=$PWD"',
    `ls -A ${sb.root}/.marsh | tr '\\n' ' '; echo`,
    `ls ${sb.root}/.marsh/layers 2>/dev/null || echo "no layers"`,
    `ls ${sb.root}/.marsh/session 2>/dev/null || echo "no sessions"`,
    `echo x >> ${sb.opDir}/upper/a.txt 2>/dev/null && echo "wrote upper"`,
    "git log --format=%s -1",
    "git status --porcelain",
    "git diff --name-only",
    `touch ${sb.root}/.git/x 2>/dev/null && echo "wrote .git"`,
    "git commit -qam 'in the op' 2>/dev/null && echo committed",
    "git branch other 2>/dev/null && echo branched",
    `touch ${sb.root}/.marsh/x 2>/dev/null && echo "wrote .marsh"`,
    `touch ${sb.control}/x 2>/dev/null && echo "wrote control"`,
    `umount -l ${sb.root}/.git 2>/dev/null && echo "unmounted .git"`,
    `umount -l ${sb.root} 2>/dev/null && echo "unmounted the fork"`,
    `mount -o remount,rw ${sb.root}/.git 2>/dev/null && echo "remounted .git"`,
  ].join("\n");

const EXPECTED = (sb: OpSandbox) =>
  [
    `pwd=${sb.root}/sub`,
    ".gitignore ",
    "no layers",
    "no sessions",
    "initial",
    " M a.txt",
    " M b.txt",
    " D sub/c.txt",
    "?? new.txt",
    "a.txt",
    "b.txt",
    "sub/c.txt",
    "",
  ].join("\n");

/** What the op left in its upper dir: its changes, and the view's two mount points. */
const UPPER = [
  ".git dir",
  ".marsh dir",
  "a.txt file:a\nabs\n",
  "b.txt file:b\nrel\n",
  "new.txt file:new\n",
  "sub dir",
  "sub/c.txt whiteout",
];

Deno.test({
  name: "an operation's view: writes land in its merged dir, .git is read-only, .marsh empty",
  permissions: perms,
}, async () => {
  await using stack = new AsyncDisposableStack();
  const sb = stack.use(await opSandbox());
  const project = fingerprint(sb.root, { skip: (rel) => rel === ".marsh" });
  const mounts = mountsBelow(sb.top);
  const r = await runOp(sb, SCRIPT(sb));
  assert.deepEqual(r.events.map((e) => e.t), ["launched", "exited", "settled"], r.stderr);
  assert.equal(r.stdout, EXPECTED(sb), r.stderr);
  // The project, its .git included, is as it was; the op's changes are in its upper dir.
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(sb.root, { skip: (rel) => rel === ".marsh" })),
    [],
  );
  assert.deepEqual(upper(sb), UPPER);
  assert.equal(Deno.readTextFileSync(`${sb.merged}/a.txt`), "a\nabs\n");
  assert.deepEqual(mountsBelow(sb.top), mounts);
});

Deno.test({
  name: "an operation's view in another process's user and mount namespace",
  permissions: perms,
}, async () => {
  await using stack = new AsyncDisposableStack();
  const sb = stack.use(await opSandbox());
  const project = fingerprint(sb.root, { skip: (rel) => rel === ".marsh" });
  const holder = new Deno.Command("unshare", {
    args: ["--user", "--map-root-user", "--mount", "--propagation", "private", "sleep", "600"],
    stdin: "null",
  }).spawn();
  stack.defer(async () => {
    holder.kill("SIGKILL");
    await holder.status;
  });
  await waitForNamespace(holder.pid);
  const r = await runOp(sb, `${SCRIPT(sb)}\nid -u`, holder.pid);
  assert.deepEqual(r.events.map((e) => e.t), ["launched", "exited", "settled"], r.stderr);
  assert.equal(r.stdout, `${EXPECTED(sb)}0\n`, r.stderr);
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(sb.root, { skip: (rel) => rel === ".marsh" })),
    [],
  );
  assert.deepEqual(upper(sb), UPPER);
});

Deno.test({
  name: "an operation's view of a project without Git: no .git, .marsh with its .gitignore only",
  permissions: perms,
}, async () => {
  await using stack = new AsyncDisposableStack();
  const sb = stack.use(await opSandbox());
  Deno.removeSync(`${sb.root}/.git`, { recursive: true });
  const r = await runOp(sb, `ls -A ${sb.root} | tr '\\n' ' '; echo abs >> ${sb.root}/a.txt`);
  assert.equal(r.stdout, ".marsh a.txt b.txt sub ", r.stderr);
  assert.deepEqual(upper(sb), [".marsh dir", "a.txt file:a\nabs\n"]);
});

/** Waits until `pid` is in a user namespace other than ours (read by `readlink`: Deno reads /proc only with -A). */
async function waitForNamespace(pid: number): Promise<void> {
  const ns = async (p: number) => {
    const out = await new Deno.Command("readlink", { args: [`/proc/${p}/ns/user`] }).output();
    return dec.decode(out.stdout).trim();
  };
  const ours = await ns(Deno.pid);
  for (let i = 0; i < 200; i++) {
    const theirs = await ns(pid);
    if (theirs !== "" && theirs !== ours) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`process ${pid} never entered its own user namespace`);
}

Deno.test({
  name:
    "an operation's view of a Git worktree: its gitfile and the repository it names are read-only",
  permissions: perms,
}, async () => {
  await using stack = new AsyncDisposableStack();
  const sb = stack.use(await opSandbox());
  // The project becomes a worktree of a repository elsewhere (its .git a gitfile).
  const repo = `${sb.top}/repo`;
  Deno.renameSync(`${sb.root}/.git`, `${repo}.git`);
  const opts = { home: sb.home };
  await gitOk(sb.top, ["clone", "-q", `${repo}.git`, repo], opts);
  Deno.removeSync(`${repo}.git`, { recursive: true });
  for (const f of ["a.txt", "b.txt", "sub/c.txt"]) Deno.removeSync(`${sb.root}/${f}`);
  Deno.removeSync(`${sb.root}/sub`);
  const marsh = `${sb.top}/marsh-aside`;
  Deno.renameSync(`${sb.root}/.marsh`, marsh);
  Deno.removeSync(sb.root);
  await gitOk(repo, ["worktree", "add", "-q", sb.root], opts);
  Deno.renameSync(marsh, `${sb.root}/.marsh`);
  assert.ok(Deno.lstatSync(`${sb.root}/.git`).isFile);
  const before = fingerprint(`${repo}/.git`);
  const r = await runOp(
    sb,
    [
      "git log --format=%s -1",
      "git status --porcelain",
      "git commit -q --allow-empty -m x 2>/dev/null && echo committed",
      `touch ${repo}/.git/x 2>/dev/null && echo "wrote the repository"`,
      `echo x > ${sb.root}/.git 2>/dev/null && echo "wrote the gitfile"`,
    ].join("\n"),
  );
  assert.equal(r.stdout, "initial\n", r.stderr);
  assert.deepEqual(fingerprintDiff(before, fingerprint(`${repo}/.git`)), []);
  assert.deepEqual(upper(sb), [".git file:", ".marsh dir"]);
});
