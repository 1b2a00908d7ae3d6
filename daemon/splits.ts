/**
 * The split state machine (spec 000 §2, §4, §6, §7): create → snapshot →
 * forks → branches → capture → await → joined | kept, or cancelled; every
 * journal record is written before the effect it describes.
 *
 * The daemon holds no FFI and reads no project file: the split-filesystem
 * service does that work; the worker runs the branches.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Journal } from "../journal/journal.ts";
import type { BranchRecord, Creator, SplitRecord } from "../journal/records.ts";
import { ATTEMPTS_DIR, SPOOL_DIR } from "../protocol/control_dir.ts";
import type { BranchSpec, JoinRequest, SplitCreateRequest } from "../protocol/daemon.ts";
import { branchCode, splitCode } from "../protocol/manifest.ts";
import type {
  CapturedReply,
  CreatedReply,
  ForkedReply,
  ForkPolicy,
  LocatedReply,
} from "../protocol/splitfs.ts";
import { SplitfsError, type SplitfsService } from "../splitfs/client.ts";
import { labelProblem } from "../splitfs/layout.ts";
import { filterEnv } from "../worker/env_filter.ts";
import type { Authority, Conn } from "./conn.ts";
import type { Log } from "./log.ts";
import { manifestOf } from "./manifest.ts";
import type { BranchPool } from "./pool.ts";
import type { WorkerLink } from "./worker_link.ts";

/** Spec 000 §4 and §12 bounds. */
export const MAX_BRANCHES = 16;
export const MAX_DEPTH = 3;
export const SPOOL_LIMIT = 64 * 1024 * 1024;
export const OUTPUT_LIMIT = 16 * 1024 * 1024;
/** How often the captured output of a running split is measured. */
const OUTPUT_POLL_MS = 100;

/** Tunables; tests shorten the lease and the grace through the environment. */
export interface Settings {
  /** An awaiting split unheld this long becomes kept (`MARSH_LEASE_MS`, default 60 s). */
  readonly leaseMs: number;
  /** The split deadline (`MARSH_SPLIT_DEADLINE_MS`, default 1 h). */
  readonly deadlineMs: number;
  /** SIGINT to SIGKILL on cancel (`MARSH_CANCEL_GRACE_MS`, default 10 s). */
  readonly graceMs: number;
  /** Test-only: stop at this step and wait to be killed (`MARSH_TEST_PAUSE_AT`). */
  readonly pauseAt: string | null;
  /** `auto`: overlay forks where this host allows them; `copy`: always copy (`MARSH_FORKS`). */
  readonly forks: ForkPolicy;
}

/** Reads the settings from the environment. */
export function settingsFromEnv(get: (name: string) => string | undefined): Settings {
  const ms = (name: string, dflt: number) => {
    const v = get(name);
    if (v === undefined || v === "") return dflt;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) {
      throw new Error(`${name} must be a number of milliseconds: ${v}`);
    }
    return n;
  };
  return {
    leaseMs: ms("MARSH_LEASE_MS", 60_000),
    deadlineMs: ms("MARSH_SPLIT_DEADLINE_MS", 3_600_000),
    graceMs: ms("MARSH_CANCEL_GRACE_MS", 10_000),
    pauseAt: get("MARSH_TEST_PAUSE_AT") || null,
    forks: forkPolicy(get("MARSH_FORKS")),
  };
}

function forkPolicy(v: string | undefined): ForkPolicy {
  if (v === undefined || v === "" || v === "auto") return "auto";
  if (v === "copy") return "copy";
  throw new Error(`MARSH_FORKS must be "auto" or "copy": ${v}`);
}

/** Opens and closes branch sockets; each connection on one carries that branch's authority. */
export interface BranchSockets {
  open(authority: Extract<Authority, { kind: "branch" }>): string;
  close(path: string): void;
}

/** Everything the state machine drives. */
export interface SplitDeps {
  readonly journal: Journal;
  readonly splitfs: SplitfsService;
  readonly worker: WorkerLink;
  readonly pool: BranchPool;
  readonly sockets: BranchSockets;
  readonly log: Log;
  readonly home: string;
  readonly settings: Settings;
}

interface LiveBranch {
  readonly spec: BranchSpec;
  readonly index: number;
  readonly fork: string;
  /** How the fork was made (`forked`): a `userns-overlay` fork exists in the service's namespace only. */
  readonly strategy: string;
  attempt: string | null;
  socket: string | null;
  exit: { code: number | null; signal: string | null } | null;
  slot: boolean;
  settled: PromiseWithResolvers<void>;
  launched: boolean;
  /** The worker said `launched`: the branch's processes exist. */
  running: boolean;
  cancelled: boolean;
  /** The attempt's directory in the control dir, once launched. */
  dir: string | null;
  /** Bytes of stdout and stderr the worker kept, final once the attempt settled. */
  outputBytes: number;
  outputFinal: boolean;
}

/** A split this daemon process is running or holding. */
class LiveSplit {
  readonly branches = new Map<string, LiveBranch>();
  creatorConn: Conn | null = null;
  joinConn: Conn | null = null;
  cancelReason: string | null = null;
  leaseTimer: ReturnType<typeof setTimeout> | undefined;
  deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  outputTimer: ReturnType<typeof setInterval> | undefined;
  /** Whether the split-filesystem service holds this split's descriptors. */
  open = false;
  readonly timing: Record<string, number> = {};
  constructor(readonly id: string, readonly session: string) {}
}

/** A request the caller got wrong; `code` is the exit status. */
export class RequestError extends Error {
  override name = "RequestError";
  constructor(readonly code: number, message: string) {
    super(message);
  }
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

function exitStatus(code: number | null, signal: string | null): string {
  if (code !== null) return `exited ${code}`;
  return `exited ${128 + (signal ? SIGNALS[signal] ?? 0 : 0)}`;
}

const OUTPUT_LIMIT_REASON = "captured output limit of 16 MiB exceeded";

/** The bytes in an attempt's stdout and stderr files so far. */
function outputSize(dir: string): number {
  let n = 0;
  for (const name of ["stdout", "stderr"]) {
    try {
      n += Deno.statSync(`${dir}/${name}`).size;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // The worker has not created it yet.
    }
  }
  return n;
}

function newId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let id = "";
  for (const b of bytes) id += alphabet[b % alphabet.length];
  return id;
}

function creatorOf(auth: Authority): Creator {
  return auth.kind === "host" ? { kind: "host" } : { kind: "session", id: auth.session };
}

function sameCreator(a: Creator, b: Creator): boolean {
  return a.kind === b.kind && (a.kind === "host" || a.id === (b as { id: string }).id);
}

/** Runs and holds splits. */
export class Splits {
  readonly #d: SplitDeps;
  readonly #live = new Map<string, LiveSplit>();
  #stopping = false;

  constructor(deps: SplitDeps) {
    this.#d = deps;
  }

  #liveOf(id: string, session: string): LiveSplit {
    let l = this.#live.get(id);
    if (!l) {
      l = new LiveSplit(id, session);
      this.#live.set(id, l);
    }
    return l;
  }

  async #pause(step: string): Promise<void> {
    if (this.#d.settings.pauseAt !== step) return;
    Deno.writeTextFileSync(`${this.#d.home}/paused-${step}`, `${Deno.pid}\n`);
    this.#d.log.info(`test pause at ${step}`);
    await new Promise(() => {/* until the test kills the daemon */});
  }

  #manifest(id: string) {
    const s = this.#d.journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    return manifestOf(s, this.#d.journal.branches(id));
  }

  async #writeManifest(id: string): Promise<void> {
    const json = JSON.stringify(this.#manifest(id), null, 2) + "\n";
    try {
      await this.#d.splitfs.request({ v: 1, t: "manifest", id, json });
    } catch (error) {
      this.#d.log.info(`split ${id}: manifest not written: ${error}`);
    }
  }

  /** Validates a create request; throws {@linkcode RequestError} with status 2. */
  #validate(req: SplitCreateRequest, auth: Authority): void {
    if (req.branches.length === 0) throw new RequestError(2, "a split needs at least one branch");
    if (req.branches.length > MAX_BRANCHES) {
      throw new RequestError(
        2,
        `too many branches: ${req.branches.length} (at most ${MAX_BRANCHES} per split)`,
      );
    }
    const seen = new Set<string>();
    for (const b of req.branches) {
      const problem = labelProblem(b.label);
      if (problem) throw new RequestError(2, problem);
      if (seen.has(b.label)) throw new RequestError(2, `duplicate label "${b.label}"`);
      seen.add(b.label);
    }
    if (auth.kind === "branch") {
      const parent = this.#d.journal.getSplit(auth.split);
      if ((parent?.depth ?? 1) + 1 > MAX_DEPTH) {
        throw new RequestError(2, `depth limit ${MAX_DEPTH} reached`);
      }
      if (req.branches.some((b) => b.kind === "shell")) {
        throw new RequestError(
          2,
          "a split created inside a branch takes argv branches only (::: LABEL CMD ...)",
        );
      }
    }
    if (req.branches.some((b) => b.kind === "argv")) {
      throw new RequestError(
        2,
        "argv branches (::: LABEL CMD ...) are not yet available; use -b LABEL='command'",
      );
    }
  }

  /** `marsh split`: runs a split over the creator's connection. */
  async create(conn: Conn, req: SplitCreateRequest): Promise<void> {
    const { journal, splitfs, log } = this.#d;
    if (this.#stopping) throw new RequestError(2, "the daemon is stopping");
    this.#validate(req, conn.authority);
    let located: LocatedReply;
    try {
      located = await splitfs.request<LocatedReply>({ v: 1, t: "locate", cwd: req.cwd });
    } catch (error) {
      throw new RequestError(2, error instanceof SplitfsError ? error.message : String(error));
    }
    const id = newId();
    const auth = conn.authority;
    const session = auth.kind === "host" ? "host" : auth.session;
    const parentSplit = auth.kind === "branch" ? journal.getSplit(auth.split) : null;
    const now = Date.now();
    const split: SplitRecord = {
      id,
      creator: creatorOf(auth),
      session,
      parent: auth.kind === "branch" ? { split: auth.split, label: auth.label } : null,
      depth: parentSplit ? parentSplit.depth + 1 : 1,
      root: located.root,
      dir: `${located.root}/.marsh/split/${id}`,
      cwd: located.cwd,
      cap: `${id}/cap`,
      state: "run",
      status: null,
      reason: null,
      identity: null,
      git: null,
      createdMs: now,
      finishedMs: null,
      timing: {},
      withIgnored: req.withIgnored,
      rootId: null,
    };
    journal.createSplit(split);
    journal.createCapability({
      id: split.cap,
      split: id,
      label: null,
      holder: auth.kind === "host" ? "host" : `session:${auth.session}`,
      state: "live",
      createdMs: now,
      revokedMs: null,
    });
    // Every requested branch is on record before anything runs: a restart
    // reports the ones that never started as cancelled.
    journal.addBranches(
      id,
      req.branches.map((b, index): BranchRecord => ({
        split: id,
        label: b.label,
        index,
        kind: b.kind,
        placement: "shell-vm",
        run: b.kind === "shell" ? b.script : b.argv,
        state: "pending",
        status: null,
        code: null,
        jobId: null,
        files: 0,
        trust: null,
        fork: `${split.dir}/${b.label}`,
        forkIdentity: null,
        forkStrategy: null,
        attempt: null,
        startedMs: null,
        finishedMs: null,
        result: null,
        mechanism: null,
      })),
    );
    const live = this.#liveOf(id, session);
    live.creatorConn = conn;
    log.info(`split ${id}: created in ${located.root} (${req.branches.length} branches)`);
    await conn.send({ v: 1, t: "split.accepted", id });
    live.deadlineTimer = setTimeout(
      () =>
        this.cancel(id, `deadline of ${Math.round(this.#d.settings.deadlineMs / 1000)} s reached`),
      this.#d.settings.deadlineMs,
    );

    // The spool is read to EOF before the snapshot.
    const spool = req.spool ? await this.#receiveSpool(conn, live) : null;
    if (spool === undefined || live.cancelReason) return this.#finishCancelled(live, spool ?? null);
    this.#watchCreator(conn, live);

    await this.#pause("before-snapshot");
    let created: CreatedReply;
    try {
      created = await splitfs.request<CreatedReply>(
        {
          v: 1,
          t: "create",
          id,
          cwd: req.cwd,
          env: { HOME: req.env.HOME, XDG_CONFIG_HOME: req.env.XDG_CONFIG_HOME },
          withIgnored: req.withIgnored,
          forks: this.#d.settings.forks,
        },
        undefined,
        (p) => {
          void conn.send({
            v: 1,
            t: "notice",
            progress: true,
            message: `snapshot: ${p.files} files, ${(p.bytes / 1048576).toFixed(1)} MiB`,
          });
        },
      );
    } catch (error) {
      return this.#setupFailed(live, spool, error, false);
    }
    live.open = true;
    if (created.root !== located.root) {
      // The tree moved between locate and snapshot: the journaled root is wrong.
      return this.#setupFailed(
        live,
        spool,
        new Error(`the project root changed while splitting: ${located.root} -> ${created.root}`),
        true,
      );
    }
    live.timing.snapshot = created.snapshot.ms;
    journal.updateSplit(id, {
      identity: created.identity,
      git: created.git,
      timing: { ...live.timing },
      rootId: created.snapshot.rootId,
    });
    await this.#pause("after-snapshot");

    const t0 = performance.now();
    for (const [index, spec] of req.branches.entries()) {
      if (live.cancelReason) break;
      let f: ForkedReply;
      try {
        f = await splitfs.request<ForkedReply>(
          { v: 1, t: "fork", id, label: spec.label },
          undefined,
          (p) => {
            void conn.send({
              v: 1,
              t: "notice",
              progress: true,
              message: `fork ${spec.label}: ${p.files} files, ${
                (p.bytes / 1048576).toFixed(1)
              } MiB`,
            });
          },
        );
        journal.updateBranch(id, spec.label, {
          forkIdentity: f.identity,
          forkStrategy: f.strategy,
        });
      } catch (error) {
        return this.#setupFailed(live, spool, error, true);
      }
      live.branches.set(spec.label, {
        spec,
        index,
        fork: `${split.dir}/${spec.label}`,
        strategy: f.strategy,
        attempt: null,
        socket: null,
        exit: null,
        slot: false,
        settled: Promise.withResolvers<void>(),
        launched: false,
        running: false,
        cancelled: false,
        dir: null,
        outputBytes: 0,
        outputFinal: false,
      });
    }
    live.timing.forks = Math.round(performance.now() - t0);
    journal.updateSplit(id, { timing: { ...live.timing } });

    const runStart = performance.now();
    const env = filterEnv(req.env);
    live.outputTimer = setInterval(() => this.#checkOutput(live), OUTPUT_POLL_MS);
    for (const b of live.branches.values()) await this.#launch(live, split, b, env, spool);
    await this.#pause("mid-run");
    await Promise.all([...live.branches.values()].map((b) => b.settled.promise));
    live.timing.run = Math.round(performance.now() - runStart);
    await this.#pause("after-capture");
    if (live.cancelReason) return this.#finishCancelled(live, spool);
    await this.#finishAwait(live, spool);
  }

  async #receiveSpool(conn: Conn, live: LiveSplit): Promise<string | null | undefined> {
    Deno.mkdirSync(`${this.#d.home}/${SPOOL_DIR}`, { recursive: true, mode: 0o700 });
    const path = `${this.#d.home}/${SPOOL_DIR}/${live.id}`;
    using file = Deno.openSync(path, { write: true, createNew: true, mode: 0o600 });
    let size = 0;
    let reason: string;
    for (;;) {
      const frame = await conn.next();
      if (frame === null) {
        reason = "the creator's stream was dropped";
        break;
      }
      if (frame.t === "split.cancel") {
        reason = "cancelled by the creator";
        break;
      }
      if (frame.t === "spool.end") return path;
      if (frame.t !== "spool") continue;
      const bytes = Buffer.from(frame.data, "base64");
      size += bytes.length;
      if (size > SPOOL_LIMIT) {
        reason = "spool limit of 64 MiB exceeded";
        break;
      }
      file.writeSync(bytes);
    }
    this.#cancelState(live, reason);
    // No branch will read a cancelled spool: it must not stay in the control dir.
    Deno.removeSync(path);
    return undefined;
  }

  /**
   * Reads the create stream after the spool: `split.cancel` (Ctrl-C) cancels
   * the split, and so does a dropped stream while it runs. Its end also
   * starts the lease of a split that finished (see #finishAwait).
   */
  #watchCreator(conn: Conn, live: LiveSplit): void {
    void (async () => {
      for (;;) {
        const frame = await conn.next();
        if (frame === null) {
          this.cancel(live.id, "the creator's stream was dropped");
          return;
        }
        if (frame.t === "split.cancel") this.cancel(live.id, "cancelled by the creator");
      }
    })();
  }

  /** Branches that never launched end as cancelled (a cancel, or a setup failure). */
  #cancelPending(id: string): void {
    for (const b of this.#d.journal.branches(id)) {
      this.#d.journal.transitionBranch(id, b.label, ["pending"], "cancelled", {
        status: "cancelled",
        code: 130,
        finishedMs: Date.now(),
      });
    }
  }

  #cancelState(live: LiveSplit, reason: string): void {
    live.cancelReason ??= reason;
  }

  async #launch(
    live: LiveSplit,
    split: SplitRecord,
    b: LiveBranch,
    env: Record<string, string>,
    spool: string | null,
  ): Promise<void> {
    const { journal, pool, worker, sockets, home, splitfs } = this.#d;
    const label = b.spec.label;
    // A branch that never starts still ends with a status and an out/ entry.
    const endUnlaunched = async (state: "cancelled" | "failed", status: string) => {
      journal.transitionBranch(live.id, label, ["pending"], state, {
        status,
        code: branchCode(status) ?? 125,
        finishedMs: Date.now(),
      });
      await this.#publish(live, label, status, null);
      b.settled.resolve();
    };
    if (live.cancelReason) {
      b.cancelled = true;
      return endUnlaunched("cancelled", "cancelled");
    }
    // A userns-overlay fork is mounted in the service's namespace only: the
    // branch joins it there, or its cwd would be the bare mount point.
    const namespace = b.strategy === "userns-overlay" ? splitfs.namespace : null;
    if (b.strategy === "userns-overlay" && namespace === null) {
      return endUnlaunched(
        "failed",
        "failed: its fork is mounted in a namespace the split-filesystem service does not have",
      );
    }
    if (!pool.admit(live.session, `${live.id}/${label}`)) {
      return endUnlaunched("failed", "failed: capacity");
    }
    b.slot = true;
    const attempt = `${live.id}-${label}-${newId().slice(0, 4)}`;
    const dir = `${home}/${ATTEMPTS_DIR}/${attempt}`;
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    b.attempt = attempt;
    b.dir = dir;
    b.socket = sockets.open({
      kind: "branch",
      split: live.id,
      label,
      session: `${live.id}/${label}`,
    });
    journal.createCapability({
      id: `${live.id}/${label}`,
      split: live.id,
      label,
      holder: `session:${live.id}/${label}`,
      state: "live",
      createdMs: Date.now(),
      revokedMs: null,
    });
    journal.transitionBranch(live.id, label, ["pending"], "running", {
      attempt,
      startedMs: Date.now(),
    });
    b.launched = true;
    const cwd = split.cwd === "" ? b.fork : `${b.fork}/${split.cwd}`;
    await worker.launch({
      attempt,
      script: (b.spec as { script: string }).script,
      cwd,
      env,
      socket: b.socket,
      stdin: spool,
      stdout: `${dir}/stdout`,
      stderr: `${dir}/stderr`,
      outputLimit: OUTPUT_LIMIT,
      ...(namespace ? { namespace: { pid: namespace.pid } } : {}),
    }, {
      launched: (_pid, mechanism) => {
        b.running = true;
        journal.updateBranch(live.id, label, { mechanism });
      },
      exited: (code, signal) => {
        b.exit = { code, signal };
      },
      settled: () => {
        this.#settled(live, b, dir).catch((error) => {
          this.#d.log.info(`split ${live.id}/${label}: settle failed: ${error?.stack ?? error}`);
          b.settled.resolve();
        });
      },
      outputLimit: () => this.cancel(live.id, OUTPUT_LIMIT_REASON),
      error: (message) => this.#attemptLost(live, b, message),
    });
  }

  /**
   * The worker gave up on an attempt. Before `launched` nothing ran: the
   * branch failed and its slot frees. After it, processes may still live: the
   * branch is uncertain, its fork untrusted, its slot held until reset.
   */
  #attemptLost(live: LiveSplit, b: LiveBranch, message: string): void {
    const { journal, log, sockets, pool } = this.#d;
    const label = b.spec.label;
    log.info(`split ${live.id}/${label}: worker: ${message}`);
    if (b.socket) sockets.close(b.socket);
    journal.revokeCapability(`${live.id}/${label}`);
    if (b.running) {
      journal.transitionBranch(live.id, label, ["running"], "uncertain", {
        trust: "untrusted",
        status: `failed: ${message}`,
        code: 125,
        finishedMs: Date.now(),
      });
    } else {
      journal.transitionBranch(live.id, label, ["running"], "failed", {
        status: `failed: ${message}`,
        code: 125,
        finishedMs: Date.now(),
      });
      if (b.slot) pool.release(live.session, `${live.id}/${label}`);
      b.slot = false;
    }
    b.settled.resolve();
  }

  async #settled(live: LiveSplit, b: LiveBranch, dir: string): Promise<void> {
    const { journal, splitfs, pool, sockets } = this.#d;
    const label = b.spec.label;
    if (b.socket) sockets.close(b.socket);
    journal.revokeCapability(`${live.id}/${label}`);
    const outputs = { stdout: `${dir}/stdout`, stderr: `${dir}/stderr` };
    b.outputBytes = outputSize(dir);
    b.outputFinal = true;
    this.#checkOutput(live);
    let state: "captured" | "rejected" | "failed" | "cancelled";
    let status: string;
    let files = 0;
    if (live.cancelReason) {
      state = "cancelled";
      status = "cancelled";
    } else {
      status = exitStatus(b.exit?.code ?? null, b.exit?.signal ?? null);
      await this.#pause("mid-capture");
      const t0 = performance.now();
      try {
        const c = await splitfs.request<CapturedReply>({ v: 1, t: "capture", id: live.id, label });
        state = "captured";
        files = c.files;
      } catch (error) {
        if (error instanceof SplitfsError && error.kind === "rejected") {
          state = "rejected";
          status = `rejected: ${error.message}`;
          await splitfs.request({ v: 1, t: "remove-fork", id: live.id, label }).catch(() => {});
        } else if (error instanceof SplitfsError && error.kind === "replaced") {
          state = "failed";
          status = "failed: workspace replaced";
          journal.updateSplit(live.id, { reason: "workspace replaced" });
        } else {
          state = "failed";
          status = `failed: ${error instanceof Error ? error.message : String(error)}`;
        }
      }
      live.timing[`capture:${label}`] = Math.round(performance.now() - t0);
    }
    const published = await this.#publish(live, label, status, outputs);
    if (!published.ok && state === "captured") {
      state = "rejected";
      status = `rejected: ${published.reason}`;
    }
    if (published.ok) {
      // out/<label> holds the copy now; the control dir must not keep every branch's output.
      await Deno.remove(dir, { recursive: true }).catch((error) =>
        this.#d.log.info(`split ${live.id}/${label}: ${dir} not removed: ${error}`)
      );
    }
    journal.transitionBranch(live.id, label, ["running"], state, {
      status,
      code: branchCode(status) ?? 125,
      files,
      finishedMs: Date.now(),
    });
    if (b.slot) pool.release(live.session, `${live.id}/${label}`);
    b.slot = false;
    b.settled.resolve();
  }

  async #publish(
    live: LiveSplit,
    label: string,
    status: string,
    outputs: { stdout: string; stderr: string } | null,
  ): Promise<{ ok: true } | { ok: false; reason: string }> {
    if (!live.open) return { ok: true };
    try {
      await this.#d.splitfs.request({
        v: 1,
        t: "publish",
        id: live.id,
        label,
        status,
        stdout: outputs?.stdout ?? null,
        stderr: outputs?.stderr ?? null,
      });
      return { ok: true };
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      this.#d.log.info(`split ${live.id}/${label}: publish failed: ${reason}`);
      return { ok: false, reason };
    }
  }

  async #setupFailed(
    live: LiveSplit,
    spool: string | null,
    error: unknown,
    remove: boolean,
  ): Promise<void> {
    const message = error instanceof Error ? error.message : String(error);
    if (remove && live.open) {
      await this.#d.splitfs.request({ v: 1, t: "remove", id: live.id }).catch(() => {});
      live.open = false;
      this.#d.journal.updateSplit(live.id, { identity: null });
    }
    this.#cancelPending(live.id);
    this.#d.journal.transitionSplit(live.id, ["run"], "cancelled", {
      status: 2,
      reason: `setup failed: ${message}`,
      finishedMs: Date.now(),
    });
    this.#d.journal.revokeCapabilitiesOfSplit(live.id);
    this.#cleanup(live, spool);
    await live.creatorConn?.send({ v: 1, t: "error", code: 2, message });
    this.#live.delete(live.id);
  }

  /**
   * Captured output is a hard limit of the whole split (spec 000 §4): every
   * branch's stdout and stderr together. The worker stops a single attempt
   * at the limit; this catches several that cross it together.
   */
  #checkOutput(live: LiveSplit): void {
    if (live.cancelReason) return;
    let total = 0;
    for (const b of live.branches.values()) {
      if (b.dir) total += b.outputFinal ? b.outputBytes : outputSize(b.dir);
    }
    if (total > OUTPUT_LIMIT) this.cancel(live.id, OUTPUT_LIMIT_REASON);
  }

  #cleanup(live: LiveSplit, spool: string | null): void {
    clearTimeout(live.deadlineTimer);
    clearInterval(live.outputTimer);
    if (spool) Deno.remove(spool).catch(() => {});
  }

  async #finishAwait(live: LiveSplit, spool: string | null): Promise<void> {
    const { journal } = this.#d;
    const code = splitCode(
      journal.branches(live.id).map((b) => ({ status: b.status ?? undefined })),
    );
    journal.transitionSplit(live.id, ["run"], "await", {
      status: code,
      finishedMs: Date.now(),
      timing: { ...live.timing },
    });
    this.#cleanup(live, spool);
    const conn = live.creatorConn;
    live.creatorConn = null;
    await this.#writeManifest(live.id);
    if (conn && !conn.isClosed) {
      // The create stream holds the lease until it ends.
      conn.closed.then(() => this.#startLease(live));
      await conn.send({
        v: 1,
        t: "split.done",
        id: live.id,
        code,
        manifest: this.#manifest(live.id),
      });
      await conn.flush();
    } else {
      this.#startLease(live);
    }
  }

  #startLease(live: LiveSplit): void {
    if (live.joinConn) return;
    clearTimeout(live.leaseTimer);
    live.leaseTimer = setTimeout(() => {
      if (live.joinConn) return;
      if (
        this.#d.journal.transitionSplit(live.id, ["await"], "kept", {
          reason: `not joined within ${Math.round(this.#d.settings.leaseMs / 1000)} s`,
        })
      ) {
        this.#d.log.info(`split ${live.id}: lease expired, kept`);
        void this.#writeManifest(live.id);
      }
    }, this.#d.settings.leaseMs);
  }

  async #finishCancelled(live: LiveSplit, spool: string | null): Promise<void> {
    const { journal, splitfs } = this.#d;
    const reason = live.cancelReason ?? "cancelled";
    // Every branch's end is confirmed once it settled (the worker reaps or kills all).
    const unconfirmed = [...live.branches.values()].filter((b) =>
      b.launched && !b.exit && !b.cancelled
    )
      .map((b) => b.spec.label);
    let message = `split ${live.id} cancelled: ${reason}`;
    if (live.open && unconfirmed.length === 0) {
      try {
        await splitfs.request({ v: 1, t: "remove", id: live.id });
        live.open = false;
        journal.updateSplit(live.id, { identity: null });
      } catch (error) {
        message += `; kept (${
          error instanceof Error ? error.message : error
        }): remove it with: marsh splits rm ${live.id}`;
      }
    } else if (unconfirmed.length > 0) {
      message += `; kept because these branches' ends are unconfirmed: ${unconfirmed.join(", ")}`;
    }
    this.#cancelPending(live.id);
    journal.transitionSplit(live.id, ["run"], "cancelled", {
      status: 130,
      reason,
      finishedMs: Date.now(),
      timing: { ...live.timing },
    });
    journal.revokeCapabilitiesOfSplit(live.id);
    this.#cleanup(live, spool);
    const conn = live.creatorConn;
    if (conn && !conn.isClosed) {
      await conn.send({
        v: 1,
        t: "split.done",
        id: live.id,
        code: 130,
        message,
        manifest: this.#manifest(live.id),
      });
    }
    this.#d.log.info(message);
    if (live.open) {
      await splitfs.request({ v: 1, t: "release", id: live.id }).catch(() => {});
      live.open = false;
    }
    this.#live.delete(live.id);
  }

  /**
   * Cancels a running split: SIGINT to every process of every branch, the
   * grace, then SIGKILL; branches not yet launched never start.
   */
  cancel(id: string, reason: string): boolean {
    const live = this.#live.get(id);
    if (!live || this.#d.journal.getSplit(id)?.state !== "run") return false;
    if (live.cancelReason) return true;
    live.cancelReason = reason;
    this.#d.log.info(`split ${id}: cancelling: ${reason}`);
    for (const b of live.branches.values()) {
      if (b.attempt && b.launched) void this.#d.worker.cancel(b.attempt, this.#d.settings.graceMs);
    }
    return true;
  }

  #authorize(auth: Authority, s: SplitRecord): void {
    if (auth.kind === "host" && s.creator.kind === "host") return;
    if (sameCreator(creatorOf(auth), s.creator)) return;
    throw new RequestError(
      2,
      `split ${s.id} was not created by this caller; only its creator may join it`,
    );
  }

  async #ensureOpen(live: LiveSplit, s: SplitRecord): Promise<void> {
    if (live.open) return;
    if (!s.identity) throw new RequestError(2, `split ${s.id} has no workspace left`);
    // Every fork still on disk is checked too; a rejected one was removed at capture.
    const forks = this.#d.journal.branches(s.id)
      .filter((b) => b.forkIdentity !== null && b.state !== "rejected")
      .map((b) => ({
        label: b.label,
        identity: b.forkIdentity!,
        ...(b.forkStrategy !== null ? { strategy: b.forkStrategy } : {}),
      }));
    // A SplitfsError goes to the caller, who says what it means for its request.
    await this.#d.splitfs.request({
      v: 1,
      t: "reopen",
      id: s.id,
      root: s.root,
      identity: s.identity,
      forks,
      git: s.git !== null,
    });
    live.open = true;
  }

  /** A split-filesystem failure on a held split, as the caller's message. */
  #refusal(id: string, error: unknown): RequestError {
    if (error instanceof SplitfsError && error.kind === "replaced") {
      return new RequestError(
        2,
        `split ${id}: workspace replaced: its directory was removed or replaced (git clean -xfd?), so nothing was read or removed; marsh splits rm ${id} forgets it`,
      );
    }
    return new RequestError(2, `split ${id}: ${error instanceof Error ? error.message : error}`);
  }

  /** `marsh join`: rendering, consumer, release. */
  async join(conn: Conn, req: JoinRequest): Promise<void> {
    const { journal, splitfs } = this.#d;
    const s = journal.getSplit(req.id);
    if (!s) throw new RequestError(2, `no split ${req.id}`);
    this.#authorize(conn.authority, s);
    if (s.state === "cancelled") {
      // `split | join` after a cancel: join does not run, and the pipeline keeps 130.
      throw new RequestError(130, `split ${s.id} was cancelled: nothing to join`);
    }
    if (s.state !== "await" && s.state !== "kept") {
      throw new RequestError(
        2,
        `split ${s.id} is ${s.state}: only awaiting or kept splits can be joined`,
      );
    }
    const live = this.#liveOf(s.id, s.session);
    if (live.joinConn && !live.joinConn.isClosed) {
      throw new RequestError(2, `split ${s.id} is already being joined`);
    }
    live.joinConn = conn;
    clearTimeout(live.leaseTimer);
    try {
      await this.#ensureOpen(live, s);
      const manifest = this.#manifest(s.id);
      const env: Record<string, string> = {
        SPLIT_ID: s.id,
        SPLIT_DIR: manifest.out,
        SPLIT_MANIFEST: `${manifest.out}/manifest.json`,
      };
      if (s.depth === 1) env.SPLIT_OBJECTS = manifest.objects;
      await conn.send({ v: 1, t: "join.ready", manifest, env });
      const branches = journal.branches(s.id);
      await splitfs.request({
        v: 1,
        t: "render",
        id: s.id,
        terminal: req.terminal,
        branches: branches.map((b) => ({
          label: b.label,
          status: b.status ?? b.state,
          files: b.files,
        })),
      }, (bytes) => conn.send({ v: 1, t: "chunk", data: Buffer.from(bytes).toString("base64") }));
      await conn.send({ v: 1, t: "join.rendered" });
      const t0 = performance.now();
      let frame = await conn.next();
      while (frame !== null && frame.t !== "join.release") frame = await conn.next();
      const consumerMs = Math.round(performance.now() - t0);
      if (frame === null) {
        this.#keep(s.id, "the join did not release it");
        return;
      }
      const uncertain = branches.some((b) => b.state === "uncertain");
      let reason: string | null = null;
      if (req.keep) reason = "--keep was given";
      else if (uncertain) reason = "a branch is uncertain";
      else if (req.consumer && frame.consumerStatus !== 0) {
        reason = `the consumer exited ${frame.consumerStatus}`;
      } else if (!req.consumer) {
        const bad = branches.find((b) => (b.code ?? 125) !== 0);
        if (bad) reason = `branch ${bad.label}: ${bad.status ?? bad.state}`;
      }
      journal.updateSplit(s.id, { timing: { ...s.timing, consumer: consumerMs } });
      if (reason === null) {
        await this.#pause("mid-release");
        // The state is journaled before the release it describes.
        journal.transitionSplit(s.id, ["await", "kept"], "joined", { reason: null });
        try {
          await splitfs.request({ v: 1, t: "remove", id: s.id });
          live.open = false;
          journal.updateSplit(s.id, { identity: null });
          journal.revokeCapabilitiesOfSplit(s.id);
          await conn.send({ v: 1, t: "join.released", removed: true });
          this.#live.delete(s.id);
          return;
        } catch (error) {
          reason = error instanceof Error ? error.message : String(error);
          journal.transitionSplit(s.id, ["joined"], "kept", { reason });
        }
      }
      this.#keep(s.id, reason);
      await conn.send({
        v: 1,
        t: "join.released",
        removed: false,
        message: `split ${s.id} kept: ${reason}; remove it with: marsh splits rm ${s.id}`,
      });
    } catch (error) {
      // A join that cannot finish leaves the split kept, never awaiting without a lease.
      const replaced = error instanceof SplitfsError && error.kind === "replaced";
      this.#keep(
        s.id,
        replaced
          ? "workspace replaced"
          : `the join failed: ${error instanceof Error ? error.message : error}`,
      );
      throw error instanceof SplitfsError ? this.#refusal(s.id, error) : error;
    } finally {
      live.joinConn = null;
    }
  }

  #keep(id: string, reason: string): void {
    this.#d.journal.transitionSplit(id, ["await", "kept"], "kept", { reason });
    void this.#writeManifest(id);
  }

  /** `marsh splits [ID]`: the host sees all; a branch its own. */
  list(auth: Authority, id?: string) {
    const { journal } = this.#d;
    const all = id
      ? [journal.getSplit(id)].filter((s): s is SplitRecord => s !== null && s !== undefined)
      : journal.listSplits(auth.kind === "host" ? {} : { creator: creatorOf(auth) });
    if (id && all.length === 0) throw new RequestError(2, `no split ${id}`);
    const visible = all.filter((s) =>
      auth.kind === "host" || sameCreator(creatorOf(auth), s.creator)
    );
    if (id && visible.length === 0) {
      throw new RequestError(2, `split ${id} was not created by this caller`);
    }
    return visible.map((s) => manifestOf(s, journal.branches(s.id)));
  }

  /** `marsh splits cancel ID`. */
  cancelRequest(auth: Authority, id: string): string {
    const s = this.#d.journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    if (auth.kind !== "host" && !sameCreator(creatorOf(auth), s.creator)) {
      throw new RequestError(2, `split ${id} was not created by this caller`);
    }
    if (s.state !== "run") {
      throw new RequestError(2, `split ${id} is not running (state ${s.state})`);
    }
    if (!this.cancel(id, "cancelled with marsh splits cancel")) {
      throw new RequestError(2, `split ${id} is not running in this daemon`);
    }
    return `split ${id}: cancelling`;
  }

  /** `marsh splits rm ID`: removes a kept (or cancelled, joined, uncertain) split. */
  async remove(auth: Authority, id: string): Promise<string> {
    const { journal, splitfs } = this.#d;
    const s = journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    if (auth.kind !== "host" && !sameCreator(creatorOf(auth), s.creator)) {
      throw new RequestError(2, `split ${id} was not created by this caller`);
    }
    if (s.state === "run") {
      throw new RequestError(
        2,
        `split ${id} is running; cancel it first with: marsh splits cancel ${id}`,
      );
    }
    const live = this.#liveOf(id, s.session);
    if (live.joinConn && !live.joinConn.isClosed) {
      throw new RequestError(2, `split ${id} is being joined`);
    }
    let said = `split ${id} removed`;
    if (s.identity) {
      try {
        await this.#ensureOpen(live, s);
        await splitfs.request({ v: 1, t: "remove", id });
      } catch (error) {
        if (!(error instanceof SplitfsError && error.kind === "replaced")) {
          throw new RequestError(
            2,
            `split ${id} not removed: ${error instanceof Error ? error.message : error}`,
          );
        }
        // What is there now is not ours: only the record goes (spec 000 §6).
        if (live.open) {
          await splitfs.request({ v: 1, t: "release", id }).catch(() => {});
          live.open = false;
        }
        said =
          `split ${id}: its directory was removed or replaced, so nothing was removed from disk; record dropped`;
      }
    }
    clearTimeout(live.leaseTimer);
    journal.revokeCapabilitiesOfSplit(id);
    journal.deleteSplit(id);
    this.#live.delete(id);
    return said;
  }

  /** Starts lease timers for awaiting splits found at start-up. */
  adoptAwaiting(): void {
    for (const s of this.#d.journal.listSplits({ states: ["await"] })) {
      this.#startLease(this.#liveOf(s.id, s.session));
    }
  }

  /** Cancels every running split and waits for them to settle (daemon stop). */
  async stop(): Promise<void> {
    this.#stopping = true;
    for (const id of this.#live.keys()) this.cancel(id, "the daemon is stopping");
    const deadline = Date.now() + this.#d.settings.graceMs + 5000;
    while (Date.now() < deadline && [...this.#live.values()].some((l) => l.cancelReason)) {
      await new Promise((r) => setTimeout(r, 50));
    }
    for (const l of this.#live.values()) {
      clearTimeout(l.leaseTimer);
      clearTimeout(l.deadlineTimer);
    }
  }
}
