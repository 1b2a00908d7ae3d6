/**
 * The daemon's side of the worker (`worker/main.ts`): starts it with its own
 * narrow permissions, sends launch and cancel frames, and routes each event
 * to the attempt it names.
 *
 * Needs `--allow-run=<deno>`. Its flags: the `worker` and `kit-worker`
 * entrypoints of `protocol/entrypoints.ts`.
 *
 * @module
 */

import type { KitLaunch } from "../protocol/kit_launch.ts";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import {
  type ArgvProgram,
  type FifoStdio,
  type FileStdio,
  type KitResetDoneEvent,
  type LaunchBase,
  type LingeringEvent,
  parseWorkerEvent,
  type ScriptProgram,
  type WorkerEvent,
  type WorkerRequest,
} from "../protocol/worker.ts";
import { entryCommand } from "../protocol/entrypoints.ts";

/**
 * What a shell branch attempt runs with: the launch frame without its
 * envelope. Only a `marsh compare --test` run has no `socket`.
 */
export type LaunchSpec =
  & Omit<LaunchBase & ScriptProgram & FileStdio, "v" | "t" | "outputLimit">
  & Required<Pick<FileStdio, "outputLimit">>;

/** What a checkpoint operation's attempt runs with: the launch frame without its envelope. */
export type OperationLaunchSpec = Omit<LaunchBase & ArgvProgram & FifoStdio, "v" | "t">;

/** The events of one attempt. */
export interface AttemptEvents {
  /** `supervisor`: the attempt's supervisor, which exits only once every process of it is gone. */
  launched(pid: number, mechanism: "cgroup" | "subreaper", supervisor?: number): void;
  exited(code: number | null, signal: string | null): void;
  /** After `exited`: what the branch left running, each time that changes. */
  lingering?(ev: LingeringEvent): void;
  settled(): void;
  outputLimit(bytes: number): void;
  error(message: string): void;
}

/** The events of one argv branch (Kit container) attempt; see `protocol/worker.ts`. */
export interface KitAttemptEvents {
  /** The container exists. */
  launched(container: string): void;
  exited(code: number | null, signal: string | null, wall: boolean): void;
  /** The container is gone (verified) and the output files are closed. */
  settled(): void;
  outputLimit(bytes: number): void;
  /** Nothing of the attempt is left; it failed. */
  error(message: string): void;
  /** A container of the attempt may still exist. */
  unreaped(container: string | null, message: string): void;
}

/** What `marsh workers reset KIT` found in the engine. */
export type KitResetResult = Omit<KitResetDoneEvent, "v" | "t" | "id">;

/** A running worker process. */
export class WorkerLink {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #attempts = new Map<string, AttemptEvents>();
  readonly #kitAttempts = new Map<string, KitAttemptEvents>();
  readonly #resets = new Map<string, PromiseWithResolvers<KitResetResult>>();
  #resetIds = 0;
  /** The engine socket the worker drives, or null when it has none. */
  readonly engine: string | null;
  #sending: Promise<void> = Promise.resolve();
  readonly #done: Promise<void>;
  #onLost: (why: string) => void;

  private constructor(
    child: Deno.ChildProcess,
    onLost: (why: string) => void,
    engine: string | null,
  ) {
    this.#child = child;
    this.engine = engine;
    this.#writer = child.stdin.getWriter();
    this.#onLost = onLost;
    this.#done = this.#readEvents();
  }

  /**
   * Starts the worker; `onLost` is called if it dies or speaks garbage.
   * With `engine` (a Docker engine's socket, `engineSocket` of
   * `docker/private_engine.ts`) it runs as the `kit-worker` entrypoint of
   * `protocol/entrypoints.ts` and runs argv branches there too; without,
   * `kit-launch` fails.
   */
  static start(
    home: string,
    onLost: (why: string) => void,
    engine: string | null = null,
  ): WorkerLink {
    const options: Deno.CommandOptions = { stdin: "piped", stdout: "piped", stderr: "inherit" };
    const child =
      (engine === null
        ? entryCommand("worker", { home }, { ...options, env: { MARSH_HOME: home } })
        : entryCommand("kit-worker", { home, engine }, {
          ...options,
          // Its containers carry the control dir: `workers reset` touches this daemon's only.
          args: [`--engine=${engine}`, `--owner=${home}`],
          env: { MARSH_HOME: home },
        })).spawn();
    return new WorkerLink(child, onLost, engine);
  }

  /** The worker's process id (recorded for the next daemon: daemon/children.ts). */
  get pid(): number {
    return this.#child.pid;
  }

  #send(req: WorkerRequest): Promise<void> {
    this.#sending = this.#sending.then(() => this.#writer.write(encodeFrame(req))).catch(
      (error) => this.#onLost(`cannot write to the worker: ${error}`),
    );
    return this.#sending;
  }

  async #readEvents(): Promise<void> {
    try {
      for await (const frame of readFrames(this.#child.stdout)) {
        this.#dispatch(parseWorkerEvent(frame));
      }
      this.#failResets("the worker exited");
      this.#onLost("the worker exited");
    } catch (error) {
      this.#failResets(`the worker's frames broke: ${error}`);
      this.#onLost(`the worker's frames broke: ${error}`);
    }
  }

  #failResets(why: string): void {
    for (const r of this.#resets.values()) r.reject(new Error(why));
    this.#resets.clear();
  }

  #dispatch(ev: WorkerEvent): void {
    if (ev.t === "kit-reset-done") {
      const r = this.#resets.get(ev.id);
      this.#resets.delete(ev.id);
      const { v: _v, t: _t, id: _id, ...result } = ev;
      r?.resolve(result);
      return;
    }
    if (!("attempt" in ev) || ev.attempt === undefined) {
      if (ev.t === "error") this.#onLost(`worker error: ${ev.message}`);
      return;
    }
    const k = this.#kitAttempts.get(ev.attempt);
    if (k) return this.#dispatchKit(ev.attempt, k, ev);
    const h = this.#attempts.get(ev.attempt);
    if (!h) return;
    switch (ev.t) {
      case "launched":
        if ("pid" in ev) h.launched(ev.pid, ev.mechanism, ev.supervisor);
        break;
      case "exited":
        h.exited(ev.code, ev.signal);
        break;
      case "lingering":
        h.lingering?.(ev);
        break;
      case "settled":
        this.#attempts.delete(ev.attempt);
        h.settled();
        break;
      case "output-limit":
        h.outputLimit(ev.bytes);
        break;
      case "error":
        // An error that names an attempt is that attempt's last event.
        this.#attempts.delete(ev.attempt);
        h.error(ev.message);
        break;
    }
  }

  #dispatchKit(attempt: string, k: KitAttemptEvents, ev: WorkerEvent): void {
    switch (ev.t) {
      case "launched":
        if ("container" in ev) k.launched(ev.container);
        break;
      case "exited":
        k.exited(ev.code, ev.signal, ev.wall === true);
        break;
      case "output-limit":
        k.outputLimit(ev.bytes);
        break;
      case "settled":
        this.#kitAttempts.delete(attempt);
        k.settled();
        break;
      case "error":
        this.#kitAttempts.delete(attempt);
        k.error(ev.message);
        break;
      case "unreaped":
        this.#kitAttempts.delete(attempt);
        k.unreaped(ev.container, ev.message);
        break;
    }
  }

  /** Launches an argv branch attempt (one Kit container); its events go to `events`. */
  kitLaunch(launch: KitLaunch, graceMs: number, events: KitAttemptEvents): Promise<void> {
    this.#kitAttempts.set(launch.attempt, events);
    return this.#send({ v: 1, t: "kit-launch", ...launch, graceMs });
  }

  /**
   * `marsh workers reset KIT`: the worker removes (verified) every container
   * of the Kit that no live attempt runs.
   */
  resetKit(kit: string): Promise<KitResetResult> {
    const id = `r${++this.#resetIds}`;
    const r = Promise.withResolvers<KitResetResult>();
    this.#resets.set(id, r);
    void this.#send({ v: 1, t: "kit-reset", id, kit });
    return r.promise;
  }

  /** Launches a shell branch attempt; its events go to `events`. */
  launch(spec: LaunchSpec, events: AttemptEvents): Promise<void> {
    this.#attempts.set(spec.attempt, events);
    return this.#send({ v: 1, t: "launch", ...spec, env: { ...spec.env } });
  }

  /**
   * Launches a checkpoint operation (its argv, its stdio on the caller's
   * FIFOs; docs/checkpoints.md "An operation"); its events go to `events`.
   */
  launchOperation(spec: OperationLaunchSpec, events: AttemptEvents): Promise<void> {
    this.#attempts.set(spec.attempt, events);
    return this.#send({ v: 1, t: "launch", ...spec, env: { ...spec.env } });
  }

  /** SIGINT to every process of the attempt, `graceMs`, then SIGKILL. */
  cancel(attempt: string, graceMs: number): Promise<void> {
    return this.#send({ v: 1, t: "cancel", attempt, graceMs });
  }

  /** Attempts not yet settled. */
  get live(): string[] {
    return [...this.#attempts.keys(), ...this.#kitAttempts.keys()];
  }

  /** Asks the worker to cancel everything and exit, then waits for it. */
  async shutdown(): Promise<void> {
    this.#onLost = () => {};
    this.#failResets("the worker is shutting down");
    await this.#send({ v: 1, t: "shutdown" });
    await this.#writer.close().catch(() => {});
    await this.#done;
    await this.#child.status;
  }
}
