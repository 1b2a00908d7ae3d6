/**
 * The branch runner. Reads request frames (`protocol/worker.ts`) on stdin
 * and writes event frames on stdout until a `shutdown` frame or the end of
 * stdin; then it cancels every attempt, waits until all have ended and
 * exits 0. A malformed frame gets an `error` event and is skipped.
 *
 * Run as (exactly `workerFlags` of `protocol/entrypoints.ts`):
 *
 * ```sh
 * deno run --no-prompt --quiet --allow-run=perl --allow-write=<control dir> \
 *   --allow-env=MARSH_WORKER_FORCE_SUBREAPER,NODE_V8_COVERAGE worker/main.ts
 * ```
 *
 * With `--engine=SOCKET` it also runs argv branches as Kit containers
 * (`kit-launch`, `kit-reset`) on the Docker engine at `SOCKET`, and must
 * then run with `kitWorkerFlags` of `protocol/entrypoints.ts` instead; the Kit
 * half (and `npm:dockerode`, which reads the environment as it loads) is
 * loaded only then. Without it, a `kit-launch` fails with an `error`.
 *
 * `MARSH_WORKER_FORCE_SUBREAPER=1` makes every attempt use the subreaper
 * fallback even where a cgroup could be made. SIGTERM starts a shutdown;
 * SIGINT is ignored, since a terminal's Ctrl-C reaches the daemon too and
 * the daemon decides what to cancel.
 *
 * @module
 */

import { encodeFrame } from "../protocol/frame.ts";
import {
  boundMessage,
  DEFAULT_GRACE_MS,
  parseWorkerRequest,
  type WorkerEvent,
} from "../protocol/worker.ts";
import { FORCE_SUBREAPER_ENV } from "../protocol/entrypoints.ts";
import { readFrameItems } from "./frame_reader.ts";
import type { KitRunner } from "./kit_runner.ts";
import { BranchRunner } from "./runner.ts";

let queue = Promise.resolve();
let broken = false;

/** Events leave in the order they are made; a gone reader stops the writing, not the worker. */
function send(event: WorkerEvent): void {
  const bytes = encodeFrame(event);
  queue = queue.then(async () => {
    if (broken) return;
    try {
      for (let off = 0; off < bytes.length;) off += await Deno.stdout.write(bytes.subarray(off));
    } catch (error) {
      broken = true;
      console.error(`marsh worker: cannot write events: ${error}`);
    }
  });
}

const runner = new BranchRunner({
  emit: send,
  forceSubreaper: Deno.env.get(FORCE_SUBREAPER_ENV) === "1",
  log: (message) => console.error(`marsh worker: ${message}`),
});

/** The Kit half, when the daemon gave an engine. */
async function kitRunner(): Promise<KitRunner | null> {
  const flag = Deno.args.find((a) => a.startsWith("--engine="));
  if (flag === undefined) return null;
  const socket = flag.slice("--engine=".length);
  const [{ DockerApi }, { KitRunner }] = await Promise.all([
    import("../docker/docker_api.ts"),
    import("./kit_runner.ts"),
  ]);
  const owner = Deno.args.find((a) => a.startsWith("--owner="))?.slice("--owner=".length) ?? null;
  return new KitRunner({
    emit: send,
    api: new DockerApi(socket),
    owner,
    log: (message) => console.error(`marsh worker: ${message}`),
  });
}

const kits = await kitRunner();

// A fault in one attempt must not end the others: their supervisors would
// see the worker gone and cancel them. Say it loudly instead.
globalThis.addEventListener("unhandledrejection", (e) => {
  e.preventDefault();
  console.error("marsh worker: unhandled rejection:", e.reason);
});

let shutdownGrace = DEFAULT_GRACE_MS;
let stop: () => void = () => {};
const stopped = new Promise<void>((resolve) => stop = resolve);
Deno.addSignalListener("SIGINT", () => {});
Deno.addSignalListener("SIGTERM", () => stop());

async function readRequests(): Promise<void> {
  for await (const item of readFrameItems(Deno.stdin.readable)) {
    if ("error" in item) {
      send({ v: 1, t: "error", message: boundMessage(`dropped a frame: ${item.error.message}`) });
      continue;
    }
    let req;
    try {
      req = parseWorkerRequest(item.value);
    } catch (error) {
      send({
        v: 1,
        t: "error",
        message: boundMessage(`dropped a frame: ${(error as Error).message}`),
      });
      continue;
    }
    if (req.t === "shutdown") {
      shutdownGrace = req.graceMs ?? DEFAULT_GRACE_MS;
      return;
    }
    if (req.t === "kit-launch" || req.t === "kit-reset") {
      if (kits === null) {
        send(
          req.t === "kit-launch"
            ? {
              v: 1,
              t: "error",
              attempt: req.attempt,
              message: "this worker was started without a Docker engine",
            }
            : {
              v: 1,
              t: "kit-reset-done",
              id: req.id,
              removed: [],
              live: [],
              failed: [],
              error: "this worker was started without a Docker engine",
            },
        );
      } else if (req.t === "kit-launch") {
        kits.launch(req, runner.knows(req.attempt));
      } else {
        void kits.reset(req);
      }
      continue;
    }
    if (req.t === "cancel" && kits?.cancel(req.attempt)) continue;
    runner.handle(req);
  }
}

await Promise.race([
  readRequests().catch((error) => console.error(`marsh worker: cannot read requests: ${error}`)),
  stopped,
]);
await Promise.all([runner.shutdown(shutdownGrace), kits?.shutdown()]);
await queue;
Deno.exit(0);
