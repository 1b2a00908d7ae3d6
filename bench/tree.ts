/**
 * `deno task bench --tree`: how long `marsh run NAME true` takes to reach
 * its child's first instruction, against `docker run --rm --network none
 * --init IMAGE true` on the same engine and image (docs/guide.md "marsh
 * run"; target: marsh within 1.2× of docker). The first instruction is the
 * engine's `start` event of the container (its process is running then),
 * read from `docker events` on the same host clock as each side's spawn.
 * Also each side's whole wall time (spawn to exit; marsh's includes the
 * verified deletion of its container, docker's `--rm` its own removal).
 *
 * Medians of `runs` timed runs after one untimed warm-up of each side, the
 * two sides interleaved, a `sync` before each. A private daemon
 * (`MARSH_HOME` in a temp dir) on a one-commit project, with the tests'
 * fixture Kit registered as they do (`--entrypoint env`); stopped and
 * removed at the end. The machine is shared: a ratio near the target is
 * within the noise of one run.
 *
 * Needs `--allow-run` (./marsh, docker, git, sync, and what
 * `tests/_engine.ts` runs), `--allow-env`, read and write on the temp dir.
 *
 * @module
 */

import { runChecked } from "./_command.ts";
import { settle, summarize, type Summary } from "./measure.ts";
import { type ContainerEvents, EngineEvents, medianOf } from "./kit_phases.ts";
import { BASELINE_LABEL, dockerRun, PrivateKitMarsh, wallMs } from "./kit_runs.ts";
import { KIT } from "./kit_types.ts";
import { ensureEngine, fixtureKit } from "../tests/_engine.ts";

/** Timed runs of each side unless asked otherwise. */
export const TREE_RUNS = 10;
/** The target: marsh's time to the first instruction at most this many times docker's. */
export const TREE_TARGET_RATIO = 1.2;

/** What `--tree` measured. */
export interface TreeResult {
  readonly image: string;
  readonly runs: number;
  /** Median ms from spawn to the container's `start` event; null when no event was seen. */
  readonly firstInstruction: { readonly marsh: number | null; readonly docker: number | null };
  readonly ratio: number | null;
  /** Spawn to exit. */
  readonly marsh: Summary;
  readonly docker: Summary;
  readonly warnings: readonly string[];
}

/** A one-commit project and a private control dir in a new temp dir. */
async function makeWorld(): Promise<string> {
  const parent = await Deno.realPath(await Deno.makeTempDir({ prefix: "marsh-bench-tree-" }));
  const project = `${parent}/project`;
  await Deno.mkdir(project);
  await Deno.writeTextFile(`${project}/README.md`, "A project for the marsh run benchmark.\n");
  const git = (args: string[]) =>
    runChecked({
      cmd: "git",
      args: ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", ...args],
      cwd: project,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", GIT_CONFIG_NOSYSTEM: "1" },
      clearEnv: true,
    });
  await git(["init", "-q"]);
  await git(["add", "-A"]);
  await git(["commit", "-q", "-m", "init"]);
  return parent;
}

/** One `marsh run KIT true`: its spawn and exit on the wall clock. */
async function marshOnce(marsh: PrivateKitMarsh): Promise<{ spawnedMs: number; endedMs: number }> {
  const spawnedMs = wallMs();
  await marsh.run(["run", KIT, "true"]);
  return { spawnedMs, endedMs: wallMs() };
}

/**
 * Measures `marsh run` against `docker run --rm` (see the module doc).
 *
 * @throws {Error} when no engine can be had, the Kit cannot be built, or a run fails
 */
export async function measureTree(
  options: { readonly runs: number; readonly log?: (line: string) => void },
): Promise<TreeResult> {
  const log = options.log ?? (() => {});
  log("tree: the Docker engine (tests/_engine.ts)");
  const socket = await ensureEngine();
  const { ref: image } = await fixtureKit(socket);
  const parent = await makeWorld();
  const marsh = new PrivateKitMarsh(parent, socket);
  const warnings: string[] = [];
  const events = new EngineEvents(socket);
  let following = true;
  let seen: Map<string, ContainerEvents> = new Map();
  const mine: { spawnedMs: number; endedMs: number }[] = [];
  const theirs: { tag: string; spawnedMs: number; endedMs: number }[] = [];
  try {
    await marsh.run(["daemon", "start"]);
    await marsh.run(["kits", "add", KIT, "--image", image, "--entrypoint", "env"]);
    log(`tree: warm-up, then ${options.runs} runs of each side`);
    await dockerRun(socket, image, 1, `${Deno.pid}/tree/warm`);
    await marshOnce(marsh);
    for (let i = 0; i < options.runs; i++) {
      await settle();
      theirs.push(...(await dockerRun(socket, image, 1, `${Deno.pid}/tree/${i}`)).containers);
      await settle();
      mine.push(await marshOnce(marsh));
    }
    // Let the last runs' events arrive.
    await new Promise((resolve) => setTimeout(resolve, 500));
    following = false;
    seen = await events.stop();
    // marsh's containers, in start order; the first is the warm-up's.
    const runs = [...seen.values()]
      .filter((c) => c.labels["marsh.split"] === "run" && c.labels["marsh.owner"] === marsh.home)
      .sort((a, b) => (a.at.get("start") ?? 0) - (b.at.get("start") ?? 0));
    if (runs.length !== mine.length + 1) {
      warnings.push(
        `engine events found for ${runs.length} marsh containers of ${mine.length + 1}`,
      );
    }
    const toStart = (spawnedMs: number, c: ContainerEvents | undefined) => {
      const start = c?.at.get("start");
      return start === undefined ? null : start - spawnedMs;
    };
    const marshFirst = mine.map((m, i) => toStart(m.spawnedMs, runs[i + 1]));
    const dockerFirst = theirs.map((d) =>
      toStart(d.spawnedMs, [...seen.values()].find((c) => c.labels[BASELINE_LABEL] === d.tag))
    );
    const first = { marsh: medianOf(marshFirst), docker: medianOf(dockerFirst) };
    return {
      image,
      runs: options.runs,
      firstInstruction: first,
      ratio: first.marsh === null || first.docker === null ? null : first.marsh / first.docker,
      marsh: summarize(`marsh run ${KIT} true`, mine.map((m) => m.endedMs - m.spawnedMs), null),
      docker: summarize(
        "docker run --rm --init IMAGE true",
        theirs.map((d) => d.endedMs - d.spawnedMs),
        null,
      ),
      warnings,
    };
  } finally {
    if (following) {
      await events.stop().catch((err) =>
        warnings.push(`engine events: ${err instanceof Error ? err.message : err}`)
      );
    }
    await marsh.run(["daemon", "stop"]).catch((err) =>
      warnings.push(`daemon not stopped: ${err instanceof Error ? err.message : err}`)
    );
    await Deno.remove(parent, { recursive: true });
  }
}

/** The table. */
export function renderTree(r: TreeResult): string {
  const ms = (x: number | null) => x === null ? "-" : `${x.toFixed(0)} ms`;
  const verdict = r.ratio === null
    ? "no engine events: no ratio"
    : `${r.ratio.toFixed(2)}× (target ≤ ${TREE_TARGET_RATIO}×: ${
      r.ratio <= TREE_TARGET_RATIO ? "met" : "missed"
    })`;
  return [
    `marsh run vs docker run --rm, ${r.runs} runs each (medians; image ${r.image})`,
    "",
    "                              marsh run    docker run",
    `spawn → first instruction   ${ms(r.firstInstruction.marsh).padStart(10)}  ${
      ms(r.firstInstruction.docker).padStart(12)
    }`,
    `spawn → exit                ${ms(r.marsh.medianMs).padStart(10)}  ${
      ms(r.docker.medianMs).padStart(12)
    }`,
    "",
    `first instruction, marsh / docker: ${verdict}`,
    "The machine is shared (2 cores, other work running): a ratio within ~0.1 of the target is",
    "inside the noise of these runs; `--runs` more for a steadier median.",
    ...r.warnings.map((w) => `warning: ${w}`),
  ].join("\n");
}
