/**
 * The tests' Docker engine. {@linkcode ensureEngine} returns a socket that
 * answers: `DOCKER_HOST`'s when it does, else the shared test engine, a
 * private engine (`marsh engine start`) under {@linkcode TEST_ENGINE_HOME}
 * that is started once and then reused by every test file and run (stop it
 * with `MARSH_HOME=/tmp/marsh-test-engine ./marsh engine stop`). When
 * `dockerd` is missing and we are root it installs `docker.io` with apt
 * first, and {@linkcode fixtureKit} installs `busybox-static`
 * (`tests/_setup.ts`). It never skips: no engine is a test failure
 * (docs/engine.md "Tests on a bare machine").
 *
 * The test runner has no network permission, so engine API calls that a
 * test makes ({@linkcode dockerRun}) run in a child Deno process with
 * `--allow-net` scoped to the one socket; this module is that child's
 * entrypoint too.
 *
 * Needs `--allow-run`, `--allow-read`, `--allow-write` and `--allow-env`.
 *
 * @module
 */

import { finish, MARSH, type Result, ROOT, show } from "./_acceptance.ts";
import { type AptPackage, ensureAptPackage, ensureBusybox } from "./_setup.ts";

/**
 * The shared test engine's control dir: `$MARSH_TEST_ENGINE_HOME`, else
 * `/tmp/marsh-test-engine` (`.ci/run` gives each run its own and stops it).
 */
export const TEST_ENGINE_HOME = Deno.env.get("MARSH_TEST_ENGINE_HOME") ?? "/tmp/marsh-test-engine";
/** Serializes installing and starting across test files and processes (flock). */
const LOCK = `${TEST_ENGINE_HOME}.lock`;

const dec = new TextDecoder();

function denoPath(): string {
  return Deno.env.get("MARSH_DENO") ?? Deno.execPath();
}

/** A clean environment for the CLI: PATH, the pinned Deno and its cache, and `extra`. */
export function cliEnv(extra: Record<string, string>): Record<string, string> {
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/sbin:/usr/bin:/sbin:/bin",
    LANG: "C.UTF-8",
    MARSH_DENO: denoPath(),
  };
  for (const k of ["HOME", "DENO_DIR", "XDG_CACHE_HOME"]) {
    const v = Deno.env.get(k);
    if (v) env[k] = v;
  }
  return { ...env, ...extra };
}

/** Runs `./marsh ARGS` with exactly `env`. */
export async function marsh(
  args: readonly string[],
  env: Record<string, string>,
  timeoutMs = 120_000,
): Promise<Result> {
  const child = new Deno.Command(MARSH, {
    args: [...args],
    env,
    clearEnv: true,
    cwd: ROOT,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  return await finish(child, `marsh ${args.join(" ")}`, timeoutMs);
}

/** dockerd, for the private test engine. */
export const DOCKERD: AptPackage = {
  pkg: "docker.io",
  what: "dockerd (for the test engine)",
  installed: async () => {
    try {
      return (await new Deno.Command("dockerd", {
        args: ["--version"],
        stdout: "null",
        stderr: "null",
      }).output()).success;
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  },
  otherwise: "or set DOCKER_HOST to an engine",
};

/**
 * Makes sure `dockerd` is installed: with apt (`docker.io`) when it is not
 * and we are root (`tests/_setup.ts`).
 *
 * @throws {Error} when it is missing and cannot be installed
 */
export async function ensureDockerd(): Promise<void> {
  await ensureAptPackage(DOCKERD);
}

/**
 * Runs `body` holding the test engine's lock (flock on a file beside its
 * control dir), across test files and processes. Builds of one Kit hold
 * it: two concurrent imports of the same tag would each make an image, and
 * the tag would end on one of them.
 */
export async function withLock<T>(body: () => Promise<T>): Promise<T> {
  using file = await Deno.open(LOCK, { read: true, write: true, create: true, mode: 0o600 });
  await file.lock(true);
  try {
    return await body();
  } finally {
    await file.unlock();
  }
}

/** `marsh engine status --json` under `env`. */
export async function engineStatusJson(
  env: Record<string, string>,
): Promise<Record<string, unknown>> {
  const r = await marsh(["engine", "status", "--json"], env);
  if (r.code !== 0 && r.code !== 1) throw new Error(`marsh engine status failed\n${show(r)}`);
  return JSON.parse(r.stdout);
}

let ensured: Promise<string> | undefined;

/**
 * A socket where a Docker engine answers: `DOCKER_HOST`'s if it answers,
 * else the shared test engine, started (and `docker.io` installed) when
 * needed. Concurrent callers in other test files wait on a lock file.
 *
 * @throws {Error} when no engine can be had: the tests must fail, not skip
 */
export function ensureEngine(): Promise<string> {
  ensured ??= (async () => {
    const host = Deno.env.get("DOCKER_HOST");
    if (host) {
      const s = await engineStatusJson(cliEnv({ DOCKER_HOST: host, MARSH_HOME: TEST_ENGINE_HOME }));
      if (s.reachable === true) return String(s.socket);
    }
    await ensureDockerd();
    return await withLock(async () => {
      const r = await marsh(
        ["engine", "start", "--json"],
        cliEnv({ MARSH_HOME: TEST_ENGINE_HOME }),
      );
      if (r.code !== 0) {
        throw new Error(`no Docker engine for the tests: marsh engine start failed\n${show(r)}`);
      }
      return String(JSON.parse(r.stdout).socket);
    });
  })();
  return ensured;
}

/** The fixture Kit's CLI arguments: busybox and git (with the libraries deno needs). */
export const FIXTURE_KIT_ARGS = ["kit", "build", "fixture", "--from-host", "--bin", "git"] as const;

let fixture: Promise<{ id: string; ref: string }> | undefined;

/**
 * Builds the fixture Kit once per process on the engine at `socket`
 * (`./marsh kit build fixture --from-host --bin git`, under the lock).
 *
 * @returns its image id and tag
 */
export function fixtureKit(socket: string): Promise<{ id: string; ref: string }> {
  fixture ??= withLock(async () => {
    await ensureBusybox();
    const home = await Deno.makeTempDir({ prefix: "marsh-home-" });
    try {
      const r = await marsh(
        FIXTURE_KIT_ARGS,
        cliEnv({ MARSH_HOME: home, DOCKER_HOST: `unix://${socket}` }),
      );
      const ref = /(marsh-kit\/fixture:[0-9a-f]{12})/.exec(r.stderr)?.[1];
      if (r.code !== 0 || !ref) throw new Error(`marsh kit build failed\n${show(r)}`);
      return { id: r.stdout.trim(), ref };
    } finally {
      await Deno.remove(home, { recursive: true });
    }
  });
  return fixture;
}

/** What {@linkcode dockerRun} returns. */
export interface DockerRunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/**
 * `docker run --rm --network none IMAGE CMD…` through `DockerApi`, in a
 * child process allowed only that socket.
 */
export async function dockerRun(
  socket: string,
  image: string,
  cmd: readonly string[],
): Promise<DockerRunResult> {
  return JSON.parse(await apiChild(socket, ["run", image, ...cmd]));
}

/** `DockerApi.inspectImage` in a child process; null when there is no such image. */
export async function inspectImage(
  socket: string,
  name: string,
): Promise<Record<string, unknown> | null> {
  return JSON.parse(await apiChild(socket, ["inspect", name]));
}

/** `DockerApi.listImages({ reference })` in a child process. */
export async function listImages(
  socket: string,
  reference: string,
): Promise<Record<string, unknown>[]> {
  return JSON.parse(await apiChild(socket, ["images", reference]));
}

/** `DockerApi.tagImage(name, repo:tag)` in a child process. */
export async function tagImage(socket: string, name: string, ref: string): Promise<void> {
  await apiChild(socket, ["tag", name, ref]);
}

/** `DockerApi.removeImage(name)` in a child process (a tag of an image with others: untagged). */
export async function removeImage(socket: string, name: string): Promise<boolean> {
  return JSON.parse(await apiChild(socket, ["rmi", name]));
}

/** The containers (running or not) carrying every one of `labels` (`KEY=VALUE` or `KEY`). */
export async function listContainers(
  socket: string,
  labels: readonly string[],
): Promise<{ id: string; state: string; labels: Record<string, string> }[]> {
  return JSON.parse(await apiChild(socket, ["containers", ...labels]));
}

/**
 * `docker commit --change 'ENTRYPOINT …'`: tags as `ref` a copy of `image`
 * whose config's entrypoint is `entrypoint` (exec form), the way a
 * third-party image ships its own entrypoint wrapper. Made once per base
 * image and entrypoint (label `marsh.test.from`), then found again.
 *
 * @returns the new image's id
 */
export async function withEntrypoint(
  socket: string,
  image: string,
  ref: string,
  entrypoint: readonly string[],
): Promise<string> {
  return JSON.parse(await apiChild(socket, ["entrypoint", image, ref, JSON.stringify(entrypoint)]));
}

/** Force-removes the containers carrying every one of `labels`; returns how many there were. */
export async function removeContainers(socket: string, labels: readonly string[]): Promise<number> {
  return JSON.parse(await apiChild(socket, ["rm", ...labels]));
}

async function apiChild(socket: string, args: string[]): Promise<string> {
  const child = new Deno.Command(denoPath(), {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      `--allow-read=${socket}`,
      `--allow-write=${socket}`,
      `--allow-net=unix:${socket}`,
      // docker-modem enumerates the environment (docs/architecture.md "Permissions").
      "--allow-env",
      `--config=${ROOT}deno.json`,
      new URL(import.meta.url).pathname,
      socket,
      ...args,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const r = await finish(child, `engine API ${args.join(" ")}`, 120_000);
  if (r.code !== 0) throw new Error(`engine API call failed\n${show(r)}`);
  return r.stdout;
}

if (import.meta.main) {
  const { DockerApi } = await import("../docker/docker_api.ts");
  const [socket, verb, ...rest] = Deno.args;
  const api = new DockerApi(socket!);
  let result: unknown;
  if (verb === "run") {
    const [image, ...cmd] = rest;
    const r = await api.run({ image: image!, cmd, labels: { "marsh.test": "1" } });
    result = { code: r.code, stdout: dec.decode(r.stdout), stderr: dec.decode(r.stderr) };
  } else if (verb === "inspect") {
    result = await api.inspectImage(rest[0]!);
  } else if (verb === "images") {
    result = await api.listImages({ reference: rest[0]! });
  } else if (verb === "tag") {
    const [name, ref] = rest;
    const at = ref!.lastIndexOf(":");
    await api.tagImage(name!, { repo: ref!.slice(0, at), tag: ref!.slice(at + 1) });
    result = null;
  } else if (verb === "entrypoint") {
    const [image, ref, entrypoint] = rest;
    const base = await api.inspectImage(image!);
    if (!base) throw new Error(`no image ${image}`);
    // Made once per base and entrypoint: a commit each run would leave the last one dangling.
    const from = `${base.id}/${encodeURIComponent(entrypoint!)}`;
    const existing = await api.inspectImage(ref!);
    if (existing?.labels["marsh.test.from"] === from) {
      result = existing.id;
    } else {
      const { default: Docker } = await import("dockerode");
      const id = await api.createContainer({ image: base.id, cmd: [], labels: {} });
      try {
        const at = ref!.lastIndexOf(":");
        const made = await new Docker({ socketPath: socket }).getContainer(id).commit({
          repo: ref!.slice(0, at),
          tag: ref!.slice(at + 1),
          changes: [`ENTRYPOINT ${entrypoint}`, `LABEL marsh.test.from=${from}`],
        }) as { Id: string };
        result = made.Id;
      } finally {
        await api.removeContainer(id);
      }
    }
  } else if (verb === "rmi") {
    result = await api.removeImage(rest[0]!);
  } else if (verb === "containers") {
    result = await api.listContainers(rest);
  } else if (verb === "rm") {
    const found = await api.listContainers(rest);
    for (const c of found) await api.removeContainer(c.id);
    result = found.length;
  } else {
    throw new Error(`unknown verb ${verb}`);
  }
  console.log(JSON.stringify(result));
}
