/**
 * One shell-branch or operation attempt from launch to its last event: the
 * output files (or the supervisor's relay to an operation's FIFOs), the
 * supervisor, the output budget, cancellation, and the rule that `settled`
 * comes only once every process is gone and the files (FIFOs) are closed.
 *
 * @module
 */

import {
  boundMessage,
  FIFO_OPEN_MS,
  type LaunchRequest,
  type Mechanism,
  type WorkerEvent,
} from "../protocol/worker.ts";
import { filterEnv } from "../model/env_filter.ts";
import { OUTPUT_LIMIT } from "../model/limits.ts";
import { OutputBudget, pump } from "./output.ts";
import { viewSteps } from "./shell_view.ts";
import { Supervisor, type SupervisorMessage } from "./supervisor.ts";

/** How attempts run, shared by every attempt of a worker. */
export interface AttemptOptions {
  /** Where events go, in order. */
  readonly emit: (event: WorkerEvent) => void;
  /** Use the subreaper fallback even where a cgroup could be made. */
  readonly forceSubreaper?: boolean;
  /** The Perl that runs supervisors (default `perl` from `PATH`). */
  readonly perl?: string;
  /** Notes that change no attempt's state (the daemon's log). */
  readonly log?: (message: string) => void;
  /** How long an operation's FIFOs wait for their peers; default `FIFO_OPEN_MS`. */
  readonly fifoOpenMs?: number;
}

/** Where an attempt's stdout and stderr go: files the worker writes, or the supervisor's relay. */
type Sink = { readonly out: Deno.FsFile; readonly err: Deno.FsFile; readonly limit: number } | null;

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A running attempt. Create it with {@linkcode Attempt.start}. */
export class Attempt {
  readonly id: string;
  readonly #opts: AttemptOptions;
  /** Resolves after the attempt's last event was emitted. */
  readonly done: Promise<void>;
  #supervisor: Supervisor | null = null;
  #launched: { mechanism: Mechanism; cgroup: string | null } | null = null;
  #settled = false;
  /** With FIFOs: the bytes the stdout and stderr readers got, from the supervisor. */
  #relayed: readonly [number, number] = [0, 0];
  #failure: string | null = null;
  /** When `bash` exited (Unix ms): what lingers after it lingers since then. */
  #exitedAt: number | null = null;
  #ended = false;
  #pendingGrace: number | null = null;
  #interrupted = false;
  #killAt = Infinity;
  #killTimer: ReturnType<typeof setTimeout> | undefined;

  private constructor(id: string, opts: AttemptOptions, run: (self: Attempt) => Promise<void>) {
    this.id = id;
    this.#opts = opts;
    this.done = run(this).catch((error) => {
      this.#end({ v: 1, t: "error", attempt: id, message: `internal fault: ${describe(error)}` });
    });
  }

  /**
   * Starts an attempt. Every outcome, including a refused launch, arrives
   * as events; {@linkcode done} resolves after the last one.
   *
   * Needs write access to the output files' directory and `--allow-run=perl`.
   */
  static start(req: LaunchRequest, opts: AttemptOptions): Attempt {
    return new Attempt(req.attempt, opts, (self) => self.#run(req));
  }

  /** Whether the attempt emitted its last event. */
  get ended(): boolean {
    return this.#ended;
  }

  /**
   * SIGINT to every process of the attempt, and SIGKILL to what is left
   * after `graceMs`. A second cancel can only bring the SIGKILL closer.
   */
  cancel(graceMs: number): void {
    if (this.#ended) return;
    if (!this.#launched) {
      this.#pendingGrace = Math.min(this.#pendingGrace ?? Infinity, graceMs);
      return;
    }
    const supervisor = this.#supervisor;
    if (!supervisor) return;
    if (!this.#interrupted) {
      this.#interrupted = true;
      supervisor.interrupt();
    }
    const at = Date.now() + graceMs;
    if (at >= this.#killAt) return;
    this.#killAt = at;
    clearTimeout(this.#killTimer);
    this.#killTimer = setTimeout(() => supervisor.kill(), graceMs);
  }

  #emit(event: WorkerEvent): void {
    if (!this.#ended) this.#opts.emit(event);
  }

  #end(event: WorkerEvent): void {
    if (this.#ended) return;
    this.#emit(event);
    this.#ended = true;
    clearTimeout(this.#killTimer);
  }

  #fail(message: string): void {
    this.#end({ v: 1, t: "error", attempt: this.id, message: boundMessage(message) });
  }

  async #run(req: LaunchRequest): Promise<void> {
    if (req.stdio !== undefined) {
      await this.#supervise(req, null);
      return;
    }
    const files: Deno.FsFile[] = [];
    try {
      for (const path of [req.stdout, req.stderr]) {
        files.push(await Deno.open(path, { write: true, createNew: true, mode: 0o600 }));
      }
    } catch (error) {
      for (const f of files) f.close();
      const which = files.length === 0 ? "stdout" : "stderr";
      this.#fail(
        `cannot create the ${which} file ${
          JSON.stringify(files.length === 0 ? req.stdout : req.stderr)
        }: ${describe(error)}`,
      );
      return;
    }
    const [out, err] = files as [Deno.FsFile, Deno.FsFile];
    try {
      await this.#supervise(req, { out, err, limit: req.outputLimit ?? OUTPUT_LIMIT });
    } finally {
      out.close();
      err.close();
    }
  }

  async #supervise(req: LaunchRequest, sink: Sink): Promise<void> {
    const supervisor = Supervisor.start(
      {
        mode: this.#opts.forceSubreaper ? "subreaper" : "auto",
        attempt: req.attempt,
        cwd: req.cwd,
        ...(req.namespace ? { namespace: req.namespace.pid } : {}),
        ...(req.view ? { view: viewSteps(req.view) } : {}),
        stdin: req.stdin ?? null,
        script: req.script ?? "",
        ...(req.argv ? { argv: req.argv } : {}),
        ...(req.stdio
          ? { fifos: { ...req.stdio, waitMs: this.#opts.fifoOpenMs ?? FIFO_OPEN_MS } }
          : {}),
        // The branch's socket is the daemon's to give, never the caller's.
        env: { ...filterEnv(req.env), ...(req.socket ? { MARSH_SOCK: req.socket } : {}) },
      },
      (m) => this.#onMessage(m),
      this.#opts.perl,
    );
    this.#supervisor = supervisor;
    let pumps: Promise<readonly number[]>;
    if (sink === null) {
      // The branch writes to the supervisor's relay; these carry only the
      // supervisor's own complaints, and nobody asked for them.
      supervisor.stdout.resume();
      supervisor.stderr.resume();
      pumps = Promise.resolve([]);
    } else {
      const budget = new OutputBudget(sink.limit);
      const onCrossed = (bytes: number) => {
        this.#emit({ v: 1, t: "output-limit", attempt: this.id, bytes });
        // Nothing more is kept; writers now get EPIPE rather than a full pipe.
        supervisor.stdout.destroy();
        supervisor.stderr.destroy();
      };
      pumps = Promise.all([
        pump(supervisor.stdout, sink.out, budget, onCrossed),
        pump(supervisor.stderr, sink.err, budget, onCrossed),
      ]);
    }
    const exit = await supervisor.exit;

    if (this.#settled) {
      // Every process is gone, so every writer of the pipes is gone too.
      const [stdoutBytes, stderrBytes] = sink === null ? this.#relayed : await pumps;
      this.#end({
        v: 1,
        t: "settled",
        attempt: this.id,
        stdoutBytes: stdoutBytes ?? 0,
        stderrBytes: stderrBytes ?? 0,
      });
      return;
    }
    supervisor.stdout.destroy();
    supervisor.stderr.destroy();
    await pumps;
    if (exit.error !== undefined) {
      this.#fail(`cannot start the supervisor (${this.#opts.perl ?? "perl"}): ${exit.error}`);
      return;
    }
    const how = exit.signal ? `was killed by ${exit.signal}` : `exited with status ${exit.code}`;
    if (!this.#launched) {
      this.#fail(this.#failure ?? `the supervisor ${how} before the branch started`);
      return;
    }
    const cgroup = this.#launched.cgroup;
    if (cgroup === null) {
      this.#fail(
        `the supervisor of attempt ${this.id} ${how}; processes of the attempt may still be running`,
      );
      return;
    }
    // The cgroup still holds whatever is left: a new supervisor ends it.
    const adopter = Supervisor.start(
      { mode: "adopt", attempt: this.id, cgroup, cwd: "/", stdin: null, script: "", env: {} },
      () => {},
      this.#opts.perl,
    );
    adopter.stdout.destroy();
    adopter.stderr.destroy();
    await adopter.exit;
    this.#fail(
      `the supervisor of attempt ${this.id} ${how}; every process left in its cgroup was killed`,
    );
  }

  #onMessage(m: SupervisorMessage): void {
    switch (m.kind) {
      case "launched": {
        this.#launched = { mechanism: m.mechanism, cgroup: m.cgroup };
        const supervisor = this.#supervisor?.pid ?? 0;
        this.#emit({
          v: 1,
          t: "launched",
          attempt: this.id,
          pid: m.pid,
          supervisor,
          mechanism: m.mechanism,
          ...(m.cgroup === null ? {} : { cgroup: m.cgroup }),
        });
        if (this.#pendingGrace !== null) this.cancel(this.#pendingGrace);
        return;
      }
      case "exited":
        this.#exitedAt = Date.now();
        this.#emit({ v: 1, t: "exited", attempt: this.id, code: m.code, signal: m.signal });
        return;
      case "lingering":
        this.#emit({
          v: 1,
          t: "lingering",
          attempt: this.id,
          since: this.#exitedAt ?? Date.now(),
          processes: m.processes,
          more: m.total - m.processes.length,
        });
        return;
      case "settled":
        this.#settled = true;
        if (m.relayed) this.#relayed = m.relayed;
        if (!m.cgroupRemoved) {
          this.#opts.log?.(`attempt ${this.id}: cannot remove cgroup ${this.#launched?.cgroup}`);
        }
        return;
      case "fail":
        this.#failure = m.message;
        return;
      case "warn":
        this.#opts.log?.(`attempt ${this.id}: ${m.message}`);
        return;
    }
  }
}
