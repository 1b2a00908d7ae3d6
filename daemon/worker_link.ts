/**
 * The daemon's side of the worker (`worker/main.ts`): starts it with its own
 * narrow permissions, sends launch and cancel frames, and routes each event
 * to the attempt it names.
 *
 * Needs `--allow-run=<deno>`.
 *
 * @module
 */

import { encodeFrame, readFrames } from "../protocol/frame.ts";
import {
  type LaunchRequest,
  parseWorkerEvent,
  type WorkerEvent,
  type WorkerRequest,
} from "../protocol/worker.ts";
import { denoPath } from "../splitfs/client.ts";
import { workerFlags } from "../worker/flags.ts";

/** What a shell branch attempt runs with: the launch frame without its envelope. */
export type LaunchSpec =
  & Omit<LaunchRequest, "v" | "t" | "outputLimit" | "socket">
  & Required<Pick<LaunchRequest, "outputLimit" | "socket">>;

/** The events of one attempt. */
export interface AttemptEvents {
  launched(pid: number, mechanism: "cgroup" | "subreaper"): void;
  exited(code: number | null, signal: string | null): void;
  settled(): void;
  outputLimit(bytes: number): void;
  error(message: string): void;
}

const repo = new URL("../", import.meta.url);

/** A running worker process. */
export class WorkerLink {
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #attempts = new Map<string, AttemptEvents>();
  #sending: Promise<void> = Promise.resolve();
  readonly #done: Promise<void>;
  #onLost: (why: string) => void;

  private constructor(child: Deno.ChildProcess, onLost: (why: string) => void) {
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#onLost = onLost;
    this.#done = this.#readEvents();
  }

  /** Starts the worker; `onLost` is called if it dies or speaks garbage. */
  static start(home: string, onLost: (why: string) => void): WorkerLink {
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        ...workerFlags(home),
        `--config=${new URL("deno.json", repo).pathname}`,
        new URL("worker/main.ts", repo).pathname,
      ],
      env: { MARSH_HOME: home },
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    return new WorkerLink(child, onLost);
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
      this.#onLost("the worker exited");
    } catch (error) {
      this.#onLost(`the worker's frames broke: ${error}`);
    }
  }

  #dispatch(ev: WorkerEvent): void {
    if (!("attempt" in ev) || ev.attempt === undefined) {
      if (ev.t === "error") this.#onLost(`worker error: ${ev.message}`);
      return;
    }
    const h = this.#attempts.get(ev.attempt);
    if (!h) return;
    switch (ev.t) {
      case "launched":
        h.launched(ev.pid, ev.mechanism);
        break;
      case "exited":
        h.exited(ev.code, ev.signal);
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

  /** Launches a shell branch attempt; its events go to `events`. */
  launch(spec: LaunchSpec, events: AttemptEvents): Promise<void> {
    this.#attempts.set(spec.attempt, events);
    return this.#send({ v: 1, t: "launch", ...spec, env: { ...spec.env } });
  }

  /** SIGINT to every process of the attempt, `graceMs`, then SIGKILL. */
  cancel(attempt: string, graceMs: number): Promise<void> {
    return this.#send({ v: 1, t: "cancel", attempt, graceMs });
  }

  /** Attempts not yet settled. */
  get live(): string[] {
    return [...this.#attempts.keys()];
  }

  /** Asks the worker to cancel everything and exit, then waits for it. */
  async shutdown(): Promise<void> {
    this.#onLost = () => {};
    await this.#send({ v: 1, t: "shutdown" });
    await this.#writer.close().catch(() => {});
    await this.#done;
    await this.#child.status;
  }
}
