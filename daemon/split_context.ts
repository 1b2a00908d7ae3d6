/**
 * What every part of the split life cycle shares: the links it drives (the
 * split-filesystem service, the worker, the pool, the sockets, the journal),
 * and the splits this daemon process runs or holds, each with its branches.
 * A split's and a branch's phase change only through `move`, which the one
 * transition table of `model/split_phase.ts` and `model/branch_phase.ts`
 * checks.
 *
 * @module
 */

import type { Journal } from "../journal/journal.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { type BranchPhase, nextBranchPhase } from "../model/branch_phase.ts";
import { cancelReason, nextSplitPhase, type SplitPhase } from "../model/split_phase.ts";
import type { BranchSpec } from "../protocol/daemon.ts";
import type { SplitfsService } from "../protocol/splitfs_client.ts";
import { BranchControls } from "./branch_controls.ts";
import { JobTreeCancel } from "./job_cancel.ts";
import { JobAdmitter } from "./job_admit.ts";
import { DEFAULT_ADMISSION_CONFIG } from "../model/job_admission.ts";
import type { Authority, Conn } from "./conn.ts";
import type { Log } from "./log.ts";
import { manifestOf } from "./manifest.ts";
import type { BranchPool } from "./pool.ts";
import { RequestError } from "./request_error.ts";
import type { ShellViewChoice } from "./shell_view.ts";
import type { Settings } from "./split_settings.ts";
import type { WorkerLink } from "./worker_link.ts";

/** Opens and closes branch sockets; each connection on one carries that branch's authority. */
export interface BranchSockets {
  open(authority: Extract<Authority, { kind: "branch" }>): string;
  /** A Kit attempt's capability socket (`/run/marsh/cap.sock`). */
  openJob(authority: Extract<Authority, { kind: "job" }>): string;
  close(path: string): void;
}

/** What the split life cycle uses of a client's connection (`daemon/conn.ts`). */
export type SplitConn = Pick<Conn, "authority" | "send" | "next" | "flush" | "closed" | "isClosed">;

/** What the split life cycle asks of the split-filesystem service (`protocol/splitfs_client.ts`). */
export type ServiceLink = Pick<SplitfsService, "request" | "namespace">;

/** What the split life cycle asks of the worker (`daemon/worker_link.ts`). */
export type WorkerPort = Pick<WorkerLink, "engine" | "launch" | "kitLaunch" | "cancel">;

/** Everything the state machine drives. */
export interface SplitDeps {
  readonly journal: Journal;
  readonly splitfs: ServiceLink;
  readonly worker: WorkerPort;
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
  /** The daemon's tree cancel, shared with the run path; made here when absent (tests). */
  readonly tree?: JobTreeCancel;
  /** The daemon's job admission, shared with the run path; made here when absent (tests). */
  readonly admitter?: JobAdmitter;
  /** This daemon's key for `job.json`'s environment digests (`daemon/env_key.ts`). */
  readonly envKey: Uint8Array;
  /**
   * Why argv branches cannot run in this daemon (the worker has no engine:
   * `DOCKER_HOST` could not be used), or absent when they can.
   */
  readonly engineProblem?: string;
  /** The `marsh run` jobs shell branches started: a branch's capture waits for them. */
  readonly branchRuns?: { settled(split: string, label: string): Promise<void> };
}

/** A branch of a split this daemon runs. */
export class LiveBranch {
  #phase: BranchPhase = { kind: "queued" };
  /** The branch's socket (a job's capability socket), open while it runs. */
  socket: string | null = null;
  /** Whether it holds a pool slot, released once. */
  slot = false;
  /** Resolved once the branch's end is recorded (or could not be). */
  readonly settled: PromiseWithResolvers<void> = Promise.withResolvers<void>();

  constructor(
    readonly spec: BranchSpec,
    readonly index: number,
    readonly fork: string,
    /** How the fork was made: a `userns-overlay` fork exists in the service's namespace only. */
    readonly strategy: string,
    /** An argv branch's Kit, resolved at create, and its job. */
    readonly kit: KitRecord | null,
    readonly jobId: string | null,
  ) {}

  get label(): string {
    return this.spec.label;
  }

  get phase(): BranchPhase {
    return this.#phase;
  }

  /** @throws {TypeError} when the table of `model/branch_phase.ts` refuses the move */
  move(to: BranchPhase): void {
    this.#phase = nextBranchPhase(this.#phase, to);
  }
}

/** A split this daemon process is running or holding. */
export class LiveSplit {
  readonly branches = new Map<string, LiveBranch>();
  #phase: SplitPhase;
  /** The create stream, while the split runs. */
  creatorConn: SplitConn | null = null;
  joinConn: SplitConn | null = null;
  leaseTimer: ReturnType<typeof setTimeout> | undefined;
  deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  outputTimer: ReturnType<typeof setInterval> | undefined;
  /** Whether the split-filesystem service holds this split's descriptors. */
  open = false;
  /** Branches stopped alone (a cancel, a time limit), with the status each ends with. */
  readonly stopped = new Map<string, string>();
  /**
   * Branches `marsh discard` is stopping: they count for neither the split's
   * exit status nor its join (docs/guide.md "Discarding branches").
   */
  readonly discarding = new Set<string>();
  /** Resolved when this daemon is done with the split ({@linkcode SplitContext.forget}). */
  readonly ended: PromiseWithResolvers<void> = Promise.withResolvers<void>();
  /**
   * Resolved when the split runs nothing any more: its create has returned,
   * every launched branch settled (a held split's never runs anything).
   */
  readonly quiet: PromiseWithResolvers<void> = Promise.withResolvers<void>();
  readonly timing: Record<string, number> = {};

  constructor(readonly id: string, readonly session: string, phase: SplitPhase) {
    this.#phase = phase;
    if (phase.kind === "held") this.quiet.resolve();
  }

  get phase(): SplitPhase {
    return this.#phase;
  }

  /** Why the split is being cancelled, or null. */
  get cancelReason(): string | null {
    return cancelReason(this.#phase);
  }

  /** @throws {TypeError} when the table of `model/split_phase.ts` refuses the move */
  move(to: SplitPhase): void {
    this.#phase = nextSplitPhase(this.#phase, to);
  }
}

/** The deps and the live splits, shared by the modules of the split life cycle. */
export class SplitContext {
  readonly live = new Map<string, LiveSplit>();
  readonly controls = new BranchControls();
  /** The daemon's tree cancel, shared with the run path (`daemon/job_cancel.ts`). */
  readonly tree: JobTreeCancel;
  /** The daemon's one entry to job admission (`daemon/job_admit.ts`). */
  readonly admitter: JobAdmitter;
  /** The control dir, canonical: a shell branch's view binds it read-only. */
  control: string | null = null;
  stopping = false;

  constructor(readonly d: SplitDeps) {
    this.tree = d.tree ?? new JobTreeCancel(d);
    this.admitter = d.admitter ?? new JobAdmitter(d.journal, DEFAULT_ADMISSION_CONFIG);
  }

  /** The live record of a split this daemon holds (made for one it did not run). */
  liveOf(id: string, session: string): LiveSplit {
    let l = this.live.get(id);
    if (!l) {
      l = new LiveSplit(id, session, { kind: "held" });
      this.live.set(id, l);
    }
    return l;
  }

  /** This daemon is done with `live` (cancelled, setup failed, joined or removed). */
  forget(live: LiveSplit): void {
    if (live.phase.kind !== "ended") live.move({ kind: "ended" });
    if (this.live.get(live.id) === live) this.live.delete(live.id);
    live.ended.resolve();
  }

  /** Test-only: stops at `step` until the test kills the daemon (`MARSH_TEST_PAUSE_AT`). */
  async pause(step: string): Promise<void> {
    if (this.d.settings.pauseAt !== step) return;
    Deno.writeTextFileSync(`${this.d.home}/paused-${step}`, `${Deno.pid}\n`);
    this.d.log.info(`test pause at ${step}`);
    await new Promise(() => {/* until the test kills the daemon */});
  }

  /** The manifest of split `id`, from the journal. @throws {RequestError} for an unknown split */
  manifest(id: string) {
    const s = this.d.journal.getSplit(id);
    if (!s) throw new RequestError(2, `no split ${id}`);
    return manifestOf(s, this.d.journal.branches(id));
  }

  /** Writes `out/manifest.json`; a failure is logged and returned (join writes it again). */
  async writeManifest(id: string): Promise<string | null> {
    const json = JSON.stringify(this.manifest(id), null, 2) + "\n";
    try {
      await this.d.splitfs.request({ v: 1, t: "manifest", id, json });
      return null;
    } catch (error) {
      this.d.log.info(`split ${id}: manifest not written: ${error}`);
      return error instanceof Error ? error.message : String(error);
    }
  }
}

/** A fresh random id (split, job, attempt suffix): 8 of `[a-z0-9]`. */
export function newId(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(8));
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  let id = "";
  for (const b of bytes) id += alphabet[b % alphabet.length];
  return id;
}
