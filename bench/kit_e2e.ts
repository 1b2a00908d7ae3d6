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
 * Needs `--allow-run` (./marsh, docker, git, sync, chmod, rm, umount, and
 * what `tests/_engine.ts` runs), `--allow-env`, read/write on the temp dir
 * and the test engine's lock file.
 *
 * @module
 */

import { fmtMs, fmtRatio, table } from "./_format.ts";
import { type CommandSpec, describeCommand, runChecked } from "./_command.ts";
import type { HardenedGit } from "./_git.ts";
import { marshOps } from "./marsh_ops.ts";
import { exists, type ManifestView, parseManifest } from "./split_e2e.ts";
import { median, settle, summarize, type Summary } from "./measure.ts";
import { cliEnv, ensureEngine, fixtureKit } from "../tests/_engine.ts";

/** Timed runs per branch count: issue 5 §6 asks for the median of 10. */
export const KIT_RUNS = 10;

/** Branch counts of the end-to-end rows, by default. */
export const KIT_BRANCHES: readonly number[] = [1, 4];

/** The Kit name the benchmark registers (the tests' fixture image). */
const KIT = "fixture";

const MARSH = new URL("../marsh", import.meta.url).pathname;

/** No command here should take this long; one that does fails the benchmark. */
const COMMAND_TIMEOUT_MS = 5 * 60_000;

/** The longest Unix socket path Linux takes is 107 bytes; branch sockets are `<home>/b/NN.sock`. */
const MAX_HOME_PATH = 107 - "/b/00.sock".length;

/** The label the baseline's containers carry, to find them in the engine's events. */
const BASELINE_LABEL = "marsh.bench.kit";

/** Inputs of {@linkcode measureKitE2e}. */
export interface KitE2eOptions {
  /** Timed runs per branch count (after one untimed warm-up of each side). */
  readonly runs: number;
  readonly branches: readonly number[];
  readonly git: HardenedGit;
  readonly log?: (line: string) => void;
}

/** One container's life in phases, medians over the runs, ms; null when not seen. */
export interface ContainerPhases {
  /** marsh: the daemon's launch request → engine `create`; docker: CLI spawn → `create`. */
  readonly toCreateMs: number | null;
  readonly createToStartMs: number | null;
  /** The container's start-to-exit as the engine sees it. */
  readonly startToDieMs: number | null;
  readonly dieToDestroyMs: number | null;
  /** marsh: `destroy` → branch settled (capture and publish included); docker: → CLI exit. */
  readonly destroyToDoneMs: number | null;
  /** marsh: launch → settled (the job window); docker: CLI spawn → exit. */
  readonly totalMs: number;
}

/** Part 1: one `true` container, marsh's Kit branch against `docker run --rm`. */
export interface KitContainerResult {
  readonly marsh: ContainerPhases;
  readonly docker: ContainerPhases;
  /** `timing_ms["capture:a"]`, median. */
  readonly captureMs: number;
  /** The job window without the capture, median. */
  readonly marshWindowNoCaptureMs: number;
  /** Containers whose engine events were found, of those expected (per side). */
  readonly eventsSeen: { readonly marsh: number; readonly docker: number; readonly of: number };
}

/** Where the pipeline's time goes, from the manifest, medians, ms. */
export interface KitBreakdown {
  /** Spawning `marsh split` until the daemon journaled the split. */
  readonly cliToRequestMs: number;
  /** The split journaled until its first branch was launched. */
  readonly requestToLaunchMs: number;
  /** `timing_ms.snapshot`. */
  readonly snapshotMs: number;
  /** `timing_ms.forks`. */
  readonly forksMs: number;
  /** First launch until the last branch settled. */
  readonly launchToSettledMs: number;
  /** `timing_ms["capture:*"]`, summed over the branches. */
  readonly captureMs: number;
  /** The last branch settled until both `split` and `join` exited (join removes the split). */
  readonly settledToExitMs: number;
}

/** Part 2: N branches. */
export interface KitE2eRow {
  readonly branches: number;
  /** `marsh split -n ::: … | marsh join --json`, spawn to both exited. */
  readonly marsh: Summary;
  /** N `docker run --rm … true` at once, spawn to the last exit. */
  readonly docker: Summary;
  readonly overheadMs: number;
  readonly overheadPerBranchMs: number;
  readonly ratio: number;
  readonly breakdown: KitBreakdown;
}

/** The whole measurement. */
export interface KitE2eResult {
  /** The engine's socket. */
  readonly socket: string;
  /** The fixture Kit image (tag) and its id. */
  readonly image: string;
  readonly imageId: string;
  readonly runs: number;
  /** Files in the temporary project (its tree, `.git` aside). */
  readonly files: number;
  /** Every `fork_strategy` the timed splits' manifests showed, sorted. */
  readonly forkStrategies: readonly string[];
  /** Part 1; null when no one-branch row ran. */
  readonly container: KitContainerResult | null;
  readonly rows: readonly KitE2eRow[];
  readonly warnings: readonly string[];
}

// ---------------------------------------------------------------------------
// Commands

interface Finished {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

const dec = new TextDecoder();

/** Runs `spec` to its end (within {@linkcode COMMAND_TIMEOUT_MS}); throws when it fails. */
async function run(spec: CommandSpec): Promise<string> {
  const out = await new Deno.Command(spec.cmd, {
    args: [...spec.args],
    cwd: spec.cwd,
    env: spec.env ? { ...spec.env } : undefined,
    clearEnv: spec.clearEnv ?? false,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: AbortSignal.timeout(COMMAND_TIMEOUT_MS),
  }).output();
  if (!out.success) {
    const how = out.signal === null ? `exited with ${out.code}` : `was killed by ${out.signal}`;
    throw new Error(
      `Command "${describeCommand(spec)}" ${how}: ${
        dec.decode(out.stderr).trim() || "(no stderr)"
      }`,
    );
  }
  return dec.decode(out.stdout);
}

/** The wall clock in ms with sub-ms resolution (comparable with `Date.now()` and the engine's). */
function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

/** The `marsh` CLI against the benchmark's private daemon, in its temporary project. */
class PrivateKitMarsh {
  readonly home: string;
  readonly project: string;
  readonly #env: Record<string, string>;

  constructor(parent: string, socket: string) {
    this.home = `${parent}/home`;
    this.project = `${parent}/project`;
    this.#env = cliEnv({ MARSH_HOME: this.home, DOCKER_HOST: `unix://${socket}` });
  }

  spec(args: readonly string[]): CommandSpec {
    return { cmd: MARSH, args, cwd: this.project, env: this.#env, clearEnv: true };
  }

  run(args: readonly string[]): Promise<string> {
    return run(this.spec(args));
  }

  /**
   * `marsh split ARGS | marsh join --json`, the two spawned at once with a
   * pipe between them. Returns the wall time from split's spawn until both
   * exited, and join's output.
   */
  async pipeline(
    splitArgs: readonly string[],
  ): Promise<{ ms: number; spawnedMs: number; endedMs: number; split: Finished; join: Finished }> {
    const signal = AbortSignal.timeout(COMMAND_TIMEOUT_MS);
    const options = (args: readonly string[], stdin: "null" | "piped") => ({
      args: [...args],
      cwd: this.project,
      env: this.#env,
      clearEnv: true,
      stdin,
      stdout: "piped" as const,
      stderr: "piped" as const,
      signal,
    });
    const spawnedMs = wallMs();
    const t0 = performance.now();
    const split = new Deno.Command(MARSH, options(splitArgs, "null")).spawn();
    const join = new Deno.Command(MARSH, options(["join", "--json"], "piped")).spawn();
    const splitStdout = split.stdout.tee();
    const piped = splitStdout[0].pipeTo(join.stdin).catch(() => {});
    const [splitStatus, splitOut, splitErr, joined] = await Promise.all([
      split.status,
      new Response(splitStdout[1]).text(),
      new Response(split.stderr).text(),
      join.output(),
    ]);
    const ms = performance.now() - t0;
    const endedMs = wallMs();
    await piped;
    if (signal.aborted) {
      throw new Error(
        `marsh ${splitArgs.join(" ")} | marsh join --json did not finish within ` +
          `${COMMAND_TIMEOUT_MS / 1000} s: ${splitErr.trim()} ${dec.decode(joined.stderr).trim()}`,
      );
    }
    return {
      ms,
      spawnedMs,
      endedMs,
      split: { code: splitStatus.code, stdout: splitOut, stderr: splitErr },
      join: {
        code: joined.code,
        stdout: dec.decode(joined.stdout),
        stderr: dec.decode(joined.stderr),
      },
    };
  }
}

// ---------------------------------------------------------------------------
// The engine's events

interface ContainerEvents {
  readonly labels: Readonly<Record<string, string>>;
  /** Action → wall clock ms (the engine's `timeNano`), first seen. */
  readonly at: Map<string, number>;
}

/** `docker events` for containers, followed from start until {@linkcode stop}. */
class EngineEvents {
  readonly #child: Deno.ChildProcess;
  readonly #text: Promise<string>;
  readonly #stderr: Promise<string>;

  constructor(socket: string) {
    this.#child = new Deno.Command("docker", {
      args: [
        "-H",
        `unix://${socket}`,
        "events",
        "--filter",
        "type=container",
        "--format",
        "{{json .}}",
      ],
      env: dockerEnv(),
      clearEnv: true,
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    this.#text = new Response(this.#child.stdout).text();
    this.#stderr = new Response(this.#child.stderr).text();
  }

  /** Stops following; returns every container seen, by id. */
  async stop(): Promise<Map<string, ContainerEvents>> {
    try {
      this.#child.kill("SIGTERM");
    } catch (err) {
      // Exited already (it failed): what it printed says why.
      if (!(err instanceof TypeError)) throw err;
    }
    const [status, text, stderr] = await Promise.all([
      this.#child.status,
      this.#text,
      this.#stderr,
    ]);
    const out = new Map<string, ContainerEvents>();
    for (const line of text.split("\n")) {
      if (line.trim() === "") continue;
      const e = JSON.parse(line) as {
        id?: string;
        Action?: string;
        status?: string;
        timeNano?: number;
        time?: number;
        Actor?: { Attributes?: Record<string, string> };
      };
      const action = e.Action ?? e.status;
      if (!e.id || !action) continue;
      const ms = e.timeNano !== undefined ? e.timeNano / 1e6 : (e.time ?? NaN) * 1000;
      let c = out.get(e.id);
      if (!c) {
        c = { labels: e.Actor?.Attributes ?? {}, at: new Map() };
        out.set(e.id, c);
      }
      if (!c.at.has(action)) c.at.set(action, ms);
    }
    if (out.size === 0 && status.signal !== "SIGTERM") {
      throw new Error(`docker events exited with ${status.code}: ${stderr.trim()}`);
    }
    return out;
  }
}

function dockerEnv(): Record<string, string> {
  const env: Record<string, string> = {
    PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
  };
  const home = Deno.env.get("HOME");
  if (home) env.HOME = home;
  return env;
}

// ---------------------------------------------------------------------------
// One run of each side

function splitArgs(n: number): string[] {
  const args = ["split", "-n"];
  for (let i = 1; i <= n; i++) args.push(":::", n === 1 ? "a" : `b${i}`, KIT, "true");
  return args;
}

/** One split's wall time and what its manifest says. */
interface MarshRun {
  readonly ms: number;
  readonly spawnedMs: number;
  readonly endedMs: number;
  readonly manifest: ManifestView;
}

/** One `marsh split -n ::: … true | marsh join --json`; throws unless every branch exited 0. */
async function marshRun(marsh: PrivateKitMarsh, n: number): Promise<MarshRun> {
  const r = await marsh.pipeline(splitArgs(n));
  let manifest: ManifestView;
  try {
    manifest = parseManifest(r.join.stdout.trim());
  } catch (err) {
    throw new Error(
      `marsh split (exit ${r.split.code}: ${r.split.stderr.trim() || "no stderr"}) | ` +
        `marsh join --json (exit ${r.join.code}: ${r.join.stderr.trim() || "no stderr"}) ` +
        "printed no manifest",
      { cause: err },
    );
  }
  if (await exists(manifest.dir)) {
    // Kept (a branch failed, or the removal did): remove it so no fork stays mounted.
    await marsh.run(["splits", "rm", manifest.id]);
  }
  const bad = manifest.branches.filter((b) => b.status !== "exited 0");
  if (r.split.code !== 0 || r.join.code !== 0 || bad.length > 0) {
    throw new Error(
      `split ${manifest.id}: marsh split exited ${r.split.code}, marsh join ${r.join.code}; ` +
        `branches: ${
          manifest.branches.map((b) => `${b.label} ${b.state} (${b.status ?? "no status"})`).join(
            ", ",
          )
        }; ${r.split.stderr.trim()} ${r.join.stderr.trim()}`,
    );
  }
  return { ms: r.ms, spawnedMs: r.spawnedMs, endedMs: r.endedMs, manifest };
}

/** One container of the baseline: when its CLI was spawned and exited. */
interface DockerContainer {
  readonly tag: string;
  readonly spawnedMs: number;
  readonly endedMs: number;
}

/** N `docker run --rm --network none --init IMAGE true` at once; wall time until the last exits. */
async function dockerRun(
  socket: string,
  image: string,
  n: number,
  tag: string,
): Promise<{ ms: number; containers: DockerContainer[] }> {
  const one = async (i: number): Promise<DockerContainer> => {
    const label = `${tag}/${i}`;
    const spawnedMs = wallMs();
    await runChecked({
      cmd: "docker",
      args: [
        "-H",
        `unix://${socket}`,
        "run",
        "--rm",
        "--network",
        "none",
        "--init",
        "--label",
        `${BASELINE_LABEL}=${label}`,
        image,
        "true",
      ],
      env: dockerEnv(),
      clearEnv: true,
    });
    return { tag: label, spawnedMs, endedMs: wallMs() };
  };
  const t0 = performance.now();
  const containers = await Promise.all(Array.from({ length: n }, (_, i) => one(i + 1)));
  return { ms: performance.now() - t0, containers };
}

// ---------------------------------------------------------------------------
// Phases

interface PhaseSample {
  readonly toCreate: number | null;
  readonly createToStart: number | null;
  readonly startToDie: number | null;
  readonly dieToDestroy: number | null;
  readonly destroyToDone: number | null;
  readonly total: number;
}

function phases(begin: number, end: number, c: ContainerEvents | undefined): PhaseSample {
  const at = (action: string) => c?.at.get(action) ?? null;
  const d = (a: number | null, b: number | null) => a === null || b === null ? null : b - a;
  const create = at("create");
  const start = at("start");
  const die = at("die");
  const destroy = at("destroy");
  return {
    toCreate: d(begin, create),
    createToStart: d(create, start),
    startToDie: d(start, die),
    dieToDestroy: d(die, destroy),
    destroyToDone: d(destroy, end),
    total: end - begin,
  };
}

/** The median of the non-null values; null when there are none. */
function medianOf(values: readonly (number | null)[]): number | null {
  const xs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  return xs.length === 0 ? null : median(xs);
}

function medianPhases(samples: readonly PhaseSample[]): ContainerPhases {
  return {
    toCreateMs: medianOf(samples.map((s) => s.toCreate)),
    createToStartMs: medianOf(samples.map((s) => s.createToStart)),
    startToDieMs: medianOf(samples.map((s) => s.startToDie)),
    dieToDestroyMs: medianOf(samples.map((s) => s.dieToDestroy)),
    destroyToDoneMs: medianOf(samples.map((s) => s.destroyToDone)),
    totalMs: median(samples.map((s) => s.total)),
  };
}

function breakdownOf(r: MarshRun): KitBreakdown {
  const m = r.manifest;
  const starts = m.branches.map((b) => b.started_unix_ms ?? NaN);
  const ends = m.branches.map((b) => b.finished_unix_ms ?? NaN);
  const first = Math.min(...starts);
  const last = Math.max(...ends);
  const captures = Object.entries(m.timing_ms).filter(([k]) => k.startsWith("capture:"));
  return {
    cliToRequestMs: m.created_unix_ms - r.spawnedMs,
    requestToLaunchMs: first - m.created_unix_ms,
    snapshotMs: m.timing_ms.snapshot ?? NaN,
    forksMs: m.timing_ms.forks ?? NaN,
    launchToSettledMs: last - first,
    captureMs: captures.length === 0 ? NaN : captures.reduce((s, [, v]) => s + v, 0),
    settledToExitMs: r.endedMs - last,
  };
}

function medianBreakdown(xs: readonly KitBreakdown[]): KitBreakdown {
  const med = (pick: (b: KitBreakdown) => number) => medianOf(xs.map(pick)) ?? NaN;
  return {
    cliToRequestMs: med((b) => b.cliToRequestMs),
    requestToLaunchMs: med((b) => b.requestToLaunchMs),
    snapshotMs: med((b) => b.snapshotMs),
    forksMs: med((b) => b.forksMs),
    launchToSettledMs: med((b) => b.launchToSettledMs),
    captureMs: med((b) => b.captureMs),
    settledToExitMs: med((b) => b.settledToExitMs),
  };
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

// ---------------------------------------------------------------------------
// Report

function ms(x: number | null): string {
  return x === null ? "n/a" : fmtMs(x);
}

function ratio(a: number | null, b: number | null): string {
  return a === null || b === null ? "n/a" : fmtRatio(a / b);
}

/** The tables: one container phase by phase, then N branches end to end, then marsh's breakdown. */
export function renderKitE2e(result: KitE2eResult): string {
  const out = [
    `## Kit branches end to end: \`::: a ${KIT} true\` against \`docker run --rm --network none ` +
    `--init IMAGE true\`; ${result.runs} runs, medians`,
    "",
    `Engine ${result.socket}, image ${result.image} (${
      result.imageId.slice(0, 19)
    }); a fresh daemon with its own MARSH_HOME on a ${result.files}-file Git project; forks: ` +
    `${result.forkStrategies.join(", ") || "none seen"}.`,
  ];
  const c = result.container;
  if (c !== null) {
    const row = (label: string, pick: (p: ContainerPhases) => number | null) => {
      const a = pick(c.marsh);
      const b = pick(c.docker);
      return [label, ms(a), ms(b), ratio(a, b)];
    };
    out.push(
      "",
      "One `true` container, phase by phase (engine times from `docker events`; marsh's window " +
        "from the manifest: the branch's started_unix_ms, when the daemon asks the worker to " +
        "launch, to its finished_unix_ms, when the container's removal is verified and the fork " +
        "captured; docker's from CLI spawn to exit). Each phase is its own median:",
      "",
      table([
        ["phase", "marsh Kit branch", "docker run --rm", "marsh/docker"],
        row("launch (marsh) / CLI spawn (docker) → create", (p) => p.toCreateMs),
        row("create → start", (p) => p.createToStartMs),
        row("start → die: the container's start to exit", (p) => p.startToDieMs),
        row("die → destroy", (p) => p.dieToDestroyMs),
        row("destroy → settled (marsh) / CLI exit (docker)", (p) => p.destroyToDoneMs),
        row("whole window", (p) => p.totalMs),
        [
          "whole window, marsh without its capture",
          `${fmtMs(c.marshWindowNoCaptureMs)} (capture ${fmtMs(c.captureMs)})`,
          fmtMs(c.docker.totalMs),
          fmtRatio(c.marshWindowNoCaptureMs / c.docker.totalMs),
        ],
      ]),
    );
  }
  out.push(
    "",
    "Per argv branch, end to end: `marsh split -n ::: … true | marsh join --json` (spawn until " +
      "both exited; join removes the split) against N `docker run --rm … true` at once:",
    "",
    table([
      [
        "branches",
        "marsh split → join",
        "docker run --rm ×N",
        "overhead",
        "overhead per branch",
        "marsh/docker",
      ],
      ...result.rows.map((r) => [
        String(r.branches),
        `${fmtMs(r.marsh.medianMs)} (min ${fmtMs(r.marsh.minMs)})`,
        `${fmtMs(r.docker.medianMs)} (min ${fmtMs(r.docker.minMs)})`,
        fmtMs(r.overheadMs),
        fmtMs(r.overheadPerBranchMs),
        fmtRatio(r.ratio),
      ]),
    ]),
    "",
    "Where marsh's time goes (from the manifest: created_unix_ms, branches' started_unix_ms and " +
      "finished_unix_ms, timing_ms), medians:",
    "",
    table([
      [
        "branches",
        "CLI → request",
        "request → launch",
        "of which snapshot",
        "of which forks",
        "launch → last settled",
        "of which capture",
        "settled → exit",
      ],
      ...result.rows.map((r) => [
        String(r.branches),
        fmtMs(r.breakdown.cliToRequestMs),
        fmtMs(r.breakdown.requestToLaunchMs),
        fmtMs(r.breakdown.snapshotMs),
        fmtMs(r.breakdown.forksMs),
        fmtMs(r.breakdown.launchToSettledMs),
        fmtMs(r.breakdown.captureMs),
        fmtMs(r.breakdown.settledToExitMs),
      ]),
    ]),
  );
  for (const w of result.warnings) out.push("", `WARNING: ${w}`);
  return out.join("\n");
}
