import assert from "node:assert/strict";
import {
  DEFAULT_SOCKET,
  EngineError,
  enginePaths,
  engineSocket,
  parseDockerHost,
} from "./private_engine.ts";

function env(vars: Record<string, string>) {
  return { get: (k: string) => vars[k] };
}

Deno.test("DOCKER_HOST: unix:// with an absolute path only", () => {
  assert.equal(parseDockerHost("unix:///run/docker.sock"), "/run/docker.sock");
  for (
    const bad of [
      "tcp://127.0.0.1:2375",
      "ssh://me@host",
      "unix://relative.sock",
      "/run/docker.sock",
      "npipe:////./pipe/x",
    ]
  ) {
    assert.throws(() => parseDockerHost(bad), EngineError, bad);
  }
  assert.throws(() => engineSocket(env({ DOCKER_HOST: "tcp://h:1" })), /unix:\/\/\/path/);
});

Deno.test({
  name: "the socket: DOCKER_HOST, else the private engine when it runs, else the default",
  permissions: { read: true, write: true },
}, () => {
  const home = Deno.makeTempDirSync({ prefix: "marsh-eng-" });
  try {
    const p = enginePaths(home);
    assert.deepEqual(engineSocket(env({ DOCKER_HOST: "unix:///x.sock" }), home), {
      path: "/x.sock",
      source: "DOCKER_HOST",
    });
    assert.deepEqual(engineSocket(env({}), home), { path: DEFAULT_SOCKET, source: "default" });
    Deno.mkdirSync(p.dir);
    Deno.writeTextFileSync(p.socket, "");
    // A socket without a pidfile: the engine is not running.
    assert.equal(engineSocket(env({}), home).source, "default");
    Deno.writeTextFileSync(p.pidfile, "1\n");
    assert.deepEqual(engineSocket(env({}), home), { path: p.socket, source: "private" });
    // Without `home`, the control dir comes from the environment.
    assert.deepEqual(engineSocket(env({ MARSH_HOME: home })), {
      path: p.socket,
      source: "private",
    });
    assert.equal(engineSocket(env({})).source, "default");
    assert.equal(engineSocket(env({ DOCKER_HOST: "unix:///y.sock" }), home).path, "/y.sock");
  } finally {
    Deno.removeSync(home, { recursive: true });
  }
});

Deno.test("the exec root is short and differs per control dir", () => {
  const a = enginePaths(`/tmp/${"x".repeat(200)}`);
  const b = enginePaths("/tmp/other");
  assert.match(a.execRoot, /^\/run\/marsh-engine-[0-9a-f]{12}$/);
  assert.notEqual(a.execRoot, b.execRoot);
  // containerd's socket inside it stays far below the 107-byte limit.
  assert.ok(`${a.execRoot}/containerd/containerd.sock`.length < 80);
});
