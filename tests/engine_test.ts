/**
 * The private engine and `marsh kit build` against a real dockerd, through
 * the real CLI (`./marsh`): a private engine's life in its own control dir,
 * the fixture Kit built twice to the same id, run with no network, holding
 * only what was assembled; bad requests refused with status 2; and each
 * engine entrypoint refused outside its flags.
 *
 * The Kit tests use the engine {@linkcode ensureEngine} provides (see
 * `tests/_engine.ts`): a missing engine fails them, it never skips them.
 */

import assert from "node:assert/strict";
import { assembleRootfs } from "../docker/rootfs.ts";
import { engineFlags, kitBuildFlags } from "../docker/flags.ts";
import { enginePaths } from "../docker/private_engine.ts";
import { ROOT, show } from "./_acceptance.ts";
import { ensureBusybox } from "./_setup.ts";
import {
  cliEnv,
  dockerRun,
  ensureDockerd,
  ensureEngine,
  FIXTURE_KIT_ARGS,
  fixtureKit,
  inspectImage,
  listImages,
  marsh,
  withLock,
} from "./_engine.ts";

const PERMS: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const deno = Deno.env.get("MARSH_DENO") ?? Deno.execPath();

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

Deno.test({
  name: "a private engine starts once, reports itself, stops, and stopping again is a no-op",
  permissions: PERMS,
}, async () => {
  await ensureDockerd();
  // Short: the engine socket lives in it.
  const home = await Deno.makeTempDir({ dir: "/tmp", prefix: "marsh-e-" });
  const env = cliEnv({ MARSH_HOME: home });
  try {
    const first = await marsh(["engine", "start"], env);
    assert.equal(first.code, 0, show(first));
    const pid = /^engine started \(pid (\d+), dockerd \S+\)\nsocket: (\S+)\n$/.exec(first.stdout);
    assert.ok(pid, show(first));
    assert.equal(pid[2], `${home}/engine/docker.sock`);

    const again = await marsh(["engine", "start", "--json"], env);
    assert.equal(again.code, 0, show(again));
    const j = JSON.parse(again.stdout);
    assert.equal(j.started, false);
    assert.equal(j.pid, Number(pid[1]));

    const status = await marsh(["engine", "status"], env);
    assert.equal(status.code, 0, show(status));
    assert.match(status.stdout, /^engine: reachable \(dockerd \S+, API [\d.]+\)$/m);
    assert.match(
      status.stdout,
      new RegExp(`^socket: ${home}/engine/docker.sock \\(the private engine\\)$`, "m"),
    );
    assert.match(status.stdout, new RegExp(`^private engine: running \\(pid ${pid[1]}\\)`, "m"));
    const sj = JSON.parse((await marsh(["engine", "status", "--json"], env)).stdout);
    assert.equal(sj.reachable, true);
    assert.equal(sj.source, "private");
    assert.equal(sj.private.pid, Number(pid[1]));
    // DOCKER_HOST wins over the private engine.
    const other = JSON.parse(
      (await marsh(["engine", "status", "--json"], {
        ...env,
        DOCKER_HOST: "unix:///nonexistent.sock",
      })).stdout,
    );
    assert.equal(other.source, "DOCKER_HOST");
    assert.equal(other.reachable, false);

    const stop = await marsh(["engine", "stop"], env);
    assert.equal(stop.code, 0, show(stop));
    assert.equal(stop.stdout, `engine stopped (pid ${pid[1]})\n`);
    const ps = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", pid[1]!] }).output();
    const state = new TextDecoder().decode(ps.stdout).trim();
    assert.ok(!ps.success || state.startsWith("Z"), `dockerd still runs: ${state}`);
    assert.ok(!(await exists(`${home}/engine/dockerd.pid`)), "pidfile left");
    assert.ok(!(await exists(`${home}/engine/docker.sock`)), "socket left");
    assert.ok(!(await exists(enginePaths(home).execRoot)), "exec root left");

    const noop = await marsh(["engine", "stop"], env);
    assert.equal(noop.code, 0, show(noop));
    assert.equal(noop.stdout, "engine: not running (nothing to stop)\n");
    const down = await marsh(["engine", "status"], env);
    assert.equal(down.code, 1, show(down));
    assert.match(
      down.stdout,
      /^private engine: not running \(start it with `marsh engine start`\)$/m,
    );
  } finally {
    const r = await marsh(["engine", "stop"], env);
    await Deno.remove(home, { recursive: true });
    assert.equal(r.code, 0, show(r));
  }
});

Deno.test({
  name: "kit build makes the fixture Kit; building again gives the same id and imports nothing",
  permissions: PERMS,
}, async () => {
  const socket = await ensureEngine();
  await ensureBusybox();
  const home = await Deno.makeTempDir({ prefix: "marsh-home-" });
  const env = cliEnv({ MARSH_HOME: home, DOCKER_HOST: `unix://${socket}` });
  try {
    // Under the lock: another test file may be building the same Kit.
    const [a, b] = await withLock(
      async () => [await marsh(FIXTURE_KIT_ARGS, env), await marsh(FIXTURE_KIT_ARGS, env)],
    );
    assert.equal(a.code, 0, show(a));
    assert.match(a.stdout, /^sha256:[0-9a-f]{64}\n$/);
    const tag = /(marsh-kit\/fixture:[0-9a-f]{12})/.exec(a.stderr)?.[1];
    assert.ok(tag, show(a));
    assert.equal(b.code, 0, show(b));
    assert.equal(b.stdout, a.stdout);
    assert.equal(
      b.stderr,
      `marsh kit build: ${tag} is up to date, tagged marsh-kit/fixture:latest\n` +
        "next: marsh kits add fixture --image fixture\n",
    );

    const info = await inspectImage(socket, tag);
    assert.ok(info, `no image ${tag}`);
    assert.equal(`${info.id}\n`, a.stdout);
    assert.equal((info.layers as string[]).length, 1, "one layer");
    assert.equal((info.labels as Record<string, string>)["marsh.kit"], "fixture");
    assert.equal((await inspectImage(socket, "marsh-kit/fixture:latest"))?.id, info.id);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

/** Paths the engine adds to every container: mount points (`--init`'s included) and its own files. */
const ENGINE_ADDED = new Set([
  "/sbin/docker-init",
  "/usr/sbin/docker-init",
  "/.dockerenv",
  "/dev",
  "/proc",
  "/sys",
  "/etc/hostname",
  "/etc/hosts",
  "/etc/mtab",
  "/etc/resolv.conf",
]);

Deno.test({
  name: "the fixture Kit runs busybox and git with no network, and holds only what was assembled",
  permissions: PERMS,
}, async () => {
  const socket = await ensureEngine();
  const image = (await fixtureKit(socket)).id;
  const hi = await dockerRun(socket, image, ["sh", "-c", "echo hi; git --version"]);
  assert.equal(hi.code, 0, JSON.stringify(hi));
  assert.match(hi.stdout, /^hi\ngit version \d+\.\d+/);

  const net = await dockerRun(socket, image, ["cat", "/proc/net/dev"]);
  const ifaces = net.stdout.split("\n").slice(2).filter((l) => l.trim() !== "").map((l) =>
    l.split(":")[0]!.trim()
  );
  assert.deepEqual(ifaces, ["lo"], "only loopback: --network none");

  const who = await dockerRun(socket, image, ["sh", "-c", "id -un; ls -ld /home/kit /tmp"]);
  assert.match(
    who.stdout,
    /^root\ndrwxr-xr-x +\d+ kit +kit .*\/home\/kit\ndrwxrwxrwt .*\/tmp\n$/,
  );

  const found = await dockerRun(socket, image, ["find", "/", "-xdev"]);
  assert.equal(found.code, 0, JSON.stringify(found));
  const inImage = new Set(
    found.stdout.trim().split("\n").filter((p) => p !== "/" && !ENGINE_ADDED.has(p)),
  );
  const assembled = new Set(
    (await assembleRootfs({
      bins: ["git"],
      files: [],
      deno,
      path: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      cwd: ROOT,
    })).map((e) => `/${e.path}`),
  );
  assert.deepEqual(inImage, assembled);
  assert.ok(!inImage.has("/usr/share/doc") && !inImage.has("/usr/share"));
});

Deno.test({
  name:
    "a bad name, a missing --from-host, an unknown --bin or a tcp DOCKER_HOST: status 2, nothing built",
  permissions: PERMS,
}, async () => {
  const socket = await ensureEngine();
  const home = await Deno.makeTempDir({ prefix: "marsh-home-" });
  const env = cliEnv({ MARSH_HOME: home, DOCKER_HOST: `unix://${socket}` });
  const name = `nothing-${crypto.randomUUID().slice(0, 8)}`;
  try {
    const cases: [string[], RegExp, Record<string, string>?][] = [
      [
        ["Bad_Name", "--from-host"],
        /^marsh kit build: invalid kit name "Bad_Name": use 1-63 lowercase letters/,
      ],
      [[name], /^marsh kit build: --from-host is required: /],
      [
        [name, "--from-host", "--bin", "no-such-program-x"],
        /^marsh kit build: --bin "no-such-program-x": not found on PATH$/m,
      ],
      [
        [name, "--from-host", "--file", "nocolon"],
        /^marsh kit build: --file "nocolon": expected SRC:DST/,
      ],
      [
        [name, "--from-host"],
        /^marsh kit build: DOCKER_HOST=tcp:\/\/127.0.0.1:2375 is not supported/,
        {
          DOCKER_HOST: "tcp://127.0.0.1:2375",
        },
      ],
    ];
    for (const [args, message, extra] of cases) {
      const r = await marsh(["kit", "build", ...args], { ...env, ...extra });
      assert.equal(r.code, 2, show(r));
      assert.equal(r.stdout, "", show(r));
      assert.match(r.stderr, message, show(r));
    }
    assert.deepEqual(await listImages(socket, `marsh-kit/${name}`), []);

    // No engine at all: the message says how to get one.
    const none = await marsh(["kit", "build", name, "--from-host"], {
      ...env,
      DOCKER_HOST: `unix://${home}/absent.sock`,
    });
    assert.equal(none.code, 2, show(none));
    assert.match(none.stderr, /no Docker engine answers at .*absent\.sock .*`marsh engine start`/);
  } finally {
    await Deno.remove(home, { recursive: true });
  }
});

async function probe(flags: string[]): Promise<Record<string, string>> {
  const out = await new Deno.Command(deno, {
    args: [
      "run",
      ...flags,
      `--config=${ROOT}deno.json`,
      `${ROOT}tests/probes/capabilities.ts`,
      `${ROOT}README.md`,
    ],
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  return JSON.parse(new TextDecoder().decode(out.stdout));
}

Deno.test({
  name: "the engine process may use its control dir and sockets, and read no project file",
  permissions: PERMS,
}, async () => {
  const got = await probe(
    engineFlags("/tmp/marsh-probe-home", ["/tmp/marsh-probe-home/engine/docker.sock"]),
  );
  assert.equal(got.readProject, "refused");
  assert.equal(got.writeTmp, "refused");
  assert.equal(got.ffiLibc, "refused");
  assert.equal(got.net, "refused");
  // It starts dockerd and signals it by pid; Deno grants signals only with unscoped --allow-run.
  assert.equal(got.runGit, "granted");
});

Deno.test({
  name: "the kit build process may read host files and its socket, and run nothing",
  permissions: PERMS,
}, async () => {
  const got = await probe(kitBuildFlags("/tmp/marsh-probe.sock"));
  assert.equal(got.readProject, "granted");
  assert.equal(got.writeTmp, "refused");
  assert.equal(got.runGit, "refused");
  assert.equal(got.ffiLibc, "refused");
  assert.equal(got.net, "refused");
});
