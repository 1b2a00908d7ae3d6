/**
 * One run of each side of the Kit benchmark: the `marsh split | marsh join`
 * pipeline through a private daemon, and N `docker run --rm` at once.
 *
 * @module
 */

import { type CommandSpec, runChecked } from "./_command.ts";
import { exists, type ManifestView, parseManifest } from "./split_e2e.ts";
import { KIT } from "./kit_types.ts";
import { cliEnv } from "../tests/_engine.ts";

const MARSH = new URL("../marsh", import.meta.url).pathname;

/** No command here should take this long; one that does fails the benchmark. */
const COMMAND_TIMEOUT_MS = 5 * 60_000;

/** The label the baseline's containers carry, to find them in the engine's events. */
export const BASELINE_LABEL = "marsh.bench.kit";

interface Finished {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

const dec = new TextDecoder();

/** Runs `spec` to its end (within {@linkcode COMMAND_TIMEOUT_MS}); throws when it fails. */
async function run(spec: CommandSpec): Promise<string> {
  return dec.decode(await runChecked({ ...spec, timeoutMs: COMMAND_TIMEOUT_MS }));
}

/** The wall clock in ms with sub-ms resolution (comparable with `Date.now()` and the engine's). */
export function wallMs(): number {
  return performance.timeOrigin + performance.now();
}

/** The `marsh` CLI against the benchmark's private daemon, in its temporary project. */
export class PrivateKitMarsh {
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

/** The docker CLI's environment: PATH and HOME only. */
export function dockerEnv(): Record<string, string> {
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
export interface MarshRun {
  readonly ms: number;
  readonly spawnedMs: number;
  readonly endedMs: number;
  readonly manifest: ManifestView;
}

/** One `marsh split -n ::: … true | marsh join --json`; throws unless every branch exited 0. */
export async function marshRun(marsh: PrivateKitMarsh, n: number): Promise<MarshRun> {
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
export interface DockerContainer {
  readonly tag: string;
  readonly spawnedMs: number;
  readonly endedMs: number;
}

/** N `docker run --rm --network none --init IMAGE true` at once; wall time until the last exits. */
export async function dockerRun(
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
