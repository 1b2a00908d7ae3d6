/**
 * The daemon's sockets: the host socket in the control dir (operator
 * authority), one socket per running shell branch (that branch's
 * authority) and one per Kit attempt (that job's authority: its
 * `/run/marsh/cap.sock`). Each connection carries one request. The socket a
 * connection arrived on is its authority; no frame can change it.
 *
 * Needs `--allow-net=unix:<each socket>` and read/write on the control dir.
 *
 * @module
 */

import {
  BRANCH_SOCKET_SLOTS,
  BRANCH_SOCKETS_DIR,
  branchSocketPath,
  CAP_SOCKET_SLOTS,
  CAP_SOCKETS_DIR,
  capSocketPath,
} from "../protocol/control_dir.ts";
import type { ClientFrame, GcReply, LogsRequest } from "../protocol/daemon.ts";
import { RESOLVE_CLIENT_FRAMES, type ResolveClientFrame } from "../protocol/daemon_resolve.ts";
import { SESSION_CLIENT_FRAMES, type SessionClientFrame } from "../protocol/daemon_session.ts";
import { MAX_JOB_CONNECTIONS, TOO_MANY_CONNECTIONS } from "../protocol/job_capability.ts";
import { type Authority, Conn } from "./conn.ts";
import type { Housekeeping } from "./housekeeping.ts";
import type { KitJobs } from "./jobs.ts";
import type { KitRegistry } from "./kits.ts";
import type { Log } from "./log.ts";
import type { Resolutions } from "./resolutions.ts";
import type { ProcessRuns } from "./process_run.ts";
import type { Sessions } from "./sessions.ts";
import { RequestError } from "./request_error.ts";
import type { BranchSockets, Splits } from "./splits.ts";
import type { CheckpointDeps } from "./checkpoint_find.ts";
import { exportCheckpoint } from "./checkpoint_commit.ts";
import { showCheckpoint } from "./checkpoint_show.ts";

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

/**
 * What a Kit job's capability admits (docs/rules.md "The job capability"): a split,
 * its join, and `marsh jobs` of its own subtree. Everything else is refused,
 * naming what to do instead.
 */
function refuseInJob(t: ClientFrame["t"]): RequestError {
  const only = "a job's capability admits only marsh split, marsh join, marsh logs and marsh jobs";
  switch (t) {
    case "splits.list":
      return new RequestError(2, `refused in a Kit job: ${only}; a job's splits are its own`);
    case "splits.cancel":
      return new RequestError(
        2,
        `refused in a Kit job: ${only}; to cancel a split, end its marsh split (Ctrl-C) or its marsh join`,
      );
    case "splits.rm":
      return new RequestError(
        2,
        `refused in a Kit job: ${only}; a split this job did not join is kept for the host (marsh splits rm)`,
      );
    default:
      return new RequestError(2, `refused in a Kit job: ${only}`);
  }
}

/** What the server needs to answer the requests that are not about one split. */
export interface ServerHooks {
  status(): {
    daemon: { pid: number; home: string; started_unix_ms: number };
    splits: { active: number; awaiting: number; kept: number };
    forks: { strategy: string; reason: string; policy: string };
    view: { view: "project" | "fork"; reason: string };
  };
  /** `marsh logs`: streams a branch's output on `conn` (`daemon/branch_logs.ts`). */
  logs(conn: Conn, req: LogsRequest): Promise<void>;
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
  readonly #freeCaps: number[] = [];
  readonly #slotOf = new Map<string, { kind: "branch" | "job"; n: number }>();
  readonly #authOf = new Map<string, Authority>();
  #splits: Splits | null = null;
  #hooks: ServerHooks | null = null;
  #kits: KitRegistry | null = null;
  #jobs: KitJobs | null = null;
  #housekeeping: Housekeeping | null = null;
  #resolutions: Resolutions | null = null;
  #checkpoints: CheckpointDeps | null = null;
  #sessions: Sessions | null = null;
  #runs: ProcessRuns | null = null;
  readonly #conns = new Set<Conn>();

  constructor(home: string, log: Log) {
    this.#home = home;
    this.#log = log;
    for (let n = 0; n < BRANCH_SOCKET_SLOTS; n++) this.#free.push(n);
    for (let n = 0; n < CAP_SOCKET_SLOTS; n++) this.#freeCaps.push(n);
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

  /** Wires `marsh splits` of one project, `marsh splits prune` and `marsh gc --all`. */
  attachHousekeeping(housekeeping: Housekeeping): void {
    this.#housekeeping = housekeeping;
  }

  /** Wires `marsh jobs` and `marsh workers reset`. */
  attachJobs(jobs: KitJobs): void {
    this.#jobs = jobs;
  }

  /** Wires `marsh merge`, `promote`, `choose`, `undo` and `resolutions`. */
  attachResolutions(resolutions: Resolutions): void {
    this.#resolutions = resolutions;
  }

  /** Wires `marsh commit` and `marsh show` (docs/checkpoints.md, "Checkout and commit"). */
  attachCheckpoints(deps: CheckpointDeps): void {
    this.#checkpoints = deps;
  }

  #checkpointDeps(): CheckpointDeps {
    if (this.#checkpoints === null) {
      throw new RequestError(125, "checkpoints are not available in this daemon");
    }
    return this.#checkpoints;
  }

  /** Wires `marsh session`, `sessions`, `op`, `log`, `rollback` and `fork`. */
  attachSessions(sessions: Sessions): void {
    this.#sessions = sessions;
  }

  /** Wires `process.run` (`marsh run`, a job's link in its child case). */
  attachProcesses(runs: ProcessRuns): void {
    this.#runs = runs;
  }

  #resolver(): Resolutions {
    if (this.#resolutions === null) {
      throw new RequestError(125, "resolving branches is not available in this daemon");
    }
    return this.#resolutions;
  }

  #kitJobs(): KitJobs {
    if (this.#jobs === null) {
      throw new RequestError(125, "Kit jobs are not available in this daemon");
    }
    return this.#jobs;
  }

  #chores(): Housekeeping {
    if (this.#housekeeping === null) {
      throw new RequestError(125, "housekeeping is not available in this daemon");
    }
    return this.#housekeeping;
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

  #listen(path: string, authority: Authority, mode = 0o600): void {
    try {
      Deno.removeSync(path);
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    const listener = Deno.listen({ transport: "unix", path });
    Deno.chmodSync(path, mode);
    this.#listeners.set(path, listener);
    void this.#accept(listener, authority);
  }

  async #accept(listener: Deno.UnixListener, authority: Authority): Promise<void> {
    try {
      for await (const raw of listener) {
        const conn = new Conn(raw, authority);
        if (authority.kind === "job" && this.#openOf(authority) >= MAX_JOB_CONNECTIONS) {
          // Idle connections count too: a slot frees only when one closes.
          void conn.send({ v: 1, t: "error", code: 125, message: TOO_MANY_CONNECTIONS })
            .then(() => conn.flush()).finally(() => conn.close());
          continue;
        }
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

  #openOf(authority: Authority): number {
    let n = 0;
    for (const c of this.#conns) if (c.authority === authority) n++;
    return n;
  }

  /** A socket for one branch; its connections carry that branch's authority. */
  open(authority: Extract<Authority, { kind: "branch" }>): string {
    const n = this.#free.shift();
    if (n === undefined) throw new RequestError(125, "no branch socket slot is free");
    Deno.mkdirSync(`${this.#home}/${BRANCH_SOCKETS_DIR}`, { recursive: true, mode: 0o700 });
    const path = branchSocketPath(this.#home, n);
    this.#listen(path, authority);
    this.#slotOf.set(path, { kind: "branch", n });
    this.#authOf.set(path, authority);
    return path;
  }

  /**
   * A Kit attempt's capability socket; its connections carry that job's
   * authority. Mode 0666: any user inside the job may use it (a root
   * container may switch users), and on the host it is reachable only
   * through the 0700 control dir.
   */
  openJob(authority: Extract<Authority, { kind: "job" }>): string {
    const n = this.#freeCaps.shift();
    if (n === undefined) throw new RequestError(125, "no job capability socket slot is free");
    Deno.mkdirSync(`${this.#home}/${CAP_SOCKETS_DIR}`, { recursive: true, mode: 0o700 });
    const path = capSocketPath(this.#home, n);
    this.#listen(path, authority, 0o666);
    this.#slotOf.set(path, { kind: "job", n });
    this.#authOf.set(path, authority);
    return path;
  }

  /** Closes a branch or job socket: its authority ends with the branch or job. */
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
    const slot = this.#slotOf.get(path);
    this.#slotOf.delete(path);
    if (slot?.kind === "branch") this.#free.push(slot.n);
    if (slot?.kind === "job") this.#freeCaps.push(slot.n);
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
    if (
      conn.authority.kind === "job" && frame.t !== "split.create" && frame.t !== "split.join" &&
      frame.t !== "splits.logs" && frame.t !== "jobs.list" && frame.t !== "process.run" &&
      // A job may resolve only a split it made: the verbs check the creator.
      !RESOLVE_CLIENT_FRAMES.has(frame.t) && frame.t !== "resolve.compare" &&
      frame.t !== "split.discard"
    ) {
      throw refuseInJob(frame.t);
    }
    switch (frame.t) {
      case "split.create":
        return await splits.create(conn, frame);
      case "split.join":
        return await splits.join(conn, frame);
      case "splits.list":
        await conn.send({
          v: 1,
          t: "splits",
          ...(this.#housekeeping === null
            ? { splits: splits.list(conn.authority, frame.id) }
            : await this.#housekeeping.list(conn.authority, frame)),
        });
        return;
      case "splits.prune":
        await conn.send({
          v: 1,
          t: "splits.pruned",
          ...await this.#chores().prune(conn.authority, frame),
        });
        return;
      case "splits.cancel":
        await conn.send({
          v: 1,
          t: "ok",
          message: splits.cancelRequest(conn.authority, frame.id, frame.label),
        });
        return;
      case "splits.logs":
        return await hooks.logs(conn, frame);
      case "splits.rm":
        await conn.send({ v: 1, t: "ok", message: await splits.remove(conn.authority, frame.id) });
        return;
      case "split.discard":
        await conn.send({
          v: 1,
          t: "split.discarded",
          ...await splits.discard(conn.authority, frame),
        });
        return;
      case "status":
        await conn.send({ v: 1, t: "status", ...hooks.status() });
        return;
      case "resolve.compare":
        await conn.send(
          await this.#resolver().compare(
            conn.authority,
            frame.id,
            frame.test ? { request: frame.test, conn } : undefined,
          ),
        );
        return;
      case "gc":
        if (conn.authority.kind !== "host") {
          throw new RequestError(2, "only the host may collect snapshot layers");
        }
        await conn.send({ v: 1, t: "gc", ...await hooks.gc(frame.cwd, frame.dryRun) });
        return;
      case "gc.all":
        if (conn.authority.kind !== "host") {
          throw new RequestError(2, "only the host may remove what marsh stored for a project");
        }
        await conn.send({
          v: 1,
          t: "gc.all",
          ...await this.#chores().gcAll(conn.authority, frame),
        });
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
      case "checkpoint.export":
        await conn.send({
          v: 1,
          t: "checkpoint.exported",
          ...await exportCheckpoint(this.#checkpointDeps(), conn.authority, frame),
        });
        return;
      case "checkpoint.show":
        return await showCheckpoint(this.#checkpointDeps(), conn, frame);
      case "checkout":
        return await this.#resolver().serveCheckout(conn, frame);
      case "process.run":
        if (this.#runs === null) {
          throw new RequestError(125, "marsh run is not available in this daemon");
        }
        return await this.#runs.run(conn, frame);
      case "resolve.merge":
      case "resolve.promote":
      case "resolve.choose":
      case "resolve.undo":
      case "resolutions.list":
        // Any socket may ask; only a split's creator is answered (daemon/resolve_context.ts).
        return await this.#resolver().serve(conn, frame as ResolveClientFrame);
      default:
        if (SESSION_CLIENT_FRAMES.has(frame.t)) {
          if (this.#sessions === null) {
            throw new RequestError(125, "checkpoint sessions are not available in this daemon");
          }
          return await this.#sessions.serve(conn, frame as SessionClientFrame);
        }
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
