/**
 * The real worker (`worker/main.ts --engine=SOCKET` under `kitWorkerFlags`)
 * running argv branch attempts on a real engine with the fixture Kit: the
 * event order, a cancel, a `kit-reset` that leaves a live attempt's
 * container alone and removes a leftover, and a worker without an engine.
 *
 * A missing engine fails these tests (`tests/_engine.ts`), never skips them.
 */

import assert from "node:assert/strict";
import { encodeFrame, readFrames } from "../protocol/frame.ts";
import { parseWorkerEvent, type WorkerEvent } from "../protocol/worker.ts";
import { denoPath } from "../protocol/splitfs_client.ts";
import { ensureEngine, fixtureKit, listContainers, removeContainers } from "../tests/_engine.ts";
import { workerFlags } from "../protocol/entrypoints.ts";
import { kitWorkerFlags } from "../protocol/entrypoints.ts";

const root = new URL("../", import.meta.url).pathname;
const perms: Deno.PermissionOptions = { read: true, write: true, run: true, env: true };

/** A worker process and the events it sent. */
class Worker implements AsyncDisposable {
  readonly events: WorkerEvent[] = [];
  readonly #child: Deno.ChildProcess;
  readonly #writer: WritableStreamDefaultWriter<Uint8Array>;
  readonly #reading: Promise<void>;
  #wake: () => void = () => {};

  constructor(control: string, socket: string | null, owner?: string) {
    const child = new Deno.Command(denoPath(), {
      args: [
        "run",
        ...(socket === null ? workerFlags(control) : kitWorkerFlags(control, socket)),
        `--config=${root}deno.json`,
        `${root}worker/main.ts`,
        ...(socket === null ? [] : [`--engine=${socket}`]),
        ...(owner === undefined ? [] : [`--owner=${owner}`]),
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "inherit",
    }).spawn();
    this.#child = child;
    this.#writer = child.stdin.getWriter();
    this.#reading = (async () => {
      for await (const f of readFrames(child.stdout)) {
        this.events.push(parseWorkerEvent(f));
        this.#wake();
      }
    })();
  }

  send(x: unknown): Promise<void> {
    return this.#writer.write(encodeFrame(x));
  }

  async wait(match: (e: WorkerEvent) => boolean, what: string): Promise<WorkerEvent> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const e = this.events.find(match);
      if (e) return e;
      if (Date.now() > deadline) {
        throw new Error(`no ${what} in ${JSON.stringify(this.events)}`);
      }
      await new Promise<void>((r) => {
        this.#wake = r;
        setTimeout(r, 200);
      });
    }
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.send({ v: 1, t: "shutdown", graceMs: 500 }).catch(() => {});
    await this.#writer.close().catch(() => {});
    await this.#reading;
    await this.#child.status;
  }
}

async function world() {
  const socket = await ensureEngine();
  const { id: image } = await fixtureKit(socket);
  const base = Deno.realPathSync(await Deno.makeTempDir({ prefix: "marsh-kitrunner-" }));
  for (const d of ["control", "fork", "home"]) Deno.mkdirSync(`${base}/${d}`);
  const tag = crypto.randomUUID().slice(0, 8);
  const launch = (attempt: string, argv: string[]) => {
    Deno.mkdirSync(`${base}/control/${attempt}`);
    return {
      v: 1,
      t: "kit-launch",
      job: `j-${attempt}`,
      attempt,
      split: `s${tag}`,
      label: attempt,
      kit: {
        name: `t${tag}`,
        image,
        entrypoint: ["env"],
        network: "none",
        env: [],
        wallS: 120,
        home: `${base}/home`,
      },
      argv: [`t${tag}`, ...argv],
      env: {},
      fork: `${base}/fork`,
      cwd: `${base}/fork`,
      admin: null,
      objectDirs: [],
      stdin: null,
      stdout: `${base}/control/${attempt}/stdout`,
      stderr: `${base}/control/${attempt}/stderr`,
      outputLimit: 1024,
      user: null,
      cap: null,
      graceMs: 500,
    };
  };
  return {
    socket,
    base,
    kit: `t${tag}`,
    split: `s${tag}`,
    launch,
    async [Symbol.asyncDispose]() {
      await removeContainers(socket, [`marsh.split=s${tag}`]);
      await Deno.remove(base, { recursive: true });
    },
  };
}

const of = (attempt: string) => (e: WorkerEvent) => "attempt" in e && e.attempt === attempt;

Deno.test({
  name: "kit worker: launched (container), exited, settled; the output limit; a cancel",
  permissions: perms,
}, async () => {
  await using w = await world();
  await using worker = new Worker(`${w.base}/control`, w.socket);
  await worker.send(w.launch("ok", ["sh", "-c", "echo hi > out.txt; echo done; exit 4"]));
  const t0 = performance.now();
  // It would sleep on: crossing the limit must stop it (also when that happens as it starts).
  await worker.send(w.launch("loud", ["sh", "-c", "head -c 1048576 /dev/zero; sleep 300"]));
  await worker.send(w.launch("slow", ["sleep", "300"]));
  await worker.wait((e) => e.t === "settled" && of("ok")(e), "ok settled");
  const ok = worker.events.filter(of("ok"));
  assert.deepEqual(ok.map((e) => e.t), ["launched", "exited", "settled"]);
  assert.match((ok[0] as { container: string }).container, /^[0-9a-f]{64}$/);
  assert.deepEqual(ok[1], { v: 1, t: "exited", attempt: "ok", code: 4, signal: null });
  assert.deepEqual(ok[2], { v: 1, t: "settled", attempt: "ok", stdoutBytes: 5, stderrBytes: 0 });
  assert.equal(Deno.readTextFileSync(`${w.base}/fork/out.txt`), "hi\n");

  await worker.wait((e) => e.t === "settled" && of("loud")(e), "loud settled");
  assert.ok(performance.now() - t0 < 30_000, "the output limit stopped the container");
  assert.deepEqual(worker.events.filter(of("loud")).map((e) => e.t), [
    "launched",
    "output-limit",
    "exited",
    "settled",
  ]);
  assert.equal(Deno.statSync(`${w.base}/control/loud/stdout`).size, 1024);

  await worker.wait((e) => e.t === "launched" && of("slow")(e), "slow launched");
  const sent = performance.now();
  await worker.send({ v: 1, t: "cancel", attempt: "slow" });
  await worker.wait((e) => e.t === "settled" && of("slow")(e), "slow settled");
  assert.ok(performance.now() - sent < 15_000, "the cancel ended it");
  const exited = worker.events.find((e) => e.t === "exited" && of("slow")(e));
  assert.ok(
    exited?.t === "exited" && (exited.signal === "SIGINT" || exited.signal === "SIGKILL"),
    JSON.stringify(exited),
  );
  assert.deepEqual(await listContainers(w.socket, [`marsh.split=${w.split}`]), []);
});

Deno.test({
  name: "kit worker: kit-reset removes leftovers, never a live attempt's container",
  permissions: perms,
}, async () => {
  await using w = await world();
  await using worker = new Worker(`${w.base}/control`, w.socket);
  // A leftover: a container of this Kit that no attempt of this worker runs.
  const other = new Worker(`${w.base}/control`, w.socket);
  await other.send(w.launch("orphan", ["sleep", "300"]));
  const orphan = await other.wait((e) => e.t === "launched" && of("orphan")(e), "orphan");
  const orphanId = (orphan as { container: string }).container;
  await worker.send(w.launch("live", ["sleep", "300"]));
  const live = await worker.wait((e) => e.t === "launched" && of("live")(e), "live launched");
  const liveId = (live as { container: string }).container;

  await worker.send({ v: 1, t: "kit-reset", id: "r1", kit: w.kit });
  const done = await worker.wait((e) => e.t === "kit-reset-done", "reset done");
  assert.ok(done.t === "kit-reset-done");
  assert.deepEqual(done.removed.map((c) => [c.container, c.attempt, c.label]), [
    [orphanId, "orphan", "orphan"],
  ]);
  assert.deepEqual(done.live.map((c) => c.container), [liveId]);
  assert.deepEqual(done.failed, []);
  const left = await listContainers(w.socket, [`marsh.split=${w.split}`]);
  assert.deepEqual(left.map((c) => c.id), [liveId]);

  // The other worker's attempt lost its container under it: it ends, nothing is left.
  await other.wait((e) => of("orphan")(e) && (e.t === "settled" || e.t === "error"), "orphan end");
  await other[Symbol.asyncDispose]();
  await worker.send({ v: 1, t: "cancel", attempt: "live" });
  await worker.wait((e) => e.t === "settled" && of("live")(e), "live settled");
});

Deno.test({
  name: "kit worker: kit-reset with an owner leaves another daemon's containers alone",
  permissions: perms,
}, async () => {
  await using w = await world();
  // Two daemons on one engine: their workers label containers with their control dirs.
  await using mine = new Worker(`${w.base}/control`, w.socket, "/state/a");
  await using theirs = new Worker(`${w.base}/control`, w.socket, "/state/b");
  await mine.send(w.launch("gone", ["true"]));
  await mine.wait((e) => e.t === "settled" && of("gone")(e), "gone settled");
  const other = new Worker(`${w.base}/control`, w.socket, "/state/a");
  await other.send(w.launch("orphan", ["sleep", "300"]));
  const orphan = await other.wait((e) => e.t === "launched" && of("orphan")(e), "orphan");
  await theirs.send(w.launch("foreign", ["sleep", "300"]));
  const foreign = await theirs.wait((e) => e.t === "launched" && of("foreign")(e), "foreign");
  const foreignId = (foreign as { container: string }).container;
  const labels = (await listContainers(w.socket, [`marsh.attempt=foreign`]))[0];
  assert.ok(labels, "the foreign container exists");

  await mine.send({ v: 1, t: "kit-reset", id: "r1", kit: w.kit });
  const done = await mine.wait((e) => e.t === "kit-reset-done", "reset done");
  assert.ok(done.t === "kit-reset-done");
  // Its own leftover goes; the other daemon's live container is not even looked at.
  assert.deepEqual(done.removed.map((c) => c.container), [
    (orphan as { container: string }).container,
  ]);
  assert.deepEqual(done.live, []);
  const left = await listContainers(w.socket, [`marsh.split=${w.split}`]);
  assert.deepEqual(left.map((c) => c.id), [foreignId]);

  await other.wait((e) => of("orphan")(e) && (e.t === "settled" || e.t === "error"), "orphan end");
  await other[Symbol.asyncDispose]();
  await theirs.send({ v: 1, t: "cancel", attempt: "foreign" });
  await theirs.wait((e) => e.t === "settled" && of("foreign")(e), "foreign settled");
});

Deno.test({
  name: "kit worker: without an engine a kit-launch and a kit-reset are refused",
  permissions: perms,
}, async () => {
  const base = await Deno.makeTempDir({ prefix: "marsh-kitrunner-" });
  try {
    await using worker = new Worker(base, null);
    await worker.send({
      v: 1,
      t: "kit-launch",
      job: "j",
      attempt: "a1",
      split: "s",
      label: "a",
      kit: {
        name: "k",
        image: "x",
        entrypoint: null,
        network: "none",
        env: [],
        wallS: 1,
        home: "/h",
      },
      argv: ["k"],
      env: {},
      fork: "/f",
      cwd: "/f",
      admin: null,
      objectDirs: [],
      stdin: null,
      stdout: `${base}/o`,
      stderr: `${base}/e`,
      outputLimit: 1,
      user: null,
      cap: null,
    });
    await worker.send({ v: 1, t: "kit-reset", id: "r", kit: "k" });
    assert.deepEqual(await worker.wait((e) => e.t === "error", "error"), {
      v: 1,
      t: "error",
      attempt: "a1",
      message: "this worker was started without a Docker engine",
    });
    const done = await worker.wait((e) => e.t === "kit-reset-done", "reset");
    assert.ok(done.t === "kit-reset-done");
    assert.equal(done.error, "this worker was started without a Docker engine");
  } finally {
    await Deno.remove(base, { recursive: true });
  }
});
