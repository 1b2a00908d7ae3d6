/**
 * Issue 4, "unprivileged daemon": the real `./marsh` CLI and daemon run as an
 * ordinary user (`runuser -u nobody`), black box, each test in its own world
 * next to the repository (nobody may mount an overlay there; not in /tmp on
 * these machines) with a control dir, a Git project and a Deno cache that
 * nobody owns.
 *
 * - `MARSH_FORKS=auto` (the default): the split-filesystem service runs in
 *   its own user and mount namespace, forks are `userns-overlay`, and the
 *   branches run inside that namespace, as its uid 0, each in a mount
 *   namespace of its own where its fork is at the project's path (the
 *   project view).
 * - `MARSH_FORKS=copy`, and a daemon that finds no usable `unshare`: copy
 *   forks, branches on the host as nobody, from their fork's directory (the
 *   fork view, and the manifest and status say why).
 *
 * Needs root (to switch users), `runuser` and the user `nobody`: without
 * them these tests fail, they are never skipped.
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { fingerprint, fingerprintDiff, unmountBelow } from "../splitfs/_testing.ts";
import {
  exists,
  finish,
  handleId,
  PERMISSIONS,
  type Result,
  show,
  waitFor,
} from "./_acceptance.ts";

const ROOT = new URL("../", import.meta.url).pathname;
const MARSH = `${ROOT}marsh`;
const USER = "nobody";
/** Where worlds go: beside the repository (nobody cannot mount overlays in this /tmp). */
const PARENT = ROOT.replace(/\/[^/]+\/$/, "");
const DENO = Deno.env.get("MARSH_DENO") ?? Deno.execPath();

async function run(cmd: string, args: readonly string[], cwd?: string): Promise<Result> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(cmd, {
      args: [...args],
      cwd,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new Error(`${cmd} is not installed; these tests need it (they are not skipped)`);
    }
    throw error;
  }
  return await finish(child, `${cmd} ${args.join(" ")}`);
}

async function ok(cmd: string, args: readonly string[], cwd?: string): Promise<string> {
  const r = await run(cmd, args, cwd);
  assert.equal(r.code, 0, `${cmd} ${args.join(" ")}: ${show(r)}`);
  return r.stdout;
}

/** The runner's Deno cache (as tests/_acceptance.ts finds it): its npm packages are copied. */
function denoCache(): string {
  const explicit = Deno.env.get("DENO_DIR");
  if (explicit) return explicit;
  const cache = Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? ""}/.cache`;
  return `${cache}/deno`;
}

/** Live (not zombie) processes whose command line contains `needle`. */
async function processesNaming(needle: string): Promise<{ pid: number; args: string }[]> {
  const out = await ok("ps", ["-eo", "pid=,stat=,args="]);
  const found = [];
  for (const line of out.split("\n")) {
    const m = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m || m[2]!.startsWith("Z") || !m[3]!.includes(needle) || /^\S*\bps -eo /.test(m[3]!)) {
      continue;
    }
    found.push({ pid: Number(m[1]), args: m[3]! });
  }
  return found;
}

/**
 * The mount points at or below `top` in a process's mount namespace, from
 * its mountinfo (through awk: Deno reads /proc only with --allow-all).
 */
async function mountsOf(pid: number | "self", top: string): Promise<string[]> {
  const out = await ok("awk", ["{print $5}", `/proc/${pid}/mountinfo`]);
  return out.split("\n").filter((p) => p === top || p.startsWith(`${top}/`)).sort();
}

/** Whether a process is alive. */
async function alive(pid: number): Promise<boolean> {
  return (await run("ps", ["-p", String(pid)])).code === 0;
}

/**
 * A world nobody owns: `home` (MARSH_HOME), `project` (a Git repository with
 * `f.txt` and `g.txt`), `scratch` (HOME), `deno` (DENO_DIR), and `outside`,
 * which nothing of marsh's may touch.
 */
class World implements AsyncDisposable {
  readonly home: string;
  readonly project: string;
  readonly scratch: string;
  readonly outside: string;
  readonly env: Record<string, string>;

  private constructor(
    readonly base: string,
    /** nobody's uid. */
    readonly uid: number,
    env: Readonly<Record<string, string>>,
  ) {
    this.home = `${base}/home`;
    this.project = `${base}/project`;
    this.scratch = `${base}/scratch`;
    this.outside = `${base}/outside`;
    this.env = {
      PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
      LANG: "C.UTF-8",
      HOME: this.scratch,
      MARSH_HOME: this.home,
      MARSH_DENO: DENO,
      DENO_DIR: `${base}/deno`,
      DENO_NO_UPDATE_CHECK: "1",
      M: MARSH,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_CONFIG_GLOBAL: "/dev/null",
      GIT_AUTHOR_NAME: "Test",
      GIT_AUTHOR_EMAIL: "test@example.invalid",
      GIT_COMMITTER_NAME: "Test",
      GIT_COMMITTER_EMAIL: "test@example.invalid",
      GIT_TERMINAL_PROMPT: "0",
      ...env,
    };
  }

  static async create(env: Readonly<Record<string, string>> = {}): Promise<World> {
    const uid = await checkUnprivilegedUser();
    const base = Deno.realPathSync(await Deno.makeTempDir({ dir: PARENT, prefix: "tmp-unpriv-" }));
    const w = new World(base, uid, env);
    try {
      Deno.chmodSync(base, 0o755);
      for (const d of [w.home, w.project, w.scratch, w.outside, `${base}/deno`]) Deno.mkdirSync(d);
      Deno.chmodSync(w.home, 0o700);
      // The npm packages the entrypoints import, so nobody's Deno needs no download.
      await ok("cp", ["-a", `${denoCache()}/npm`, `${base}/deno/npm`]);
      Deno.writeTextFileSync(`${w.outside}/keep.txt`, "keep\n");
      await ok("chown", ["-R", `${USER}:`, base]);
      Deno.chownSync(base, 0, 0);
      const init = await w.bash(
        "printf 'f\\n' > f.txt && printf 'g\\n' > g.txt && git init -q -b main && git add -A && git commit -q -m init",
      );
      assert.equal(init.code, 0, show(init));
      return w;
    } catch (error) {
      await Deno.remove(base, { recursive: true });
      throw error;
    }
  }

  /** Runs `bash -c script` as nobody with exactly this world's environment. */
  bash(script: string, opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<Result> {
    return finish(this.spawnBash(script, opts), `bash -c ${script}`);
  }

  /** Starts `bash -c script` as nobody without waiting for it. */
  spawnBash(
    script: string,
    opts: { env?: Record<string, string>; cwd?: string } = {},
  ): Deno.ChildProcess {
    const env = Object.entries({ ...this.env, ...opts.env }).map(([k, v]) => `${k}=${v}`);
    return new Deno.Command("runuser", {
      args: ["-u", USER, "--", "/usr/bin/env", "-i", ...env, "bash", "-c", script],
      cwd: opts.cwd ?? this.project,
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  }

  /** Runs `./marsh ARGS` as nobody in the project. */
  marsh(args: readonly string[], opts: { stdin?: string; env?: Record<string, string> } = {}) {
    const quoted = args.map((a) => `'${a.replaceAll("'", `'\\''`)}'`).join(" ");
    const stdin = opts.stdin === undefined ? "</dev/null" : `<<<'${opts.stdin.trim()}'`;
    return this.bash(`"$M" ${quoted} ${stdin}`, { env: opts.env });
  }

  async manifest(id: string): Promise<Manifest> {
    const r = await this.marsh(["splits", "--json", id]);
    assert.equal(r.code, 0, show(r));
    const [m] = (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
    assert.ok(m, r.stdout);
    return m;
  }

  async status(): Promise<
    {
      daemon: { pid: number } | null;
      forks?: { strategy: string; reason: string };
      view?: { view: string; reason: string };
    }
  > {
    const r = await this.marsh(["status", "--json"]);
    assert.equal(r.code, 0, show(r));
    return JSON.parse(r.stdout);
  }

  /** The daemon's split-filesystem service: its pid names its namespace. */
  async service(): Promise<{ pid: number; uid: number }> {
    const s = await this.status();
    assert.ok(s.daemon, "no daemon answers");
    const out = await ok("ps", ["-o", "pid=,uid=,args=", "--ppid", String(s.daemon.pid)]);
    const line = out.split("\n").find((l) => l.includes("splitfs/main.ts"));
    assert.ok(line, `no split-filesystem service under the daemon: ${out}`);
    const [pid, uid] = line.trim().split(/\s+/).map(Number);
    return { pid: pid!, uid: uid! };
  }

  /** `out/<label>/diff.patch` etc. of a split, read as root. */
  out(m: Manifest, label: string, file: string): string {
    return Deno.readTextFileSync(`${m.out}/${label}/${file}`);
  }

  async stopDaemon(): Promise<void> {
    if (!exists(`${this.home}/marshd.sock`)) return;
    const r = await this.marsh(["daemon", "stop"]);
    assert.equal(r.code, 0, show(r));
    // The daemon exits after its worker and its service did (their command
    // lines do not all name the control dir; the daemon's does).
    await waitFor(
      "the daemon and its services to end",
      async () => (await processesNaming(this.home)).length === 0,
    );
  }

  /**
   * Stops the daemon; processes still naming this world (all started here)
   * are killed; nothing may stay mounted; the world is removed.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      await this.stopDaemon().catch(async (error) => {
        for (const p of await processesNaming(this.base)) {
          try {
            Deno.kill(p.pid, "SIGKILL");
          } catch (e) {
            if (!(e instanceof Deno.errors.NotFound)) throw e;
          }
        }
        throw error;
      });
    } finally {
      const left = await mountsOf("self", this.base);
      unmountBelow(this.base);
      await Deno.remove(this.base, { recursive: true });
      assert.deepEqual(left, [], "the host saw mounts in the world");
    }
  }
}

let checked: Promise<number> | null = null;

/**
 * We are root, and `runuser -u nobody` runs the pinned Deno on the
 * repository; resolves with nobody's uid.
 */
function checkUnprivilegedUser(): Promise<number> {
  checked ??= (async () => {
    const id = await run("id", ["-u"]);
    if (id.stdout.trim() !== "0") {
      throw new Error(
        `these tests switch to the user ${USER} with runuser and must run as root (uid ${id.stdout.trim()})`,
      );
    }
    const who = await run("id", ["-u", USER]);
    if (who.code !== 0) {
      throw new Error(`there is no user ${USER} to run the unprivileged daemon as: ${show(who)}`);
    }
    const r = await run("runuser", [
      "-u",
      USER,
      "--",
      "/bin/sh",
      "-c",
      `test -x "$0" && test -r "$1"`,
      DENO,
      `${ROOT}main.ts`,
    ]);
    if (r.code !== 0) {
      throw new Error(
        `${USER} cannot run ${DENO} on ${ROOT} (both must be readable by every user): ${show(r)}`,
      );
    }
    return Number(who.stdout.trim());
  })();
  return checked;
}

/** `marsh split -b a='echo x >> f.txt' -b b='rm g.txt' [...]`, joined with `git apply` of both. */
async function roundTrip(w: World, extra: readonly string[] = []): Promise<Manifest> {
  const split = await w.marsh(["split", "-b", "a=echo x >> f.txt", "-b", "b=rm g.txt", ...extra]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const join = await w.marsh(
    [
      "join",
      "--",
      "sh",
      "-c",
      'cat >/dev/null && cp -r "$SPLIT_DIR" "$HOME/out" && for l in a b; do git apply --check "$SPLIT_DIR/$l/diff.patch" && git apply "$SPLIT_DIR/$l/diff.patch" || exit 9; done',
    ],
    { stdin: split.stdout },
  );
  assert.equal(join.code, 0, show(join));
  // git apply reproduced both forks' changes in the project.
  assert.equal(Deno.readTextFileSync(`${w.project}/f.txt`), "f\nx\n");
  assert.ok(!exists(`${w.project}/g.txt`));
  assert.ok(!exists(`${w.project}/.marsh/split/${id}`), "a joined split's directory is removed");
  const m = await w.manifest(id);
  assert.equal(m.state, "joined");
  assert.deepEqual(
    m.branches.map((b) => [b.label, b.status]),
    [
      ["a", "exited 0"],
      ["b", "exited 0"],
      ...extra.filter((_, i) => i % 2).map((b) => [
        b.slice(0, b.indexOf("=")),
        "exited 0",
      ]),
    ],
  );
  // out/ as the consumer saw it (copied to $HOME/out): its manifest says the same.
  const seen = JSON.parse(Deno.readTextFileSync(`${w.scratch}/out/manifest.json`)) as Manifest;
  assert.deepEqual(
    seen.branches.map((b) => b.fork_strategy),
    m.branches.map((b) => b.fork_strategy),
  );
  return m;
}

const COPY_STRATEGIES = ["reflink", "copy_file_range", "copy"];

Deno.test({
  name:
    "unprivileged: as nobody the daemon forks with userns-overlay; branches run in its namespace; restart and rm",
  permissions: PERMISSIONS,
}, async () => {
  // A short grace: the cancel below must SIGKILL a grandchild that ignores SIGINT.
  await using w = await World.create({ MARSH_CANCEL_GRACE_MS: "500" });
  const m = await roundTrip(w);
  assert.deepEqual(m.branches.map((b) => b.fork_strategy), ["userns-overlay", "userns-overlay"]);
  const status = await w.status();
  assert.equal(status.forks?.strategy, "userns-overlay", status.forks?.reason);
  assert.match(status.forks.reason, /^not root: the split-filesystem service runs in its own user/);
  const svc = await w.service();
  assert.equal(svc.uid, w.uid, "the service runs as nobody");
  assert.deepEqual(await mountsOf(svc.pid, w.project), [], "the joined split left no mount");

  // Cancelling a branch in the namespace ends all of it, a setsid'd
  // grandchild included (bash started it ignoring SIGINT: the grace's
  // SIGKILL ends it): the supervisor sees every descendant through nsenter.
  const running = w.spawnBash(`"$M" split -b s='setsid sleep 6061 & exec sleep 6062' </dev/null`);
  const sleeping = await waitFor("the branch's processes", async () => {
    const both = (await processesNaming("sleep 606"))
      .filter((p) => p.args === "sleep 6061" || p.args === "sleep 6062");
    return both.length === 2 ? both : undefined;
  });
  const s = await waitFor("the split to run", async () => {
    const r = await w.marsh(["splits", "--json"]);
    const all = (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
    return all.find((m) => m.state === "run" && m.branches[0]?.state === "running");
  });
  const cancel = await w.marsh(["splits", "cancel", s.id]);
  assert.equal(cancel.code, 0, show(cancel));
  const cancelled = await finish(running, "the cancelled split");
  assert.equal(cancelled.code, 130, show(cancelled));
  for (const p of sleeping) assert.ok(!(await alive(p.pid)), `${p.args} outlived the cancel`);
  assert.equal((await w.manifest(s.id)).state, "cancelled");
  assert.deepEqual(await mountsOf(svc.pid, w.project), [], "the cancelled split left no mount");

  // A split to keep: k writes; c proves it runs in the namespace, on the
  // mounted fork at the project's path (uid 0 there, its parent the
  // supervisor), and that it cannot unmount its view: CAP_SYS_ADMIN left
  // its bounding set (before the project view, a lazy umount detached it).
  const umount = [
    "echo z > u.txt",
    "F=$PWD",
    'echo "$(id -u) $(cat /proc/$PPID/comm)"',
    "cd /",
    'if umount "$F" 2>/dev/null; then echo "plain umount worked"; fi',
    'umount -l "$F" && echo detached',
    'test -e "$F/u.txt" || echo "bare mount point"',
  ].join("; ");
  const split = await w.marsh(["split", "-b", "k=echo k > k.txt", "-b", `c=${umount}`]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const kept = await w.manifest(id);
  assert.deepEqual(kept.branches.map((b) => [b.label, b.status, b.fork_strategy]), [
    ["k", "exited 0", "userns-overlay"],
    ["c", "exited 0", "userns-overlay"],
  ]);
  assert.equal(w.out(kept, "c", "stdout"), "0 perl\n");
  for (const b of kept.branches) {
    assert.equal(b.view, "project", b.label);
    assert.match(
      b.view_reason ?? "",
      /^not root: each shell branch sees its fork at the project's path/,
    );
  }
  assert.match(w.out(kept, "c", "diff.patch"), /^\+\+\+ b\/u\.txt\n@@ -0,0 \+1 @@\n\+z$/m);
  assert.match(w.out(kept, "k", "diff.patch"), /^\+\+\+ b\/k\.txt\n@@ -0,0 \+1 @@\n\+k$/m);
  // The mounts are the service's, in its namespace only.
  assert.deepEqual(await mountsOf(svc.pid, kept.dir), [
    `${kept.dir}/base`,
    `${kept.dir}/c`,
    `${kept.dir}/k`,
  ]);
  assert.deepEqual(await mountsOf("self", w.base), []);
  const keep = await w.marsh(["join", "--keep", "--", "true"], { stdin: split.stdout });
  assert.equal(keep.code, 0, show(keep));
  assert.equal((await w.manifest(id)).state, "kept");
  // A second kept split, whose upper dir will be replaced behind marsh's back.
  const other = await w.marsh(["split", "-b", "t=echo t > t.txt"]);
  assert.equal(other.code, 0, show(other));
  const tampered = await w.manifest(handleId(other.stdout));
  assert.equal(
    (await w.marsh(["join", "--keep", "--", "true"], { stdin: other.stdout })).code,
    0,
  );

  // A restart ends the namespace and its mounts: the fork names show bare
  // mount points, the upper dirs hold the work.
  await w.stopDaemon();
  assert.equal((await w.status()).daemon, null);
  assert.ok(!(await alive(svc.pid)), "the old service is gone, and its namespace with it");
  assert.deepEqual([...Deno.readDirSync(`${kept.dir}/k`)], []);
  assert.equal(Deno.readTextFileSync(`${kept.dir}/.overlay/k/upper/k.txt`), "k\n");
  // The journal names each userns-overlay fork by its upper dir: a replaced
  // one makes rm drop the record and remove nothing.
  const upper = `${tampered.dir}/.overlay/t/upper`;
  Deno.renameSync(upper, `${upper}.moved`);
  Deno.mkdirSync(upper);
  Deno.chownSync(upper, w.uid, null);
  const refused = await w.marsh(["splits", "rm", tampered.id]);
  assert.equal(refused.code, 0, show(refused));
  assert.match(refused.stdout, /nothing was removed from disk; record dropped/);
  assert.equal(Deno.readTextFileSync(`${upper}.moved/t.txt`), "t\n");
  assert.ok(exists(`${tampered.dir}/t`));
  Deno.removeSync(tampered.dir, { recursive: true });

  const before = [...Deno.readDirSync(w.project)].map((e) => e.name).sort();
  const rm = await w.marsh(["splits", "rm", id]);
  assert.equal(rm.code, 0, show(rm));
  assert.equal(rm.stdout.trim(), `split ${id} removed`);
  assert.ok(!exists(kept.dir));
  assert.deepEqual(
    [...Deno.readDirSync(`${w.project}/.marsh/split`)],
    [],
    "nothing of the split is left",
  );
  // Nothing else was removed: the project, its layers, the world around it.
  assert.deepEqual([...Deno.readDirSync(w.project)].map((e) => e.name).sort(), before);
  assert.equal(Deno.readTextFileSync(`${w.project}/f.txt`), "f\nx\n");
  assert.ok(exists(`${w.project}/.marsh/layers`));
  assert.equal(Deno.readTextFileSync(`${w.outside}/keep.txt`), "keep\n");
  const again = await w.service();
  assert.notEqual(again.pid, svc.pid);
  assert.deepEqual(await mountsOf(again.pid, w.base), [], "the new service mounted nothing");
  assert.deepEqual(await mountsOf("self", w.base), []);
  assert.equal((await w.marsh(["splits", id])).code, 2, "the record is gone");
});

Deno.test({
  name: "unprivileged: MARSH_FORKS=copy as nobody gives copy forks, branches on the host",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create({ MARSH_FORKS: "copy" });
  const m = await roundTrip(w, ["-b", "w=id -u"]);
  for (const b of m.branches) assert.ok(COPY_STRATEGIES.includes(b.fork_strategy ?? ""), b.label);
  assert.equal(
    Deno.readTextFileSync(`${w.scratch}/out/w/stdout`),
    `${w.uid}\n`,
    "no namespace: the branch is nobody",
  );
  const status = await w.status();
  assert.equal(status.forks?.strategy, "copy");
  assert.equal(status.forks.reason, "copy forks were asked for (MARSH_FORKS=copy)");
  assert.deepEqual(await mountsOf((await w.service()).pid, w.base), []);
  // No namespace to be had: the branches ran from their fork's directory, and both say so.
  const why =
    /^not root, and the split-filesystem service has no user namespace \(MARSH_FORKS=copy\): shell branches run in their fork's directory/;
  assert.equal(status.view?.view, "fork");
  assert.match(status.view.reason, why);
  for (const b of m.branches) {
    assert.equal(b.view, "fork", b.label);
    assert.match(b.view_reason ?? "", why);
  }
  const text = await w.marsh(["status"]);
  assert.match(text.stdout, /^shell branches: fork view \(not root, and the split-filesystem/m);
});

Deno.test({
  name:
    "unprivileged: a branch sees its fork at the project's path; absolute paths, ../.. and the layers are out of reach",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  // A first split leaves the layers the second one's branch goes for.
  const first = await w.marsh(["split", "-n", "-b", "x=true"]);
  assert.equal(first.code, 0, show(first));
  assert.equal((await w.marsh(["join"], { stdin: first.stdout })).code, 0);
  const root = w.project;
  const project = fingerprint(root, { skip: (rel) => rel === ".marsh" });
  const layers = fingerprint(`${root}/.marsh/layers`);
  assert.ok(layers.size > 0);
  const attack = [
    `echo abs >> ${root}/f.txt`,
    "test -e ../../../../g.txt && echo up >> ../../../../g.txt",
    `for f in ${root}/.marsh/layers/*/data/f.txt ../../../layers/*/data/f.txt; do ` +
    `echo BACKDOOR >> "$f" 2>/dev/null && echo "wrote $f"; done`,
    `touch ${w.home}/x 2>/dev/null && echo "wrote the control dir"`,
    `umount -l ${root} 2>/dev/null && echo "unmounted the fork"`,
    'echo "$(id -u) $PWD"',
    "git status --porcelain",
  ].join("; ");
  const split = await w.marsh(["split", "-b", `a=${attack}`]);
  assert.equal(split.code, 0, show(split));
  const m = await w.manifest(handleId(split.stdout));
  assert.deepEqual(
    fingerprintDiff(project, fingerprint(root, { skip: (rel) => rel === ".marsh" })),
    [],
  );
  assert.deepEqual(fingerprintDiff(layers, fingerprint(`${root}/.marsh/layers`)), []);
  assert.equal(w.out(m, "a", "stdout"), `0 ${root}\n M f.txt\n`, w.out(m, "a", "stderr"));
  assert.match(w.out(m, "a", "diff.patch"), /^\+abs$/m);
  assert.equal(m.branches[0]?.view, "project");
  assert.equal((await w.status()).view?.view, "project");
  const rm = await w.marsh(["join", "--", "true"], { stdin: split.stdout });
  assert.equal(rm.code, 0, show(rm));
});

/** A PATH dir with every program of `/usr/bin` but `unshare`, plus `extra`. */
function pathWithout(w: World, extra: Readonly<Record<string, string>> = {}): string {
  const dir = `${w.base}/bin`;
  Deno.mkdirSync(dir);
  for (const e of Deno.readDirSync("/usr/bin")) {
    if (e.name !== "unshare") Deno.symlinkSync(`/usr/bin/${e.name}`, `${dir}/${e.name}`);
  }
  for (const [name, script] of Object.entries(extra)) {
    Deno.writeTextFileSync(`${dir}/${name}`, script, { mode: 0o755 });
  }
  return dir;
}

Deno.test({
  name: "unprivileged: without unshare on PATH the daemon falls back to copy forks and says why",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  w.env.PATH = pathWithout(w);
  const m = await roundTrip(w, ["-b", "w=id -u"]);
  for (const b of m.branches) assert.ok(COPY_STRATEGIES.includes(b.fork_strategy ?? ""), b.label);
  assert.equal(Deno.readTextFileSync(`${w.scratch}/out/w/stdout`), `${w.uid}\n`);
  const status = await w.status();
  assert.equal(status.forks?.strategy, "copy");
  assert.match(
    status.forks.reason,
    /^not root, and no user and mount namespace for the split-filesystem service: unshare \(util-linux\) is not on PATH; overlay: the daemon may not mount/,
  );
});

Deno.test({
  name: "unprivileged: a refused unshare -Urm is a copy fallback with the refusal in the reason",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  w.env.PATH = pathWithout(w, {
    unshare: "#!/bin/sh\necho 'unshare: unshare failed: Operation not permitted' >&2\nexit 1\n",
  });
  const r = await w.marsh(["splits"]);
  assert.equal(r.code, 0, show(r));
  const status = await w.status();
  assert.equal(status.forks?.strategy, "copy");
  assert.match(
    status.forks.reason,
    /: unshare -Urm was refused \(exit 1: unshare: unshare failed: Operation not permitted\); overlay: /,
  );
  assert.equal((await w.service()).uid, w.uid);
});

Deno.test({
  name:
    "unprivileged: kill -9 mid-capture takes the service (under unshare) along; a new daemon removes the split",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  // A large change: its capture (a 30 MB text diff) takes seconds.
  const creator = w.spawnBash(`"$M" split -n -b 'a=seq 1 4000000 > big.txt' </dev/null`);
  const m = await waitFor("the split", async () => {
    // A listing that races split's start of the daemon may fail: ask again.
    const r = await w.marsh(["splits", "--json"]);
    if (r.code !== 0) return undefined;
    return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits[0];
  });
  await waitFor("the capture to start", () => exists(`${m.out}/a/diff.patch`));
  const daemon = (await w.status()).daemon!.pid;
  const service = await w.service();
  // `unshare` execs: the service's parent is the daemon itself.
  Deno.kill(daemon, "SIGKILL");
  // Gone, or a zombie (nothing may reap it here): either way it holds no file and no mount.
  const live = async () => {
    const r = await run("ps", ["-o", "stat=", "-p", String(service.pid)]);
    return r.code === 0 && !r.stdout.trim().startsWith("Z");
  };
  await waitFor("the service to die with its daemon", async () => !(await live()), 1000);
  await finish(creator, "the creator's marsh split");
  const started = await w.marsh(["daemon", "start"]);
  assert.equal(started.code, 0, show(started));
  const rm = await w.marsh(["splits", "rm", m.id]);
  assert.equal(rm.code, 0, show(rm));
  assert.ok(!exists(m.dir));
});

Deno.test({
  name:
    "unprivileged: nobody's rm -rf .marsh removes it all, with layers, a kept split and its overlay dirs",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  // Two snapshots (two layers), a joined split and a kept one, whose overlay
  // upper and work dirs (the kernel's work/work is mode 0) stay on disk.
  await roundTrip(w);
  const split = await w.marsh(["split", "-n", "-b", "k=echo k > k.txt"]);
  assert.equal(split.code, 0, show(split));
  const keep = await w.marsh(["join", "--keep", "--", "true"], { stdin: split.stdout });
  assert.equal(keep.code, 0, show(keep));
  const kept = await w.manifest(handleId(split.stdout));
  assert.equal(kept.branches[0]?.fork_strategy, "userns-overlay");
  await w.stopDaemon();
  const layers = [...Deno.readDirSync(`${w.project}/.marsh/layers`)]
    .filter((e) => /^[a-z0-9]{8,24}$/.test(e.name));
  assert.equal(layers.length, 2);
  assert.ok(exists(`${kept.dir}/.overlay/k/work`));
  const rm = await w.bash("rm -rf .marsh");
  assert.equal(rm.code, 0, show(rm));
  assert.ok(!exists(`${w.project}/.marsh`));
  assert.equal(Deno.readTextFileSync(`${w.project}/f.txt`), "f\nx\n");
});

Deno.test({
  name:
    "unprivileged: nobody's marsh gc --all removes a kept userns-overlay split, every layer and .marsh",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  await roundTrip(w);
  const split = await w.marsh(["split", "-n", "-b", "k=echo k > k.txt"]);
  assert.equal(split.code, 0, show(split));
  const keep = await w.marsh(["join", "--keep", "--", "true"], { stdin: split.stdout });
  assert.equal(keep.code, 0, show(keep));
  const kept = await w.manifest(handleId(split.stdout));
  const svc = await w.service();
  assert.deepEqual(await mountsOf(svc.pid, kept.dir), [`${kept.dir}/base`, `${kept.dir}/k`]);
  const gc = await w.marsh(["gc", "--all"]);
  assert.equal(gc.code, 0, show(gc));
  assert.match(gc.stdout, /^removed 2 splits and 2 snapshot layers \(/m);
  assert.ok(!exists(`${w.project}/.marsh`), show(gc));
  assert.deepEqual(await mountsOf(svc.pid, w.project), [], "its overlays were unmounted");
  assert.equal((await w.marsh(["splits", "--all"])).stdout, "no splits\n");
  assert.equal(Deno.readTextFileSync(`${w.project}/f.txt`), "f\nx\n");
});

Deno.test({
  name:
    "unprivileged: marsh compare --test as nobody tests each branch in a throwaway fork in the service's namespace, then removes it",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  const split = await w.marsh(["split", "-n", "-b", "a=echo x >> f.txt", "-b", "b=rm g.txt"]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const r = await w.marsh([
    "compare",
    id,
    "--json",
    "--test",
    'grep -q x f.txt; e=$?; echo new > n.txt; echo "$(pwd) $(id -u)"; exit $e',
  ]);
  assert.equal(r.code, 0, show(r));
  const rows =
    (JSON.parse(r.stdout) as { branches: { label: string; test?: { status: string } }[] })
      .branches;
  assert.deepEqual(rows.map((b) => [b.label, b.test?.status]), [["a", "exited 0"], [
    "b",
    "exited 1",
  ]]);
  const m = await w.manifest(id);
  // The project view, made in the service's user namespace (uid 0 there).
  assert.equal(w.out(m, "a", "compare/stdout"), `${w.project} 0\n`);
  const dir = `${w.project}/.marsh/split/${id}`;
  for (const label of ["a", "b"]) {
    assert.ok(!exists(`${dir}/.overlay/${label}/upper/n.txt`), "the branch's work is untouched");
  }
  assert.ok(!exists(`${dir}/.compare-a`) && !exists(`${dir}/.compare-b`));
  const svc = await w.service();
  assert.deepEqual((await mountsOf(svc.pid, w.base)).filter((p) => p.includes(".compare-")), []);
});

Deno.test({
  name:
    "unprivileged: where no overlay can be mounted (MARSH_FORKS=copy), marsh session start is refused, changing nothing",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create({ MARSH_FORKS: "copy" });
  const before = fingerprint(w.project);
  // No copy_fallback view or native operation: a session that cannot have its overlays is refused.
  const r = await w.marsh(["session", "start", "fix"]);
  assert.equal(r.code, 125, show(r));
  assert.match(
    r.stderr,
    new RegExp(
      `\nmarsh session start: cannot take the snapshot of ${w.project}: checkpoint sessions need overlay mounts, and none can be made in ${w.project}: .+; they have no copy fallback \\(docs/checkpoints.md\\): run the daemon as root, or as a user where unshare -Urm works with MARSH_FORKS=auto \\(marsh status shows which forks this host allows\\)\n$`,
    ),
  );
  const listed = await w.marsh(["sessions", "--json"]);
  assert.equal(listed.code, 0, show(listed));
  assert.deepEqual(JSON.parse(listed.stdout).sessions, []);
  assert.ok(!exists(`${w.project}/.marsh/session/fix`), "no session dir");
  // Only marsh's own dir (its lock) is new: the project's files are as they were.
  const changed = fingerprintDiff(before, fingerprint(w.project));
  assert.deepEqual(changed.filter((l) => !/^. \.marsh(\/|:)/.test(l)), [], changed.join("\n"));
});
