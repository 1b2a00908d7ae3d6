/**
 * Argv branches as Kit containers on a real engine (docs/engine.md "Tests on a bare machine"): a
 * real split made by `SplitWorkspace` (copy forks, and overlay forks where this
 * host mounts them), the fixture Kit (busybox and git), and the runner in a
 * child process under the Kit worker's exact flags (`kitWorkerFlags`), since
 * the test runner has no network permission. No engine is a failure, never
 * a skip (`ensureEngine`). Every test ends by showing that no container with
 * its job's label is left.
 */

import assert from "node:assert/strict";
import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { envDigest } from "../protocol/job_env_digest.ts";
import { ensureEngine, fixtureKit } from "../tests/_engine.ts";
import { FORK_REF } from "../splitfs/fork/admin.ts";
import {
  exists,
  gitOk,
  gitProject,
  run as runTool,
  type Sandbox,
  sandbox,
  text,
} from "../splitfs/_testing.ts";
import { type ForkInfo, SplitWorkspace } from "../splitfs/workspace/workspace.ts";
import {
  CAP_FILES,
  CAP_SOCKET,
  type JobJson,
  jobPath,
  linkScript,
  stubScript,
} from "../protocol/job_capability.ts";
import { alternateOf } from "../protocol/fork_view.ts";
import type { KitCap, KitLaunch, KitSpec } from "../protocol/kit_launch.ts";
import { imagePath, jobJson, kitCommand, kitEnv, kitLabels } from "./kit_container.ts";
import { kitWorkerFlags } from "../protocol/entrypoints.ts";
import { denoPath } from "./_testing.ts";

const root = new URL("../", import.meta.url).pathname;
/** The daemon's digest key in these launches. */
const TEST_KEY_HEX = "0123456789abcdef".repeat(4);
const dec = new TextDecoder();
const MiB = 1024 * 1024;
const perms: Deno.PermissionOptions = {
  read: true,
  write: true,
  run: true,
  env: true,
  ffi: true,
};

interface DriverReply {
  // deno-lint-ignore no-explicit-any
  readonly ok?: any;
  readonly error?: { name: string; message: string; containerId?: string | null; cause?: string };
}

/** `worker/testdata/kit_run.ts` under `kitWorkerFlags(control, socket)`. */
async function driver(socket: string, control: string, args: string[]): Promise<DriverReply> {
  const out = await new Deno.Command(denoPath(), {
    args: [
      "run",
      ...kitWorkerFlags(control, socket),
      `--config=${root}deno.json`,
      `${root}worker/testdata/kit_run.ts`,
      socket,
      ...args,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const stderr = dec.decode(out.stderr);
  assert.equal(out.code, 0, `kit_run ${args.join(" ")} failed:\n${stderr}`);
  return JSON.parse(dec.decode(out.stdout));
}

/** The docker CLI, for what the runner must not be trusted to report about itself. */
async function dockerCli(socket: string, args: string[]): Promise<string> {
  const out = await new Deno.Command("docker", {
    args: ["-H", `unix://${socket}`, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  if (!out.success) throw new Error(`docker ${args.join(" ")}: ${dec.decode(out.stderr)}`);
  return dec.decode(out.stdout);
}

/** One split with forks, a control dir and a kit home; the containers' labels carry `job`. */
interface Ctx extends AsyncDisposable {
  readonly socket: string;
  readonly image: string;
  readonly sb: Sandbox;
  readonly ws: SplitWorkspace;
  readonly forks: ReadonlyMap<string, ForkInfo>;
  readonly control: string;
  readonly kitHome: string;
  readonly job: string;
  /** The project's HEAD. */
  readonly head: string;
  admin(label: string): string;
  launch(label: string, argv: string[], over?: Over): KitLaunch;
  run(launch: KitLaunch, opts?: Record<string, number>): Promise<Ran>;
  /** The containers labelled with this context's job, by the engine's own listing. */
  leftovers(): Promise<unknown[]>;
}

type Over = Partial<Omit<KitLaunch, "kit">> & { kit?: Partial<KitSpec> };

interface Ran {
  readonly reply: DriverReply;
  readonly stdout: string;
  readonly stderr: string;
}

let seq = 0;

async function setup(
  opts: { forks: "copy" | "auto"; labels?: string[]; packRefs?: boolean },
): Promise<Ctx> {
  const socket = await ensureEngine();
  const image = (await fixtureKit(socket)).ref;
  const sb = sandbox("marsh-kit-test-");
  const head = await gitProject(sb, {
    "README.md": "the project\n",
    "src/main.ts": "console.log(1);\n",
    "sub/keep.txt": "keep\n",
  });
  if (opts.packRefs) await gitOk(sb.root, ["pack-refs", "--all"], { home: sb.home });
  const ws = SplitWorkspace.create({
    root: sb.root,
    id: "s1",
    env: { HOME: sb.home },
    forks: opts.forks,
  });
  const forks = new Map<string, ForkInfo>();
  for (const label of opts.labels ?? ["a"]) forks.set(label, ws.fork(label));
  const control = `${sb.top}/control`;
  Deno.mkdirSync(`${control}/attempts`, { recursive: true, mode: 0o700 });
  const kitHome = `${sb.top}/kit-home`;
  Deno.mkdirSync(kitHome);
  const job = `kt${(++seq).toString(36)}${crypto.randomUUID().slice(0, 8)}`;
  let n = 0;
  const ctx: Ctx = {
    socket,
    image,
    sb,
    ws,
    forks,
    control,
    kitHome,
    job,
    head,
    admin: (label) => `${ws.dirPath}/.admin/${label}`,
    launch(label, argv, over = {}) {
      const attempt = `${job}-${++n}`;
      const dir = `${control}/attempts/${attempt}`;
      Deno.mkdirSync(dir, { mode: 0o700 });
      const fork = forks.get(label)!.path;
      const { kit, ...rest } = over;
      return {
        job,
        attempt,
        split: "s1",
        label,
        kit: {
          name: "sh",
          image,
          entrypoint: null,
          network: "none",
          env: ["FOO"],
          wallS: 120,
          home: kitHome,
          ...kit,
        },
        argv,
        env: { FOO: "foo", BAZ: "baz", GITHUB_TOKEN: "not passed", MARSH_X: "not passed" },
        fork,
        cwd: fork,
        admin: `${ws.dirPath}/.admin/${label}`,
        objectDirs: ws.objectDirs,
        stdin: null,
        stdout: `${dir}/stdout`,
        stderr: `${dir}/stderr`,
        outputLimit: 16 * MiB,
        user: null,
        cap: null,
        ...rest,
      };
    },
    async run(launch, o = {}) {
      const dir = launch.stdout.slice(0, launch.stdout.lastIndexOf("/"));
      Deno.writeTextFileSync(`${dir}/launch.json`, JSON.stringify(launch));
      Deno.writeTextFileSync(`${dir}/opts.json`, JSON.stringify(o));
      const reply = await driver(socket, control, [
        "run",
        `${dir}/launch.json`,
        `${dir}/opts.json`,
      ]);
      const read = (p: string) => exists(p) ? text(p) : "";
      return { reply, stdout: read(launch.stdout), stderr: read(launch.stderr) };
    },
    async leftovers() {
      return (await driver(socket, control, ["list", `marsh.job=${job}`])).ok;
    },
    async [Symbol.asyncDispose]() {
      // Whatever a failed test left: no container may outlive it.
      for (const c of await ctx.leftovers() as { id: string }[]) {
        await driver(socket, control, ["remove", c.id, "30000"]);
      }
      ws.close();
      sb[Symbol.dispose]();
    },
  };
  return ctx;
}

function ok(r: Ran) {
  assert.equal(r.reply.error, undefined, JSON.stringify(r.reply.error) + `\n${r.stderr}`);
  return r.reply.ok;
}

async function noLeftovers(ctx: Ctx): Promise<void> {
  assert.deepEqual(await ctx.leftovers(), []);
}

for (const forks of ["copy", "auto"] as const) {
  const kind = forks === "copy" ? "copy fork" : "overlay fork";

  Deno.test({
    name:
      `kit container (${kind}): user runs it as that uid:gid, no new privileges; what it writes is theirs`,
    permissions: perms,
  }, async () => {
    await using ctx = await setup({ forks });
    const fork = ctx.forks.get("a")!.path;
    // The forks' owner is the daemon's user; here a made-up one owns this fork.
    await new Deno.Command("chown", { args: ["-R", "4321:8765", fork] }).output();
    const r = await ctx.run(
      ctx.launch(
        "a",
        ["sh", "-c", "id -u; id -g; grep NoNewPrivs /proc/self/status; mkdir d && echo x > d/f"],
        { user: "4321:8765" },
      ),
    );
    const exit = ok(r);
    assert.equal(exit.code, 0, r.stderr);
    // no-new-privileges: no set-uid program can raise the job's privileges.
    assert.match(r.stdout, /^4321\n8765\nNoNewPrivs:\s+1\n$/);
    for (const p of [`${fork}/d`, `${fork}/d/f`]) {
      const st = Deno.statSync(p);
      assert.deepEqual([st.uid, st.gid], [4321, 8765], p);
    }
    await noLeftovers(ctx);
  });

  Deno.test({
    name: `kit container (${kind}): writes land in the fork, cwd is the same absolute path`,
    permissions: perms,
  }, async () => {
    await using ctx = await setup({ forks, packRefs: true });
    if (forks === "auto") assert.equal(ctx.forks.get("a")!.strategy, "overlay");
    const fork = ctx.forks.get("a")!.path;
    const r = await ctx.run(
      ctx.launch("a", ["sh", "-c", "echo hi; pwd; echo x > new.txt; id -u"], {
        cwd: `${fork}/sub`,
      }),
    );
    const exit = ok(r);
    assert.equal(r.stdout, `hi\n${fork}/sub\n0\n`);
    assert.equal(exit.code, 0);
    assert.equal(exit.signal, null);
    assert.equal(exit.removed, true);
    assert.equal(text(`${fork}/sub/new.txt`), "x\n");
    // The mount table as built, in order.
    const admin = ctx.admin("a");
    assert.deepEqual(
      exit.mounts.map((m: { target: string; readOnly: boolean }) => [m.target, m.readOnly]),
      [
        [fork, false],
        [admin, false],
        [`${fork}/.git`, true],
        [`${admin}/config`, true],
        [`${admin}/HEAD`, true],
        [`${admin}/info`, true],
        [`${admin}/packed-refs`, true],
        ...ctx.ws.objectDirs.map((d) => [alternateOf(d), true]),
        ["/root", false],
      ],
    );
    assert.equal(exit.mounts.at(-1).source, ctx.kitHome);
    // The engine forgot it: inspect by id fails.
    await assert.rejects(dockerCli(ctx.socket, ["inspect", exit.containerId]), /No such/);
    await noLeftovers(ctx);
  });

  Deno.test({
    name: `kit container (${kind}): git works; a commit moves ${FORK_REF}, never HEAD`,
    permissions: perms,
  }, async () => {
    await using ctx = await setup({ forks });
    const admin = ctx.admin("a");
    const headBytes = text(`${admin}/HEAD`);
    const r = await ctx.run(ctx.launch("a", [
      "sh",
      "-c",
      [
        "set -e",
        "git -C . status --porcelain",
        "echo status-ok",
        "echo new > c.txt",
        "git add c.txt",
        "git -c user.name=kit -c user.email=kit@marsh.invalid commit -q -m c",
        "git rev-parse HEAD",
        "git symbolic-ref HEAD",
      ].join("\n"),
    ]));
    const exit = ok(r);
    assert.equal(exit.code, 0, r.stderr);
    const [status, commit, symref] = r.stdout.trimEnd().split("\n");
    assert.equal(status, "status-ok");
    assert.match(commit!, /^[0-9a-f]{40}$/);
    assert.equal(symref, FORK_REF);
    assert.equal(text(`${admin}/refs/heads/marsh-split`), `${commit}\n`);
    assert.equal(text(`${admin}/HEAD`), headBytes);
    const fork = ctx.forks.get("a")!.path;
    const home = { home: ctx.sb.home };
    assert.equal((await gitOk(fork, ["rev-parse", "HEAD^"], home)).trim(), ctx.head);
    // What the container wrote is Git's own state: capture verifies and accepts it.
    const summary = ctx.ws.capture("a");
    assert.equal(summary.files, 1);
    await noLeftovers(ctx);
  });

  Deno.test({
    name:
      `kit container (${kind}): gitfile and admin config, HEAD, info, packed-refs are read-only`,
    permissions: perms,
  }, async () => {
    await using ctx = await setup({ forks, packRefs: true });
    const fork = ctx.forks.get("a")!.path;
    const admin = ctx.admin("a");
    const guarded = [`${fork}/.git`, `${admin}/config`, `${admin}/HEAD`, `${admin}/packed-refs`];
    const before = guarded.map(text);
    const exclude = text(`${admin}/info/exclude`);
    const script = [
      ...[...guarded, `${admin}/info/exclude`].map((f) =>
        `if (echo junk >> ${f}) 2>/dev/null; then echo "writable ${f}"; else echo "refused ${f}"; fi`
      ),
      `rm -f ${fork}/.git 2>/dev/null && echo "gitfile removed" || echo "gitfile kept"`,
      `mv ${admin}/config ${admin}/c2 2>/dev/null && echo "config moved" || echo "config kept"`,
      `mkdir ${admin}/info/x 2>/dev/null && echo "info writable" || echo "info refused"`,
      `touch ${admin}/index.lock && rm ${admin}/index.lock && echo "admin writable"`,
      `touch ${fork}/sub/w && echo "fork writable"`,
      `mknod ${fork}/null c 1 3 2>/dev/null && echo "mknod made" || echo "mknod refused"`,
      ...ctx.ws.objectDirs.map(alternateOf).map((d) =>
        `if ! test -d ${d}; then echo "missing ${d}"; elif touch ${d}/x 2>/dev/null; then echo "writable ${d}"; else echo "refused ${d}"; fi`
      ),
    ].join("\n");
    const r = await ctx.run(ctx.launch("a", ["sh", "-c", script]));
    ok(r);
    assert.deepEqual(r.stdout.trimEnd().split("\n"), [
      ...[...guarded, `${admin}/info/exclude`].map((f) => `refused ${f}`),
      "gitfile kept",
      "config kept",
      "info refused",
      "admin writable",
      "fork writable",
      "mknod refused",
      ...ctx.ws.objectDirs.map(alternateOf).map((d) => `refused ${d}`),
    ]);
    assert.deepEqual(guarded.map(text), before);
    assert.equal(text(`${admin}/info/exclude`), exclude);
    assert.equal(exists(`${fork}/null`), false);
    // Capture's own check agrees: the admin files are as splitfs wrote them.
    assert.equal(ctx.ws.capture("a").files, 1);
    await noLeftovers(ctx);
  });
}

Deno.test({
  name: "kit container: no packed-refs, none bound, and git still commits",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const admin = ctx.admin("a");
  assert.equal(exists(`${admin}/packed-refs`), false);
  const r = await ctx.run(ctx.launch("a", [
    "sh",
    "-c",
    "git -c user.name=k -c user.email=k@x commit -q --allow-empty -m e && git rev-parse HEAD",
  ]));
  const exit = ok(r);
  assert.equal(exit.code, 0, r.stderr);
  assert.ok(!exit.mounts.some((m: { role: string }) => m.role === "admin packed-refs"));
  assert.equal(text(`${admin}/refs/heads/marsh-split`), r.stdout);
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: nothing of the project is mounted but the fork, its admin dir and objects",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy", labels: ["a", "b"] });
  const split = ctx.ws.dirPath;
  const r = await ctx.run(ctx.launch("a", [
    "sh",
    "-c",
    [
      `ls -A ${ctx.sb.root}`,
      "echo --",
      `ls -A ${ctx.sb.root}/.git 2>/dev/null || echo "no .git"`,
      `ls -A ${ctx.sb.root}/.marsh`,
      "echo --",
      `ls -A ${split}`,
      "echo --",
      `ls -A ${split}/.admin`,
      "echo --",
      `cat ${ctx.sb.root}/README.md 2>/dev/null || echo "no README"`,
      `ls ${ctx.sb.outside} 2>/dev/null || echo "no outside"`,
      `ls ${ctx.sb.home} 2>/dev/null || echo "no home"`,
    ].join("\n"),
  ]));
  ok(r);
  assert.equal(
    r.stdout,
    [
      // The user's objects are at the name the alternates use (protocol/fork_view.ts).
      ".marsh",
      "--",
      "no .git",
      "git-objects",
      "split",
      "--",
      ".admin",
      "a",
      "store.git",
      "--",
      "a",
      "--",
      "no README",
      "no outside",
      "no home",
      "",
    ].join("\n"),
  );
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: network none has only lo; exit codes pass through",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const r = await ctx.run(ctx.launch("a", ["sh", "-c", "ls /sys/class/net; exit 3"]));
  const exit = ok(r);
  assert.equal(r.stdout, "lo\n");
  assert.equal(exit.code, 3);
  assert.equal(exit.signal, null);
  await noLeftovers(ctx);
});

Deno.test({
  name:
    "kit container: env is what the daemon forwards, checked again, plus HOME and MARSH_JOB; an entrypoint gets argv[1..]",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const r = await ctx.run(ctx.launch("a", ["fixture", 'echo "$0 $1"; env', "zero", "one"], {
    kit: { name: "fixture", entrypoint: ["sh", "-c"], env: ["FOO", "ABSENT"] },
  }));
  const exit = ok(r);
  assert.equal(exit.code, 0, r.stderr);
  const [first, ...env] = r.stdout.trimEnd().split("\n");
  assert.equal(first, "zero one");
  const names = new Map(env.map((e) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]));
  assert.equal(names.get("FOO"), "foo");
  assert.equal(names.get("HOME"), "/root");
  assert.equal(names.get("MARSH_JOB"), ctx.job);
  // Forwarded by the daemon; a credential or a reserved name never passes, whoever sends it.
  assert.equal(names.get("BAZ"), "baz");
  assert.equal(names.has("GITHUB_TOKEN"), false);
  assert.equal(names.has("MARSH_X"), false);
  assert.equal(names.has("ABSENT"), false);
  // The image's PATH, and what Docker and the shell add themselves.
  assert.deepEqual(
    [...names.keys()].sort(),
    ["BAZ", "FOO", "HOME", "HOSTNAME", "MARSH_JOB", "PATH", "PWD", "SHLVL"],
  );
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: the spool reaches stdin and is closed; no spool is empty stdin",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const spool = `${ctx.control}/spool`;
  const bytes = crypto.getRandomValues(new Uint8Array(65_536));
  const big = new Uint8Array(3 * MiB + 17);
  for (let i = 0; i < big.length; i += bytes.length) big.set(bytes.subarray(0, big.length - i), i);
  Deno.writeFileSync(spool, big, { mode: 0o600 });
  const md5 = createHash("md5").update(big).digest("hex");
  const r = await ctx.run(
    ctx.launch("a", ["sh", "-c", "md5sum | cut -d' ' -f1; wc -c < /dev/null"], {
      stdin: spool,
    }),
  );
  assert.equal(ok(r).code, 0, r.stderr);
  assert.equal(r.stdout, `${md5}\n0\n`);
  // A command that never reads its stdin is not held up by it.
  const unread = await ctx.run(ctx.launch("a", ["sh", "-c", "echo done"], { stdin: spool }));
  assert.equal(ok(unread).code, 0);
  assert.equal(unread.stdout, "done\n");
  const empty = await ctx.run(ctx.launch("a", ["sh", "-c", "cat; echo end"]));
  assert.equal(ok(empty).code, 0);
  assert.equal(empty.stdout, "end\n");
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a 20 MiB writer stops at a 16 MiB output limit and is removed",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const launch = ctx.launch("a", [
    "sh",
    "-c",
    "head -c 10485760 /dev/zero; head -c 10485760 /dev/zero >&2; sleep 30",
  ]);
  const r = await ctx.run(launch, { graceMs: 2_000 });
  const exit = ok(r);
  assert.equal(exit.outputLimit, true);
  assert.equal(exit.stdoutBytes + exit.stderrBytes, 16 * MiB);
  assert.equal(Deno.statSync(launch.stdout).size + Deno.statSync(launch.stderr).size, 16 * MiB);
  assert.equal(exit.signal, "SIGINT");
  assert.equal(exit.removed, true);
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: the wall clock stops a sleeper",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const t0 = Date.now();
  const r = await ctx.run(ctx.launch("a", ["sh", "-c", "sleep 30"], { kit: { wallS: 1 } }));
  const exit = ok(r);
  assert.equal(exit.wall, true);
  assert.equal(exit.cancelled, false);
  assert.equal(exit.signal, "SIGINT");
  // Far below the 30 s sleep: the stop, not the command, ended it.
  assert.ok(Date.now() - t0 < 20_000);
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: abort sends SIGINT, then SIGKILL after the grace; both remove it",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  // The abort comes once the command runs (its first line), not at a fixed
  // time: a loaded engine may take longer than any fixed time to start it.
  const soft = await ctx.run(ctx.launch("a", ["sh", "-c", "echo started; sleep 30"]), {
    abortAfterOutputMs: 200,
  });
  assert.equal(ok(soft).cancelled, true);
  assert.equal(ok(soft).signal, "SIGINT");
  const hard = await ctx.run(
    ctx.launch("a", ["sh", "-c", "trap '' INT; echo started; sleep 30; echo survived"]),
    { abortAfterOutputMs: 200, graceMs: 500 },
  );
  assert.equal(ok(hard).cancelled, true);
  assert.equal(ok(hard).signal, "SIGKILL");
  assert.equal(hard.stdout, "started\n");
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a missing source, image or file fails the launch and leaves nothing",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const missing = await ctx.run(ctx.launch("a", ["sh", "-c", "true"], {
    objectDirs: [...ctx.ws.objectDirs, `${ctx.sb.top}/no-such-objects`],
  }));
  assert.equal(missing.reply.error?.name, "KitLaunchError");
  assert.match(missing.reply.error!.message, /object dir .*no-such-objects does not exist/);
  const noImage = await ctx.run(ctx.launch("a", ["sh", "-c", "true"], {
    kit: { image: "marsh-kit/no-such-kit:000000000000" },
  }));
  assert.equal(noImage.reply.error?.name, "KitLaunchError");
  assert.match(noImage.reply.error!.message, /no image/);
  const taken = ctx.launch("a", ["sh", "-c", "true"]);
  Deno.writeTextFileSync(taken.stdout, "already here");
  const r = await ctx.run(taken);
  assert.equal(r.reply.error?.name, "KitLaunchError");
  assert.match(r.reply.error!.message, /cannot open the stdout file/);
  assert.equal(text(taken.stdout), "already here");
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a real overlay mount as the fork (mount -t overlay)",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const top = `${ctx.sb.top}/ovl`;
  for (const d of ["lower", "upper", "work", "fork"]) {
    Deno.mkdirSync(`${top}/${d}`, { recursive: true });
  }
  Deno.writeTextFileSync(`${top}/lower/a.txt`, "lower\n");
  await runTool("mount", [
    "-t",
    "overlay",
    "overlay",
    "-o",
    `lowerdir=${top}/lower,upperdir=${top}/upper,workdir=${top}/work`,
    `${top}/fork`,
  ], { home: ctx.sb.home });
  try {
    const r = await ctx.run(ctx.launch("a", [
      "sh",
      "-c",
      `cat a.txt; echo changed > a.txt; echo n > n.txt; awk '$5 == "${top}/fork" ` +
      `{ for (i = 7; i <= NF; i++) if ($i == "-") { print $(i + 1); break } }' /proc/self/mountinfo`,
    ], { fork: `${top}/fork`, cwd: `${top}/fork`, admin: null, objectDirs: [] }));
    const exit = ok(r);
    assert.equal(exit.code, 0, r.stderr);
    assert.equal(r.stdout, "lower\noverlay\n");
    assert.equal(text(`${top}/upper/a.txt`), "changed\n");
    assert.equal(text(`${top}/upper/n.txt`), "n\n");
    assert.equal(text(`${top}/lower/a.txt`), "lower\n");
    assert.equal(text(`${top}/fork/a.txt`), "changed\n");
  } finally {
    await runTool("umount", [`${top}/fork`], { home: ctx.sb.home });
  }
  await noLeftovers(ctx);
});

Deno.test({
  name:
    "kit container: an image's config is read once; removed since, the launch is refused as before",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  // An image of its own (a copy of the fixture's with one more label), named by its id as
  // the daemon names a Kit's image.
  const made = (await dockerCli(ctx.socket, ["create", ctx.image, "true"])).trim();
  let image: string;
  try {
    image = (await dockerCli(ctx.socket, [
      "commit",
      "--change",
      `LABEL marsh.test=${ctx.job}`,
      made,
    ])).trim();
  } finally {
    await dockerCli(ctx.socket, ["rm", "-f", made]);
  }
  try {
    assert.match(image, /^sha256:[0-9a-f]{64}$/);
    const launch = ctx.launch("a", ["sh", "-c", "true"], { kit: { image } });
    const dir = launch.stdout.slice(0, launch.stdout.lastIndexOf("/"));
    Deno.writeTextFileSync(`${dir}/launch.json`, JSON.stringify(launch));
    // One process, two launches, the image removed between them.
    const r = await driver(ctx.socket, ctx.control, ["rmi-between", `${dir}/launch.json`]);
    assert.equal(r.error?.name, "KitLaunchError");
    assert.equal(r.error?.message, `kit sh: the engine has no image ${image}`);
    // The second launch did not ask for the config again: the create found the image gone.
    assert.match(r.error?.cause ?? "", /^DockerApiError: create container /);
  } finally {
    await dockerCli(ctx.socket, ["rmi", "-f", image]).catch((error: unknown) => {
      // Removed by the driver, as it should be.
      assert.match(String(error), /No such image/);
    });
  }
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a run removes every container labelled with its attempt, not only its own",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const launch = ctx.launch("a", ["sh", "-c", "true"]);
  // Another container of the same attempt (an earlier create whose answer was lost, say).
  const stray = (await dockerCli(ctx.socket, [
    "create",
    "--label",
    `marsh.attempt=${launch.attempt}`,
    "--label",
    `marsh.job=${ctx.job}`,
    ctx.image,
    "true",
  ])).trim();
  const r = await ctx.run(launch);
  assert.equal(ok(r).code, 0, r.stderr);
  await assert.rejects(dockerCli(ctx.socket, ["inspect", stray]), /No such/);
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: leftovers are found by label (marsh-made only) and removed verified",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const kit = `left-${ctx.job}`;
  const made = (await dockerCli(ctx.socket, [
    "create",
    "--label",
    `marsh.attempt=${ctx.job}-x`,
    "--label",
    `marsh.job=${ctx.job}`,
    "--label",
    `marsh.kit=${kit}`,
    ctx.image,
    "true",
  ])).trim();
  // Not made by marsh: the kit label alone (an image label, say) does not count.
  const foreign = (await dockerCli(ctx.socket, [
    "create",
    "--label",
    `marsh.kit=${kit}`,
    ctx.image,
    "true",
  ])).trim();
  try {
    const found = await driver(ctx.socket, ctx.control, ["leftovers", `marsh.kit=${kit}`]);
    assert.deepEqual(found.ok.map((c: { id: string }) => c.id), [made]);
    const removed = await driver(ctx.socket, ctx.control, ["remove", made, "10000"]);
    assert.equal(removed.ok, true);
    await assert.rejects(dockerCli(ctx.socket, ["inspect", made]), /No such/);
  } finally {
    await dockerCli(ctx.socket, ["rm", "-f", foreign]);
  }
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a removal that cannot be verified is a ContainerNotRemovedError",
  permissions: perms,
}, async () => {
  using sb = sandbox("marsh-kit-test-");
  const control = `${sb.top}/control`;
  Deno.mkdirSync(control);
  const r = await driver(`${control}/no-engine.sock`, control, ["remove", "0123456789ab", "300"]);
  assert.equal(r.error?.name, "ContainerNotRemovedError");
  assert.equal(r.error?.containerId, "0123456789ab");
  assert.match(r.error!.message, /no Docker engine answers/);
});

// The job capability: /run/marsh in a real container.

/**
 * The in-job client stand-in (`marsh.js`): one request on `cap.sock`, the
 * answer on stdout. The link runs it with `JOB_CLIENT_FLAGS`, so this also
 * shows those grants reach the socket.
 */
const CLIENT_JS = `
const conn = await Deno.connect({ transport: "unix", path: "${CAP_SOCKET}" });
const line = JSON.stringify({ job: Deno.env.get("MARSH_JOB"), args: Deno.args }) + "\\n";
await conn.write(new TextEncoder().encode(line));
let got = "";
const buf = new Uint8Array(4096);
for (let n; (n = await conn.read(buf)) !== null;) got += new TextDecoder().decode(buf.subarray(0, n));
console.log(got.trimEnd());
`;

/** A host listener on a Unix socket: answers `count` one-line requests with `pong LINE`, prints each. */
const LISTENER_JS = `
const [path, count] = Deno.args;
const listener = Deno.listen({ transport: "unix", path });
console.log("ready");
const dec = new TextDecoder();
for (let i = 0; i < Number(count); i++) {
  const conn = await listener.accept();
  let got = "";
  const buf = new Uint8Array(4096);
  while (!got.includes("\\n")) {
    const n = await conn.read(buf);
    if (n === null) break;
    got += dec.decode(buf.subarray(0, n));
  }
  console.log(got.trimEnd());
  await conn.write(new TextEncoder().encode("pong " + got));
  conn.close();
}
listener.close();
`;

/** The listener as a child process: its own exact `unix:` grant, since the test runner has no net. */
class Listener implements AsyncDisposable {
  readonly #child: Deno.ChildProcess;
  readonly #lines: AsyncIterator<string>;

  private constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#lines = (async function* () {
      let buf = "";
      for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
        buf += chunk;
        for (let i; (i = buf.indexOf("\n")) >= 0; buf = buf.slice(i + 1)) yield buf.slice(0, i);
      }
    })();
  }

  static async start(dir: string, path: string, count: number): Promise<Listener> {
    const script = `${dir}/listener.js`;
    Deno.writeTextFileSync(script, LISTENER_JS);
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        "--quiet",
        "--no-prompt",
        "--no-config",
        `--allow-net=unix:${path}`,
        `--allow-read=${path}`,
        `--allow-write=${path}`,
        script,
        path,
        String(count),
      ],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const l = new Listener(child);
    assert.equal(await l.line(), "ready");
    return l;
  }

  /** The next line it printed. */
  async line(): Promise<string> {
    const r = await this.#lines.next();
    if (r.done) throw new Error("the listener ended");
    return r.value;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    try {
      this.#child.kill("SIGKILL");
    } catch (error) {
      // It exited by itself after its last request.
      if (!(error instanceof TypeError)) throw error;
    }
    await this.#child.status;
    await this.#lines.return?.();
  }
}

/**
 * A cap dir as the daemon makes it, under the attempt's dir (the worker
 * may write only under the control dir): `bin/marsh`, `bin/fixture`,
 * `link`, `context.md`, the three placeholders; the socket beside it.
 */
function makeCap(ctx: Ctx, launch: KitLaunch, opts: { placeholders?: string[] } = {}): KitCap {
  const attemptDir = launch.stdout.slice(0, launch.stdout.lastIndexOf("/"));
  const dir = `${attemptDir}/cap`;
  Deno.mkdirSync(`${dir}/${CAP_FILES.bin}`, { recursive: true, mode: 0o755 });
  Deno.chmodSync(dir, 0o755);
  for (const name of ["marsh", "fixture"]) {
    Deno.writeTextFileSync(`${dir}/${CAP_FILES.bin}/${name}`, stubScript(name), { mode: 0o755 });
  }
  Deno.writeTextFileSync(`${dir}/${CAP_FILES.link}`, linkScript("fixture"), { mode: 0o755 });
  Deno.writeTextFileSync(`${dir}/${CAP_FILES.context}`, "# context\n", { mode: 0o644 });
  for (const p of opts.placeholders ?? [CAP_FILES.socket, CAP_FILES.deno, CAP_FILES.client]) {
    Deno.writeFileSync(`${dir}/${p}`, new Uint8Array(), { mode: 0o644 });
  }
  const client = `${attemptDir}/marsh.js`;
  Deno.writeTextFileSync(client, CLIENT_JS, { mode: 0o644 });
  return {
    dir,
    socket: `${attemptDir}/cap.sock`,
    deno: Deno.execPath(),
    client,
    job: {
      version: 1,
      job: ctx.job,
      name: "fixture",
      spawn: ["fixture"],
      registered: ["fixture"],
      socket: CAP_SOCKET,
      limits: { pool: 4, depth: 3, same_kit: 2, fan_out: 8, total: 64 },
    },
    envKey: TEST_KEY_HEX,
  };
}

/** A launch of the fixture kit (`sh -c SCRIPT`) with a capability. */
function capLaunch(ctx: Ctx, script: string): { launch: KitLaunch; cap: KitCap } {
  const base = ctx.launch("a", ["fixture", script], {
    kit: { name: "fixture", entrypoint: ["sh", "-c"], env: ["FOO"] },
  });
  const cap = makeCap(ctx, base);
  return { launch: { ...base, cap }, cap };
}

Deno.test({
  name:
    "kit container: /run/marsh is bound read-only with job.json, PATH, MARSH_ENTRY, deno and a socket that answers",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  const { launch, cap } = capLaunch(
    ctx,
    [
      `touch /run/marsh/x 2>/dev/null && echo "cap writable" || echo "cap read-only"`,
      `mkdir /run/marsh/bin/x 2>/dev/null && echo "bin writable" || echo "bin read-only"`,
      `(echo junk >> /run/marsh/job.json) 2>/dev/null && echo "job.json writable" || echo "job.json read-only"`,
      `rm -f /run/marsh/cap.sock 2>/dev/null && echo "socket removed" || echo "socket kept"`,
      `(echo junk >> /run/marsh/marsh.js) 2>/dev/null && echo "client writable" || echo "client read-only"`,
      `echo "PATH=$PATH"`,
      `echo "MARSH_ENTRY=\${MARSH_ENTRY-unset}"`,
      `echo "MARSH_JOB=\${MARSH_JOB-unset}"`,
      "command -v marsh",
      "/run/marsh/deno --version | head -n 1",
      "cat /run/marsh/job.json",
      "marsh hello world",
    ].join("\n"),
  );
  await using listener = await Listener.start(ctx.sb.top, cap.socket, 1);
  const r = await ctx.run(launch);
  const exit = ok(r);
  assert.equal(exit.code, 0, r.stderr);
  const image = JSON.parse(await dockerCli(ctx.socket, ["image", "inspect", ctx.image]))[0];
  const path = jobPath(imagePath(image.Config.Env));
  assert.ok(path.startsWith("/run/marsh/bin:/"), path);
  const lines = r.stdout.trimEnd().split("\n");
  assert.deepEqual(lines.slice(0, 9), [
    "cap read-only",
    "bin read-only",
    "job.json read-only",
    "socket kept",
    "client read-only",
    `PATH=${path}`,
    "MARSH_ENTRY=1",
    `MARSH_JOB=${ctx.job}`,
    "/run/marsh/bin/marsh",
  ]);
  assert.match(lines[9]!, new RegExp(`^deno ${Deno.version.deno.replaceAll(".", "\\.")} `));
  // job.json: the daemon's part plus the starting PATH, as written on the host.
  const inside: JobJson = JSON.parse(lines[10]!);
  assert.equal(inside.job, ctx.job);
  assert.equal(inside.path, path);
  assert.ok(inside.path.startsWith("/run/marsh/bin:"));
  // env: every starting variable digested under the launch's key (the image's ENV
  // too), "" for what Docker and marsh set; forwarded: what the job received.
  const key = new Uint8Array(Buffer.from(TEST_KEY_HEX, "hex"));
  const expected: Record<string, string> = {};
  for (const e of image.Config.Env as string[]) {
    const name = e.slice(0, e.indexOf("="));
    expected[name] = envDigest(key, name, e.slice(e.indexOf("=") + 1));
  }
  Object.assign(expected, {
    BAZ: envDigest(key, "BAZ", "baz"),
    FOO: envDigest(key, "FOO", "foo"),
    HOME: "",
    HOSTNAME: "",
    MARSH_ENTRY: "",
    MARSH_JOB: "",
    PATH: "",
  });
  assert.deepEqual(inside.env, expected);
  assert.ok(Object.values(inside.env).every((d) => /^([0-9a-f]{64})?$/.test(d)));
  assert.deepEqual(inside.forwarded, ["BAZ", "FOO"]);
  assert.deepEqual(inside, { ...cap.job, path, env: expected, forwarded: ["BAZ", "FOO"] });
  assert.ok(!lines.join("\n").includes(TEST_KEY_HEX), "the key is not in the container");
  assert.deepEqual(Object.keys(inside), [
    "version",
    "job",
    "name",
    "spawn",
    "registered",
    "socket",
    "path",
    "limits",
    "env",
    "forwarded",
  ]);
  const onHost = `${cap.dir}/${CAP_FILES.jobJson}`;
  assert.equal(Deno.statSync(onHost).mode! & 0o777, 0o644);
  assert.deepEqual(JSON.parse(text(onHost)), inside);
  // stub -> link -> /run/marsh/deno -> marsh.js -> cap.sock -> the host listener, and back.
  const request = { job: ctx.job, args: ["--link=marsh", "hello", "world"] };
  assert.equal(lines[11], `pong ${JSON.stringify(request)}`);
  assert.equal(lines.length, 12, r.stdout);
  assert.deepEqual(JSON.parse(await listener.line()), request);
  assert.deepEqual(
    exit.mounts.slice(-4).map((m: { source: string; target: string; readOnly: boolean }) => [
      m.source,
      m.target,
      m.readOnly,
    ]),
    [
      [cap.dir, "/run/marsh", true],
      [cap.socket, "/run/marsh/cap.sock", true],
      [cap.deno, "/run/marsh/deno", true],
      [cap.client, "/run/marsh/marsh.js", true],
    ],
  );
  // Nothing the container did reached the cap dir.
  assert.deepEqual(
    [...Deno.readDirSync(cap.dir)].map((e) => e.name).sort(),
    ["bin", "cap.sock", "context.md", "deno", "job.json", "link", "marsh.js"],
  );
  assert.equal(Deno.statSync(`${cap.dir}/${CAP_FILES.socket}`).size, 0);
  await noLeftovers(ctx);
});

Deno.test({
  name: "kit container: a /run/marsh that cannot be set up fails the launch and leaves nothing",
  permissions: perms,
}, async () => {
  await using ctx = await setup({ forks: "copy" });
  // job.json is there already: never overwritten, no container.
  const taken = capLaunch(ctx, "echo ran");
  const jobJsonPath = `${taken.cap.dir}/${CAP_FILES.jobJson}`;
  Deno.writeTextFileSync(jobJsonPath, "{}");
  const r1 = await ctx.run(taken.launch);
  assert.equal(r1.reply.error?.name, "KitLaunchError");
  assert.match(r1.reply.error!.message, /cannot write the job capability's ".*\/job\.json": /);
  assert.equal(text(jobJsonPath), "{}");
  assert.equal(r1.stdout, "");
  // No socket where the daemon said: the engine finds no source.
  const noSocket = capLaunch(ctx, "echo ran");
  const r2 = await ctx.run(noSocket.launch);
  assert.equal(r2.reply.error?.name, "KitLaunchError");
  assert.match(r2.reply.error!.message, /the capability socket .*cap\.sock does not exist/);
  assert.equal(r2.stdout, "");
  // A cap dir without its placeholders: the engine cannot bind over them in a read-only dir.
  const base = ctx.launch("a", ["fixture", "echo ran"], {
    kit: { name: "fixture", entrypoint: ["sh", "-c"] },
  });
  const bare = makeCap(ctx, base, { placeholders: [] });
  await using _listener = await Listener.start(ctx.sb.top, bare.socket, 1);
  const r3 = await ctx.run({ ...base, cap: bare });
  assert.equal(r3.reply.error?.name, "KitLaunchError", JSON.stringify(r3.reply));
  assert.match(r3.reply.error!.message, /did not start: .*\/run\/marsh\/.*read-only file system/s);
  assert.equal(r3.stdout, "");
  // A cap dir that does not exist: job.json cannot be written.
  const gone = capLaunch(ctx, "echo ran");
  Deno.removeSync(gone.cap.dir, { recursive: true });
  const r4 = await ctx.run(gone.launch);
  assert.equal(r4.reply.error?.name, "KitLaunchError");
  assert.match(r4.reply.error!.message, /cannot write the job capability's/);
  await noLeftovers(ctx);
});

// Without an engine: how a launch becomes a container's command, env and labels.

function bare(over: Over = {}): KitLaunch {
  const { kit, ...rest } = over;
  return {
    job: "j",
    attempt: "at",
    split: "s",
    label: "a",
    kit: {
      name: "claude",
      image: "i",
      entrypoint: null,
      network: "none",
      env: ["ANTHROPIC_API_KEY", "HOME", "MARSH_X", "PATH", "LANG"],
      wallS: 1,
      home: "/h",
      ...kit,
    },
    argv: ["claude", "-p", "x"],
    env: {
      ANTHROPIC_API_KEY: "k",
      GITHUB_TOKEN: "t",
      HOME: "/host",
      MARSH_X: "1",
      PATH: "/bin",
      OTHER: "o",
    },
    fork: "/p/f",
    cwd: "/p/f",
    admin: null,
    objectDirs: [],
    stdin: null,
    stdout: "/c/o",
    stderr: "/c/e",
    outputLimit: 1,
    user: null,
    cap: null,
    ...rest,
  };
}

Deno.test({
  name: "kitCommand: argv[0] is the kit; an entrypoint gets argv[1..]",
  permissions: "none",
}, () => {
  assert.deepEqual(kitCommand(bare()), { entrypoint: null, cmd: ["claude", "-p", "x"] });
  assert.deepEqual(
    kitCommand(bare({ kit: { entrypoint: ["/usr/bin/claude", "--yes"] } })),
    { entrypoint: ["/usr/bin/claude", "--yes"], cmd: ["-p", "x"] },
  );
  assert.deepEqual(kitCommand(bare({ kit: { entrypoint: [] } })), {
    entrypoint: [],
    cmd: ["-p", "x"],
  });
  assert.throws(() => kitCommand(bare({ argv: ["codex", "x"] })), { name: "KitLaunchError" });
});

Deno.test({
  name: "kitEnv and kitLabels: allowed names only, reserved ones never",
  permissions: "none",
}, () => {
  // What the daemon forwards passes, a Kit's --env name whatever it looks like; never a
  // credential it did not register, nor HOME, PATH or MARSH_*.
  assert.deepEqual(kitEnv(bare(), "/root", "/usr/bin:/bin"), [
    "ANTHROPIC_API_KEY=k",
    "OTHER=o",
    "HOME=/root",
    "MARSH_JOB=j",
  ]);
  assert.deepEqual(kitLabels(bare()), {
    "marsh.job": "j",
    "marsh.attempt": "at",
    "marsh.split": "s",
    "marsh.label": "a",
    "marsh.kit": "claude",
  });
});

const UNIT_CAP: KitCap = {
  dir: "/c/cap",
  socket: "/c/cap.sock",
  deno: "/opt/deno",
  client: "/opt/marsh.js",
  job: {
    version: 1,
    job: "j",
    name: "claude",
    spawn: ["claude"],
    registered: ["claude", "codex"],
    socket: CAP_SOCKET,
    limits: { pool: 1, depth: 3, same_kit: 2, fan_out: 8, total: 64 },
  },
  envKey: TEST_KEY_HEX,
};

Deno.test({
  name: "kitEnv with a job capability: PATH is /run/marsh/bin and the image's, MARSH_ENTRY=1",
  permissions: "none",
}, () => {
  assert.deepEqual(kitEnv(bare({ cap: UNIT_CAP }), "/root", "/usr/bin:/bin"), [
    "ANTHROPIC_API_KEY=k",
    "OTHER=o",
    "HOME=/root",
    "MARSH_JOB=j",
    "PATH=/run/marsh/bin:/usr/bin:/bin",
    "MARSH_ENTRY=1",
  ]);
  // No PATH in the image: Docker's default follows the links.
  assert.equal(
    kitEnv(bare({ cap: UNIT_CAP }), "/root", null)[4],
    "PATH=/run/marsh/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
  );
  assert.equal(imagePath(["A=1", "PATH=/a", "PATH=/b:/c"]), "/b:/c");
  assert.equal(imagePath(["PATHX=/a", "HOME=/h"]), null);
  assert.equal(imagePath(["PATH="]), null);
  assert.equal(imagePath([]), null);
  const record = { env: { LANG: "" }, forwarded: [] };
  assert.deepEqual(jobJson(UNIT_CAP, "/bin", record), {
    ...UNIT_CAP.job,
    path: "/run/marsh/bin:/bin",
    ...record,
  });
  assert.equal(Object.keys(jobJson(UNIT_CAP, "/bin", record))[6], "path");
});
