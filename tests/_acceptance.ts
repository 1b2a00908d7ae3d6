/**
 * The acceptance tests' harness: a sandbox per test with its own control
 * dir and Git project in temp dirs, the real `./marsh` run as a subprocess
 * with a hardened environment, polling instead of sleeping, and a teardown
 * that stops the sandbox's daemon and every process still naming its
 * control dir, so no daemon outlives its test.
 *
 * Needs `--allow-run`, `--allow-read`, `--allow-write` and `--allow-env`.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { unmountBelow } from "../splitfs/_testing.ts";

/** The repository, and the CLI launcher under test. */
export const ROOT = new URL("../", import.meta.url).pathname;
export const MARSH = `${ROOT}marsh`;

/** What every acceptance test asks for: it runs the CLI, Git and shells in temp dirs. */
export const PERMISSIONS: Deno.PermissionOptions = {
  run: true,
  read: true,
  write: true,
  env: true,
};

/** How long any one command or wait may take before the test fails. */
export const TIMEOUT_MS = 60_000;

const dec = new TextDecoder();
const enc = new TextEncoder();

/** A finished command. */
export interface Result {
  readonly code: number;
  readonly signal: Deno.Signal | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Options of one command. */
export interface RunOptions {
  /** Bytes for stdin; absent means /dev/null. */
  readonly stdin?: string | Uint8Array;
  /** Variables added to the sandbox's environment. */
  readonly env?: Readonly<Record<string, string>>;
  /** Default: the project. */
  readonly cwd?: string;
  readonly timeoutMs?: number;
}

/** The one handle line `marsh split` prints; returns its id. */
export function handleId(stdout: string): string {
  const m = /^\{"marsh_split":1,"id":"([a-z0-9]+)"\}\n$/.exec(stdout);
  assert.ok(m, `not exactly one handle line: ${JSON.stringify(stdout)}`);
  return m[1]!;
}

/** Describes a result for assertion messages. */
export function show(r: Result): string {
  return `exit ${r.code}${
    r.signal ? ` (${r.signal})` : ""
  }\nstdout: ${r.stdout}\nstderr: ${r.stderr}`;
}

/** Waits for a child with a deadline; a child past it is killed and the test fails. */
export async function finish(
  child: Deno.ChildProcess,
  what: string,
  timeoutMs = TIMEOUT_MS,
): Promise<Result> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      try {
        child.kill("SIGKILL");
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;
        // It ended meanwhile.
      }
      reject(new Error(`${what}: still running after ${timeoutMs} ms`));
    }, timeoutMs);
  });
  try {
    const out = await Promise.race([child.output(), late]);
    return {
      code: out.code,
      signal: out.signal,
      stdout: dec.decode(out.stdout),
      stderr: dec.decode(out.stderr),
    };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Polls `probe` until it returns something other than undefined or false.
 *
 * @throws {Error} naming `what` after `timeoutMs`
 */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined | false> | T | undefined | false,
  timeoutMs = TIMEOUT_MS,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (let pause = 20;; pause = Math.min(pause * 2, 250)) {
    const got = await probe();
    if (got !== undefined && got !== false) return got;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, pause));
  }
}

/** Whether a path exists (without following a final symlink). */
export function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/**
 * Pids of live (not zombie) processes whose command line contains
 * `needle`. Through ps(1): Deno reads /proc only with --allow-all.
 */
async function processesNaming(needle: string): Promise<number[]> {
  const out = await new Deno.Command("ps", {
    args: ["-eo", "pid=,stat=,args="],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.equal(out.code, 0, "ps failed");
  const found: number[] = [];
  for (const line of dec.decode(out.stdout).split("\n")) {
    const m = /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m || m[2]!.startsWith("Z") || !m[3]!.includes(needle)) continue;
    if (/^\S*\bps -eo /.test(m[3]!)) continue;
    found.push(Number(m[1]));
  }
  return found;
}

function killQuietly(pid: number, signal: Deno.Signal): void {
  try {
    Deno.kill(pid, signal);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
    // Gone already.
  }
}

/** The runner's Deno cache, so the CLI under test (with another HOME) needs no download. */
function denoDir(): string {
  const explicit = Deno.env.get("DENO_DIR");
  if (explicit) return explicit;
  const cache = Deno.env.get("XDG_CACHE_HOME") ?? `${Deno.env.get("HOME") ?? ""}/.cache`;
  return `${cache}/deno`;
}

/** One test's world: a control dir, a Git project, and the environment to reach them. */
export class Sandbox implements AsyncDisposable {
  /** The temp dir holding everything below. */
  readonly base: string;
  /** `MARSH_HOME`. */
  readonly home: string;
  /** The project (a Git repository with one commit). */
  readonly project: string;
  /** A scratch dir outside the project (counters, markers, gates). */
  readonly scratch: string;
  /** The environment every command gets (nothing else of the test runner's). */
  readonly env: Record<string, string>;

  private constructor(base: string, env: Readonly<Record<string, string>>) {
    this.base = base;
    this.home = `${base}/home`;
    this.project = `${base}/project`;
    this.scratch = `${base}/scratch`;
    Deno.mkdirSync(this.project);
    Deno.mkdirSync(this.scratch);
    this.env = {
      PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      LANG: "C.UTF-8",
      HOME: this.scratch,
      MARSH_HOME: this.home,
      // The launcher's pinned Deno (the one running these tests) and its module cache.
      MARSH_DENO: Deno.env.get("MARSH_DENO") ?? Deno.execPath(),
      DENO_DIR: denoDir(),
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

  /**
   * Makes the temp dirs and a Git project holding `files` (default
   * `a.txt`), committed once.
   */
  static async create(
    opts: {
      readonly files?: Readonly<Record<string, string>>;
      readonly env?: Readonly<Record<string, string>>;
    } = {},
  ): Promise<Sandbox> {
    const base = Deno.realPathSync(await Deno.makeTempDir({ prefix: "marsh-accept-" }));
    const sb = new Sandbox(base, opts.env ?? {});
    for (const [path, text] of Object.entries(opts.files ?? { "a.txt": "hello\n" })) {
      const slash = path.lastIndexOf("/");
      if (slash > 0) Deno.mkdirSync(`${sb.project}/${path.slice(0, slash)}`, { recursive: true });
      Deno.writeTextFileSync(`${sb.project}/${path}`, text);
    }
    await sb.git("init", "-q", "-b", "main");
    await sb.git("add", "-A");
    await sb.git("commit", "-q", "-m", "init");
    return sb;
  }

  #command(cmd: string, args: readonly string[], opts: RunOptions): Deno.ChildProcess {
    const child = new Deno.Command(cmd, {
      args: [...args],
      cwd: opts.cwd ?? this.project,
      env: { ...this.env, ...opts.env },
      clearEnv: true,
      stdin: opts.stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    if (opts.stdin !== undefined) {
      const bytes = typeof opts.stdin === "string" ? enc.encode(opts.stdin) : opts.stdin;
      const writer = child.stdin.getWriter();
      writer.write(bytes).then(() => writer.close()).catch((error) => {
        // A command that exits without reading all of stdin is the test's business.
        if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
      });
    }
    return child;
  }

  /** Starts `./marsh ARGS` without waiting for it. */
  spawnMarsh(args: readonly string[], opts: RunOptions = {}): Deno.ChildProcess {
    return this.#command(MARSH, args, opts);
  }

  /** Runs `./marsh ARGS` to its end. */
  marsh(args: readonly string[], opts: RunOptions = {}): Promise<Result> {
    return finish(this.spawnMarsh(args, opts), `marsh ${args.join(" ")}`, opts.timeoutMs);
  }

  /** Runs a bash script (with `$M` the CLI) to its end. */
  bash(script: string, opts: RunOptions = {}): Promise<Result> {
    return finish(this.#command("bash", ["-c", script], opts), `bash -c ${script}`, opts.timeoutMs);
  }

  /**
   * Runs git in the project.
   *
   * @returns its stdout
   * @throws {assert.AssertionError} when it fails
   */
  async git(...args: string[]): Promise<string> {
    const r = await finish(this.#command("git", args, {}), `git ${args.join(" ")}`);
    assert.equal(r.code, 0, `git ${args.join(" ")}: ${show(r)}`);
    return r.stdout;
  }

  /** Runs git in the project and returns what happened, whatever its status. */
  runGit(args: readonly string[]): Promise<Result> {
    return finish(this.#command("git", [...args], {}), `git ${args.join(" ")}`);
  }

  /** `marsh splits --all --json`: every split of this sandbox's daemon, whatever the project. */
  async splits(): Promise<Manifest[]> {
    const r = await this.marsh(["splits", "--all", "--json"]);
    assert.equal(r.code, 0, show(r));
    return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
  }

  /** One split from `marsh splits --json`, or undefined when there is none with that id. */
  async split(id: string): Promise<Manifest | undefined> {
    return (await this.splits()).find((s) => s.id === id);
  }

  /** The only split in `run`, once there is one whose branches all started (or settled). */
  runningSplit(): Promise<Manifest> {
    return waitFor("a running split with its branches started", async () => {
      const s = (await this.splits()).find((m) => m.state === "run");
      if (!s || s.branches.length === 0) return undefined;
      return s.branches.every((b) => b.state !== "pending") ? s : undefined;
    });
  }

  /** The pid in the control dir's `marshd.pid`, or null. */
  daemonPid(): number | null {
    try {
      return Number(Deno.readTextFileSync(`${this.home}/marshd.pid`).trim());
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return null;
      throw error;
    }
  }

  /**
   * Stops the daemon (`marsh daemon stop`), waits for every process naming
   * this control dir (the daemon, its worker, a killed daemon's worker) to
   * end, SIGKILLs the pid in `marshd.pid` and the rest when they do not,
   * and removes the temp dirs.
   */
  async [Symbol.asyncDispose](): Promise<void> {
    try {
      if (exists(`${this.home}/marshd.sock`)) await this.marsh(["daemon", "stop"]);
      // A stopping daemon ends its worker and service first; give it time, then kill.
      const deadline = Date.now() + 15_000;
      for (;;) {
        const left = await processesNaming(this.home);
        if (left.length === 0) break;
        if (Date.now() > deadline) {
          const pid = this.daemonPid();
          if (pid !== null && left.includes(pid)) killQuietly(pid, "SIGKILL");
          for (const p of left) killQuietly(p, "SIGKILL");
          break;
        }
        await new Promise((r) => setTimeout(r, 100));
      }
    } finally {
      unmountBelow(this.base);
      await Deno.remove(this.base, { recursive: true });
    }
  }
}

/** Nine numbered lines: room for hunks far enough apart to apply or merge on their own. */
export const NINE = "1\n2\n3\n4\n5\n6\n7\n8\n9\n";

/**
 * A sandbox whose `a.txt` is {@linkcode NINE}, committed, then edited on
 * line 1 without a commit: a snapshot's pre-image of `a.txt` is in no
 * commit, so `git apply --3way` finds it only where join put it.
 */
export async function uncommittedNine(): Promise<Sandbox> {
  const sb = await Sandbox.create({ files: { "a.txt": NINE } });
  Deno.writeTextFileSync(`${sb.project}/a.txt`, NINE.replace("1\n", "one\n"));
  return sb;
}
