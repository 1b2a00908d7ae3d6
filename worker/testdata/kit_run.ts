/**
 * A test driver run under the Kit worker's exact flags (`kitWorkerFlags`),
 * so every test of `runKitContainer` also proves those flags suffice. The
 * test runner itself has no network permission.
 *
 * ```sh
 * deno run $(kitWorkerFlags) worker/testdata/kit_run.ts SOCKET VERB ARGS...
 * ```
 *
 * - `run LAUNCH.json [OPTIONS.json]`: one launch; options `abortAfterMs`,
 *   `abortAfterOutputMs` (that long after the command's first stdout byte,
 *   so the abort finds it running however slow the engine is), `graceMs`,
 *   `drainMs`, `removeTimeoutMs`;
 * - `time LAUNCH.json N`: N launches one after another (attempt `<attempt>-<i>`,
 *   output files `<stdout>-<i>`), printing each one's milliseconds;
 * - `rmi-between LAUNCH.json`: one launch, then the launch's image removed from
 *   the engine, then a second launch (attempt `<attempt>-2`) in the same
 *   process, whose result is printed;
 * - `list LABEL=VALUE...`: containers with every label (`DockerApi.listContainers`);
 * - `leftovers LABEL=VALUE...`: `findLeftoverContainers`;
 * - `remove ID TIMEOUT_MS`: `removeVerified`.
 *
 * Prints one JSON line: `{"ok": …}` or `{"error": {"name", "message", …}}`.
 *
 * @module
 */

import { DockerApi } from "../../docker/docker_api.ts";
import { type KitLaunch, parseKitLaunch } from "../../protocol/kit_launch.ts";
import {
  ContainerNotRemovedError,
  type KitExit,
  type KitRunOptions,
  runKitContainer,
} from "../kit_container.ts";
import { findLeftoverContainers, removeVerified } from "../kit_removal.ts";
import type { KitMount } from "../kit_mounts.ts";

function labels(args: string[]): Record<string, string> {
  return Object.fromEntries(args.map((a) => {
    const i = a.indexOf("=");
    return [a.slice(0, i), a.slice(i + 1)];
  }));
}

async function run(
  api: DockerApi,
  launch: KitLaunch,
  o: Record<string, number>,
): Promise<{ exit: KitExit; mounts: readonly KitMount[] | null; ms: number }> {
  const controller = new AbortController();
  let timer = o.abortAfterMs === undefined
    ? undefined
    : setTimeout(() => controller.abort(), o.abortAfterMs);
  const afterOutput = o.abortAfterOutputMs;
  const poll = afterOutput === undefined ? undefined : setInterval(() => {
    let size = 0;
    try {
      size = Deno.statSync(launch.stdout).size;
    } catch (error) {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Not made yet: the launch opens it.
    }
    if (size === 0) return;
    clearInterval(poll);
    timer = setTimeout(() => controller.abort(), afterOutput);
  }, 20);
  let mounts: readonly KitMount[] | null = null;
  const opts: KitRunOptions = {
    graceMs: o.graceMs,
    drainMs: o.drainMs,
    removeTimeoutMs: o.removeTimeoutMs,
    onContainer: (_id, m) => mounts = m,
  };
  const t0 = performance.now();
  try {
    const exit = await runKitContainer(api, launch, controller.signal, opts);
    return { exit, mounts, ms: performance.now() - t0 };
  } finally {
    clearInterval(poll);
    clearTimeout(timer);
  }
}

const [socket, verb, ...rest] = Deno.args;
const api = new DockerApi(socket!);
let result: unknown;
try {
  switch (verb) {
    case "run": {
      const launch = parseKitLaunch(JSON.parse(Deno.readTextFileSync(rest[0]!)));
      const o = rest[1] ? JSON.parse(Deno.readTextFileSync(rest[1])) : {};
      const r = await run(api, launch, o);
      result = { ok: { ...r.exit, mounts: r.mounts } };
      break;
    }
    case "time": {
      const base = parseKitLaunch(JSON.parse(Deno.readTextFileSync(rest[0]!)));
      const ms: number[] = [];
      for (let i = 0; i < Number(rest[1]); i++) {
        const launch = {
          ...base,
          attempt: `${base.attempt}-${i}`,
          stdout: `${base.stdout}-${i}`,
          stderr: `${base.stderr}-${i}`,
        };
        const r = await run(api, launch, {});
        if (r.exit.code !== 0) throw new Error(`run ${i} exited ${r.exit.code}`);
        ms.push(r.ms);
      }
      result = { ok: ms };
      break;
    }
    case "rmi-between": {
      const launch = parseKitLaunch(JSON.parse(Deno.readTextFileSync(rest[0]!)));
      const first = await run(api, launch, {});
      if (first.exit.code !== 0) throw new Error(`the first run exited ${first.exit.code}`);
      if (!(await api.removeImage(launch.kit.image))) throw new Error("the image was not removed");
      const again = { ...launch, attempt: `${launch.attempt}-2` };
      const r = await run(api, {
        ...again,
        stdout: `${launch.stdout}-2`,
        stderr: `${launch.stderr}-2`,
      }, {});
      result = { ok: r.exit };
      break;
    }
    case "list":
      result = { ok: await api.listContainers(rest) };
      break;
    case "leftovers":
      result = { ok: await findLeftoverContainers(api, labels(rest)) };
      break;
    case "remove":
      await removeVerified(api, rest[0]!, { timeoutMs: Number(rest[1]) });
      result = { ok: true };
      break;
    default:
      throw new Error(`unknown verb ${verb}`);
  }
} catch (error) {
  const e = error as Error;
  result = {
    error: {
      name: e.name,
      message: e.message,
      ...(error instanceof ContainerNotRemovedError ? { containerId: error.containerId } : {}),
      cause: e.cause instanceof Error ? `${e.cause.name}: ${e.cause.message}` : undefined,
    },
  };
}
console.log(JSON.stringify(result));
