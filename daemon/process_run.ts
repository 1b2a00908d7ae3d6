/**
 * `process.run` (docs/rules.md "Running a registered command as a job"):
 * `marsh run NAME ARGS...` from the host or a shell branch, and a job's
 * link in its child case. One request, one Kit job in one fresh container:
 *
 * 1. its place: parent and view by the caller's socket (`process_run_view.ts`);
 * 2. admission and the job's record in one transaction (`job_admit.ts`);
 * 3. its `/run/marsh` and `cap.sock` (`kit_job_cap.ts`) and its stdio FIFOs
 *    (`process_run_io.ts`);
 * 4. one container on the worker, its stdio relayed live;
 * 5. its end: exit status passed through after the container's deletion
 *    was verified, the slot freed, its capability revoked and its
 *    subtree cancelled.
 *
 * A caller that drops its stream (or sends `process.signal`) cancels the
 * job's subtree, its children's splits included (`job_cancel.ts`, the
 * daemon's one tree cancel).
 *
 * @module
 */

import { Buffer } from "node:buffer";
import type { Journal } from "../journal/journal.ts";
import { type JobRecord, queuedJob } from "../journal/records.ts";
import { exitCodeOf } from "../model/exit_code.ts";
import { cutArgs } from "../model/job_lineage.ts";
import { MAX_WALL_S } from "../model/limits.ts";
import type { KitCap, KitLaunch } from "../protocol/kit_launch.ts";
import { MAX_OUTPUT_LIMIT } from "../protocol/launch_fields.ts";
import type { ProcessRunRequest } from "../protocol/process_run.ts";
import type { Conn } from "./conn.ts";
import type { Admitted, JobAdmitter } from "./job_admit.ts";
import { offeredMarks } from "./job_marks.ts";
import type { BranchRuns } from "./branch_links.ts";
import type { KitRecord } from "../model/kit_rules.ts";
import { kitSpec, openJobCap } from "./kit_job_cap.ts";
import type { JobTreeCancel } from "./job_cancel.ts";
import { envSourceOf, forwardedEnv } from "./job_env_forward.ts";
import { FifoRelay, makeFifos } from "./process_run_io.ts";
import { type RunPlace, runPlace, type RunPlaceDeps } from "./process_run_view.ts";
import { RequestError } from "./request_error.ts";
import type { BranchSockets } from "./split_context.ts";
import { newId } from "./split_context.ts";
import type { KitAttemptEvents } from "./worker_link.ts";

/** Where `marsh run` jobs' attempt dirs are, in the control dir. */
export const RUNS_DIR = "runs";

/** What `process.run` needs of the daemon. */
export interface ProcessRunDeps extends RunPlaceDeps {
  readonly journal: Journal;
  readonly admitter: JobAdmitter;
  readonly worker: {
    readonly engine: string | null;
    kitLaunch(launch: KitLaunch, graceMs: number, events: KitAttemptEvents): Promise<void>;
    cancel(attempt: string, graceMs: number): Promise<void>;
  };
  readonly sockets: BranchSockets;
  readonly jobClient: { ensure(): Promise<string> };
  readonly deno: string;
  /** This daemon's environment digest key (`daemon/env_key.ts`). */
  readonly envKey: Uint8Array;
  readonly home: string;
  readonly graceMs: number;
  readonly log: { info(line: string): void };
  /** The daemon's tree cancel, shared with the split path. */
  readonly tree: JobTreeCancel;
  /** Why Kit jobs cannot run here (no engine), if they cannot. */
  readonly engineProblem?: string;
  /** Where a shell branch's runs are tracked: its capture waits for them. */
  readonly branchRuns?: BranchRuns;
}

/** A `marsh run` job this daemon drives, while it runs. */
export interface LiveRun {
  /** Its worker attempt, once launched. */
  readonly attempt: string;
  /** Why it was cancelled (`cancelled`), or null while nobody cancelled it. */
  cancelled: string | null;
}

/** How the worker's attempt ended. */
type RunEnd =
  | { readonly kind: "settled" }
  | { readonly kind: "error"; readonly message: string }
  | { readonly kind: "unreaped"; readonly container: string | null; readonly message: string };

/** The `process.run` requests of one daemon. */
export class ProcessRuns {
  readonly #d: ProcessRunDeps;
  /** Live runs by job id (what a tree's cancel signals). */
  readonly #runs = new Map<string, LiveRun>();

  constructor(d: ProcessRunDeps) {
    this.#d = d;
    // What a killed daemon left: its jobs are uncertain, their dirs of no use.
    try {
      Deno.removeSync(`${d.home}/${RUNS_DIR}`, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
  }

  /** Live runs, by job id. */
  get live(): ReadonlyMap<string, LiveRun> {
    return this.#runs;
  }

  /**
   * Cancels job `id`'s subtree (its live containers, and those of the
   * splits below it, get INT, then KILL after the grace: `job_cancel.ts`).
   *
   * @returns the ids of the subtree's jobs, `id` first
   */
  cancel(id: string, reason = "cancelled"): string[] {
    return [...this.#d.tree.cancel({ kind: "job", id }, reason).jobs];
  }

  /**
   * Serves one `process.run` on `conn` to its end.
   *
   * @throws {RequestError} for a refusal before anything ran (the server answers it)
   */
  async run(conn: Conn, req: ProcessRunRequest): Promise<void> {
    const d = this.#d;
    if (d.worker.engine === null) {
      throw new RequestError(
        125,
        `no Docker engine for Kit jobs: ${d.engineProblem ?? "none was chosen"}`,
      );
    }
    const kit = d.journal.getKit(req.name);
    if (kit === null) {
      throw new RequestError(
        127,
        `${req.name} is not a registered command (marsh kits ls shows them; marsh kits add registers one)`,
      );
    }
    const place = await runPlace(d, conn.authority, req.cwd);
    const id = newId();
    const now = Date.now();
    const record: JobRecord = queuedJob({
      id,
      kit: kit.name,
      args: [kit.name, ...cutArgs(req.args)],
      split: "",
      label: "",
      session: place.session,
      createdMs: now,
    });
    const admitted = d.admitter.admit({
      record,
      kit,
      parent: place.parent,
      branch: null,
      via: req.via,
      narrow: req.spawn,
      tty: req.tty,
      marks: offeredMarks(d.journal, conn.authority, req),
    });
    d.log.info(
      `run ${id}: ${kit.name} admitted (parent ${admitted.lineage.parent}, depth ${admitted.lineage.depth})`,
    );
    const done = Promise.withResolvers<void>();
    if (place.parent.kind === "split") {
      d.branchRuns?.track(place.parent.split, place.parent.label, done.promise);
    }
    try {
      await this.#admitted(conn, req, kit, place, id, admitted);
    } finally {
      done.resolve();
    }
  }

  /** An admitted run, from its capability to its end. */
  async #admitted(
    conn: Conn,
    req: ProcessRunRequest,
    kit: KitRecord,
    place: RunPlace,
    id: string,
    admitted: Admitted,
  ): Promise<void> {
    const d = this.#d;
    await conn.send({ v: 1, t: "process.started", job: id, warnings: admitted.warnings });
    const attempt = `${id}-${newId().slice(0, 4)}`;
    // What the job receives (docs/rules.md, "Environment forwarding"): a job's link offers.
    const { env, dropped } = forwardedEnv(
      d.envKey,
      envSourceOf(conn.authority.kind === "job", req.env, req.envDigests),
      kit.env,
    );
    if (dropped.length > 0) {
      d.log.info(
        `run ${id}: offered variables not forwarded: ${
          dropped.map((x) => `${x.name} (${x.why})`).join(", ")
        }`,
      );
    }
    const dir = `${d.home}/${RUNS_DIR}/${attempt}`;
    let cap: KitCap, socket: string | null = null;
    let fifos: Awaited<ReturnType<typeof makeFifos>>;
    try {
      Deno.mkdirSync(dir, { recursive: true, mode: 0o700 });
      const opened = await openJobCap({
        jobClient: d.jobClient,
        deno: d.deno,
        sockets: d.sockets,
        registered: () => d.admitter.registered(),
        envKey: d.envKey,
      }, {
        dir,
        name: kit.name,
        spawn: admitted.lineage.spawn,
        authority: {
          kind: "job",
          job: id,
          attempt,
          split: "",
          label: "",
          session: place.session,
          fork: place.view.root,
          view: place.view,
        },
      });
      cap = opened.cap;
      socket = opened.socket;
      fifos = await makeFifos(dir);
    } catch (error) {
      if (socket !== null) d.sockets.close(socket);
      const why = error instanceof Error ? error.message : String(error);
      this.#endUnlaunched(id, dir, `failed: /run/marsh not set up: ${why}`);
      throw new RequestError(125, `${kit.name}: /run/marsh not set up: ${why}`);
    }
    const run: LiveRun = { attempt, cancelled: null };
    this.#runs.set(id, run);
    const untrack = d.tree.track(id, (reason) => {
      if (run.cancelled !== null) return;
      run.cancelled = reason;
      d.worker.cancel(attempt, d.graceMs).catch((error) =>
        d.log.info(`run ${id}: cancel not sent: ${error}`)
      );
    });
    const relay = new FifoRelay(
      fifos,
      (frame) => conn.send(frame),
      (what, error) => d.log.info(`run ${id}: ${what}: ${error}`),
    );
    const end = Promise.withResolvers<RunEnd>();
    let exit: { code: number | null; signal: string | null; wall: boolean } | null = null;
    let container: string | null = null;
    d.journal.updateJob(id, { state: "running", cleanup: "live", attempt, startedMs: Date.now() });
    // A cancel that took the lock between admission and here already marked this job.
    if (d.journal.jobTree.lineage(id)?.cap !== "live") run.cancelled = "cancelled";
    const wallS = Math.max(
      1,
      Math.min(MAX_WALL_S, Math.ceil((admitted.lineage.deadlineMs - Date.now()) / 1000)),
    );
    const launch: KitLaunch = {
      job: id,
      attempt,
      // A run belongs to no split: its containers' labels say `run`.
      split: "run",
      label: id,
      kit: kitSpec(kit, wallS),
      argv: [kit.name, ...req.args],
      env,
      fork: place.view.root,
      cwd: place.cwd,
      admin: place.view.admin,
      objectDirs: place.view.objectDirs,
      readOnly: place.view.readOnly,
      stdio: "fifos",
      stdin: fifos.stdin,
      stdout: fifos.stdout,
      stderr: fifos.stderr,
      outputLimit: MAX_OUTPUT_LIMIT,
      user: `${Deno.uid()}:${Deno.gid()}`,
      cap,
    };
    relay.start();
    void this.#follow(conn, id, relay, end.promise);
    // A worker that cannot be asked (its link is gone) ends the run as a failure, never a hang.
    await d.worker.kitLaunch(launch, d.graceMs, {
      launched: (c) => {
        container = c;
        d.journal.updateJob(id, { container: c });
        d.log.info(`run ${id}: ${kit.name} container ${c}`);
        if (run.cancelled !== null) void d.worker.cancel(attempt, d.graceMs);
      },
      exited: (code, signal, wall) => exit = { code, signal, wall },
      settled: () => end.resolve({ kind: "settled" }),
      outputLimit: () => {},
      error: (message) => end.resolve({ kind: "error", message }),
      unreaped: (c, message) => end.resolve({ kind: "unreaped", container: c, message }),
    }).catch((error) =>
      end.resolve({
        kind: "unreaped",
        container: null,
        message: `the worker was not asked: ${error}`,
      })
    );
    if (run.cancelled !== null) void d.worker.cancel(attempt, d.graceMs);
    const how = await end.promise;
    await relay.finish();
    this.#runs.delete(id);
    untrack();
    const reply = this.#record(
      id,
      kit.name,
      admitted.lineage.parentDeadline,
      how,
      exit,
      container,
      run.cancelled,
    );
    d.sockets.close(socket);
    d.journal.jobTree.revoke(id);
    // Its end ends its subtree: nothing it started outlives it. Its caller (and a shell
    // branch's capture) hears of its end once its splits run nothing more.
    d.tree.cancel({ kind: "job", id }, "cancelled: its parent job ended", { below: true });
    await d.tree.quiet({ kind: "job", id });
    if (how.kind !== "unreaped") {
      try {
        Deno.removeSync(dir, { recursive: true });
      } catch (error) {
        d.log.info(`run ${id}: ${dir} not removed: ${error}`);
      }
    }
    await conn.send({ v: 1, t: "process.exit", job: id, ...reply });
  }

  /**
   * Reads the caller's frames while the job runs: stdin into the relay, a
   * signal or a dropped stream cancels the job's subtree.
   */
  async #follow(conn: Conn, id: string, relay: FifoRelay, ended: Promise<RunEnd>): Promise<void> {
    let over = false;
    void ended.then(() => over = true);
    for (;;) {
      const frame = await Promise.race([conn.next(), ended.then(() => "ended" as const)]);
      if (frame === "ended") return;
      if (frame === null) {
        relay.endStdin();
        if (!over) {
          this.#d.log.info(`run ${id}: the caller's stream dropped: cancelling its tree`);
          this.cancel(id);
        }
        return;
      }
      switch (frame.t) {
        case "process.stdin":
          await relay.stdin(Buffer.from(frame.data, "base64"));
          break;
        case "process.stdin.end":
          relay.endStdin();
          break;
        case "process.signal":
          this.#d.log.info(`run ${id}: ${frame.signal} from the caller: cancelling its tree`);
          this.cancel(id);
          break;
        default:
          this.#d.log.info(`run ${id}: unexpected frame ${frame.t} ignored`);
      }
    }
  }

  /** A job that never reached the worker: failed, its capability revoked, its dir gone. */
  #endUnlaunched(id: string, dir: string, status: string): void {
    const d = this.#d;
    d.journal.updateJob(id, { state: "failed", status, code: 125, finishedMs: Date.now() });
    d.journal.jobTree.revoke(id);
    try {
      Deno.removeSync(dir, { recursive: true });
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) d.log.info(`run ${id}: ${dir}: ${error}`);
    }
  }

  /** Records the job's end and returns what the caller hears. */
  #record(
    id: string,
    name: string,
    parentDeadline: boolean,
    how: RunEnd,
    exit: { code: number | null; signal: string | null; wall: boolean } | null,
    container: string | null,
    cancelled: string | null,
  ): { code: number | null; signal: string | null; status: number; cause: string | null } {
    const d = this.#d;
    const finishedMs = Date.now();
    if (how.kind === "unreaped") {
      const status = `failed: ${how.message}; its slot is held until: marsh workers reset ${name}`;
      d.journal.updateJob(id, {
        state: "uncertain",
        cleanup: "uncertain",
        ...(how.container !== null ? { container: how.container } : {}),
        status,
        code: 125,
        finishedMs,
      });
      return { code: null, signal: null, status: 125, cause: status };
    }
    const cleanup = container === null ? "none" : "removed";
    if (cancelled !== null) {
      d.journal.updateJob(id, {
        state: "cancelled",
        cleanup,
        status: "cancelled",
        code: 130,
        finishedMs,
      });
      return {
        code: exit?.code ?? null,
        signal: exit?.signal ?? null,
        status: 130,
        cause: cancelled,
      };
    }
    if (how.kind === "error") {
      const status = `failed: ${how.message}`;
      d.journal.updateJob(id, { state: "failed", cleanup, status, code: 125, finishedMs });
      return { code: null, signal: null, status: 125, cause: status };
    }
    if (exit === null) {
      const status = "failed: the worker reported no exit";
      d.journal.updateJob(id, { state: "failed", cleanup, status, code: 125, finishedMs });
      return { code: null, signal: null, status: 125, cause: status };
    }
    if (exit.wall) {
      // The deadline fixed at admission: the parent's remaining time, or its own limits.
      const cause = parentDeadline ? "limit:wall: parent deadline" : "limit:wall";
      const status = `failed: wall clock limit reached (${cause})`;
      d.journal.updateJob(id, { state: "failed", cleanup, status, code: 124, finishedMs });
      return { code: exit.code, signal: exit.signal, status: 124, cause };
    }
    const code = exitCodeOf(exit.code, exit.signal);
    d.journal.updateJob(id, {
      state: "finished",
      cleanup,
      status: `exited ${code}`,
      code,
      finishedMs,
    });
    return { code: exit.code, signal: exit.signal, status: code, cause: null };
  }
}
