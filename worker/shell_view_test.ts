/**
 * A shell branch's project view (issue 10 §2, §3), through the real worker
 * and supervisor, on real splits (splitfs, real git, real overlay mounts:
 * these tests run as root): the branch sees its fork at the project's own
 * path, and what it writes through absolute paths, `../..`, a venv-style
 * shebang or an absolute symlink lands in its fork, never in the project,
 * the layers, other forks, `out/` or the control dir.
 */

import assert from "node:assert/strict";
import { viewSteps } from "./shell_view.ts";
import type { LaunchRequest, ShellView } from "../protocol/worker.ts";
import {
  fingerprint,
  fingerprintDiff,
  gitEnv,
  gitProject,
  mountsBelow,
  put,
  type Sandbox,
  unmountBelow,
} from "../splitfs/_testing.ts";
import { SplitWorkspace } from "../splitfs/workspace/workspace.ts";
import { WorkerClient } from "./_testing.ts";

const perms: Deno.PermissionOptions = {
  ffi: true,
  read: true,
  write: true,
  run: true,
  env: true,
};

/**
 * A project four levels below the sandbox's top, so `../../../..` from its
 * root stays in the sandbox; `control/` is the worker's control dir.
 */
function deepSandbox(): Sandbox & { readonly control: string } {
  const top = Deno.realPathSync(Deno.makeTempDirSync({ prefix: "marsh-view-test-" }));
  const root = `${top}/w/x/y/project`;
  for (const d of [root, `${top}/home`, `${top}/outside`, `${top}/control`]) {
    Deno.mkdirSync(d, { recursive: true });
  }
  return {
    top,
    root,
    home: `${top}/home`,
    outside: `${top}/outside`,
    control: `${top}/control`,
    [Symbol.dispose]() {
      unmountBelow(top);
      new Deno.Command("chmod", { args: ["-R", "u+w", top] }).outputSync();
      Deno.removeSync(top, { recursive: true });
    },
  };
}

let serial = 0;

/** Runs `script` as branch `label` of `ws` with a view; resolves with its stdout, stderr and events. */
async function runInView(
  sb: ReturnType<typeof deepSandbox>,
  ws: SplitWorkspace,
  label: string,
  script: string,
  over: { view?: Partial<ShellView>; cwd?: string; namespace?: number } = {},
): Promise<{ stdout: string; stderr: string; events: string[]; error?: string }> {
  await using w = WorkerClient.start(sb.control);
  const attempt = `view-${Deno.pid}-${++serial}`;
  const view: ShellView = {
    root: sb.root,
    fork: `${ws.dirPath}/${label}`,
    admin: `${ws.dirPath}/.admin/${label}`,
    objectDirs: ws.objectDirs,
    control: sb.control,
    ...over.view,
  };
  const req: Partial<LaunchRequest> & { attempt: string; script: string; cwd: string } = {
    attempt,
    script,
    cwd: over.cwd ?? sb.root,
    env: gitEnv({ home: sb.home }),
    view,
    ...(over.namespace ? { namespace: { pid: over.namespace } } : {}),
  };
  await w.launch(`${sb.control}/${attempt}`, req);
  const events = (await w.finish(attempt)).map((t) => t.event);
  const error = events.find((e) => e.t === "error");
  const read = (f: string) => Deno.readTextFileSync(`${sb.control}/${attempt}/${f}`);
  return {
    stdout: read("stdout"),
    stderr: read("stderr"),
    events: events.map((e) => e.t),
    ...(error?.t === "error" ? { error: error.message } : {}),
  };
}

/** A venv's interpreter that writes next to itself, and a tool whose shebang names it by absolute path. */
function venv(root: string): Record<string, string> {
  return {
    ".venv/bin/python3": '#!/bin/sh\necho "installed by $0" >> "$(dirname "$0")/installed.txt"\n',
    ".venv/bin/tool": `#!${root}/.venv/bin/python3\n`,
  };
}

for (const forks of ["auto", "copy"] as const) {
  Deno.test({
    name:
      `the view (forks: ${forks}): absolute paths, ../../.., a venv shebang and an absolute symlink write the fork only`,
    permissions: perms,
  }, async () => {
    using sb = deepSandbox();
    for (const [rel, text] of Object.entries(venv(sb.root))) put(sb.root, rel, text, 0o755);
    Deno.symlinkSync(`${sb.root}/b.txt`, `${sb.root}/link`);
    await gitProject(sb, { "a.txt": "a\n", "b.txt": "b\n", "sub/c.txt": "c\n" });
    using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home }, forks });
    ws.fork("a");
    ws.fork("b");
    const project = fingerprint(sb.root, { skip: (rel) => rel === ".marsh" });
    const mounts = mountsBelow(sb.top);
    const marsh = fingerprint(`${sb.root}/.marsh`, {
      // The forks' own state is theirs to change.
      skip: (rel) => /^split\/s1\/(a|\.admin\/a|\.overlay\/a)(\/|$)/.test(rel),
    });
    const script = [
      `echo abs >> ${sb.root}/a.txt`,
      // From the old place of the fork (<root>/.marsh/split/s1/a), the project root.
      "echo up >> ../../../../a.txt 2>/dev/null; echo up=$?",
      "cd sub && echo rel >> ../../../../../a.txt 2>/dev/null; echo rel=$?; cd ..",
      `${sb.root}/.venv/bin/tool`,
      "echo via-link >> link",
      `for f in ${sb.root}/.marsh/layers/*/data/a.txt ../../../layers/*/data/a.txt; do ` +
      `echo BACKDOOR >> "$f" 2>/dev/null && echo "wrote $f"; done`,
      `echo x >> ${ws.dirPath}/b/a.txt 2>/dev/null && echo "wrote b"`,
      `touch ${ws.dirPath}/out/x 2>/dev/null && echo "wrote out"`,
      `touch ${sb.root}/.marsh/x 2>/dev/null && echo "wrote .marsh"`,
      `touch ${sb.control}/x 2>/dev/null && echo "wrote control"`,
      `umount -l ${sb.root} 2>/dev/null && echo "unmounted the fork"`,
      `umount -l ${sb.root}/.marsh 2>/dev/null && echo "unmounted .marsh"`,
      `mount -o remount,rw ${sb.root}/.marsh 2>/dev/null && echo "remounted .marsh"`,
      'echo "pwd=$PWD"',
      "ls -A .marsh | tr '\\n' ' '; echo",
      "git status --porcelain",
      "git commit -qam 'in the view' && echo committed",
      "git log --format=%s -1",
    ].join("\n");
    const r = await runInView(sb, ws, "a", script);
    assert.equal(r.error, undefined, r.stderr);
    assert.deepEqual(r.events, ["launched", "exited", "settled"], r.stderr);
    const cwdUp = `${sb.root.split("/").slice(0, -4).join("/")}`;
    assert.equal(
      r.stdout,
      [
        // Above the root (see below), not in the project.
        "up=0",
        "rel=0",
        `pwd=${sb.root}`,
        ".gitignore git-objects split ",
        " M a.txt",
        " M b.txt",
        "?? .venv/bin/installed.txt",
        "committed",
        "in the view",
        "",
      ].join("\n"),
      r.stderr,
    );
    // ../../../.. from the root leaves the project altogether (into the sandbox).
    assert.equal(Deno.readTextFileSync(`${cwdUp}/a.txt`), "up\nrel\n");
    // Nothing of the project or of marsh's state but the fork's own changed.
    assert.deepEqual(
      fingerprintDiff(project, fingerprint(sb.root, { skip: (rel) => rel === ".marsh" })),
      [],
    );
    assert.deepEqual(
      fingerprintDiff(
        marsh,
        fingerprint(`${sb.root}/.marsh`, {
          skip: (rel) => /^split\/s1\/(a|\.admin\/a|\.overlay\/a)(\/|$)/.test(rel),
        }),
      ),
      [],
    );
    // The view's mounts were the branch's own: the host has the split's, as before.
    assert.deepEqual(mountsBelow(sb.top), mounts);
    // The fork has every change; capture accepts it (the commit moved marsh-split only).
    const summary = ws.capture("a");
    const patch = Deno.readTextFileSync(`${ws.dirPath}/out/a/diff.patch`);
    assert.equal(summary.files, 3, patch);
    assert.match(patch, /^\+abs$/m);
    assert.match(patch, /^\+via-link$/m);
    assert.match(patch, new RegExp(`^\\+installed by ${sb.root}/\\.venv/bin/python3$`, "m"));
    assert.doesNotMatch(patch, /\.marsh/);

    // Git replaces HEAD by renaming over it: a new branch works in the view.
    const b = await runInView(sb, ws, "b", "git checkout -q -b feature && git symbolic-ref HEAD");
    assert.equal(b.stdout, "refs/heads/feature\n", b.stderr);
  });
}

Deno.test({
  name: "the view: steps in order, the user's objects at .marsh/git-objects",
  permissions: "none",
}, () => {
  const root = "/p";
  const steps = viewSteps({
    root,
    fork: "/p/.marsh/split/s/a",
    admin: "/p/.marsh/split/s/.admin/a",
    objectDirs: ["/p/.marsh/split/s/store.git/objects", "/p/.git/objects"],
    control: "/c",
  }).map((s) => `${s.step} ${s.source} ${s.target}`.replace("\n", "\\n"));
  assert.deepEqual(steps, [
    "bind-ro /c /c",
    "bind /p/.marsh/split/s/a /p",
    "bind-ro /p/.marsh/split/s/a/.git /p/.git",
    "mkdir  /p/.marsh",
    "tmpfs  /p/.marsh",
    "file *\\n /p/.marsh/.gitignore",
    "mkdir  /p/.marsh/split",
    "bind-ro /p/.marsh/split /p/.marsh/split",
    "bind /p/.marsh/split/s/.admin/a /p/.marsh/split/s/.admin/a",
    "bind-ro /p/.marsh/split/s/.admin/a/info /p/.marsh/split/s/.admin/a/info",
    "bind-ro /p/.marsh/split/s/store.git/objects /p/.marsh/split/s/store.git/objects",
    "mkdir  /p/.marsh/git-objects",
    "bind-ro /p/.git/objects /p/.marsh/git-objects",
    "remount-ro  /p/.marsh",
  ]);
  // Without Git: the fork, the tmpfs and the split dirs only.
  assert.deepEqual(
    viewSteps({ root, fork: "/p/.marsh/split/s/a", admin: null, objectDirs: [], control: "/c" })
      .map((s) => s.step),
    ["bind-ro", "bind", "mkdir", "tmpfs", "mkdir", "bind-ro", "remount-ro"],
  );
});

Deno.test({
  name: "the view: a missing fork fails the launch before anything runs; nothing is left mounted",
  permissions: perms,
}, async () => {
  using sb = deepSandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home } });
  ws.fork("a");
  const r = await runInView(sb, ws, "a", `echo ran > ${sb.outside}/ran`, {
    view: { fork: `${ws.dirPath}/nope`, admin: null, objectDirs: [] },
  });
  assert.deepEqual(r.events, ["error"]);
  assert.match(
    r.error ?? "",
    new RegExp(`cannot set up the branch's view: cannot open ${ws.dirPath}/nope: No such file`),
  );
  assert.throws(() => Deno.lstatSync(`${sb.outside}/ran`), Deno.errors.NotFound);
  assert.deepEqual(mountsBelow(sb.top), []);
});

Deno.test({
  name:
    "the view in another process's user and mount namespace (the unprivileged daemon's service)",
  permissions: perms,
}, async () => {
  using sb = deepSandbox();
  await gitProject(sb, { "a.txt": "a\n" });
  using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home } });
  ws.fork("a");
  const project = fingerprint(sb.root, { skip: (rel) => rel === ".marsh" });
  // What the daemon's service runs in: a user namespace mapping us to its
  // root, and a mount namespace owned by it, where the host's mounts are locked.
  const holder = new Deno.Command("unshare", {
    args: ["--user", "--map-root-user", "--mount", "--propagation", "private", "sleep", "600"],
    stdin: "null",
  }).spawn();
  try {
    await waitForNamespace(holder.pid);
    const r = await runInView(
      sb,
      ws,
      "a",
      [
        `echo abs >> ${sb.root}/a.txt`,
        `touch ${sb.root}/.marsh/x 2>/dev/null && echo "wrote .marsh"`,
        `touch ${sb.control}/x 2>/dev/null && echo "wrote control"`,
        `umount -l ${sb.root} 2>/dev/null && echo "unmounted the fork"`,
        'echo "$(id -u) $PWD"',
        "git status --porcelain",
      ].join("\n"),
      { namespace: holder.pid },
    );
    assert.equal(r.error, undefined, r.stderr);
    assert.equal(r.stdout, `0 ${sb.root}\n M a.txt\n`, r.stderr);
  } finally {
    holder.kill("SIGKILL");
    await holder.status;
  }
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(sb.root, { skip: (rel) => rel === ".marsh" })),
    [],
  );
  assert.equal(ws.capture("a").files, 1);
  assert.match(Deno.readTextFileSync(`${ws.dirPath}/out/a/diff.patch`), /^\+abs$/m);
});

/** Waits until `pid` is in a user namespace other than ours (read by `readlink`: Deno reads /proc only with -A). */
async function waitForNamespace(pid: number): Promise<void> {
  const ns = async (p: number) => {
    const out = await new Deno.Command("readlink", { args: [`/proc/${p}/ns/user`] }).output();
    return new TextDecoder().decode(out.stdout).trim();
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
  name: "the view of a project without Git: the fork at the root, .marsh with the split dirs only",
  permissions: perms,
}, async () => {
  using sb = deepSandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = SplitWorkspace.create({ id: "s1", root: sb.root, env: { HOME: sb.home } });
  ws.fork("a");
  const r = await runInView(
    sb,
    ws,
    "a",
    `echo abs >> ${sb.root}/a.txt; ls -A .marsh; ls -A ${sb.root}/.marsh/split/s1 | tr '\\n' ' '`,
    { view: { admin: null, objectDirs: [] } },
  );
  assert.equal(r.error, undefined, r.stderr);
  assert.equal(r.stdout, "split\n.admin a base out store.git ", r.stderr);
  assert.equal(Deno.readTextFileSync(`${sb.root}/a.txt`), "a\n");
  assert.equal(ws.capture("a").files, 1);
});

Deno.test({
  name: "an operation's view: the user's .git read-only if there, .marsh with its .gitignore only",
  permissions: "none",
}, () => {
  const steps = viewSteps({
    root: "/p",
    fork: "/p/.marsh/session/fix/op/o1/merged",
    admin: null,
    objectDirs: [],
    control: "/c",
  }).map((s) => `${s.step} ${s.source} ${s.target}`.replace("\n", "\\n"));
  assert.deepEqual(steps, [
    "bind-ro /c /c",
    "bind /p/.marsh/session/fix/op/o1/merged /p",
    "bind-ro-if /p/.git /p/.git",
    "mkdir  /p/.marsh",
    "tmpfs  /p/.marsh",
    "file *\\n /p/.marsh/.gitignore",
    "remount-ro  /p/.marsh",
  ]);
});
