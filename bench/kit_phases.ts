/**
 * The Kit benchmark's timings: the engine's container events (`docker
 * events`), each container's phases from them, and where marsh's time goes
 * from a split's manifest.
 *
 * @module
 */

import { median } from "./measure.ts";
import { dockerEnv, type MarshRun } from "./kit_runs.ts";
import type { ContainerPhases, KitBreakdown } from "./kit_types.ts";

/** One container's engine events. */
export interface ContainerEvents {
  readonly labels: Readonly<Record<string, string>>;
  /** Action → wall clock ms (the engine's `timeNano`), first seen. */
  readonly at: Map<string, number>;
}

/** `docker events` for containers, followed from start until {@linkcode stop}. */
export class EngineEvents {
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

/** One container's phases in one run, ms; null when an event was not seen. */
export interface PhaseSample {
  readonly toCreate: number | null;
  readonly createToStart: number | null;
  readonly startToDie: number | null;
  readonly dieToDestroy: number | null;
  readonly destroyToDone: number | null;
  readonly total: number;
}

/** The phases of one container between `begin` and `end` (wall clock ms). */
export function phases(begin: number, end: number, c: ContainerEvents | undefined): PhaseSample {
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
export function medianOf(values: readonly (number | null)[]): number | null {
  const xs = values.filter((v): v is number => v !== null && Number.isFinite(v));
  return xs.length === 0 ? null : median(xs);
}

/** Each phase's median over the runs. */
export function medianPhases(samples: readonly PhaseSample[]): ContainerPhases {
  return {
    toCreateMs: medianOf(samples.map((s) => s.toCreate)),
    createToStartMs: medianOf(samples.map((s) => s.createToStart)),
    startToDieMs: medianOf(samples.map((s) => s.startToDie)),
    dieToDestroyMs: medianOf(samples.map((s) => s.dieToDestroy)),
    destroyToDoneMs: medianOf(samples.map((s) => s.destroyToDone)),
    totalMs: median(samples.map((s) => s.total)),
  };
}

/** Where one split's time went, from its manifest. */
export function breakdownOf(r: MarshRun): KitBreakdown {
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

/** Each part's median over the runs. */
export function medianBreakdown(xs: readonly KitBreakdown[]): KitBreakdown {
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
