/**
 * The split engine against adversarial trees and branches, black-box at the
 * engine's API: special files, nested `.git`, files that keep changing,
 * tampered Git metadata, planted symlinks at every step, `git clean -xfd`
 * mid-split, and a repository whose own config would run programs.
 *
 * Each test runs on copy forks and on overlay forks (`forks: "auto"`, real
 * mounts: the tests run as root), except where a hazard replaces a fork by
 * path, which a mount point refuses (EBUSY): those keep a copy-only test and
 * have an overlay test of the same hazard against the fork's upper layer.
 */

import assert from "node:assert/strict";
import {
  exists,
  fingerprint,
  fingerprintDiff,
  git,
  gitOk,
  gitProject,
  leaves,
  put,
  run,
  sandbox,
  text,
  throwsA,
} from "../splitfs/_testing.ts";
import { InvalidNameError, SymlinkRefusedError } from "../splitfs/fd/dir.ts";
import { FIX_IGNORABLE, FIX_RENAME } from "../splitfs/fd/non_utf8.ts";
import { FsError } from "../splitfs/fd/ffi.ts";
import { RejectedError, SnapshotError, WorkspaceReplacedError } from "../splitfs/errors.ts";
import { type CreateOptions, SplitWorkspace } from "../splitfs/workspace/workspace.ts";

// awk and umount: the sandbox's dispose unmounts what a test left mounted.
const perms = {
  ffi: true,
  read: true,
  write: true,
  run: ["git", "awk", "umount"],
  env: ["PATH"],
} satisfies Deno.PermissionOptions;

/** Tests that need more tools than Git. */
function running(...tools: string[]): Deno.PermissionOptions {
  return { ...perms, run: [...perms.run, ...tools] };
}

/**
 * Both fork policies: `copy` (a copied base, copy forks) and `auto` (a
 * layered base mounted read-only, overlay forks; the tests run as root).
 */
const POLICIES = ["copy", "auto"] as const;
type Policy = typeof POLICIES[number];

/**
 * `SplitWorkspace.create` under `forks`, checking that `auto` really took
 * overlay forks: a silent fallback to copies would test copies twice.
 */
function create(
  opts: Omit<CreateOptions, "id" | "forks"> & { id?: string },
  forks: Policy,
): SplitWorkspace {
  const ws = SplitWorkspace.create({ id: "s1", ...opts, forks });
  try {
    assert.equal(ws.forkChoice.strategy, forks === "auto" ? "overlay" : "copy");
  } catch (error) {
    ws.close();
    throw error;
  }
  return ws;
}

function splitDir(root: string, id = "s1"): string {
  return `${root}/.marsh/split/${id}`;
}

function expectRejected(ws: SplitWorkspace, label: string, reason: string): void {
  const err = throwsA(() => ws.capture(label), RejectedError);
  assert.equal(err.reason, reason, `fork ${label}`);
  assert.equal(err.message, `rejected: ${reason}`);
}

/** A bash loop in the background until {@linkcode Loop.stop}, which lets its last round finish. */
interface Loop {
  stop(): Promise<void>;
}

function loop(body: string, cwd: string, stopFile: string): Loop {
  const child = new Deno.Command("bash", {
    args: ["-c", `while [ ! -e '${stopFile}' ]; do ${body}; done`],
    cwd,
    clearEnv: true,
    env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin" },
    stdin: "null",
    stdout: "null",
    stderr: "null",
  }).spawn();
  return {
    async stop() {
      Deno.writeTextFileSync(stopFile, "");
      await child.status;
    },
  };
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `snapshot prunes FIFOs, sockets and nested .git dirs and gitfiles, and follows no symlink (forks: ${forks})`,
    permissions: running("mkfifo", "python3"),
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, { "a.txt": "a\n", "deep/x/b.txt": "b\n" });
    await run("mkfifo", ["pipe", "deep/x/pipe"], { ...opts, cwd: sb.root });
    const bind = "import socket, sys\nfor p in sys.argv[1:]: socket.socket(socket.AF_UNIX).bind(p)";
    await run("python3", ["-c", bind, "sock", "deep/sock"], { ...opts, cwd: sb.root });
    put(sb.root, "vendor/lib/.git/config", "[core]\n\tfsmonitor = /bin/false\n");
    put(sb.root, "vendor/lib/.git/HEAD", "ref: refs/heads/main\n");
    put(sb.root, "vendor/lib/code.c", "int x;\n");
    put(sb.root, "deep/x/y/.git", `gitdir: ${sb.outside}\n`);
    Deno.mkdirSync(`${sb.root}/linked`);
    Deno.symlinkSync(sb.outside, `${sb.root}/linked/.git`);
    put(sb.outside, "secret", "outside the project\n");
    Deno.symlinkSync(sb.outside, `${sb.root}/escape-dir`);
    Deno.symlinkSync(`../outside/secret`, `${sb.root}/escape-file`);
    assert.equal(Deno.lstatSync(`${sb.root}/sock`).isSocket, true);
    assert.equal(Deno.lstatSync(`${sb.root}/pipe`).isFifo, true);
    const outside = fingerprint(sb.outside, { times: true });

    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const base = `${splitDir(sb.root)}/base`;
    assert.deepEqual(leaves(base), [
      "a.txt",
      "deep/x/b.txt",
      "escape-dir",
      "escape-file",
      "vendor/lib/code.c",
    ]);
    assert.equal(Deno.readLinkSync(`${base}/escape-dir`), sb.outside);
    assert.equal(Deno.readLinkSync(`${base}/escape-file`), "../outside/secret");
    assert.equal(ws.snapshot.prunedSpecial, 4);
    assert.equal(ws.snapshot.prunedGit, 4, "the root .git and three nested ones");
    assert.deepEqual(fingerprintDiff(outside, fingerprint(sb.outside, { times: true })), []);

    // A fork and its capture see the same pruned tree: nothing changed.
    ws.fork("a");
    assert.equal(ws.capture("a").files, 0);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `snapshot fails with file kept changing while writers append, and leaves nothing (forks: ${forks})`,
    permissions: running("bash"),
  }, async () => {
    using sb = sandbox();
    const initial = 16 * 1024 * 1024;
    put(sb.root, "a.txt", "a\n");
    put(sb.root, "logs/big.log", new Uint8Array(initial).fill(0x61));
    // Three writers, so that one descheduled on a loaded machine is not enough
    // to give a copy a quiet moment.
    const writers = [1, 2, 3].map((n) =>
      loop(`printf ${n} >> logs/big.log`, sb.root, `${sb.top}/stop-writers`)
    );
    let failedId: string | undefined;
    try {
      const size = () => Deno.statSync(`${sb.root}/logs/big.log`).size;
      while (size() === initial) await new Promise((r) => setTimeout(r, 5));
      // One quiet copy of the four lets a snapshot through; sixteen snapshots
      // in a row that each had one are not the scheduler's doing.
      for (let i = 0; i < 16 && failedId === undefined; i++) {
        const id = `s${i}`;
        try {
          create({ root: sb.root, id, env: {} }, forks).remove();
          continue;
        } catch (error) {
          if (!(error instanceof SnapshotError)) throw error;
          assert.equal(error.message, "file kept changing: logs/big.log");
        }
        assert.equal(exists(splitDir(sb.root, id)), false);
        assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/split`)], []);
        failedId = id;
      }
    } finally {
      for (const w of writers) await w.stop();
    }
    assert.ok(failedId, "sixteen snapshots never noticed a file that kept changing");
    // With the writer gone the same id snapshots fine: the failed attempt left nothing.
    using ws = create({ root: sb.root, id: failedId, env: {} }, forks);
    assert.equal(ws.snapshot.files, 2);
    const big = `${splitDir(sb.root, failedId)}/base/logs/big.log`;
    assert.equal(Deno.statSync(big).size, Deno.statSync(`${sb.root}/logs/big.log`).size);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `snapshot never follows a symlink swapped in for a directory during the walk (forks: ${forks})`,
    permissions: running("bash"),
  }, async () => {
    using sb = sandbox();
    for (let i = 0; i < 200; i++) put(sb.root, `dir/f${i}.txt`, `${i}\n`);
    put(sb.root, "dir/inner/x.txt", "x\n");
    const marker = "SECRET-OUTSIDE-MARKER";
    put(sb.outside, "f1.txt", marker);
    put(sb.outside, "inner/x.txt", marker);
    const outside = fingerprint(sb.outside, { times: true });
    const swapper = loop(
      `mv dir dir.swap; ln -s '${sb.outside}' dir; rm dir; mv dir.swap dir`,
      sb.root,
      `${sb.top}/stop-swapper`,
    );
    let made = 0, refused = 0;
    try {
      for (let i = 0; i < 20; i++) {
        let ws: SplitWorkspace;
        try {
          ws = create({ root: sb.root, id: `s${i}`, env: {} }, forks);
        } catch (error) {
          // Refusing (or finding the directory gone) is fine; following is not.
          // A failed create leaves nothing.
          const vanished = error instanceof FsError && error.code === "ENOENT";
          if (!(error instanceof SymlinkRefusedError || vanished)) throw error;
          assert.equal(exists(splitDir(sb.root, `s${i}`)), false);
          refused++;
          continue;
        }
        const base = `${splitDir(sb.root, `s${i}`)}/base`;
        for (const [rel, v] of fingerprint(base)) {
          if (!v.startsWith("file ")) continue;
          assert.notEqual(text(`${base}/${rel}`), marker, `${rel} was read through the symlink`);
        }
        ws.remove();
        made++;
      }
    } finally {
      await swapper.stop();
    }
    assert.equal(made + refused, 20);
    assert.deepEqual(fingerprintDiff(outside, fingerprint(sb.outside, { times: true })), []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `a fork whose gitfile or Git admin files were tampered with is rejected, its patch written and its Git metadata set aside (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, { "a.txt": "a\n" });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const admin = (label: string) => `${splitDir(sb.root)}/.admin/${label}`;
    // Every program a tampered config names writes this marker if it ever runs.
    const marker = `${sb.outside}/ran`;
    const program = `${sb.outside}/program`;
    put(sb.outside, "program", `#!/bin/sh\necho "$0 $*" >> ${marker}\nexit 1\n`, 0o755);
    const cases: [string, (fork: string, admin: string) => void | Promise<void>, string][] = [
      ["config", (_f, a) => {
        Deno.writeTextFileSync(`${a}/config`, `[core]\n\tfsmonitor = ${program}\n`, {
          append: true,
        });
      }, "admin file changed: config (core.fsmonitor)"],
      ["hookspath", (_f, a) => {
        put(a, "config", text(`${a}/config`).replace("/dev/null", `${sb.outside}/hooks`));
        put(sb.outside, "hooks/post-index-change", `#!/bin/sh\n${program} hook\n`, 0o755);
      }, "admin file changed: config (core.hookspath)"],
      ["include", (_f, a) => {
        put(sb.outside, "included", `[core]\n\tfsmonitor = ${program}\n`);
        Deno.writeTextFileSync(`${a}/config`, `[include]\n\tpath = ${sb.outside}/included\n`, {
          append: true,
        });
      }, "admin file changed: config (include.path)"],
      [
        "hooks",
        (_f, a) => put(a, "hooks/post-checkout", "#!/bin/sh\n", 0o755),
        "admin dir has an unexpected entry: hooks",
      ],
      [
        "commondir",
        (_f, a) => put(a, "commondir", `${sb.root}/.git\n`),
        "admin dir has an unexpected entry: commondir",
      ],
      [
        "gitdir",
        (_f, a) => put(a, "gitdir", `${sb.root}/.git\n`),
        "admin dir has an unexpected entry: gitdir",
      ],
      [
        "worktree",
        (_f, a) => put(a, "config.worktree", `[core]\n\tfsmonitor = ${program}\n`),
        "admin dir has an unexpected entry: config.worktree",
      ],
      ["alternates", (_f, a) => {
        Deno.writeTextFileSync(`${a}/objects/info/alternates`, `${sb.outside}\n`, { append: true });
      }, "admin file changed: objects/info/alternates"],
      [
        "head",
        (_f, a) => put(a, "HEAD", "ref: refs/remotes/origin/main\n"),
        "admin file changed: HEAD (points outside refs/heads/)",
      ],
      [
        "packedrefs",
        (_f, a) => put(a, "packed-refs", "garbage\n"),
        "admin file changed: packed-refs (unexpected line 1)",
      ],
      ["exclude", (_f, a) => put(a, "info/exclude", "*\n"), "admin file changed: info/exclude"],
      [
        "attributes",
        (_f, a) => put(a, "info/attributes", "* filter=x\n"),
        "admin dir has an unexpected entry: info/attributes",
      ],
      [
        "reflink",
        (_f, a) => Deno.symlinkSync(sb.outside, `${a}/refs/heads/evil`),
        "admin dir has a symlink: refs/heads/evil",
      ],
      ["gitfile", (f) => put(f, ".git", `gitdir: ${sb.root}/.git\n`), "admin file changed: .git"],
      ["nogitfile", (f) => Deno.removeSync(`${f}/.git`), "admin file changed: .git"],
      ["gitdirfork", async (f) => {
        Deno.removeSync(`${f}/.git`);
        await gitOk(f, ["init", "-q"], opts);
        await gitOk(f, ["config", "core.fsmonitor", program], opts);
      }, "admin file changed: .git"],
      ["admindir", (_f, a) => {
        Deno.renameSync(a, `${a}.moved`);
        Deno.symlinkSync(`${a}.moved`, a);
      }, "admin dir is missing or replaced: .admin/admindir"],
    ];
    for (const [label, tamper, reason] of cases) {
      const fork = ws.fork(label);
      put(fork.path, "a.txt", `changed in ${label}\n`);
      put(fork.path, "new.txt", "new\n");
      await tamper(fork.path, admin(label));
      const c = ws.capture(label);
      assert.equal(c.rejected, reason, `fork ${label}`);
      // The tree's patch is written all the same, for recovery.
      assert.equal(c.files, 2, `fork ${label}`);
      const out = `${splitDir(sb.root)}/out/${label}`;
      assert.equal(text(`${out}/files`), "M\ta.txt\nA\tnew.txt\n", `fork ${label}`);
      assert.match(text(`${out}/diff.patch`), new RegExp(`\\+changed in ${label}\n`));
      // The fork is kept, its files untouched; the branch's own metadata is set aside.
      assert.equal(text(`${fork.path}/a.txt`), `changed in ${label}\n`);
      assert.equal(exists(`${splitDir(sb.root)}/.admin/.rejected-${label}`), true, `fork ${label}`);
      // A host git in the kept fork meets only marsh's metadata: it shows the
      // work against the caller's HEAD and runs nothing.
      const status = await gitOk(fork.path, ["status", "--porcelain"], opts);
      // (The repository a branch made at the root shows as an untracked dir.)
      assert.equal(
        status.replace(/^\?\? \.git\.rejected-[0-9a-f]{8}\/\n/m, ""),
        " M a.txt\n?? new.txt\n",
        `fork ${label}`,
      );
      assert.equal(exists(marker), false, `fork ${label}: ${exists(marker) ? text(marker) : ""}`);
    }
    // A branch-made repository at the fork's root is moved aside, not deleted.
    const moved = [...Deno.readDirSync(`${splitDir(sb.root)}/gitdirfork`)]
      .map((e) => e.name).filter((n) => n.startsWith(".git.rejected-"));
    assert.equal(moved.length, 1);
    assert.equal(exists(`${splitDir(sb.root)}/gitdirfork/${moved[0]}/config`), true);

    // A normal commit inside a fork is Git's own state, never a rejection.
    const ok = ws.fork("commit");
    put(ok.path, "a.txt", "committed\n");
    await gitOk(ok.path, ["add", "-A"], opts);
    await gitOk(ok.path, ["commit", "-q", "-m", "in the fork"], opts);
    await gitOk(ok.path, ["status"], opts);
    await gitOk(ok.path, ["log", "--oneline"], opts);
    const committed = ws.capture("commit");
    assert.equal(committed.files, 1);
    assert.equal(committed.rejected, null);

    // The split's removal takes the kept forks and their set-aside metadata along.
    ws.remove();
    assert.equal(exists(splitDir(sb.root)), false);
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture rejects a nested .git anywhere in a fork, even inside a new ignored directory (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, {
      ".gitignore": "build/\n",
      "sub/a.txt": "a\n",
      "sub/deeper/b.txt": "b\n",
    });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const cases: [string, string, string][] = [
      ["existing", "sub/.git/config", "nested .git at sub/.git"],
      ["gitfile", "sub/deeper/.git", "nested .git at sub/deeper/.git"],
      ["newdir", "newdir/x/.git", "nested .git at newdir/x/.git"],
      ["ignored", "build/x/.git/config", "nested .git at build/x/.git"],
      // Names git apply refuses as .git look-alikes (core.protectNTFS, case folding).
      ["upper", "sub/.GIT/config", "nested .git at sub/.GIT"],
      ["ntfs-short", "git~1/config", "nested .git at git~1"],
      ["ntfs-dots", "sub/.git. /config", "nested .git at sub/.git. "],
      ["root-upper", ".Git/config", "nested .git at .Git"],
    ];
    /** The names in `dir` that `name` was set aside as. */
    const asideOf = (dir: string, name: string) =>
      [...Deno.readDirSync(dir)].map((e) => e.name).filter((n) =>
        n.startsWith(`${name}.rejected-`) &&
        /^[0-9a-f]{8}$/.test(n.slice(`${name}.rejected-`.length))
      );
    for (const [label, rel, reason] of cases) {
      const fork = ws.fork(label);
      put(fork.path, rel, "[core]\n\tfsmonitor = /bin/false\n");
      put(fork.path, "sub/work.txt", "work\n");
      expectRejected(ws, label, reason);
      // The kept fork's repository is moved aside in its own directory, its work untouched.
      const at = reason.slice("nested .git at ".length);
      const slash = at.lastIndexOf("/");
      const [dir, name] = [`${fork.path}/${at.slice(0, slash + 1)}`, at.slice(slash + 1)];
      assert.equal(exists(`${fork.path}/${at}`), false, label);
      assert.equal(asideOf(dir, name).length, 1, label);
      assert.equal(text(`${fork.path}/sub/work.txt`), "work\n", label);
    }
    const link = ws.fork("link");
    Deno.symlinkSync(sb.outside, `${link.path}/sub/.git`);
    const outside = fingerprint(sb.outside, { times: true });
    expectRejected(ws, "link", "nested .git at sub/.git");
    const [moved] = asideOf(`${link.path}/sub`, ".git");
    assert.equal(Deno.readLinkSync(`${link.path}/sub/${moved}`), sb.outside);
    assert.deepEqual(fingerprintDiff(outside, fingerprint(sb.outside, { times: true })), []);

    // Every one is found, not only the first capture met: in the snapshot's
    // directories, in new and ignored ones, and look-alikes.
    const many = ws.fork("many");
    const all = ["build/x/.git", "dep/.git", "newdir/a/.git", "sub/.GIT", "sub/deeper/.git"];
    for (const rel of all) put(many.path, `${rel}/config`, "[core]\n\tfsmonitor = /bin/false\n");
    expectRejected(ws, "many", "nested .git at build/x/.git");
    for (const rel of all) {
      const slash = rel.lastIndexOf("/");
      assert.equal(exists(`${many.path}/${rel}`), false, rel);
      const [aside] = asideOf(`${many.path}/${rel.slice(0, slash)}`, rel.slice(slash + 1));
      assert.ok(aside, rel);
      assert.equal(exists(`${many.path}/${rel.slice(0, slash)}/${aside}/config`), true, rel);
    }
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `setting a rejected fork's nested .git aside never writes through a mount, and says when a directory could not be searched (forks: ${forks})`,
    permissions: running("bash", "mount"),
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "a.txt": "a\n" });
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    // A bind mount of an outside cache holding a repository, in a fork with its own nested one.
    put(sb.outside, "cache/.git/config", "[core]\n\tfsmonitor = /bin/false\n");
    const cache = fingerprint(sb.outside, { times: true });
    const mounted = ws.fork("mounted");
    put(mounted.path, "dep/.git/config", "[core]\n\tfsmonitor = /bin/false\n");
    Deno.mkdirSync(`${mounted.path}/vm`);
    await run("mount", ["--bind", `${sb.outside}/cache`, `${mounted.path}/vm`], { home: sb.home });
    try {
      expectRejected(ws, "mounted", "nested .git at dep/.git");
      assert.equal(exists(`${mounted.path}/dep/.git`), false);
      assert.equal(exists(`${mounted.path}/vm/.git/config`), true, "the mount is not written");
    } finally {
      await run("umount", [`${mounted.path}/vm`], { home: sb.home });
    }
    assert.deepEqual(fingerprintDiff(cache, fingerprint(sb.outside, { times: true })), []);

    // A directory whose name is not UTF-8 is searched by its bytes: its nested
    // repository is set aside like any other.
    const bad = ws.fork("bad");
    put(bad.path, "dep/.git/config", "[core]\n\tfsmonitor = /bin/false\n");
    await run("bash", ["-c", "mkdir -p $'x/bad\\xff/.git'"], { home: sb.home, cwd: bad.path });
    expectRejected(ws, "bad", "nested .git at dep/.git");
    assert.equal(exists(`${bad.path}/dep/.git`), false);
    const inner = await run("bash", ["-c", "ls -a $'x/bad\\xff'"], {
      home: sb.home,
      cwd: bad.path,
    });
    assert.match(inner, /^\.git\.rejected-/m, inner);
    assert.doesNotMatch(inner, /^\.git$/m, inner);
    // Removal goes by raw names (the sandbox's clean-up cannot).
    ws.remove();
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture rejects a .git a branch made at the root of a fork of a project without Git (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    assert.equal(ws.git, null);
    const fork = ws.fork("a");
    await gitOk(fork.path, ["init", "-q"], { home: sb.home });
    await gitOk(fork.path, ["config", "core.fsmonitor", `${sb.outside}/fsmonitor`], {
      home: sb.home,
    });
    put(fork.path, "b.txt", "made\n");
    // Its patch is written, and its repository moved aside for the kept fork.
    const c = ws.capture("a");
    assert.equal(c.rejected, "nested .git at .git");
    assert.equal(c.files, 1);
    assert.equal(exists(`${fork.path}/.git`), false);
    const moved = [...Deno.readDirSync(fork.path)].filter((e) =>
      e.name.startsWith(".git.rejected-")
    );
    assert.equal(moved.length, 1);
    assert.equal(exists(`${fork.path}/${moved[0]!.name}/config`), true);
    const plain = ws.fork("plain");
    put(plain.path, "a.txt", "changed\n");
    assert.equal(ws.capture("plain").files, 1);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture rejects names that are not UTF-8 and oversized ignore files; remove still cleans up (forks: ${forks})`,
    permissions: running("bash"),
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, { "a.txt": "a\n" });
    const ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const bad = ws.fork("badname");
    await run("bash", ["-c", "mkdir -p sub && printf x > $'sub/bad\\xff'"], {
      ...opts,
      cwd: bad.path,
    });
    expectRejected(
      ws,
      "badname",
      `file name is not valid UTF-8: badname/sub/bad\\xff; ${FIX_IGNORABLE}`,
    );
    ws.fork("badref");
    await run("bash", ["-c", "printf x > $'refs/heads/\\xfe'"], {
      ...opts,
      cwd: `${splitDir(sb.root)}/.admin/badref`,
    });
    // In the admin dir it is a verification failure: the patch is still written.
    assert.equal(
      ws.capture("badref").rejected,
      "file name is not valid UTF-8: .admin/badref/refs/heads/\\xfe",
    );
    const big = ws.fork("bigignore");
    put(big.path, "sub/.gitignore", new Uint8Array(16 * 1024 * 1024 + 1).fill(0x61));
    expectRejected(ws, "bigignore", "ignore file too large: sub/.gitignore");

    // Removal goes by raw names: nothing a branch named can keep the split alive.
    ws.remove();
    assert.equal(exists(splitDir(sb.root)), false);
    assert.deepEqual([...Deno.readDirSync(`${sb.root}/.marsh/.trash`)], []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `create fails clearly on a project file name that is not UTF-8, and leaves nothing (forks: ${forks})`,
    permissions: running("bash"),
  }, async () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    await run("bash", ["-c", "mkdir -p dir && printf x > $'dir/caf\\xe9.txt'"], {
      home: sb.home,
      cwd: sb.root,
    });
    const err = throwsA(
      () => create({ root: sb.root, env: {} }, forks),
      InvalidNameError,
    );
    assert.equal(
      err.message,
      `file name is not valid UTF-8 in ${sb.root}/dir: "caf\\xe9.txt"; ${FIX_RENAME}`,
    );
    assert.equal(exists(splitDir(sb.root)), false);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `a branch's symlinks to outside the project are captured as links, never followed (forks: ${forks})`,
    permissions: perms,
  }, async () => {
    using sb = sandbox();
    await gitProject(sb, { "dir/a.txt": "a\n" });
    put(sb.outside, "secret", "SECRET-OUTSIDE\n");
    using ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    Deno.removeSync(`${fork.path}/dir`, { recursive: true });
    Deno.symlinkSync(sb.outside, `${fork.path}/dir`);
    Deno.symlinkSync(`${sb.outside}/secret`, `${fork.path}/leak`);
    ws.capture("a");
    const out = `${splitDir(sb.root)}/out/a`;
    assert.deepEqual(text(`${out}/files`).split("\n").filter((l) => l).sort(), [
      "A\tdir",
      "A\tleak",
      "D\tdir/a.txt",
    ]);
    const patch = text(`${out}/diff.patch`);
    assert.match(patch, /^new file mode 120000$/m);
    assert.doesNotMatch(patch, /SECRET-OUTSIDE/);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `create refuses a .marsh planted as a symlink and writes nothing through it (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    Deno.symlinkSync(sb.outside, `${sb.root}/.marsh`);
    const err = throwsA(
      () => create({ root: sb.root, env: {} }, forks),
      SymlinkRefusedError,
    );
    assert.match(err.message, /refusing to follow a symlink at .*\/\.marsh$/);
    assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
    assert.equal(Deno.lstatSync(`${sb.root}/.marsh`).isSymlink, true);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `create refuses a .marsh/split planted as a symlink and writes nothing through it (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    Deno.mkdirSync(`${sb.root}/.marsh`);
    Deno.symlinkSync(sb.outside, `${sb.root}/.marsh/split`);
    const err = throwsA(
      () => create({ root: sb.root, env: {} }, forks),
      SymlinkRefusedError,
    );
    assert.match(err.message, /refusing to follow a symlink at .*\/\.marsh\/split$/);
    assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `create refuses a split id pre-created as a symlink and writes nothing through it (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    Deno.mkdirSync(`${sb.root}/.marsh/split`, { recursive: true });
    Deno.symlinkSync(sb.outside, splitDir(sb.root));
    const err = throwsA(
      () => create({ root: sb.root, env: {} }, forks),
      SnapshotError,
    );
    assert.equal(err.message, `split s1 already exists in ${sb.root}`);
    assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
    assert.equal(Deno.lstatSync(splitDir(sb.root)).isSymlink, true);
  });
}

// Copy forks only: an overlay fork is a mount point, which rename(2) refuses
// (EBUSY); the overlay variant below swaps its upper layer instead.
Deno.test({
  name: "capture and remove refuse a fork swapped for a symlink, and remove nothing (forks: copy)",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = create({ root: sb.root, env: {} }, "copy");
  const fork = ws.fork("a");
  put(fork.path, "a.txt", "changed\n");
  put(sb.outside, "a.txt", "outside\n");
  const outside = fingerprint(sb.outside, { times: true });
  Deno.renameSync(fork.path, `${fork.path}.moved`);
  Deno.symlinkSync(sb.outside, fork.path);
  const err = throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  assert.equal(err.message, "workspace replaced");
  assert.deepEqual([...Deno.readDirSync(`${splitDir(sb.root)}/out/a`)], []);
  throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.deepEqual(fingerprintDiff(outside, fingerprint(sb.outside, { times: true })), []);
  assert.equal(Deno.lstatSync(fork.path).isSymlink, true);
  assert.equal(text(`${fork.path}.moved/a.txt`), "changed\n");
  assert.equal(exists(`${splitDir(sb.root)}/base/a.txt`), true);
});

Deno.test({
  name:
    "capture and remove refuse an overlay fork whose upper layer was swapped for a symlink, and remove nothing (forks: auto)",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = create({ root: sb.root, env: {} }, "auto");
  const fork = ws.fork("a");
  put(fork.path, "a.txt", "changed\n");
  // The mount point itself cannot be moved aside.
  assert.throws(() => Deno.renameSync(fork.path, `${fork.path}.moved`), /Device or resource busy/);
  const upper = `${splitDir(sb.root)}/.overlay/a`;
  put(sb.outside, "upper/a.txt", "outside\n");
  const outside = fingerprint(sb.outside, { times: true });
  Deno.renameSync(upper, `${upper}.moved`);
  Deno.symlinkSync(sb.outside, upper);
  const err = throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  assert.equal(err.message, "workspace replaced");
  assert.deepEqual([...Deno.readDirSync(`${splitDir(sb.root)}/out/a`)], []);
  throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.deepEqual(fingerprintDiff(outside, fingerprint(sb.outside, { times: true })), []);
  assert.equal(Deno.lstatSync(upper).isSymlink, true);
  assert.equal(text(`${upper}.moved/upper/a.txt`), "changed\n");
  assert.equal(text(`${fork.path}/a.txt`), "changed\n", "the fork is still mounted");
  assert.equal(text(`${splitDir(sb.root)}/base/a.txt`), "a\n");
});

for (const forks of POLICIES) {
  Deno.test({
    name: `capture rejects an out/<label> replaced by a symlink as tampered with (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "changed\n");
    const out = `${splitDir(sb.root)}/out/a`;
    Deno.removeSync(out);
    Deno.symlinkSync(sb.outside, out);
    expectRejected(ws, "a", "out/a was tampered with");
    assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `capture rejects an out/<label> file planted as a symlink and never writes through it (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    for (const name of ["diff.patch", "files", "raw"]) {
      const label = name.replace(".", "-");
      const fork = ws.fork(label);
      put(fork.path, "a.txt", "changed\n");
      put(sb.outside, name, "victim\n");
      Deno.symlinkSync(`${sb.outside}/${name}`, `${splitDir(sb.root)}/out/${label}/${name}`);
      expectRejected(ws, label, `out/${label} was tampered with`);
      assert.equal(text(`${sb.outside}/${name}`), "victim\n");
      assert.deepEqual(
        [...Deno.readDirSync(`${splitDir(sb.root)}/out/${label}`)].map((e) => e.name),
        [
          name,
        ],
      );
    }
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `remove refuses a .marsh/.trash planted as a symlink and removes nothing (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    const fork = ws.fork("a");
    put(fork.path, "b.txt", "b\n");
    Deno.symlinkSync(sb.outside, `${sb.root}/.marsh/.trash`);
    throwsA(() => ws.remove(), SymlinkRefusedError);
    assert.deepEqual([...Deno.readDirSync(sb.outside)], []);
    assert.equal(text(`${splitDir(sb.root)}/a/a.txt`), "a\n");
    // Refused before anything was let go: the fork is still held (and mounted), and captures.
    assert.equal(ws.capture("a").files, 1);
  });
}

// Copy forks only: git clean deletes a copy fork and its base outright; the
// overlay variant below is the same hazard against mounted forks.
Deno.test({
  name:
    "git clean -xfd mid-split makes capture and remove fail with workspace replaced (forks: copy)",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n" });
  using ws = create({ root: sb.root, env: { HOME: sb.home } }, "copy");
  const fork = ws.fork("a");
  put(fork.path, "a.txt", "changed\n");
  await gitOk(sb.root, ["clean", "-xfd"], opts);
  assert.equal(exists(`${sb.root}/.marsh`), false);
  // Same-named directories made after the clean are not ours: nothing may remove them.
  put(fork.path, "keep-me", "new owner\n");
  put(splitDir(sb.root), "base/keep-me", "new owner\n");
  const after = fingerprint(`${sb.root}/.marsh`, { times: true });

  const captureErr = throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  assert.equal(captureErr.message, "workspace replaced");
  const removeErr = throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.equal(removeErr.message, "workspace replaced");
  assert.deepEqual(fingerprintDiff(after, fingerprint(`${sb.root}/.marsh`, { times: true })), []);
  assert.equal(exists(`${sb.root}/.marsh/.trash`), false);
});

Deno.test({
  name:
    "git clean -xfd mid-split deletes an overlay fork's upper layer and the layers but not the mounts: capture and remove fail with workspace replaced and remove nothing (forks: auto)",
  permissions: perms,
}, async () => {
  using sb = sandbox();
  const opts = { home: sb.home };
  await gitProject(sb, { "a.txt": "a\n", "dir/b.txt": "b\n" });
  using ws = create({ root: sb.root, env: { HOME: sb.home } }, "auto");
  const fork = ws.fork("a");
  put(fork.path, "a.txt", "changed\n");
  const clean = await git(sb.root, ["clean", "-xfdq"], opts);
  // The mounted fork and base cannot go (busy, read-only); everything else does.
  assert.equal(clean.code, 1, clean.stderr);
  assert.match(clean.stderr, /Device or resource busy|Read-only file system/);
  assert.equal(exists(`${sb.root}/.marsh/layers`), false);
  assert.equal(exists(`${splitDir(sb.root)}/.overlay`), false);
  assert.equal(exists(`${splitDir(sb.root)}/out`), false);
  assert.equal(text(`${splitDir(sb.root)}/base/dir/b.txt`), "b\n");
  // Same-named directories made after the clean are not ours: nothing may remove them.
  put(splitDir(sb.root), ".overlay/a/upper/keep-me", "new owner\n");
  put(sb.root, ".marsh/layers/keep-me", "new owner\n");
  const after = fingerprint(`${sb.root}/.marsh`, { times: true });

  const captureErr = throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  assert.equal(captureErr.message, "workspace replaced");
  const removeErr = throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.equal(removeErr.message, "workspace replaced");
  assert.deepEqual(fingerprintDiff(after, fingerprint(`${sb.root}/.marsh`, { times: true })), []);
  assert.equal(exists(`${sb.root}/.marsh/.trash`), false);
});

Deno.test({
  name:
    "an overlay fork's upper layer or a base layer deleted by path fails capture with workspace replaced (forks: auto)",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = create({ root: sb.root, env: {} }, "auto");
  const gone = ws.fork("gone");
  const ok = ws.fork("ok");
  put(gone.path, "a.txt", "changed\n");
  put(ok.path, "a.txt", "changed\n");
  // The upper layer holds the branch's work: without it capture would see no change.
  Deno.removeSync(`${splitDir(sb.root)}/.overlay/gone`, { recursive: true });
  throwsA(() => ws.capture("gone"), WorkspaceReplacedError);
  assert.deepEqual([...Deno.readDirSync(`${splitDir(sb.root)}/out/gone`)], []);
  const [layer] = ws.layers!.layers;
  Deno.removeSync(`${sb.root}/.marsh/layers/${layer}`, { recursive: true });
  throwsA(() => ws.capture("ok"), WorkspaceReplacedError);
  assert.deepEqual([...Deno.readDirSync(`${splitDir(sb.root)}/out/ok`)], []);
});

// Copy forks only: an overlay fork is a mount point, which rmdir(2) refuses
// (EBUSY); the overlay variant below replaces its upper layer instead.
Deno.test({
  name:
    "a fork replaced by a same-named directory fails capture and remove and survives (forks: copy)",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = create({ root: sb.root, env: {} }, "copy");
  const fork = ws.fork("a");
  Deno.removeSync(fork.path, { recursive: true });
  put(fork.path, "keep-me", "new owner\n");
  throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.equal(text(`${fork.path}/keep-me`), "new owner\n");
  assert.equal(exists(`${splitDir(sb.root)}/base/a.txt`), true);
});

Deno.test({
  name:
    "an overlay fork whose upper layer was replaced by a same-named directory fails capture and remove and survives (forks: auto)",
  permissions: perms,
}, () => {
  using sb = sandbox();
  put(sb.root, "a.txt", "a\n");
  using ws = create({ root: sb.root, env: {} }, "auto");
  const fork = ws.fork("a");
  put(fork.path, "a.txt", "changed\n");
  assert.throws(() => Deno.removeSync(fork.path), /Device or resource busy/);
  const upper = `${splitDir(sb.root)}/.overlay/a`;
  Deno.removeSync(upper, { recursive: true });
  put(upper, "upper/keep-me", "new owner\n");
  throwsA(() => ws.capture("a"), WorkspaceReplacedError);
  throwsA(() => ws.remove(), WorkspaceReplacedError);
  assert.equal(text(`${upper}/upper/keep-me`), "new owner\n");
  assert.equal(exists(`${splitDir(sb.root)}/base/a.txt`), true);
});

for (const forks of POLICIES) {
  Deno.test({
    name:
      `a split dir moved away and replaced by a same-named directory is never touched by path (forks: ${forks})`,
    permissions: perms,
  }, () => {
    using sb = sandbox();
    put(sb.root, "a.txt", "a\n");
    using ws = create({ root: sb.root, env: {} }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "changed\n");
    const moved = `${sb.root}/.marsh/moved`;
    Deno.renameSync(splitDir(sb.root), moved);
    put(splitDir(sb.root), "a/keep-me", "new owner\n");
    const after = fingerprint(`${sb.root}/.marsh`, { times: true });
    throwsA(() => ws.capture("a"), WorkspaceReplacedError);
    throwsA(() => ws.remove(), WorkspaceReplacedError);
    assert.deepEqual(fingerprintDiff(after, fingerprint(`${sb.root}/.marsh`, { times: true })), []);

    // Without forks only the split dir's own identity stands between remove() and the path.
    using bare = create({ root: sb.root, id: "s2", env: {} }, forks);
    Deno.renameSync(splitDir(sb.root, "s2"), `${moved}2`);
    Deno.mkdirSync(splitDir(sb.root, "s2"));
    throwsA(() => bare.remove(), WorkspaceReplacedError);
    assert.equal(exists(splitDir(sb.root, "s2")), true);
    assert.equal(exists(`${moved}2/base/a.txt`), true);
  });
}

for (const forks of POLICIES) {
  Deno.test({
    name:
      `a repo's own fsmonitor, filters, hooks and external diff never run, in the engine or in a fork (forks: ${forks})`,
    permissions: running("touch"),
  }, async () => {
    using sb = sandbox();
    const opts = { home: sb.home };
    await gitProject(sb, {
      "a.txt": "a\n",
      "b.txt": "b\n",
      ".gitattributes": "* filter=x diff=x\n",
    });
    const marker = `${sb.outside}/marker`;
    const script = (name: string, body: string) => {
      put(sb.outside, name, `#!/bin/sh\necho ${name} "$@" >> '${marker}'\n${body}`, 0o755);
      return `${sb.outside}/${name}`;
    };
    const config: [string, string][] = [
      ["core.fsmonitor", script("fsmonitor", "")],
      ["filter.x.clean", script("clean", "cat\n")],
      ["filter.x.smudge", script("smudge", "cat\n")],
      ["filter.x.required", "true"],
      ["diff.x.textconv", script("textconv", 'cat "$1"\n')],
      ["diff.external", script("external", "")],
      ["core.hooksPath", `${sb.outside}/hooks`],
    ];
    script("hooks/pre-commit", "");
    script("hooks/post-commit", "");
    script("hooks/post-index-change", "");
    for (const [key, value] of config) await gitOk(sb.root, ["config", key, value], opts);
    // A stat-dirty tracked file, so Git in the project would clean it through the filter.
    await run("touch", ["-d", "@1600000000", "a.txt"], { ...opts, cwd: sb.root });

    const ws = create({ root: sb.root, env: { HOME: sb.home } }, forks);
    const fork = ws.fork("a");
    put(fork.path, "a.txt", "changed in the fork\n");
    put(fork.path, "c.txt", "new\n");
    assert.equal(exists(marker), false, "the engine ran something");
    for (
      const args of [
        ["status"],
        ["diff"],
        ["diff", "--ext-diff"],
        ["add", "-A"],
        ["commit", "-q", "-m", "in the fork"],
        ["status"],
      ]
    ) {
      await gitOk(sb.top, ["-C", fork.path, ...args], opts);
      assert.equal(
        exists(marker),
        false,
        `git ${args.join(" ")} in the fork ran: ${exists(marker) ? text(marker) : ""}`,
      );
    }
    assert.equal(ws.capture("a").files, 2);
    ws.remove();
    assert.equal(exists(marker), false);

    // The control: the same Git in the project itself does run them.
    await gitOk(sb.root, ["status"], opts);
    await gitOk(sb.root, ["add", "a.txt"], opts);
    assert.match(text(marker), /fsmonitor/);
    assert.match(text(marker), /clean/);
  });
}
