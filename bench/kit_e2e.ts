/**
 * Kit branches end to end (issue 5 §6): a `true` argv branch
 * (`marsh split -n ::: a fixture true | marsh join --json`) through the real
 * CLI, daemon and worker, against `docker run --rm --network none --init
 * IMAGE true` (the docker CLI) on the same engine and image. Medians of
 * {@linkcode KIT_RUNS} timed runs (after one untimed warm-up of each side),
 * the two sides interleaved, a `sync` before each.
 *
 * Two things are reported:
 *
 * 1. One `true` container, phase by phase. marsh does not record when its
 *    container started or exited, so the container's own phases come from
 *    the engine: the harness follows `docker events` for the whole run and
 *    takes each container's `create`, `start`, `die` and `destroy` times
 *    (the engine's clock; "start → die" is the container's start-to-exit).
 *    marsh's own view is the branch's job window from the manifest
 *    (`branches[].started_unix_ms`: the daemon asks the worker to launch;
 *    `finished_unix_ms`: the container's removal verified, the fork
 *    captured, the outputs published), shown also without the capture
 *    (`timing_ms["capture:a"]`). The docker side's window is the CLI's, from
 *    spawn to exit. Same host clock on both sides.
 * 2. The overhead marsh adds per argv branch: the wall time of the pipeline
 *    `marsh split -n ::: b1 fixture true ... ::: bN fixture true | marsh
 *    join --json` (spawn of split until both exited) minus that of N
 *    `docker run --rm` started at once (marsh runs a split's branches at
 *    once too), in total and divided by N, and as a ratio; with where
 *    marsh's time goes, from the manifest.
 *
 * The engine is the tests' ({@linkcode ensureEngine}: `DOCKER_HOST` when it
 * answers, else the shared private test engine, started when needed) and
 * the image the tests' fixture Kit ({@linkcode fixtureKit}: `marsh kit build
 * fixture --from-host --bin git`, rebuilt only when its inputs changed).
 * The daemon is a fresh one with a private `MARSH_HOME` in a temp dir, on a
 * one-commit Git project there, with the Kit registered as the tests do
 * (`marsh kits add fixture --image REF --entrypoint env`); it is stopped
 * with `marsh daemon stop` at the end and the temp dir removed.
 *
 * The result types are bench/kit_types.ts, one run of each side
 * bench/kit_runs.ts, the engine's events and the phases bench/kit_phases.ts,
 * the tables bench/kit_report.ts.
 *
 * Needs `--allow-run` (./marsh, docker, git, sync, chmod, rm, umount, and
 * what `tests/_engine.ts` runs), `--allow-env`, read/write on the temp dir
 * and the test engine's lock file.
 *
 * @module
 */

import type { HardenedGit } from "./_git.ts";
import { runChecked } from "./_command.ts";
import { marshOps } from "./marsh_ops.ts";
import { exists } from "./split_e2e.ts";
import { settle, summarize } from "./measure.ts";
import { ensureEngine, fixtureKit } from "../tests/_engine.ts";
import {
  BASELINE_LABEL,
  type DockerContainer,
  dockerRun,
  type MarshRun,
  marshRun,
  PrivateKitMarsh,
} from "./kit_runs.ts";
import {
  breakdownOf,
  type ContainerEvents,
  EngineEvents,
  medianBreakdown,
  medianOf,
  medianPhases,
  phases,
  type PhaseSample,
} from "./kit_phases.ts";
import {
  KIT,
  type KitBreakdown,
  type KitContainerResult,
  type KitE2eResult,
  type KitE2eRow,
} from "./kit_types.ts";
/** Timed runs per branch count: issue 5 §6 asks for the median of 10. */
export const KIT_RUNS = 10;

/** Branch counts of the end-to-end rows, by default. */
export const KIT_BRANCHES: readonly number[] = [1, 4];

/** The longest Unix socket path Linux takes is 107 bytes; branch sockets are `<home>/b/NN.sock`. */
const MAX_HOME_PATH = 107 - "/b/00.sock".length;

/** Inputs of {@linkcode measureKitE2e}. */
export interface KitE2eOptions {
  /** Timed runs per branch count (after one untimed warm-up of each side). */
  readonly runs: number;
  readonly branches: readonly number[];
  readonly git: HardenedGit;
  readonly log?: (line: string) => void;
}

// ---------------------------------------------------------------------------
// Setup and teardown

/** Makes the temp dir: a one-commit Git project beside the control dir's parent. */
async function makeWorld(git: HardenedGit): Promise<{ parent: string; files: number }> {
  let parent = await Deno.makeTempDir({ prefix: "marsh-bench-kit-" });
  if (`${parent}/home`.length > MAX_HOME_PATH) {
    await Deno.remove(parent);
    parent = await Deno.makeTempDir({ dir: "/tmp", prefix: "marsh-bench-kit-" });
  }
  parent = await Deno.realPath(parent);
  const project = `${parent}/project`;
  await Deno.mkdir(project);
  const files: Record<string, string> = {
    "README.md": "A project for the Kit branch benchmark.\n",
    "src/main.txt": "hello\n",
  };
  for (const [path, text] of Object.entries(files)) {
    const slash = path.lastIndexOf("/");
    if (slash > 0) await Deno.mkdir(`${project}/${path.slice(0, slash)}`, { recursive: true });
    await Deno.writeTextFile(`${project}/${path}`, text);
  }
  await git.run(project, ["init", "-q"]);
  await git.run(project, ["add", "-A"]);
  await git.run(project, ["commit", "-q", "-m", "init"]);
  return { parent, files: Object.keys(files).length };
}

/**
 * Removes what is left of the splits, stops the daemon, unmounts what a
 * failed split left mounted (with a warning), and removes the temp dir.
 */
async function teardown(
  marsh: PrivateKitMarsh,
  parent: string,
  warnings: string[],
): Promise<void> {
  try {
    if (await exists(`${marsh.home}/marshd.sock`)) {
      try {
        const listed = JSON.parse(await marsh.run(["splits", "--json"])) as {
          splits: { id: string; state: string }[];
        };
        // A joined split is history: its fork is gone already.
        for (const s of listed.splits.filter((s) => s.state !== "joined")) {
          await marsh.run(["splits", "rm", s.id]).catch((err) =>
            warnings.push(`split ${s.id} not removed: ${err instanceof Error ? err.message : err}`)
          );
        }
      } finally {
        await marsh.run(["daemon", "stop"]);
      }
    }
  } finally {
    const mounted = (await exists(marsh.project)) ? marshOps.mountsUnder(marsh.project) : [];
    for (const m of [...mounted].sort((a, b) => b.length - a.length)) {
      warnings.push(`unmounted ${m}, which the daemon left mounted`);
      await runChecked({ cmd: "umount", args: [m] });
    }
    if (await exists(marsh.project)) await marshOps.removeState(marsh.project);
    await runChecked({ cmd: "chmod", args: ["-R", "u+w", "--", parent] });
    await Deno.remove(parent, { recursive: true });
  }
}

// ---------------------------------------------------------------------------
// The measurement

/**
 * Measures Kit branches against `docker run --rm` (see the module doc).
 *
 * @throws {Error} when no engine can be had, the Kit cannot be built, or a
 * command or a branch fails
 */
export async function measureKitE2e(options: KitE2eOptions): Promise<KitE2eResult> {
  const { runs, git } = options;
  const log = options.log ?? (() => {});
  log("kit e2e: the Docker engine (tests/_engine.ts)");
  const socket = await ensureEngine();
  log(`kit e2e: the fixture Kit image on ${socket}`);
  const { id: imageId, ref: image } = await fixtureKit(socket);
  const { parent, files } = await makeWorld(git);
  const marsh = new PrivateKitMarsh(parent, socket);
  const warnings: string[] = [];
  const events = new EngineEvents(socket);
  let seen: Map<string, ContainerEvents> | null = null;
  const rows: KitE2eRow[] = [];
  const strategies = new Set<string>();
  const oneBranch: { marsh: MarshRun[]; docker: DockerContainer[] } = { marsh: [], docker: [] };
  try {
    try {
      await marsh.run(["daemon", "start"]);
      await marsh.run(["kits", "add", KIT, "--image", image, "--entrypoint", "env"]);
      for (const n of options.branches) {
        log(`kit e2e: ${n} branch(es), warm-up, then ${runs} runs`);
        await dockerRun(socket, image, n, `${Deno.pid}/${n}/warm`);
        await marshRun(marsh, n);
        const mine: number[] = [];
        const theirs: number[] = [];
        const breakdowns: KitBreakdown[] = [];
        for (let i = 0; i < runs; i++) {
          await settle();
          const d = await dockerRun(socket, image, n, `${Deno.pid}/${n}/${i}`);
          theirs.push(d.ms);
          await settle();
          const m = await marshRun(marsh, n);
          mine.push(m.ms);
          breakdowns.push(breakdownOf(m));
          for (const b of m.manifest.branches) strategies.add(b.fork_strategy ?? "unknown");
          if (n === 1) {
            oneBranch.marsh.push(m);
            oneBranch.docker.push(...d.containers);
          }
        }
        const marshSummary = summarize(`marsh split ×${n} → join`, mine, null);
        const dockerSummary = summarize(`docker run --rm ×${n} at once`, theirs, null);
        const overheadMs = marshSummary.medianMs - dockerSummary.medianMs;
        rows.push({
          branches: n,
          marsh: marshSummary,
          docker: dockerSummary,
          overheadMs,
          overheadPerBranchMs: overheadMs / n,
          ratio: marshSummary.medianMs / dockerSummary.medianMs,
          breakdown: medianBreakdown(breakdowns),
        });
      }
      // Let the last runs' events arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      seen = await events.stop().catch((err) => {
        warnings.push(`no engine events: ${err instanceof Error ? err.message : String(err)}`);
        return null;
      });
    }
  } finally {
    await teardown(marsh, parent, warnings);
  }

  let container: KitContainerResult | null = null;
  if (oneBranch.marsh.length > 0) {
    const byLabel = (key: string, value: string) =>
      [...(seen?.values() ?? [])].find((c) => c.labels[key] === value);
    const marshSamples = oneBranch.marsh.map((r) => {
      const b = r.manifest.branches[0]!;
      return phases(
        b.started_unix_ms ?? NaN,
        b.finished_unix_ms ?? NaN,
        byLabel("marsh.split", r.manifest.id),
      );
    });
    const dockerSamples = oneBranch.docker.map((c) =>
      phases(c.spawnedMs, c.endedMs, byLabel(BASELINE_LABEL, c.tag))
    );
    const count = (xs: readonly PhaseSample[]) => xs.filter((s) => s.startToDie !== null).length;
    const captures = oneBranch.marsh.map((r) => r.manifest.timing_ms["capture:a"] ?? NaN);
    const eventsSeen = {
      marsh: count(marshSamples),
      docker: count(dockerSamples),
      of: oneBranch.marsh.length,
    };
    if (eventsSeen.marsh < eventsSeen.of || eventsSeen.docker < eventsSeen.of) {
      warnings.push(
        `engine events found for ${eventsSeen.marsh} marsh and ${eventsSeen.docker} docker ` +
          `containers of ${eventsSeen.of} each`,
      );
    }
    container = {
      marsh: medianPhases(marshSamples),
      docker: medianPhases(dockerSamples),
      captureMs: medianOf(captures) ?? NaN,
      marshWindowNoCaptureMs: medianOf(marshSamples.map((s, i) => s.total - captures[i]!)) ?? NaN,
      eventsSeen,
    };
  }
  return {
    socket,
    image,
    imageId,
    runs,
    files,
    forkStrategies: [...strategies].sort(),
    container,
    rows,
    warnings,
  };
}
