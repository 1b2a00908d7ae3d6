/**
 * TEST ONLY: a stand-in for the daemon at the socket boundary, and a way to
 * run the real CLI (`./marsh`) against it.
 *
 * The real daemon (`daemon/`) is being built in parallel, so the CLI's tests
 * cannot use it yet; the end-to-end tests through the real daemon live in
 * `tests/`. This stand-in speaks `protocol/daemon.ts` exactly: the socket
 * end runs as its own process (`_fake_daemon_main.ts`, narrow flags), and
 * each test scripts the replies here, frame by frame.
 *
 * @module
 */

import type { ClientFrame, DaemonFrame } from "../protocol/daemon.ts";
import type { Manifest, ManifestBranch } from "../protocol/manifest.ts";
import { denoPath } from "../protocol/splitfs_client.ts";

export const root = new URL("../", import.meta.url).pathname;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** The permissions of the CLI tests: they run processes; the socket is the stand-in's. */
export const cliTestPermissions: Deno.PermissionOptions = {
  run: true,
  env: true,
  read: true,
  write: true,
};

type Event =
  | { ev: "listening" }
  | { ev: "conn"; c: number }
  | { ev: "frame"; c: number; frame: ClientFrame }
  | { ev: "bad"; c: number; error: string }
  | { ev: "end"; c: number };

/** A queue whose consumer waits for the next item. */
class Queue<T> {
  #items: T[] = [];
  #waiters: ((v: T) => void)[] = [];
  push(v: T): void {
    const w = this.#waiters.shift();
    if (w) w(v);
    else this.#items.push(v);
  }
  shift(): Promise<T> {
    const v = this.#items.shift();
    if (v !== undefined) return Promise.resolve(v);
    return new Promise((resolve) => this.#waiters.push(resolve));
  }
}

/** One client connection as the stand-in sees it. */
export class FakeConn {
  readonly c: number;
  /** Every frame the client sent, in order. */
  readonly received: ClientFrame[] = [];
  /** Protocol violations the stand-in saw. */
  readonly bad: string[] = [];
  readonly #daemon: FakeDaemon;
  readonly #frames = new Queue<ClientFrame | undefined>();
  readonly #ended = Promise.withResolvers<void>();

  constructor(daemon: FakeDaemon, c: number) {
    this.#daemon = daemon;
    this.c = c;
  }

  /** Resolves when the client has closed the connection. */
  get ended(): Promise<void> {
    return this.#ended.promise;
  }

  /** The client's next frame, or undefined once it closed the connection. */
  next(): Promise<ClientFrame | undefined> {
    return this.#frames.shift();
  }

  /** Waits for the next frame and checks its type. */
  async expect<T extends ClientFrame["t"]>(t: T): Promise<Extract<ClientFrame, { t: T }>> {
    const frame = await this.next();
    if (frame?.t !== t) {
      throw new Error(`expected a ${t} frame, got ${JSON.stringify(frame)?.slice(0, 200)}`);
    }
    return frame as Extract<ClientFrame, { t: T }>;
  }

  send(frame: DaemonFrame): Promise<void> {
    return this.#daemon.command({ cmd: "send", c: this.c, frame });
  }

  close(): Promise<void> {
    return this.#daemon.command({ cmd: "close", c: this.c });
  }

  /** @internal */
  deliver(event: Event): void {
    if (event.ev === "frame") {
      this.received.push(event.frame);
      this.#frames.push(event.frame);
    } else if (event.ev === "bad") {
      this.bad.push(event.error);
    } else if (event.ev === "end") {
      this.#frames.push(undefined);
      this.#ended.resolve();
    }
  }
}

/** The stand-in daemon listening on a socket. */
export class FakeDaemon implements AsyncDisposable {
  /** Every connection so far. */
  readonly connections: FakeConn[] = [];
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #conns = new Queue<FakeConn>();
  #closed = false;

  private constructor(child: Deno.ChildProcess) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
  }

  /** Starts listening on `socket` (whose directory must exist). */
  static async listen(socket: string): Promise<FakeDaemon> {
    const dir = socket.slice(0, socket.lastIndexOf("/"));
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        "--quiet",
        "--no-prompt",
        `--allow-read=${dir}`,
        `--allow-write=${dir}`,
        `--allow-net=unix:${socket}`,
        `--config=${root}deno.json`,
        `${root}client/_fake_daemon_main.ts`,
        socket,
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    const daemon = new FakeDaemon(child);
    const listening = Promise.withResolvers<void>();
    void daemon.#pump(listening.resolve);
    await listening.promise;
    return daemon;
  }

  async #pump(listening: () => void): Promise<void> {
    let buf = "";
    for await (const bytes of this.#child.stdout.pipeThrough(new TextDecoderStream())) {
      buf += bytes;
      for (let nl = buf.indexOf("\n"); nl >= 0; nl = buf.indexOf("\n")) {
        const event = JSON.parse(buf.slice(0, nl)) as Event;
        buf = buf.slice(nl + 1);
        if (event.ev === "listening") {
          listening();
        } else if (event.ev === "conn") {
          const conn = new FakeConn(this, event.c);
          this.connections.push(conn);
          this.#conns.push(conn);
        } else {
          this.connections[event.c]?.deliver(event);
        }
      }
    }
  }

  /** The next connection a client makes. */
  accept(): Promise<FakeConn> {
    return this.#conns.shift();
  }

  /** @internal */
  async command(cmd: Record<string, unknown>): Promise<void> {
    await this.#writer.write(enc.encode(`${JSON.stringify(cmd)}\n`));
  }

  /** Stops listening and removes the socket. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await this.#writer.close();
    await this.#child.status;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}

/** A temp control dir (0700) that removes itself. */
export async function tempHome(): Promise<AsyncDisposable & { path: string }> {
  const path = await Deno.makeTempDir({ prefix: "marsh-cli-" });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await Deno.chmod(path, 0o700);
      await Deno.remove(path, { recursive: true });
    },
  };
}

/** The environment for the CLI: ours without MARSH_*, plus `extra`. */
export function cliEnv(extra: Record<string, string>): Record<string, string> {
  const env = Object.fromEntries(
    Object.entries(Deno.env.toObject()).filter(([k]) => !k.startsWith("MARSH_")),
  );
  return { ...env, ...extra };
}

/** What a finished CLI run left. */
export interface MarshResult {
  readonly code: number;
  readonly stdout: Uint8Array;
  readonly stderr: string;
  readonly text: string;
}

/** A running `./marsh`. */
export interface MarshRun {
  readonly child: Deno.ChildProcess;
  readonly done: Promise<MarshResult>;
}

/**
 * Starts `./marsh ARGS` with `MARSH_HOME=home`. `stdin` is written and
 * closed (bytes), or "null", or kept open for the caller ("piped").
 */
export function spawnMarsh(
  args: readonly string[],
  opts: {
    home: string;
    stdin?: Uint8Array | "null" | "piped";
    env?: Record<string, string>;
    cwd?: string;
  },
): MarshRun {
  const child = new Deno.Command(`${root}marsh`, {
    args: [...args],
    cwd: opts.cwd ?? opts.home,
    clearEnv: true,
    env: cliEnv({ MARSH_HOME: opts.home, ...opts.env }),
    stdin: opts.stdin === undefined || opts.stdin === "null" ? "null" : "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const input = opts.stdin;
  const fed = input instanceof Uint8Array
    ? (async () => {
      const w = child.stdin.getWriter();
      try {
        await w.write(input);
        await w.close();
      } catch (error) {
        if (!(error instanceof Deno.errors.BrokenPipe)) throw error;
        // The CLI may leave without reading all of its stdin (-n, a refusal).
      }
    })()
    : Promise.resolve();
  const done = (async () => {
    const [out] = await Promise.all([child.output(), fed]);
    return {
      code: out.code,
      stdout: out.stdout,
      stderr: dec.decode(out.stderr),
      text: dec.decode(out.stdout),
    };
  })();
  return { child, done };
}

/** Runs `./marsh ARGS` to its end. */
export function marsh(
  args: readonly string[],
  opts: Parameters<typeof spawnMarsh>[1],
): Promise<MarshResult> {
  return spawnMarsh(args, opts).done;
}

/** A plausible manifest for replies. */
export function manifest(
  id: string,
  branches: Partial<ManifestBranch>[] = [{ label: "a" }],
  extra: Partial<Manifest> = {},
): Manifest {
  const dir = `/work/p/.marsh/split/${id}`;
  const m: Manifest = {
    version: 2,
    id,
    state: "await",
    creator: { kind: "host" },
    session: "s1",
    parent: null,
    depth: 1,
    root: "/work/p",
    dir,
    out: `${dir}/out`,
    objects: `${dir}/store.git/objects`,
    cwd: "",
    created_unix_ms: Date.UTC(2025, 0, 2, 3, 4, 5),
    identity: [1, 2],
    timing_ms: { snapshot: 1 },
    branches: branches.map((b) => ({
      label: "a",
      kind: "shell",
      placement: "shell-vm",
      state: "captured",
      status: "exited 0",
      code: 0,
      files: 0,
      fork: `${dir}/${b.label ?? "a"}`,
      ...b,
    })),
    ...extra,
  };
  // As it comes off the wire: no undefined fields.
  return JSON.parse(JSON.stringify(m));
}

export { dec, enc };
