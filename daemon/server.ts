/**
 * The daemon's sockets: the host socket in the control dir (operator
 * authority) and one socket per running shell branch (that branch's
 * authority). Each connection carries one request.
 *
 * Needs `--allow-net=unix:<each socket>` and read/write on the control dir.
 *
 * @module
 */

import {
  BRANCH_SOCKET_SLOTS,
  BRANCH_SOCKETS_DIR,
  branchSocketPath,
} from "../protocol/control_dir.ts";
import type { ClientFrame, GcReply } from "../protocol/daemon.ts";
import { type Authority, Conn } from "./conn.ts";
import type { KitJobs } from "./jobs.ts";
import type { KitRegistry } from "./kits.ts";
import type { Log } from "./log.ts";
import { type BranchSockets, RequestError, type Splits } from "./splits.ts";

/** How long a refused request's connection is read on before it is closed. */
const DRAIN_MS = 2_000;

/** Reads and drops `conn`'s frames until it ends or `ms` pass. */
async function drain(conn: Conn, ms: number): Promise<void> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<"late">((r) => timer = setTimeout(() => r("late"), ms));
  try {
    for (;;) {
      const frame = await Promise.race([conn.next(), late]).catch(() => null);
      if (frame === null || frame === "late") return;
    }
  } finally {
    clearTimeout(timer);
  }
}

/** What the server needs to answer the requests that are not about one split. */
export interface ServerHooks {
  status(): {
    daemon: { pid: number; home: string; started_unix_ms: number };
    splits: { active: number; awaiting: number; kept: number };
    forks: { strategy: string; reason: string; policy: string };
  };
  /** `marsh gc`: collects the unreferenced snapshot layers of the project at `cwd`. */
  gc(cwd: string, dryRun: boolean): Promise<Omit<GcReply, "v" | "t">>;
  stop(): void;
}

/** Accepts connections and dispatches their requests. */
export class Server implements BranchSockets {
  readonly #home: string;
  readonly #log: Log;
  readonly #listeners = new Map<string, Deno.UnixListener>();
  readonly #free: number[] = [];
  readonly #slotOf = new Map<string, number>();
  readonly #authOf = new Map<string, Authority>();
  #splits: Splits | null = null;
  #hooks: ServerHooks | null = null;
  #kits: KitRegistry | null = null;
  #jobs: KitJobs | null = null;
  readonly #conns = new Set<Conn>();

  constructor(home: string, log: Log) {
    this.#home = home;
    this.#log = log;
    for (let n = 0; n < BRANCH_SOCKET_SLOTS; n++) this.#free.push(n);
  }

  /** Wires the state machine after both exist. */
  attach(splits: Splits, hooks: ServerHooks): void {
    this.#splits = splits;
    this.#hooks = hooks;
  }

  /** Wires the Kit registry (`kits.add`, `kits.list`, `kits.rm`). */
  attachKits(kits: KitRegistry): void {
    this.#kits = kits;
  }

  /** Wires `marsh jobs` and `marsh workers reset`. */
  attachJobs(jobs: KitJobs): void {
    this.#jobs = jobs;
  }

  #kitJobs(): KitJobs {
    if (this.#jobs === null) {
      throw new RequestError(125, "Kit jobs are not available in this daemon");
    }
    return this.#jobs;
  }

  #registry(): KitRegistry {
    if (this.#kits === null) {
      throw new RequestError(125, "the Kit registry is not available in this daemon");
    }
    return this.#kits;
  }

  /** Listens on the host socket. */
  listenHost(path: string): void {
    this.#listen(path, { kind: "host" });
  }

  #listen(path: string, authority: Authority): void {
    try {
      Deno.removeSync(path);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    const listener = Deno.listen({ transport: "unix", path });
    Deno.chmodSync(path, 0o600);
    this.#listeners.set(path, listener);
    void this.#accept(listener, authority);
  }

  async #accept(listener: Deno.UnixListener, authority: Authority): Promise<void> {
    try {
      for await (const raw of listener) {
        const conn = new Conn(raw, authority);
        this.#conns.add(conn);
        void this.#serve(conn).finally(() => {
          conn.close();
          this.#conns.delete(conn);
        });
      }
    } catch (error) {
      if (!(error instanceof Deno.errors.BadResource)) this.#log.info(`accept failed: ${error}`);
    }
  }

  /** A socket for one branch; its connections carry that branch's authority. */
  open(authority: Extract<Authority, { kind: "branch" }>): string {
    const n = this.#free.shift();
    if (n === undefined) throw new RequestError(125, "no branch socket slot is free");
    Deno.mkdirSync(`${this.#home}/${BRANCH_SOCKETS_DIR}`, { recursive: true, mode: 0o700 });
    const path = branchSocketPath(this.#home, n);
    this.#listen(path, authority);
    this.#slotOf.set(path, n);
    this.#authOf.set(path, authority);
    return path;
  }

  /** Closes a branch socket: its authority ends with the branch. */
  close(path: string): void {
    const listener = this.#listeners.get(path);
    this.#listeners.delete(path);
    try {
      listener?.close();
    } catch {
      // Already closed.
    }
    try {
      Deno.removeSync(path);
    } catch {
      // Gone already; the slot is what matters.
    }
    // The branch's authority ends with it: its open connections end too.
    const auth = this.#authOf.get(path);
    this.#authOf.delete(path);
    for (const c of this.#conns) if (auth && c.authority === auth) c.close();
    const n = this.#slotOf.get(path);
    this.#slotOf.delete(path);
    if (n !== undefined) this.#free.push(n);
  }

  async #serve(conn: Conn): Promise<void> {
    const first = await conn.next();
    if (first === null) return;
    try {
      await this.#dispatch(conn, first);
    } catch (error) {
      if (error instanceof RequestError) {
        await conn.send({ v: 1, t: "error", code: error.code, message: error.message });
      } else {
        this.#log.info(
          `request ${first.t} failed: ${error instanceof Error ? error.stack : error}`,
        );
        await conn.send({ v: 1, t: "error", code: 125, message: `internal error: ${error}` });
      }
      await conn.flush();
      // A refused split.create's caller may still be sending its spool; closing
      // under those writes can reset the connection before it reads the refusal.
      // Read on (and drop) until it hangs up, for a short while.
      if (first.t === "split.create") await drain(conn, DRAIN_MS);
      return;
    }
    await conn.flush();
  }

  async #dispatch(conn: Conn, frame: ClientFrame): Promise<void> {
    const splits = this.#splits!, hooks = this.#hooks!;
    switch (frame.t) {
      case "split.create":
        return await splits.create(conn, frame);
      case "split.join":
        return await splits.join(conn, frame);
      case "splits.list":
        await conn.send({ v: 1, t: "splits", splits: splits.list(conn.authority, frame.id) });
        return;
      case "splits.cancel":
        await conn.send({ v: 1, t: "ok", message: splits.cancelRequest(conn.authority, frame.id) });
        return;
      case "splits.rm":
        await conn.send({ v: 1, t: "ok", message: await splits.remove(conn.authority, frame.id) });
        return;
      case "status":
        await conn.send({ v: 1, t: "status", ...hooks.status() });
        return;
      case "gc":
        if (conn.authority.kind !== "host") {
          throw new RequestError(2, "only the host may collect snapshot layers");
        }
        await conn.send({ v: 1, t: "gc", ...await hooks.gc(frame.cwd, frame.dryRun) });
        return;
      case "daemon.stop":
        if (conn.authority.kind !== "host") {
          throw new RequestError(2, "only the host may stop the daemon");
        }
        await conn.send({ v: 1, t: "ok", message: "marshd stopping" });
        await conn.flush();
        hooks.stop();
        return;
      case "kits.add":
        await conn.send({ v: 1, t: "kits.added", ...this.#registry().add(conn.authority, frame) });
        return;
      case "kits.list":
        await conn.send({ v: 1, t: "kits", kits: this.#registry().list(conn.authority) });
        return;
      case "kits.rm":
        await conn.send({
          v: 1,
          t: "kits.removed",
          kit: this.#registry().remove(conn.authority, frame.name),
        });
        return;
      case "jobs.list":
        await conn.send({ v: 1, t: "jobs", jobs: this.#kitJobs().list(conn.authority) });
        return;
      case "workers.reset":
        await conn.send({
          v: 1,
          t: "workers.reset",
          ...await this.#kitJobs().reset(conn.authority, frame.kit),
        });
        return;
      default:
        throw new RequestError(2, `unexpected ${frame.t} frame to start a request`);
    }
  }

  /** Stops accepting and closes every connection. */
  shutdown(): void {
    for (const [path, l] of this.#listeners) {
      try {
        l.close();
      } catch {
        // Already closed.
      }
      try {
        Deno.removeSync(path);
      } catch {
        // Gone already.
      }
    }
    this.#listeners.clear();
    for (const c of this.#conns) c.close();
  }
}
