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
import type { KitRecord } from "../journal/kits.ts";
import type { BranchRecord, JobRecord, SplitRecord } from "../journal/records.ts";
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
import { labelProblem } from "../model/layout.ts";
import { filterEnv } from "../worker/env_filter.ts";
import type { Authority, Conn } from "./conn.ts";
import { creatorOf, mayView, sameCreator } from "./creator.ts";
import {
  branchCancelProblem,
  BranchControls,
  stoppedState,
  timeLimitProblem,
  timeLimitStatus,
} from "./branch_controls.ts";
import { heldByUncertainJobs } from "./jobs.ts";
import { consumerEnv } from "./join_env.ts";
import { writeJoinObjects } from "./join_objects.ts";
import { checkArgvBranches } from "./kit_names.ts";
import type { Log } from "./log.ts";
import { keptWork, manifestOf } from "./manifest.ts";
import { removeAttemptsOf } from "./attempts.ts";
import { completeOut } from "./join_out.ts";
import type { BranchPool } from "./pool.ts";
import type { WorkerLink } from "./worker_link.ts";
import { jobJsonBase, writeCapDir } from "./job_capability.ts";
import { branchCwd, shellPlace, type ShellViewChoice } from "./shell_view.ts";
import { isReservedEnvName, isWithin, type KitCap } from "../protocol/kit_launch.ts";
import { MAX_BRANCHES, MAX_DEPTH, OUTPUT_LIMIT, SPOOL_LIMIT } from "./limits.ts";
import { RequestError } from "./request_error.ts";
import { moveBranch, moveSplit } from "./split_moves.ts";
import { endEvent } from "../model/branch_state.ts";

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
  /** A Kit attempt's capability socket (`/run/marsh/cap.sock`). */
  openJob(authority: Extract<Authority, { kind: "job" }>): string;
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
  /** The view shell branches get (`daemon/shell_view.ts`). */
  readonly shellView: ShellViewChoice;
  /** The bundled in-job client, built on the first Kit launch. */
  readonly jobClient: { ensure(): Promise<string> };
  /** The host's Deno executable, bound at `/run/marsh/deno`. */
  readonly deno: string;
  /**
   * Why argv branches cannot run in this daemon (the worker has no engine:
   * `DOCKER_HOST` could not be used), or absent when they can.
   */
  readonly engineProblem?: string;
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
  /** An argv branch's Kit, resolved at create, and its job. */
  readonly kit: KitRecord | null;
  readonly jobId: string | null;
  /** An argv branch's container, once it exists. */
  container: string | null;
  /** The Kit's wall clock stopped the container. */
  wall: boolean;
  /** The end is confirmed without an exit (a Kit attempt that failed and left nothing). */
  confirmed: boolean;
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
  /** Branches stopped alone (a cancel, a time limit), with the status each ends with. */
  readonly stopped = new Map<string, string>();
  readonly timing: Record<string, number> = {};
  constructor(readonly id: string, readonly session: string) {}
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

function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

function newId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let id = "";
  for (const b of bytes) id += alphabet[b % alphabet.length];
  return id;
}

/** Spec 004 §13.6: a job or a split branch splits with argv branches only. */
export function shellBranchRefusal(label: string): string {
  return `${label}: shell branches (-b, split { }) run only from the session shell; ` +
    "from a job or a split branch use argv branches: ::: LABEL CMD [ARG...]";
}

/** Runs and holds splits. */
export class Splits {
  readonly #d: SplitDeps;
  /** The control dir, canonical: a shell branch's view binds it read-only. */
  #control: string | null = null;
  readonly #live = new Map<string, LiveSplit>();
  readonly #controls = new BranchControls();
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

  /** Writes `out/manifest.json`; a failure is logged and returned (join writes it again). */
  async #writeManifest(id: string): Promise<string | null> {
    const json = JSON.stringify(this.#manifest(id), null, 2) + "\n";
    try {
      await this.#d.splitfs.request({ v: 1, t: "manifest", id, json });
      return null;
    } catch (error) {
      this.#d.log.info(`split ${id}: manifest not written: ${error}`);
      return error instanceof Error ? error.message : String(error);
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
      const limit = timeLimitProblem(b);
      if (limit) throw new RequestError(2, limit);
    }
    if (auth.kind === "branch" || auth.kind === "job") {
      const shell = req.branches.find((b) => b.kind === "shell");
      if (shell) throw new RequestError(2, shellBranchRefusal(shell.label));
      const parent = this.#d.journal.getSplit(auth.split);
      if ((parent?.depth ?? 1) + 1 > MAX_DEPTH) {
        throw new RequestError(2, `depth limit ${MAX_DEPTH} reached`);
      }
    }
    if (auth.kind === "job" && !isWithin(req.cwd, auth.fork)) {
      // The job's view is its fork: a split of anything else is not its to make.
      throw new RequestError(
        2,
        `a job splits its own fork: run marsh split in ${auth.fork} or below (not ${req.cwd})`,
      );
    }
    const unknown = checkArgvBranches(req.branches, this.#d.journal);
    if (unknown !== null) throw new RequestError(2, unknown);
  }

  /**
   * The registration of every argv branch's Kit, resolved once at create:
   * a later `kits rm` or `--replace` does not change a running split.
   */
  #resolveKits(req: SplitCreateRequest): Map<string, KitRecord> {
    const kits = new Map<string, KitRecord>();
    for (const b of req.branches) {
      if (b.kind !== "argv" || kits.has(b.argv[0]!)) continue;
      const kit = this.#d.journal.getKit(b.argv[0]!);
      if (kit === null) {
        // Removed since the check: refuse the same way.
        throw new RequestError(2, checkArgvBranches([b], this.#d.journal) ?? `unknown Kit command`);
      }
      kits.set(kit.name, kit);
    }
    return kits;
  }

  /** Where a branch's CLI is, as the split-filesystem service sees it (`branchCwd`). */
  #callerCwd(auth: Authority, cwd: string): string {
    if (auth.kind !== "branch") return cwd;
    const branch = this.#d.journal.getBranch(auth.split, auth.label);
    const parent = this.#d.journal.getSplit(auth.split);
    return branch && parent ? branchCwd(cwd, branch, parent.root) : cwd;
  }

  /** `marsh split`: runs a split over the creator's connection. */
  async create(conn: Conn, req: SplitCreateRequest): Promise<void> {
    const { journal, splitfs, log } = this.#d;
    if (this.#stopping) throw new RequestError(2, "the daemon is stopping");
    this.#validate(req, conn.authority);
    const kits = this.#resolveKits(req);
    // A branch's or a job's split is taken of its own fork (spec 000 §2, ChildFromParent).
    const source = conn.authority.kind === "host"
      ? null
      : { split: conn.authority.split, label: conn.authority.label };
    // A branch with the project view reports its cwd under the project root.
    const cwd = this.#callerCwd(conn.authority, req.cwd);
    let located: LocatedReply;
    try {
      located = await splitfs.request<LocatedReply>({
        v: 1,
        t: "locate",
        cwd,
        ...(source ? { parent: source } : {}),
      });
    } catch (error) {
      throw new RequestError(2, error instanceof SplitfsError ? error.message : String(error));
    }
    const id = newId();
    const auth = conn.authority;
    // The creator may have ended while the project was located: a branch's or
    // a job's split is recorded only under a live capability (spec 004 §3).
    if (
      auth.kind !== "host" && journal.getCapability(`${auth.split}/${auth.label}`)?.state !== "live"
    ) {
      throw new RequestError(
        125,
        "the capability of this caller was revoked: its branch or job ended",
      );
    }
    const session = auth.kind === "host" ? "host" : auth.session;
    const parentSplit = auth.kind !== "host" ? journal.getSplit(auth.split) : null;
    const now = Date.now();
    const split: SplitRecord = {
      id,
      creator: creatorOf(auth),
      session,
      parent: auth.kind !== "host" ? { split: auth.split, label: auth.label } : null,
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
      holder: auth.kind === "host"
        ? "host"
        : auth.kind === "job"
        ? `job:${auth.job}`
        : `session:${auth.session}`,
      state: "live",
      createdMs: now,
      revokedMs: null,
    });
    // Every requested branch (and an argv branch's job) is on record before
    // anything runs: a restart reports the ones that never started as cancelled.
    const jobIds = new Map<string, string>();
    for (const b of req.branches) if (b.kind === "argv") jobIds.set(b.label, newId());
    const branchRecords = req.branches.map((b, index): BranchRecord => ({
      split: id,
      label: b.label,
      index,
      kind: b.kind,
      placement: b.kind === "shell" ? "shell-vm" : `kit:${b.argv[0]}`,
      run: b.kind === "shell" ? b.script : b.argv,
      state: "pending",
      status: null,
      code: null,
      jobId: jobIds.get(b.label) ?? null,
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
      view: null,
      viewReason: null,
    }));
    journal.immediate(() => {
      journal.addBranches(id, branchRecords);
      for (const b of req.branches) {
        if (b.kind !== "argv") continue;
        const job: JobRecord = {
          id: jobIds.get(b.label)!,
          kit: b.argv[0]!,
          args: b.argv,
          split: id,
          label: b.label,
          session,
          state: "queued",
          cleanup: "none",
          attempt: null,
          container: null,
          status: null,
          code: null,
          createdMs: now,
          startedMs: null,
          finishedMs: null,
        };
        journal.addJob(job);
      }
    });
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
          cwd,
          env: { HOME: req.env.HOME, XDG_CONFIG_HOME: req.env.XDG_CONFIG_HOME },
          withIgnored: req.withIgnored,
          // A fork mounted in the service's own namespace is invisible to the
          // engine: a split with argv branches takes copies there.
          forks: splitfs.namespace !== null && kits.size > 0 ? "copy" : this.#d.settings.forks,
          ...(source ? { parent: source } : {}),
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
    if (created.snapshot.untrusted) {
      // A layer changed after its seal is never a base again (docs/engine.md).
      const message = `marsh split: ${created.snapshot.untrusted}; ` +
        "it was not used: this split's base is a fresh copy of the tree";
      log.info(`split ${id}: ${message}`);
      void conn.send({ v: 1, t: "notice", message });
    }
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
        kit: spec.kind === "argv" ? kits.get(spec.argv[0]!) ?? null : null,
        jobId: jobIds.get(spec.label) ?? null,
        container: null,
        wall: false,
        confirmed: false,
      });
    }
    live.timing.forks = Math.round(performance.now() - t0);
    journal.updateSplit(id, { timing: { ...live.timing } });

    const runStart = performance.now();
    const env = filterEnv(req.env);
    live.outputTimer = setInterval(() => this.#checkOutput(live), OUTPUT_POLL_MS);
    for (const b of live.branches.values()) {
      if (b.spec.kind === "argv") await this.#launchKit(live, split, b, req.env, spool);
      else await this.#launch(live, split, b, env, spool);
    }
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
      moveBranch(this.#d.journal, id, b.label, "skip", {
        status: "cancelled",
        code: 130,
        finishedMs: Date.now(),
      });
    }
  }

  #cancelState(live: LiveSplit, reason: string): void {
    live.cancelReason ??= reason;
  }

  /** A branch that never starts still ends with a status and an out/ entry. */
  async #endUnlaunched(
    live: LiveSplit,
    b: LiveBranch,
    state: "cancelled" | "failed",
    status: string,
  ): Promise<void> {
    const { journal } = this.#d;
    const label = b.spec.label;
    const now = Date.now();
    const code = branchCode(status) ?? 125;
    moveBranch(journal, live.id, label, state === "cancelled" ? "skip" : "refuse", {
      status,
      code,
      finishedMs: now,
    });
    if (b.jobId !== null) {
      journal.updateJob(b.jobId, { state, cleanup: "none", status, code, finishedMs: now });
    }
    await this.#publish(live, label, status, null);
    b.settled.resolve();
  }

  /**
   * Takes a pool slot for `b`; when the pool is full, the branch fails with
   * `failed: capacity` and the creator hears which Kits hold slots.
   */
  async #admit(live: LiveSplit, b: LiveBranch): Promise<boolean> {
    const { pool, journal } = this.#d;
    const label = b.spec.label;
    if (pool.admit(live.session, `${live.id}/${label}`)) {
      b.slot = true;
      return true;
    }
    const held = heldByUncertainJobs(journal, live.session);
    if (held !== "" && live.creatorConn && !live.creatorConn.isClosed) {
      await live.creatorConn.send({
        v: 1,
        t: "notice",
        message: `marsh split: branch ${label}: failed: capacity: ${pool.size} branches (${held})`,
      });
    }
    await this.#endUnlaunched(live, b, "failed", "failed: capacity");
    return false;
  }

  async #launch(
    live: LiveSplit,
    split: SplitRecord,
    b: LiveBranch,
    env: Record<string, string>,
    spool: string | null,
  ): Promise<void> {
    const { journal, worker, sockets, home, splitfs } = this.#d;
    const label = b.spec.label;
    if (live.cancelReason || live.stopped.has(label)) {
      b.cancelled = true;
      return this.#endUnlaunched(live, b, "cancelled", "cancelled");
    }
    // A userns-overlay fork is mounted in the service's namespace only: the
    // branch joins it there, or its cwd would be the bare mount point. An
    // unprivileged daemon's view is made there too (docs/engine.md, "Containment").
    const shellView = this.#d.shellView;
    const namespace = b.strategy === "userns-overlay" || shellView.view === "project"
      ? splitfs.namespace
      : null;
    if (b.strategy === "userns-overlay" && namespace === null) {
      return this.#endUnlaunched(
        live,
        b,
        "failed",
        "failed: its fork is mounted in a namespace the split-filesystem service does not have",
      );
    }
    if (!(await this.#admit(live, b))) return;
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
    moveBranch(journal, live.id, label, "start", {
      attempt,
      startedMs: Date.now(),
      view: shellView.view,
      viewReason: shellView.reason,
    });
    b.launched = true;
    this.#control ??= Deno.realPathSync(home);
    const place = shellPlace(
      shellView,
      split,
      journal.getSplit(live.id)?.git ?? null,
      label,
      this.#control,
    );
    await worker.launch({
      attempt,
      script: (b.spec as { script: string }).script,
      ...place,
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
        // Stopped while it was being launched: the cancel could not be sent before.
        if (live.stopped.has(label)) void worker.cancel(attempt, this.#d.settings.graceMs);
        const limit = b.spec.kind === "shell" ? b.spec.timeLimitS : undefined;
        if (limit === undefined) return;
        this.#controls.startLimit(live.id, label, limit, () => {
          this.#stopBranch(live, label, timeLimitStatus(limit));
        });
      },
      exited: (code, signal) => {
        b.exit = { code, signal };
      },
      lingering: (ev) => this.#controls.lingering(live.id, label, ev),
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
   * Launches an argv branch: one Kit job, one fresh container (spec 000 §1,
   * §8). Its cwd is the fork's copy of the caller's cwd at the same absolute
   * path inside the container; it mounts, of the project, only its fork, the
   * fork's Git metadata and the object dirs. Capture starts only after the
   * worker verified the container deleted (`settled`); until then the pool
   * slot stays taken.
   */
  async #launchKit(
    live: LiveSplit,
    split: SplitRecord,
    b: LiveBranch,
    callerEnv: Readonly<Record<string, string>>,
    spool: string | null,
  ): Promise<void> {
    const { journal, worker, home, log, settings, sockets, pool } = this.#d;
    const label = b.spec.label;
    const kit = b.kit!;
    const jobId = b.jobId!;
    if (live.cancelReason || live.stopped.has(label)) {
      b.cancelled = true;
      return this.#endUnlaunched(live, b, "cancelled", "cancelled");
    }
    if (worker.engine === null) {
      return this.#endUnlaunched(
        live,
        b,
        "failed",
        `failed: no Docker engine for Kit branches: ${this.#d.engineProblem ?? "none was chosen"}`,
      );
    }
    if (b.strategy === "userns-overlay") {
      return this.#endUnlaunched(
        live,
        b,
        "failed",
        "failed: its fork is mounted in a namespace the Docker engine cannot see",
      );
    }
    if (!(await this.#admit(live, b))) return;
    const attempt = `${live.id}-${label}-${newId().slice(0, 4)}`;
    const dir = `${home}/${ATTEMPTS_DIR}/${attempt}`;
    Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
    b.attempt = attempt;
    b.dir = dir;
    const env: Record<string, string> = {};
    for (const name of kit.env) {
      const value = callerEnv[name];
      if (value !== undefined) env[name] = value;
    }
    // The job's capability (spec 004 §4): its socket and its /run/marsh. A
    // failed setup fails the attempt; a job never runs without one.
    let cap: KitCap;
    try {
      const client = await this.#d.jobClient.ensure();
      const base = jobJsonBase(
        jobId,
        kit.name,
        journal.listKits().map((k) => k.name),
        Object.keys(env).filter((name) => !isReservedEnvName(name)),
      );
      writeCapDir(`${dir}/run`, base);
      b.socket = sockets.openJob({
        kind: "job",
        job: jobId,
        attempt,
        split: live.id,
        label,
        session: live.session,
        fork: b.fork,
      });
      cap = { dir: `${dir}/run`, socket: b.socket, deno: this.#d.deno, client, job: base };
    } catch (error) {
      if (b.socket) sockets.close(b.socket);
      b.socket = null;
      if (b.slot) pool.release(live.session, `${live.id}/${label}`);
      b.slot = false;
      log.info(`split ${live.id}/${label}: /run/marsh not set up: ${error}`);
      const why = error instanceof Error ? error.message : String(error);
      return this.#endUnlaunched(live, b, "failed", `failed: /run/marsh not set up: ${why}`);
    }
    // A daemon record, revoked at the job's end (its socket closes with it).
    journal.createCapability({
      id: `${live.id}/${label}`,
      split: live.id,
      label,
      holder: `job:${jobId}`,
      state: "live",
      createdMs: Date.now(),
      revokedMs: null,
    });
    const now = Date.now();
    moveBranch(journal, live.id, label, "start", {
      attempt,
      startedMs: now,
    });
    // Journaled before the worker is asked: from here a container may exist.
    journal.updateJob(jobId, { state: "running", cleanup: "live", attempt, startedMs: now });
    b.launched = true;
    const git = journal.getSplit(live.id)?.git ?? null;
    const argv = (b.spec as { argv: readonly string[] }).argv;
    await worker.kitLaunch(
      {
        job: jobId,
        attempt,
        split: live.id,
        label,
        kit: {
          name: kit.name,
          // The id checked at registration: a re-tagged image does not change a Kit.
          image: kit.imageId,
          entrypoint: kit.entrypoint,
          network: kit.network,
          env: kit.env,
          wallS: kit.wallS,
          home: kit.home,
        },
        argv,
        env,
        fork: b.fork,
        cwd: split.cwd === "" ? b.fork : `${b.fork}/${split.cwd}`,
        admin: git === null ? null : `${split.dir}/.admin/${label}`,
        objectDirs: git?.objects ?? [],
        stdin: spool,
        stdout: `${dir}/stdout`,
        stderr: `${dir}/stderr`,
        outputLimit: OUTPUT_LIMIT,
        // The forks' owner: the fork is writable and what the job writes is ours.
        user: `${Deno.uid()}:${Deno.gid()}`,
        cap,
      },
      settings.graceMs,
      {
        launched: (container) => {
          b.running = true;
          b.container = container;
          if (live.stopped.has(label)) void worker.cancel(attempt, settings.graceMs);
          journal.updateJob(jobId, { container });
          log.info(
            `split ${live.id}/${label}: job ${jobId} (kit ${kit.name}) container ${container}`,
          );
        },
        exited: (code, signal, wall) => {
          b.exit = { code, signal };
          b.wall = wall;
        },
        settled: () => {
          this.#settled(live, b, dir).catch((error) => {
            log.info(`split ${live.id}/${label}: settle failed: ${error?.stack ?? error}`);
            b.settled.resolve();
          });
        },
        outputLimit: () => this.cancel(live.id, OUTPUT_LIMIT_REASON),
        error: (message) => {
          this.#kitFailed(live, b, dir, message).catch((error) => {
            log.info(`split ${live.id}/${label}: failure not recorded: ${error?.stack ?? error}`);
            b.settled.resolve();
          });
        },
        unreaped: (container, message) => this.#kitUnreaped(live, b, container, message),
      },
    );
  }

  /**
   * A branch's (or its job's) end: its socket closes, its capability is
   * revoked, and every split it created that still runs is cancelled
   * (spec 000 §4: LiveUnderLive, CancelPropagates).
   */
  #revoke(live: LiveSplit, b: LiveBranch): void {
    const { journal, sockets } = this.#d;
    const label = b.spec.label;
    if (b.socket) sockets.close(b.socket);
    b.socket = null;
    journal.revokeCapability(`${live.id}/${label}`);
    for (const child of this.#live.values()) {
      if (child === live || child.cancelReason !== null) continue;
      const rec = journal.getSplit(child.id);
      if (rec?.state !== "run" || rec.parent?.split !== live.id || rec.parent.label !== label) {
        continue;
      }
      const by = b.jobId !== null ? `job ${b.jobId}` : "branch";
      this.cancel(child.id, `its creator (${by}, ${live.id}/${label}) ended`);
    }
  }

  /**
   * A Kit attempt ended without running to an exit, and nothing of it is
   * left (protocol/worker.ts): the branch failed (or was cancelled before
   * its container started) and its slot frees.
   */
  async #kitFailed(live: LiveSplit, b: LiveBranch, dir: string, message: string): Promise<void> {
    const { journal, log, pool } = this.#d;
    const label = b.spec.label;
    log.info(`split ${live.id}/${label}: kit ${b.kit?.name}: ${message}`);
    b.confirmed = true;
    this.#revoke(live, b);
    const stop = live.stopped.get(label) ?? (live.cancelReason !== null ? "cancelled" : undefined);
    const state = stop !== undefined ? stoppedState(stop) : "failed";
    const status = stop ?? `failed: ${message}`;
    const code = branchCode(status) ?? 125;
    const outputs = ["stdout", "stderr"].every((n) => exists(`${dir}/${n}`))
      ? { stdout: `${dir}/stdout`, stderr: `${dir}/stderr` }
      : null;
    b.outputBytes = outputSize(dir);
    b.outputFinal = true;
    const published = await this.#publish(live, label, status, outputs);
    if (published.ok) {
      await Deno.remove(dir, { recursive: true }).catch((error) =>
        log.info(`split ${live.id}/${label}: ${dir} not removed: ${error}`)
      );
    }
    const now = Date.now();
    moveBranch(journal, live.id, label, endEvent(state), {
      status,
      code,
      finishedMs: now,
    });
    journal.updateJob(b.jobId!, {
      state,
      cleanup: b.container === null ? "none" : "removed",
      status,
      code,
      finishedMs: now,
    });
    if (b.slot) pool.release(live.session, `${live.id}/${label}`);
    b.slot = false;
    b.settled.resolve();
  }

  /**
   * A container of a Kit attempt may still exist: the branch is uncertain,
   * its fork untrusted and never captured, and its pool slot stays held
   * until `marsh workers reset KIT` verifies the deletion (spec 000 §4, §13).
   */
  #kitUnreaped(live: LiveSplit, b: LiveBranch, container: string | null, message: string): void {
    const { journal, log } = this.#d;
    const label = b.spec.label;
    const kit = b.kit!.name;
    const status = `failed: ${message}; its slot is held until: marsh workers reset ${kit}`;
    log.info(`split ${live.id}/${label}: job ${b.jobId}: ${status}`);
    this.#revoke(live, b);
    const now = Date.now();
    moveBranch(journal, live.id, label, "lose", {
      trust: "untrusted",
      status,
      code: 125,
      finishedMs: now,
    });
    journal.updateJob(b.jobId!, {
      state: "uncertain",
      cleanup: "uncertain",
      ...(container !== null ? { container } : {}),
      status,
      code: 125,
      finishedMs: now,
    });
    // b.slot stays true: the slot is released by `marsh workers reset`, not here.
    b.settled.resolve();
  }

  /**
   * The worker gave up on an attempt. Before `launched` nothing ran: the
   * branch failed and its slot frees. After it, processes may still live: the
   * branch is uncertain, its fork untrusted, its slot held until reset.
   */
  #attemptLost(live: LiveSplit, b: LiveBranch, message: string): void {
    const { journal, log, pool } = this.#d;
    const label = b.spec.label;
    log.info(`split ${live.id}/${label}: worker: ${message}`);
    this.#controls.ended(live.id, label);
    this.#revoke(live, b);
    if (b.running) {
      moveBranch(journal, live.id, label, "lose", {
        trust: "untrusted",
        status: `failed: ${message}`,
        code: 125,
        finishedMs: Date.now(),
      });
    } else {
      moveBranch(journal, live.id, label, "fail", {
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
    const { journal, splitfs, pool } = this.#d;
    const label = b.spec.label;
    b.confirmed = true;
    this.#controls.ended(live.id, label);
    this.#revoke(live, b);
    const outputs = { stdout: `${dir}/stdout`, stderr: `${dir}/stderr` };
    b.outputBytes = outputSize(dir);
    b.outputFinal = true;
    this.#checkOutput(live);
    let state: "captured" | "rejected" | "failed" | "cancelled";
    let status: string;
    let files = 0;
    // A branch stopped alone keeps its own status, even when the split is cancelled after.
    const stop = live.stopped.get(label) ?? (live.cancelReason ? "cancelled" : undefined);
    if (stop !== undefined) {
      state = stoppedState(stop);
      status = stop;
    } else {
      status = exitStatus(b.exit?.code ?? null, b.exit?.signal ?? null);
      if (b.wall) status = `failed: wall clock limit of ${b.kit?.wallS} s reached`;
      await this.#pause("mid-capture");
      const t0 = performance.now();
      try {
        const c = await splitfs.request<CapturedReply>({ v: 1, t: "capture", id: live.id, label });
        state = c.rejected === undefined ? "captured" : "rejected";
        if (c.rejected !== undefined) status = `rejected: ${c.rejected}`;
        files = c.files;
      } catch (error) {
        if (error instanceof SplitfsError && error.kind === "rejected") {
          // The fork is kept: it is the branch's work (docs/engine.md, "Capture and verification").
          state = "rejected";
          status = `rejected: ${error.message}`;
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
    const code = branchCode(status) ?? 125;
    const now = Date.now();
    moveBranch(journal, live.id, label, endEvent(state), {
      status,
      code,
      files,
      finishedMs: now,
      // Consumers apply what they trust; a rejected result is for recovery only.
      ...(state === "rejected" ? { trust: "untrusted" as const } : {}),
    });
    if (b.jobId !== null) {
      // Settled means its container's removal was verified (protocol/worker.ts).
      journal.updateJob(b.jobId, {
        state: state === "cancelled" ? "cancelled" : "finished",
        cleanup: "removed",
        status,
        code,
        finishedMs: now,
      });
    }
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
    let left = "";
    if (remove && live.open) {
      try {
        await this.#d.splitfs.request({ v: 1, t: "remove", id: live.id });
        live.open = false;
        this.#d.journal.updateSplit(live.id, { identity: null });
      } catch (removal) {
        // The record keeps its identity, so marsh splits rm can finish the removal.
        const why = removal instanceof Error ? removal.message : String(removal);
        this.#d.log.info(`split ${live.id}: not removed after its setup failed: ${why}`);
        left = `; not removed: ${why}`;
      }
    }
    this.#cancelPending(live.id);
    moveSplit(this.#d.journal, live.id, "setupFailed", {
      status: 2,
      reason: `setup failed: ${message}${left}`,
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
    this.#controls.forget(live.id);
    clearTimeout(live.deadlineTimer);
    clearInterval(live.outputTimer);
    if (spool) Deno.remove(spool).catch(() => {});
  }

  async #finishAwait(live: LiveSplit, spool: string | null): Promise<void> {
    const { journal } = this.#d;
    const code = splitCode(
      journal.branches(live.id).map((b) => ({ status: b.status ?? undefined })),
    );
    moveSplit(journal, live.id, "finish", {
      status: code,
      finishedMs: Date.now(),
      timing: { ...live.timing },
    });
    this.#cleanup(live, spool);
    const conn = live.creatorConn;
    live.creatorConn = null;
    const unwritten = await this.#writeManifest(live.id);
    if (unwritten !== null && conn && !conn.isClosed) {
      await conn.send({
        v: 1,
        t: "notice",
        message: `marsh split: out/manifest.json was not written: ${unwritten}; ` +
          "marsh join writes it again and refuses to run a consumer until it can",
      });
    }
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
        moveSplit(this.#d.journal, live.id, "leaseExpired", {
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
      b.launched && !b.exit && !b.cancelled && !b.confirmed
    )
      .map((b) => b.spec.label);
    let message = `split ${live.id} cancelled: ${reason}`;
    if (live.open && unconfirmed.length === 0) {
      try {
        await splitfs.request({ v: 1, t: "remove", id: live.id });
        live.open = false;
        journal.updateSplit(live.id, { identity: null });
        removeAttemptsOf(this.#d.home, live.id, journal.branches(live.id), this.#d.log);
      } catch (error) {
        message += `; kept (${
          error instanceof Error ? error.message : error
        }): remove it with: marsh splits rm ${live.id}`;
      }
    } else if (unconfirmed.length > 0) {
      message += `; kept because these branches' ends are unconfirmed: ${unconfirmed.join(", ")}`;
    }
    this.#cancelPending(live.id);
    moveSplit(journal, live.id, "cancel", {
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

  /**
   * Stops one branch (a cancel, its time limit): SIGINT to its processes,
   * SIGKILL after the grace, or it never starts; it ends with `status`, not
   * captured, and its siblings go on.
   */
  #stopBranch(live: LiveSplit, label: string, status: string): void {
    if (live.cancelReason || live.stopped.has(label)) return;
    live.stopped.set(label, status);
    this.#d.log.info(`split ${live.id}/${label}: stopping the branch: ${status}`);
    const b = live.branches.get(label);
    if (b?.attempt && b.launched) void this.#d.worker.cancel(b.attempt, this.#d.settings.graceMs);
  }

  /** What `marsh logs` follows of a branch this daemon runs (`daemon/branch_logs.ts`), or null. */
  liveOutput(id: string, label: string): { dir: string | null; ended: Promise<void> } | null {
    const b = this.#live.get(id)?.branches.get(label);
    return b ? { dir: b.dir, ended: b.settled.promise } : null;
  }

  /**
   * Streams `out/<label>/<name>` of split `id` to `onChunk`, through the
   * split-filesystem service (the daemon reads no project file).
   *
   * @throws {RequestError} when the split's directory is gone or the file is missing
   */
  async readOut(
    id: string,
    label: string,
    name: "stdout" | "stderr",
    onChunk: (bytes: Uint8Array) => Promise<void>,
  ): Promise<void> {
    const s = this.#d.journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    try {
      await this.#ensureOpen(this.#liveOf(id, s.session), s);
      await this.#d.splitfs.request({ v: 1, t: "out-read", id, label, name }, onChunk);
    } catch (error) {
      throw error instanceof SplitfsError ? this.#refusal(id, error) : error;
    }
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
    // Every fork still on disk is checked too. A rejected one is not held: it
    // may be gone (daemons before this one removed it at capture), and the
    // split's removal empties the whole split dir either way.
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
      // A consumer never reads a half out/ (a full disk): what failed is tried again first.
      const incomplete = await completeOut(
        this.#d,
        s.id,
        () => JSON.stringify(this.#manifest(s.id), null, 2) + "\n",
      );
      if (incomplete !== null) {
        throw new RequestError(
          2,
          `cannot hand split ${s.id} to the consumer: ${incomplete}; the split is kept: ` +
            `free space (or fix what is named), then run marsh join again, or remove it with: marsh splits rm ${s.id}`,
        );
      }
      const unwritten = await writeJoinObjects(this.#d, s);
      if (unwritten !== null) throw new RequestError(2, unwritten);
      const manifest = this.#manifest(s.id);
      const creator = s.parent ? journal.getBranch(s.parent.split, s.parent.label) : null;
      const env = consumerEnv(s, manifest, creator);
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
          ...(b.state === "rejected" ? { untrusted: true as const } : {}),
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
      const rejected = branches.find((b) => b.state === "rejected");
      let reason: string | null = null;
      if (req.keep) reason = "--keep was given";
      else if (uncertain) reason = "a branch is uncertain";
      else if (rejected) reason = keptWork(manifest, rejected);
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
        moveSplit(journal, s.id, "join", { reason: null });
        try {
          await splitfs.request({ v: 1, t: "remove", id: s.id });
          live.open = false;
          journal.updateSplit(s.id, { identity: null });
          journal.revokeCapabilitiesOfSplit(s.id);
          removeAttemptsOf(this.#d.home, s.id, branches, this.#d.log);
          await conn.send({
            v: 1,
            t: "join.released",
            removed: true,
            reason: req.consumer ? "the consumer exited 0" : "every branch exited 0",
            manifest: this.#manifest(s.id),
          });
          this.#live.delete(s.id);
          return;
        } catch (error) {
          reason = error instanceof Error ? error.message : String(error);
          this.#d.log.info(`split ${s.id}: not removed at its join: ${reason}`);
          moveSplit(journal, s.id, "releaseFailed", { reason });
        }
      }
      this.#keep(s.id, reason);
      await conn.send({
        v: 1,
        t: "join.released",
        removed: false,
        reason,
        manifest: this.#manifest(s.id),
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
    moveSplit(this.#d.journal, id, "keep", { reason });
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
    return visible.map((s) => this.#controls.decorate(manifestOf(s, journal.branches(s.id))));
  }

  /** `marsh splits cancel ID [LABEL]`: the split, or one branch (daemon/branch_controls.ts). */
  cancelRequest(auth: Authority, id: string, label?: string): string {
    const s = this.#d.journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    if (!mayView(auth, s.creator)) {
      throw new RequestError(2, `split ${id} was not created by this caller`);
    }
    if (label !== undefined) {
      const problem = branchCancelProblem(s, this.#d.journal.branches(id), label);
      if (problem) throw new RequestError(2, problem);
      const live = this.#live.get(id);
      if (!live) throw new RequestError(2, `split ${id} is not running in this daemon`);
      if (live.cancelReason) {
        throw new RequestError(2, `split ${id} is being cancelled already: ${live.cancelReason}`);
      }
      const was = live.stopped.get(label);
      if (was !== undefined) {
        return `split ${id}: branch ${label} is being stopped already (${was})`;
      }
      this.#stopBranch(live, label, "cancelled");
      return `split ${id}: cancelling branch ${label}`;
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
    // NoRemoveWhileLive: a container of one of its Kit jobs may still write its fork.
    const held = journal.listJobs({ split: id, cleanups: ["live", "uncertain"] })[0];
    if (held !== undefined) {
      throw new RequestError(
        2,
        `split ${id} not removed: the container of branch ${held.label} (kit ${held.kit}, job ${held.id}) may still run; remove it first with: marsh workers reset ${held.kit}`,
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
          const why = error instanceof Error ? error.message : String(error);
          this.#d.log.info(`split ${id}: not removed: ${why}`);
          throw new RequestError(2, `split ${id} not removed: ${why}`);
        }
        // What is there now is not ours: nothing is deleted (spec 000 §6). The
        // overlays marsh mounted there are still its own: they are unmounted,
        // or the record stays, saying what is left (docs/engine.md "Removal").
        if (live.open) {
          await splitfs.request({ v: 1, t: "release", id }).catch((error) =>
            this.#d.log.info(`split ${id}: release failed: ${error}`)
          );
          live.open = false;
        }
        try {
          await splitfs.request({ v: 1, t: "unmount", id, root: s.root });
        } catch (unmounting) {
          const why = unmounting instanceof Error ? unmounting.message : String(unmounting);
          const reason = `its directory was removed or replaced, and ${why}`;
          this.#d.log.info(`split ${id}: not removed: ${reason}`);
          journal.updateSplit(id, { reason });
          throw new RequestError(2, `split ${id} not removed: ${reason}`);
        }
        said =
          `split ${id}: its directory was removed or replaced, so nothing was removed from disk; record dropped`;
      }
    }
    clearTimeout(live.leaseTimer);
    journal.revokeCapabilitiesOfSplit(id);
    const branches = journal.branches(id);
    journal.deleteSplit(id);
    // What the attempts kept (a failed publish, an uncertain branch) goes with the split.
    removeAttemptsOf(this.#d.home, id, branches, this.#d.log);
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
