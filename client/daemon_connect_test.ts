/**
 * How the CLI finds and trusts the daemon's socket, through the real
 * launcher and CLI, against the stand-in daemon of `_fake_daemon.ts` (the
 * real daemon is built in parallel; autostarting it is tested end to end in
 * `tests/`).
 */
import assert from "node:assert/strict";
import { CliError } from "./cli_error.ts";
import { daemonLockFree, daemonSocket, JOB_SOCK_ENV } from "./daemon_connect.ts";
import {
  cliTestPermissions as permissions,
  FakeDaemon,
  manifest,
  marsh,
  tempHome,
} from "./_fake_daemon.ts";

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

Deno.test(
  { name: "a control dir others can reach is refused with the fix", permissions },
  async () => {
    await using home = await tempHome();
    await using daemon = await FakeDaemon.listen(`${home.path}/marshd.sock`);
    await Deno.chmod(home.path, 0o755);
    for (const args of [["splits"], ["status"], ["split", "-n", "-b", "a=true"]]) {
      const r = await marsh(args, { home: home.path, stdin: "null" });
      assert.equal(r.code, 2, args.join(" "));
      assert.equal(
        r.stderr,
        `marsh: the control dir ${home.path} has mode 0755, not 0700; run: chmod 700 ${home.path}\n`,
      );
    }
    assert.equal(daemon.connections.length, 0);
  },
);

Deno.test({ name: "a missing control dir is created 0700", permissions }, async () => {
  await using home = await tempHome();
  const dir = `${home.path}/state/marsh`;
  const r = await marsh(["status"], { home: dir, cwd: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal((await Deno.stat(dir)).mode! & 0o777, 0o700);
});

Deno.test({ name: "a socket others can reach is refused", permissions }, async () => {
  await using home = await tempHome();
  const sock = `${home.path}/marshd.sock`;
  await Deno.writeTextFile(sock, "", { mode: 0o644 });
  await Deno.chmod(sock, 0o644);
  const r = await marsh(["splits"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr,
    `marsh: the daemon socket ${sock} has mode 0644; others may reach it. Stop the daemon and remove it\n`,
  );
});

Deno.test({ name: "MARSH_SOCK is the socket used inside a branch", permissions }, async () => {
  await using home = await tempHome();
  await Deno.mkdir(`${home.path}/b`, { mode: 0o700 });
  const sock = `${home.path}/b/00.sock`;
  await using daemon = await FakeDaemon.listen(sock);
  const listing = (async () => {
    const conn = await daemon.accept();
    await conn.expect("splits.list");
    await conn.send({ v: 1, t: "splits", splits: [manifest("CHILD")] });
  })();
  const r = await marsh(["splits", "--json"], {
    home: home.path,
    stdin: "null",
    env: { MARSH_SOCK: sock },
  });
  await listing;
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), { splits: [manifest("CHILD")] });
  assert.equal(await exists(`${home.path}/marshd.sock`), false);
});

Deno.test({ name: "MARSH_SOCK with no daemon fails and starts none", permissions }, async () => {
  await using home = await tempHome();
  const sock = `${home.path}/b/03.sock`;
  const started = Date.now();
  const r = await marsh(["split", "-n", "-b", "a=true"], {
    home: home.path,
    stdin: "null",
    env: { MARSH_SOCK: sock },
  });
  assert.equal(r.code, 2);
  assert.equal(
    r.stderr,
    `marsh: no daemon answers at MARSH_SOCK=${sock}; the shell branch that set it has ended, or unset MARSH_SOCK to use your own daemon\n`,
  );
  assert.ok(Date.now() - started < 5_000, "it waited for a daemon to start");
  assert.deepEqual(await Array.fromAsync(Deno.readDir(home.path)), []);
});

Deno.test({ name: "status never starts a daemon", permissions }, async () => {
  await using home = await tempHome();
  let r = await marsh(["status"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.equal(r.text, `daemon: not running\ncontrol dir: ${home.path}\n`);
  r = await marsh(["status", "--json"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.text), { daemon: null });
  r = await marsh(["daemon", "status"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 1);
  assert.equal(r.text, "marshd: not running\n");
  r = await marsh(["daemon", "stop"], { home: home.path, stdin: "null" });
  assert.equal(r.code, 0);
  assert.equal(r.text, "marshd: not running\n");
  assert.deepEqual(await Array.fromAsync(Deno.readDir(home.path)), []);
});

const envOf = (vars: Record<string, string>) => ({ get: (k: string) => vars[k] });

Deno.test({ name: "MARSH_JOB_SOCK is a job's socket, taken as it is", permissions }, async () => {
  await using home = await tempHome();
  // Inside a container the socket is the host daemon's: its owner and mode are not ours to judge.
  const sock = `${home.path}/cap.sock`;
  await Deno.writeTextFile(sock, "", { mode: 0o666 });
  await Deno.chmod(sock, 0o666);
  await Deno.chmod(home.path, 0o755);
  // No HOME, no MARSH_HOME: the control dir is neither located nor created.
  assert.deepEqual(daemonSocket(envOf({ [JOB_SOCK_ENV]: sock })), {
    path: sock,
    home: "",
    branch: true,
    job: true,
  });
  // It wins over a branch socket and the control dir.
  assert.deepEqual(
    daemonSocket(envOf({ [JOB_SOCK_ENV]: sock, MARSH_SOCK: "/x/b/00.sock", MARSH_HOME: "/x" })),
    { path: sock, home: "", branch: true, job: true },
  );
  assert.throws(
    () => daemonSocket(envOf({ [JOB_SOCK_ENV]: "cap.sock" })),
    (e: unknown) =>
      e instanceof CliError && e.code === 2 &&
      e.message === "marsh: MARSH_JOB_SOCK must be an absolute path: cap.sock",
  );
});

Deno.test({
  name: "daemon stop waits for the daemon's lock, not only for its socket to go quiet",
  permissions: { read: true, write: true },
}, async () => {
  await using home = await tempHome();
  // No daemon ever ran here: nothing holds the lock.
  assert.equal(daemonLockFree(home.path), true);
  // A stopping daemon: its socket is gone, its process still holds marshd.lock (it ends its
  // children and its journal last). A start now would be refused, so it is not gone yet.
  const lock = await Deno.open(`${home.path}/marshd.lock`, {
    read: true,
    write: true,
    create: true,
    mode: 0o600,
  });
  await lock.lock(true);
  assert.equal(daemonLockFree(home.path), false);
  await lock.unlock();
  lock.close();
  assert.equal(daemonLockFree(home.path), true);
});
