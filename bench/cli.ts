/**
 * `deno task bench --cli`: how fast the CLI starts (issue 12 §1). Times
 * `./marsh --version`, `./marsh status` and `./marsh splits` (a fresh daemon
 * running, on a one-commit Git project in a temp dir) against `deno run` of
 * an empty script, as medians of `--cli-runs` runs (21) with the commands
 * interleaved, so that a shared, noisy machine slows them alike; prints
 * each as a ratio to the empty run, with the targets: `--version` ≤ 2.5×,
 * `status` ≤ 3×. `MARSH_CLI_BUNDLE=0 ./marsh --version` (the sources, not
 * the bundle) is shown for comparison, and the launcher's freshness check
 * alone: the one `sha256sum` it runs over the bundle's inputs.
 *
 * The bundle is built (or found fresh) by an untimed first run.
 *
 * Needs `--allow-run` (./marsh, deno, git, sha256sum), `--allow-env`,
 * read/write on a temp dir and read on the checkout's `.deno/cli`.
 *
 * @module
 */

import { runChecked, runText } from "./_command.ts";

const repo = new URL("../", import.meta.url).pathname;
const MARSH = `${repo}marsh`;

/** Timed runs of each command, unless `--cli-runs` says otherwise. */
export const CLI_RUNS = 21;

/** One timed command. */
export interface CliRow {
  readonly name: string;
  readonly medianMs: number;
  readonly minMs: number;
  /** The median over the empty `deno run`'s median. */
  readonly ratio: number;
  /** The limit on the ratio, or null when it sets none. */
  readonly target: number | null;
}

/** What `--cli` measured. */
export interface CliBenchResult {
  readonly runs: number;
  /** `bundle` when `./marsh` ran a bundle, `sources` when it fell back. */
  readonly mode: "bundle" | "sources";
  readonly emptyMs: number;
  readonly rows: readonly CliRow[];
  /** The launcher's freshness check: `sha256sum` over this many files. */
  readonly check: { readonly files: number; readonly bytes: number; readonly medianMs: number };
}

interface Case {
  readonly name: string;
  readonly cmd: string;
  readonly args: readonly string[];
  readonly env?: Readonly<Record<string, string>>;
  readonly target: number | null;
}

async function timeOnce(c: Case, cwd: string, env: Record<string, string>): Promise<number> {
  const t0 = performance.now();
  const out = await new Deno.Command(c.cmd, {
    args: [...c.args],
    cwd,
    env: { ...env, ...c.env },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).output();
  const ms = performance.now() - t0;
  if (!out.success) {
    throw new Error(`${c.name} exited ${out.code}: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return ms;
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** The bundle the launcher would run now, from its state file, or null. */
async function bundleInputs(): Promise<string[] | null> {
  let state: string;
  try {
    state = await Deno.readTextFile(`${repo}.deno/cli/current`);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return null;
    throw error;
  }
  const lines = state.split("\n");
  if (lines[1] === "-" || lines[1] === undefined) return null;
  return lines.slice(2).filter((l) => l !== "").map((l) => l.slice(l.indexOf("  ") + 2));
}

/**
 * Runs the CLI benchmark in a temp dir (removed at the end, the daemon
 * stopped).
 *
 * @param deno the Deno the launcher runs (`MARSH_DENO`)
 * @param runs timed runs per command
 * @param log progress lines (stderr)
 */
export async function runCliBench(
  deno: string,
  runs: number,
  log: (line: string) => void,
): Promise<CliBenchResult> {
  const tmp = await Deno.makeTempDir({ prefix: "marsh-bench-cli-" });
  const home = `${tmp}/home`;
  const project = `${tmp}/project`;
  const env: Record<string, string> = {
    ...Deno.env.toObject(),
    MARSH_HOME: home,
    MARSH_DENO: deno,
    DENO_NO_UPDATE_CHECK: "1",
  };
  let daemon = false;
  try {
    await Deno.mkdir(home, { mode: 0o700 });
    await Deno.mkdir(project);
    await Deno.writeTextFile(`${tmp}/empty.ts`, "");
    await Deno.writeTextFile(`${project}/a.txt`, "a\n");
    const git = (...args: string[]) =>
      runChecked({
        cmd: "git",
        args: ["-c", "user.name=bench", "-c", "user.email=bench@example.invalid", ...args],
        cwd: project,
      });
    await git("init", "-q", "-b", "main");
    await git("add", "-A");
    await git("commit", "-q", "-m", "init");
    log("cli: starting a daemon; the first ./marsh bundles the CLI when needed");
    await runChecked({ cmd: MARSH, args: ["daemon", "start"], cwd: project, env });
    daemon = true;

    const inputs = await bundleInputs();
    const cases: Case[] = [
      {
        name: "deno run (empty script)",
        cmd: deno,
        args: ["run", `${tmp}/empty.ts`],
        target: null,
      },
      { name: "marsh --version", cmd: MARSH, args: ["--version"], target: 2.5 },
      { name: "marsh status (daemon running)", cmd: MARSH, args: ["status"], target: 3 },
      { name: "marsh splits (daemon running)", cmd: MARSH, args: ["splits"], target: null },
      {
        name: "marsh --version, sources (MARSH_CLI_BUNDLE=0)",
        cmd: MARSH,
        args: ["--version"],
        env: { MARSH_CLI_BUNDLE: "0" },
        target: null,
      },
    ];
    if (inputs !== null) {
      cases.push({
        name: "the freshness check's sha256sum",
        cmd: "sha256sum",
        args: ["--", ...inputs],
        target: null,
      });
    }
    for (const c of cases) await timeOnce(c, project, env);
    const times = cases.map(() => [] as number[]);
    for (let i = 0; i < runs; i++) {
      log(`cli: run ${i + 1}/${runs}`);
      for (const [k, c] of cases.entries()) times[k]!.push(await timeOnce(c, project, env));
    }
    const emptyMs = median(times[0]!);
    const rows = cases.map((c, k): CliRow => ({
      name: c.name,
      medianMs: median(times[k]!),
      minMs: Math.min(...times[k]!),
      ratio: median(times[k]!) / emptyMs,
      target: c.target,
    }));
    let bytes = 0;
    for (const f of inputs ?? []) bytes += (await Deno.stat(f)).size;
    const check = rows.at(-1)!;
    return {
      runs,
      mode: inputs === null ? "sources" : "bundle",
      emptyMs,
      rows: inputs === null ? rows : rows.slice(0, -1),
      check: { files: inputs?.length ?? 0, bytes, medianMs: inputs === null ? 0 : check.medianMs },
    };
  } finally {
    if (daemon) {
      await runText({ cmd: MARSH, args: ["daemon", "stop"], cwd: project, env }).catch((error) => {
        log(`cli: WARNING: marsh daemon stop: ${error instanceof Error ? error.message : error}`);
      });
    }
    await Deno.remove(tmp, { recursive: true });
  }
}

/** The result as a table, with the targets met or missed. */
export function renderCliBench(r: CliBenchResult): string {
  const lines = [
    `CLI start-up: medians of ${r.runs} runs, interleaved; ./marsh ran the ${r.mode}`,
    "",
    `${"command".padEnd(48)} ${"median".padStart(9)} ${"min".padStart(9)} ${
      "ratio".padStart(7)
    }  target`,
  ];
  for (const row of r.rows) {
    const target = row.target === null
      ? ""
      : `≤ ${row.target}× ${row.ratio <= row.target ? "met" : "MISSED"}`;
    lines.push(
      `${row.name.padEnd(48)} ${row.medianMs.toFixed(1).padStart(6)} ms ${
        row.minMs.toFixed(1).padStart(6)
      } ms ${row.ratio.toFixed(2).padStart(6)}×  ${target}`,
    );
  }
  if (r.check.files > 0) {
    lines.push(
      "",
      `The launcher's freshness check: sha256sum of ${r.check.files} files (${
        Math.round(r.check.bytes / 1024)
      } KiB), median ${r.check.medianMs.toFixed(1)} ms (a process start included).`,
    );
  }
  return lines.join("\n");
}
