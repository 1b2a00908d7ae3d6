/**
 * Fakes of the split life cycle's links, for the state machine's unit tests
 * only (`split_machine_test.ts`): a split-filesystem service that answers
 * from a script, a worker whose attempts the test drives event by event,
 * branch sockets that are only names, and a client connection held in
 * memory. Nothing here touches a project tree or starts a process; every
 * test of the real links stays real (`tests/`, `splitfs/`, `worker/`).
 *
 * @module
 */

import type { ClientFrame, DaemonFrame } from "../protocol/daemon.ts";
import type { SplitfsRequest } from "../protocol/splitfs.ts";
import { SplitfsError } from "../protocol/splitfs_client.ts";
import type { Authority } from "./conn.ts";
import type { BranchSockets, ServiceLink, SplitConn, WorkerPort } from "./split_context.ts";
import type { AttemptEvents, KitAttemptEvents, LaunchSpec } from "./worker_link.ts";
import type { KitLaunch } from "../protocol/kit_launch.ts";

type Reply = Awaited<ReturnType<ServiceLink["request"]>>;

/** How the fake service answers one request type: a reply, or a thrown error. */
export type FakeAnswer = (req: SplitfsRequest) => Reply | Promise<Reply>;

/** A split-filesystem service that answers from a script and records every request. */
export class FakeService implements ServiceLink {
  readonly namespace = null;
  readonly requests: SplitfsRequest[] = [];
  readonly #answers = new Map<string, FakeAnswer>();

  constructor(readonly root: string) {}

  /** Answers requests of type `t` with `answer` from now on. */
  on(t: SplitfsRequest["t"], answer: FakeAnswer): void {
    this.#answers.set(t, answer);
  }

  /** Fails requests of type `t` with a {@linkcode SplitfsError} of `kind`. */
  fail(t: SplitfsRequest["t"], kind: SplitfsError["kind"], message: string): void {
    this.on(t, () => {
      throw new SplitfsError(kind, message);
    });
  }

  /** The types of the requests seen, in order. */
  get types(): string[] {
    return this.requests.map((r) => r.t);
  }

  request<R extends Reply = Reply>(req: SplitfsRequest): Promise<R> {
    this.requests.push(req);
    const answer = this.#answers.get(req.t);
    return Promise.resolve().then(() => (answer ? answer(req) : this.defaultReply(req)) as R);
  }

  /** What the fake answers when the test scripted nothing for the request's type. */
  defaultReply(req: SplitfsRequest): Reply {
    const identity = ["1", "2"] as const;
    switch (req.t) {
      case "locate":
        return { v: 1, t: "located", root: this.root, cwd: "" };
      case "create":
        return {
          v: 1,
          t: "created",
          root: this.root,
          cwd: "",
          dir: `${this.root}/.marsh/split/${req.id}`,
          identity,
          git: null,
          snapshot: { files: 1, bytes: 1, ms: 1, strategy: "copy", rootId: null },
        } as Reply;
      case "fork":
        return {
          v: 1,
          t: "forked",
          label: req.label,
          path: `${this.root}/.marsh/split/${req.id}/${req.label}`,
          strategy: "copy",
          identity,
          ms: 1,
        };
      case "capture":
        return { v: 1, t: "captured", label: req.label, files: 1, changedBytes: 1, ms: 1 };
      case "out-check":
        return { v: 1, t: "out-checked", missing: [] } as Reply;
      default:
        return { v: 1, t: "ok" };
    }
  }
}

/** A worker whose attempts the test drives: each launch is recorded with its events. */
export class FakeWorker implements WorkerPort {
  readonly shell = new Map<string, { spec: LaunchSpec; events: AttemptEvents }>();
  readonly kit = new Map<string, { launch: KitLaunch; events: KitAttemptEvents }>();
  readonly cancels: string[] = [];

  constructor(readonly engine: string | null = null) {}

  launch(spec: LaunchSpec, events: AttemptEvents): Promise<void> {
    this.shell.set(spec.attempt, { spec, events });
    return Promise.resolve();
  }

  kitLaunch(launch: KitLaunch, _graceMs: number, events: KitAttemptEvents): Promise<void> {
    this.kit.set(launch.attempt, { launch, events });
    return Promise.resolve();
  }

  cancel(attempt: string, _graceMs: number): Promise<void> {
    this.cancels.push(attempt);
    return Promise.resolve();
  }

  /** The events of the shell attempt of branch `label`. @throws {Error} when none was launched */
  shellOf(label: string): AttemptEvents {
    for (const [attempt, a] of this.shell) if (attempt.includes(`-${label}-`)) return a.events;
    throw new Error(`no shell attempt of branch ${label}`);
  }

  /** The events of the Kit attempt of branch `label`. @throws {Error} when none was launched */
  kitOf(label: string): KitAttemptEvents {
    for (const [attempt, a] of this.kit) if (attempt.includes(`-${label}-`)) return a.events;
    throw new Error(`no Kit attempt of branch ${label}`);
  }
}

/** Branch sockets that are names only; closes are recorded. */
export class FakeSockets implements BranchSockets {
  #n = 0;
  readonly closed: string[] = [];
  open(): string {
    return `/fake/b/${++this.#n}.sock`;
  }
  openJob(): string {
    return `/fake/c/${++this.#n}.sock`;
  }
  close(path: string): void {
    this.closed.push(path);
  }
}

/** A client connection held in memory: the test pushes frames in and reads what was sent. */
export class FakeConn implements SplitConn {
  readonly sent: DaemonFrame[] = [];
  readonly #inbox: (ClientFrame | null)[] = [];
  #waiting: ((f: ClientFrame | null) => void) | null = null;
  #closed = false;
  readonly #closedSignal = Promise.withResolvers<void>();

  constructor(readonly authority: Authority = { kind: "host" }) {}

  get closed(): Promise<void> {
    return this.#closedSignal.promise;
  }

  get isClosed(): boolean {
    return this.#closed;
  }

  /** A frame from the client. */
  push(frame: ClientFrame): void {
    if (this.#waiting) {
      const w = this.#waiting;
      this.#waiting = null;
      w(frame);
    } else this.#inbox.push(frame);
  }

  /** The client hangs up. */
  end(): void {
    this.#closed = true;
    this.#closedSignal.resolve();
    this.push(null as unknown as ClientFrame);
  }

  next(): Promise<ClientFrame | null> {
    if (this.#inbox.length > 0) return Promise.resolve(this.#inbox.shift()!);
    if (this.#closed) return Promise.resolve(null);
    return new Promise((resolve) => this.#waiting = resolve);
  }

  send(frame: DaemonFrame): Promise<void> {
    if (!this.#closed) this.sent.push(frame);
    return Promise.resolve();
  }

  flush(): Promise<void> {
    return Promise.resolve();
  }

  /** The first frame of type `t` sent so far, or undefined. */
  frame<T extends DaemonFrame["t"]>(t: T): Extract<DaemonFrame, { t: T }> | undefined {
    return this.sent.find((f) => f.t === t) as Extract<DaemonFrame, { t: T }> | undefined;
  }
}
