/**
 * The in-job client as a Kit container runs it: bundled for real, run by
 * this Deno with exactly `JOB_CLIENT_FLAGS` (the socket grants moved to a
 * test socket: Deno scopes `--allow-net=unix:` to exact paths), from an
 * empty environment (`env -i`: no HOME, USER or PATH) with `MARSH_CAP_DIR`
 * pointing at a temp dir holding `job.json`, against the stand-in daemon of
 * `client/_fake_daemon.ts`.
 */
import assert from "node:assert/strict";
import { FakeDaemon, manifest } from "../client/_fake_daemon.ts";
import { CAP_SOCKET, JOB_CLIENT_FLAGS, type JobJson } from "../protocol/job_capability.ts";
import { bundleJobClient } from "./bundle.ts";

const permissions: Deno.PermissionOptions = { run: true, read: true, write: true, env: true };
const dec = new TextDecoder();

let bundled: Promise<string> | undefined;

/** One bundle for every test in this file (removed at exit with its dir). */
function bundle(): Promise<string> {
  bundled ??= (async () => {
    const dir = await Deno.makeTempDir({ prefix: "marsh-job-bundle-" });
    globalThis.addEventListener("unload", () => Deno.removeSync(dir, { recursive: true }));
    const out = `${dir}/marsh.js`;
    await bundleJobClient(Deno.execPath(), out);
    return out;
  })();
  return bundled;
}

/** A temp cap dir with a job.json whose socket is `cap.sock` in it. */
async function capDir(
  over: Partial<Record<keyof JobJson, unknown>> = {},
): Promise<AsyncDisposable & { path: string; socket: string }> {
  const path = await Deno.makeTempDir({ prefix: "marsh-cap-" });
  const socket = `${path}/cap.sock`;
  const job: Record<string, unknown> = {
    version: 1,
    job: "01JOB",
    name: "fixture",
    spawn: ["fixture"],
    registered: ["fixture", "claude"],
    socket,
    path: "/run/marsh/bin:/usr/bin:/bin",
    limits: { pool: 4, depth: 3, same_kit: 2, fan_out: 4, total: 16 },
    env: {},
    forwarded: [],
    ...over,
  };
  await Deno.writeTextFile(`${path}/job.json`, JSON.stringify(job));
  return {
    path,
    socket,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true });
    },
  };
}

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the bundle as the link does: `deno run JOB_CLIENT_FLAGS marsh.js ARGS`. */
async function job(
  args: readonly string[],
  cap: { path: string; socket: string },
  env: Record<string, string> = {},
  stdin?: string,
): Promise<Run> {
  const flags = JOB_CLIENT_FLAGS.map((f) => f.replace(CAP_SOCKET, cap.socket));
  assert.ok(flags.some((f) => f === `--allow-net=unix:${cap.socket}`));
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", ...flags, await bundle(), ...args],
    cwd: cap.path,
    clearEnv: true,
    env: { MARSH_CAP_DIR: cap.path, DENO_NO_UPDATE_CHECK: "1", ...env },
    stdin: stdin === undefined ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(new TextEncoder().encode(stdin));
    await w.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

Deno.test(
  { name: "the bundle is one JS file needing no npm or engine code", permissions },
  async () => {
    const text = await Deno.readTextFile(await bundle());
    assert.equal((await Deno.stat(await bundle())).mode! & 0o777, 0o644);
    assert.doesNotMatch(text, /from "npm:|dockerode|ssh2/);
    assert.doesNotMatch(text, /^\/\/ (engine|daemon|worker)\//m);
    assert.match(text, /runs through a link/);
  },
);

Deno.test(
  { name: "marsh splits reaches the job's socket; a refusal is the exit", permissions },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      await conn.expect("splits.list");
      await conn.send({
        v: 1,
        t: "error",
        code: 126,
        message: "a job may list only its own splits",
      });
      await conn.ended;
    })();
    const r = await job(["--link=marsh", "splits"], cap);
    await serve;
    assert.equal(r.stderr, "marsh splits: a job may list only its own splits\n");
    assert.equal(r.code, 126);
    assert.equal(r.stdout, "");
  },
);

Deno.test(
  { name: "marsh split ::: sends an argv branch and prints the handle", permissions },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      const create = await conn.expect("split.create");
      await conn.expect("spool.end");
      await conn.send({ v: 1, t: "split.accepted", id: "S1" });
      await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
      await conn.ended;
      return create;
    })();
    const r = await job(["--link=marsh", "split", ":::", "a", "fixture", "true"], cap);
    const create = await serve;
    assert.equal(r.code, 0, r.stderr);
    assert.equal(r.stdout, '{"marsh_split":1,"id":"S1"}\n');
    assert.deepEqual(create.branches, [{ kind: "argv", label: "a", argv: ["fixture", "true"] }]);
    assert.equal(create.cwd, await Deno.realPath(cap.path));
    assert.equal(create.spool, true);
    // From `env -i`: no HOME, and PATH from job.json.
    assert.equal(create.env.HOME, undefined);
    assert.equal(create.env.PATH, "/run/marsh/bin:/usr/bin:/bin");
  },
);
Deno.test(
  { name: "a job's split offers its environment with job.json's starting digests", permissions },
  async () => {
    const d1 = "1".repeat(64), d2 = "2".repeat(64);
    await using cap = await capDir({
      env: { IMG: d1, FOO: d2, HOME: "", PATH: "", HOSTNAME: "" },
      forwarded: ["FOO"],
    });
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      const create = await conn.expect("split.create");
      await conn.send({ v: 1, t: "split.done", id: "S1", code: 0, manifest: manifest("S1") });
      await conn.ended;
      return create;
    })();
    const r = await job(["--link=marsh", "split", "-n", ":::", "a", "fixture", "true"], cap, {
      IMG: "a",
      FOO: "1",
      NEW: "n",
      HOME: "/home/kit",
      HOSTNAME: "c0ffee",
    });
    const create = await serve;
    assert.equal(r.code, 0, r.stderr);
    // What Docker and marsh set is never offered; a received name carries no digest.
    assert.deepEqual(
      [create.env.IMG, create.env.FOO, create.env.NEW, create.env.HOME, create.env.HOSTNAME],
      ["a", "1", "n", undefined, undefined],
    );
    assert.equal(create.env.PATH, undefined);
    assert.deepEqual(create.envDigests, { IMG: d1 });
  },
);

Deno.test({
  name: "marsh join -- CMD finds CMD on job.json's PATH after env -i",
  permissions,
}, async () => {
  await using cap = await capDir();
  await using daemon = await FakeDaemon.listen(cap.socket);
  const serve = (async () => {
    const conn = await daemon.accept();
    const join = await conn.expect("split.join");
    await conn.send({ v: 1, t: "join.ready", manifest: manifest("S1"), env: { SPLIT_ID: "S1" } });
    await conn.send({ v: 1, t: "chunk", data: btoa("the rendering\n") });
    await conn.send({ v: 1, t: "join.rendered" });
    const release = await conn.expect("join.release");
    await conn.send({ v: 1, t: "join.released", removed: false, message: "split S1 kept" });
    await conn.ended;
    return { join, release };
  })();
  const r = await job(
    ["--link=marsh", "join", "--", "sh", "-c", 'cat; echo "id=$SPLIT_ID"; exit 3'],
    cap,
    {},
    '{"marsh_split":1,"id":"S1"}\n',
  );
  const { join, release } = await serve;
  assert.equal(r.stdout, "the rendering\nid=S1\n");
  assert.equal(r.stderr, "split S1 kept\n");
  assert.equal(r.code, 3);
  assert.equal(join.id, "S1");
  assert.equal(join.consumer, true);
  assert.equal(release.consumerStatus, 3);
});

Deno.test(
  { name: "the socket is job.json's whatever the environment says", permissions },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      await conn.expect("jobs.list");
      const doc = new TextEncoder().encode('{"schema":"marsh.jobs/v1","jobs":[]}\n');
      await conn.send({ v: 1, t: "chunk", data: doc.toBase64() });
      await conn.send({ v: 1, t: "jobs" });
      await conn.ended;
    })();
    const r = await job(["--link=marsh", "jobs", "--json"], cap, {
      MARSH_SOCK: "/nowhere/b/00.sock",
      MARSH_JOB_SOCK: "/nowhere/cap.sock",
      MARSH_HOME: "/nowhere",
      PATH: "/usr/bin:/bin",
    });
    await serve;
    assert.equal(r.code, 0, r.stderr);
    assert.deepEqual(JSON.parse(r.stdout), { schema: "marsh.jobs/v1", jobs: [] });
  },
);

Deno.test(
  { name: "no daemon on the socket: the capability was revoked (125)", permissions },
  async () => {
    await using cap = await capDir();
    for (const args of [["splits"], ["jobs"], ["split", ":::", "a", "fixture"]]) {
      const r = await job(["--link=marsh", ...args], cap);
      assert.equal(r.code, 125, args.join(" "));
      assert.equal(
        r.stderr,
        `marsh: no daemon answers at ${cap.socket}; this job's capability was revoked (the job ended or the daemon restarted)\n`,
      );
    }
    assert.deepEqual((await Array.fromAsync(Deno.readDir(cap.path))).map((e) => e.name), [
      "job.json",
    ]);
  },
);

Deno.test(
  { name: "registered names: unknown, outside the spawn set, child case", permissions },
  async () => {
    await using cap = await capDir();
    let r = await job(["--link=codex", "exec", "hi"], cap);
    assert.equal(r.code, 127);
    assert.equal(r.stderr, "marsh: codex is not a registered command\n");
    r = await job(["--link=claude", "-p", "hi"], cap);
    assert.equal(r.code, 126);
    assert.equal(
      r.stderr,
      "marsh: spawn refused: claude not in this job's spawn set (MARSH_SPAWN)\n",
    );
  },
);

Deno.test(
  { name: "the child case runs the name as a child job: process.run, stdio and exit", permissions },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      const run = await conn.expect("process.run");
      await conn.send({ v: 1, t: "process.started", job: "CHILD", warnings: [] });
      const stdin = await conn.expect("process.stdin");
      await conn.expect("process.stdin.end");
      const out = (stream: "stdout" | "stderr", text: string) =>
        conn.send({ v: 1, t: "process.out", stream, data: btoa(text) });
      await out("stdout", "child out\n");
      await out("stderr", "child err\n");
      await conn.send({
        v: 1,
        t: "process.exit",
        job: "CHILD",
        code: 7,
        signal: null,
        status: 7,
        cause: null,
      });
      await conn.ended;
      return { run, stdin: atob(stdin.data) };
    })();
    const r = await job(["--link=fixture", "sh", "-c", "x"], cap, {}, "to the child\n");
    const { run, stdin } = await serve;
    assert.deepEqual([r.code, r.stdout, r.stderr], [7, "child out\n", "child err\n"]);
    assert.deepEqual(
      [run.name, run.args, run.via, run.tty, run.spawn],
      ["fixture", ["sh", "-c", "x"], "link", false, {}],
    );
    assert.equal(stdin, "to the child\n");
    // A refusal is the daemon's status and message, with the CLI's prefix.
    const refuse = (async () => {
      const conn = await daemon.accept();
      await conn.expect("process.run");
      await conn.send({ v: 1, t: "error", code: 125, message: "fan-out limit 4" });
      await conn.ended;
    })();
    const refused = await job(["--link=fixture", "true"], cap);
    await refuse;
    assert.deepEqual([refused.code, refused.stdout, refused.stderr], [
      125,
      "",
      "marsh: fan-out limit 4\n",
    ]);
  },
);

Deno.test(
  { name: "the child case offers the job's environment with its starting digests", permissions },
  async () => {
    const d1 = "1".repeat(64);
    await using cap = await capDir({ env: { IMG: d1, FOO: d1, HOME: "" }, forwarded: ["FOO"] });
    await using daemon = await FakeDaemon.listen(cap.socket);
    const serve = (async () => {
      const conn = await daemon.accept();
      const run = await conn.expect("process.run");
      await conn.send({ v: 1, t: "error", code: 125, message: "stop here" });
      await conn.ended;
      return run;
    })();
    await job(["--link=fixture", "true"], cap, { IMG: "a", FOO: "1", HOME: "/h" });
    const run = await serve;
    assert.deepEqual([run.env.IMG, run.env.FOO, run.env.HOME], ["a", "1", undefined]);
    assert.deepEqual(run.envDigests, { IMG: d1 });
  },
);

Deno.test({ name: "without --link=NAME first the client refuses (2)", permissions }, async () => {
  await using cap = await capDir();
  for (
    const args of [[], ["splits"], ["--link=", "splits"], ["--link=Bad", "x"], [
      "x",
      "--link=marsh",
    ]]
  ) {
    const r = await job(args, cap);
    assert.equal(r.code, 2, JSON.stringify(args));
    assert.match(
      r.stderr,
      /^marsh: the in-job client runs through a link: \/run\/marsh\/bin\/NAME/,
    );
  }
});

Deno.test({ name: "a missing or malformed job.json is refused (2)", permissions }, async () => {
  await using cap = await capDir();
  let r = await job(["--link=marsh", "jobs"], cap, { MARSH_CAP_DIR: `${cap.path}/none` });
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr,
    `marsh: cannot read ${cap.path}/none/job.json: it does not exist; the in-job client runs only inside a Kit job\n`,
  );
  for (
    const [over, why] of [
      [{ version: 2 }, "unknown version 2"],
      [{ socket: "cap.sock" }, "socket is not an absolute path"],
      [{ spawn: "fixture" }, "spawn is not a list of names"],
    ] as const
  ) {
    await using bad = await capDir(over);
    r = await job(["--link=marsh", "jobs"], bad);
    assert.equal(r.code, 2);
    assert.equal(r.stderr, `marsh: ${bad.path}/job.json is not a job.json: ${why}\n`);
  }
});

Deno.test({ name: "marsh help lists the job's commands only", permissions }, async () => {
  await using cap = await capDir();
  const r = await job(["--link=marsh", "--help"], cap);
  assert.equal(r.code, 0, r.stderr);
  for (const cmd of ["split", "join", "splits", "jobs"]) {
    assert.match(r.stdout, new RegExp(`\n  ${cmd} `));
  }
  for (const cmd of ["status", "daemon", "engine", "kits", "kit", "workers", "gc", "diff"]) {
    assert.doesNotMatch(r.stdout, new RegExp(`\n  ${cmd} `));
  }
  const unknown = await job(["--link=marsh", "kits", "ls"], cap);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /^marsh: unknown command 'kits'/);
});

Deno.test(
  { name: "a link past the job's connection cap retries, then says so exactly (125)", permissions },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    let refused = 0;
    const serve = (async () => {
      for (;;) {
        const conn = await daemon.accept();
        await conn.send({
          v: 1,
          t: "error",
          code: 125,
          message: "too many concurrent daemon requests in this job",
        });
        await conn.close();
        if (++refused >= 3) break;
      }
      // A slot freed: the next try is served.
      const conn = await daemon.accept();
      await conn.expect("process.run");
      await conn.send({ v: 1, t: "process.started", job: "C", warnings: [] });
      await conn.send({
        v: 1,
        t: "process.exit",
        job: "C",
        code: 0,
        signal: null,
        status: 0,
        cause: null,
      });
      await conn.ended;
    })();
    const ok = await job(["--link=fixture", "true"], cap);
    await serve;
    // Then none frees: the refusal stands after the retries.
    const stop = Promise.withResolvers<null>();
    const refuse = (async () => {
      for (;;) {
        const c = await Promise.race([daemon.accept(), stop.promise]);
        if (c === null) return;
        await c.send({
          v: 1,
          t: "error",
          code: 125,
          message: "too many concurrent daemon requests in this job",
        });
        await c.close();
      }
    })();
    assert.deepEqual([ok.code, ok.stderr], [0, ""]);
    assert.ok(refused >= 3);
    const t0 = Date.now();
    const r = await job(["--link=fixture", "true"], cap);
    assert.deepEqual([r.code, r.stdout, r.stderr], [
      125,
      "",
      "marsh: too many concurrent daemon requests in this job\n",
    ]);
    assert.ok(Date.now() - t0 >= 2_000, "retried for a while first");
    stop.resolve(null);
    await refuse;
  },
);

Deno.test(
  {
    name: "a link with a terminal on stdin asks as a TTY child; the refusal is the daemon's",
    permissions,
  },
  async () => {
    await using cap = await capDir();
    await using daemon = await FakeDaemon.listen(cap.socket);
    const message =
      "interactive child jobs are not supported yet: fixture has a terminal on stdin or stdout; run it non-interactively with neither attached, e.g. `fixture ... </dev/null | cat`";
    const serve = (async () => {
      const conn = await daemon.accept();
      const run = await conn.expect("process.run");
      await conn.send({ v: 1, t: "error", code: 125, message });
      await conn.ended;
      return run;
    })();
    const flags = JOB_CLIENT_FLAGS.map((f) => f.replace(CAP_SOCKET, cap.socket));
    // `script` gives the client a terminal on stdin and stdout; its stderr stays ours.
    const line = [Deno.execPath(), "run", ...flags, await bundle(), "--link=fixture", "true"]
      .map((a) => `'${a}'`).join(" ");
    const out = await new Deno.Command("script", {
      args: ["-qec", `${line} 2>${cap.path}/err`, "/dev/null"],
      cwd: cap.path,
      clearEnv: true,
      env: { MARSH_CAP_DIR: cap.path, DENO_NO_UPDATE_CHECK: "1", PATH: "/usr/bin:/bin" },
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
    const run = await serve;
    assert.equal(run.tty, true);
    assert.equal(out.code, 125);
    assert.equal(Deno.readTextFileSync(`${cap.path}/err`), `marsh: ${message}\n`);
  },
);
