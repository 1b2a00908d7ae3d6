/**
 * `deno task bench --resolve`, through the real CLI (issue 13 §4,
 * docs/resolution.md "Measured"): `./marsh merge ID change` (the `--git`
 * apply) of the 20-file change in a working copy of the generated trees of
 * 10k and 100k files, against `git apply --3way change.patch` in a second
 * working copy of the same tree, as a ratio (target ≤ 1.5×), and the merge
 * at 100k over the merge at 10k (it must not grow with the tree). A second
 * row per size has the user's own edit in one of the changed files first
 * (another line), so the path is changed on both sides and the git planner
 * process runs. Then `./marsh merge ID wide --dry-run` of a 1,000-file
 * change against `./marsh --version` (target ≤ 50 ms beyond the CLI's
 * start). Medians of interleaved runs; each run is put back untimed (`marsh
 * undo`, `git reset --hard`).
 *
 * The floor, timed in the same runs: an empty `deno run` (the pinned Deno
 * starting a module that does nothing) beside `git apply --3way`, and each
 * merge's time beyond the CLI's own start (`./marsh --version`): what marsh
 * itself spends, where a Deno CLI's start alone may pass Git's whole apply.
 *
 * The working copies (`git clone` of the cached tree, every file checked
 * out) are cached beside it, in `bench/.trees/<files>-<seed>/work/`, and
 * reused while `git status` shows them clean. The daemon runs with a
 * private `MARSH_HOME` (a temp dir), started once and stopped at the end;
 * the split's state (`.marsh/`) is removed from the working copy after.
 *
 * Needs `--allow-run` (./marsh, git), `--allow-env`, read/write on
 * `bench/.trees/` and the temp dir.
 *
 * @module
 */

import { join } from "node:path";
import { type CommandSpec, runChecked, runText } from "./_command.ts";
import { fmtMs, fmtRatio } from "./_format.ts";
import type { HardenedGit } from "./_git.ts";
import { exists } from "./_fs.ts";
import { marshOps } from "./marsh_ops.ts";
import { median } from "./measure.ts";
import { prepare, RATIO_TARGET, wideChange } from "./resolve.ts";
import type { PlannedEdit } from "./small_change.ts";
import { dirtyReason } from "./tree_cache.ts";

const MARSH = new URL("../marsh", import.meta.url).pathname;
/** No command here should take this long (a 100k-file split's snapshot included). */
const TIMEOUT_MS = 10 * 60_000;
/** The limit on a dry run beyond the CLI's start. */
export const DRY_RUN_TARGET_MS = 50;
/** The merge at the largest size over the smallest, past which it is said to grow (noise allowance). */
export const GROWTH_ALLOWANCE = 1.25;
/** The line the "user" adds on top of one changed file for the both-sided rows. */
const USER_LINE = "// the user's own edit, made after the split\n";

/** One cached tree to measure on. */
export interface CliTree {
  readonly files: number;
  /** The cached tree (a Git worktree with one commit). */
  readonly dir: string;
  readonly head: string;
  /** Where its working copies are cached (`work/` beside the tree). */
  readonly workDir: string;
  /** The 20-file change (bench/small_change.ts). */
  readonly edits: readonly PlannedEdit[];
}

/** One row: a case at one size. */
export interface CliRow {
  readonly files: number;
  readonly case: "clean" | "both sides";
  readonly changed: number;
  readonly marshMs: number;
  readonly gitApplyMs: number;
  /** `./marsh --version` in the same runs: the CLI's start, part of `marshMs`. */
  readonly cliStartMs: number;
  /** `marshMs - cliStartMs`: what marsh spends beyond its CLI's start. */
  readonly beyondMs: number;
  /** An empty `deno run` in the same runs: no Deno CLI starts faster. */
  readonly denoRunMs: number;
  /** `marshMs / gitApplyMs`. */
  readonly ratio: number;
}

/** What the CLI part of `--resolve` measured. */
export interface ResolveCliResult {
  readonly runs: number;
  readonly rows: readonly CliRow[];
  /** The clean merge at the largest size over the smallest; null with one size. */
  readonly growth: { readonly from: number; readonly to: number; readonly ratio: number } | null;
  readonly dryRun: {
    readonly files: number;
    readonly changed: number;
    readonly dryRunMs: number;
    readonly versionMs: number;
    /** `dryRunMs - versionMs`. */
    readonly beyondMs: number;
  } | null;
  /** Each figure's command, as run. */
  readonly commands: readonly string[];
  readonly notes: readonly string[];
}

/**
 * A working copy of `t`'s tree at `work/<name>`: reused when its marker
 * names the tree's commit and `git status` shows it clean, cloned (every
 * file checked out) otherwise; the marker is written last.
 */
async function workingCopy(
  git: HardenedGit,
  t: CliTree,
  name: string,
  log: (line: string) => void,
): Promise<string> {
  const dir = join(t.workDir, name);
  const marker = join(t.workDir, `${name}.json`);
  if (await exists(marker)) {
    const m = JSON.parse(await Deno.readTextFile(marker)) as { head?: unknown };
    if (m.head === t.head && await exists(dir)) {
      await marshOps.removeState(dir);
      const dirty = await dirtyReason(dir, t.head, git);
      if (dirty === null) return dir;
      log(`working copy "${dir}" is not clean (${dirty}); cloning it again`);
    }
    await Deno.remove(marker);
  }
  await Deno.remove(dir, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.mkdir(t.workDir, { recursive: true });
  log(`cloning "${t.dir}" into "${dir}" (every file checked out)`);
  await git.run(t.workDir, ["clone", "-q", t.dir, dir]);
  await Deno.writeTextFile(marker, JSON.stringify({ head: t.head }) + "\n");
  return dir;
}

/** The `marsh` CLI against a private daemon. */
class Marsh {
  readonly env: Record<string, string>;
  constructor(readonly home: string) {
    const env = Deno.env.toObject();
    // A MARSH_SOCK (inside a shell branch) would send the CLI to another daemon.
    for (const k of Object.keys(env)) {
      if (k.startsWith("MARSH_") && k !== "MARSH_DENO") delete env[k];
    }
    this.env = { ...env, MARSH_HOME: home, DENO_NO_UPDATE_CHECK: "1" };
  }
  spec(cwd: string, args: readonly string[]): CommandSpec {
    return { cmd: MARSH, args, cwd, env: this.env, clearEnv: true, timeoutMs: TIMEOUT_MS };
  }
  run(cwd: string, args: readonly string[]): Promise<string> {
    return runText(this.spec(cwd, args));
  }
}

async function timed(spec: CommandSpec): Promise<number> {
  const t0 = performance.now();
  await runChecked(spec);
  return performance.now() - t0;
}

/** The newest resolution, checked to be an applied merge of `label` in `split`; its id. */
async function newestMerge(m: Marsh, cwd: string, split: string, label: string): Promise<string> {
  const text = await m.run(cwd, ["resolutions", "--json"]);
  const r = (JSON.parse(text) as { resolutions: Record<string, unknown>[] }).resolutions[0];
  if (r?.kind !== "merge" || r.state !== "applied" || r.split !== split || r.label !== label) {
    throw new Error(`the newest resolution is not an applied merge of ${split}:${label}: ${text}`);
  }
  return String(r.id);
}

/** A modified text file of the change with room for an edit of the user's far from the branch's. */
async function bothSidedPath(t: CliTree): Promise<string> {
  for (const e of t.edits) {
    if (e.status !== "M") continue;
    const old = await Deno.readFile(join(t.dir, e.path));
    if (!old.includes(0) && new TextDecoder().decode(old).split("\n").length >= 16) return e.path;
  }
  throw new RangeError(`the change in "${t.dir}" modifies no text file of 16 lines or more`);
}

async function userEdit(dir: string, path: string): Promise<void> {
  const p = join(dir, path);
  await Deno.writeTextFile(p, USER_LINE + await Deno.readTextFile(p));
}

/** Throws unless `path` in `dir` holds the user's line and the branch's. */
async function checkBoth(dir: string, path: string, who: string): Promise<void> {
  const text = await Deno.readTextFile(join(dir, path));
  if (!text.startsWith(USER_LINE) || !text.includes("changed by the bench")) {
    throw new Error(`${who}: ${path} does not hold both sides' edits after the merge`);
  }
}

/**
 * Runs the CLI part of the `--resolve` benchmark on `trees` (smallest
 * first); the dry run is measured on the first.
 */
export async function measureResolveCli(opts: {
  readonly git: HardenedGit;
  readonly runs: number;
  readonly trees: readonly CliTree[];
  /** Files in the dry run's change (default 1,000). */
  readonly wideFiles?: number;
  readonly log: (line: string) => void;
}): Promise<ResolveCliResult> {
  const { git, log } = opts;
  const scratchRoot = await Deno.makeTempDir({ prefix: "marsh-bench-rcli-" });
  const m = new Marsh(join(scratchRoot, "home"));
  await Deno.mkdir(m.home, { mode: 0o700 });
  const rows: CliRow[] = [];
  const notes: string[] = [];
  const copies: { t: CliTree; dirs: string[] }[] = [];
  let dryRun: ResolveCliResult["dryRun"] = null;
  let daemon = false;
  try {
    for (const t of opts.trees) {
      const scratch = join(scratchRoot, String(t.files));
      await Deno.mkdir(scratch);
      const c = await prepare(git, t.dir, t.files, t.edits, scratch);
      const ours = await workingCopy(git, t, "marsh", log);
      const theirs = await workingCopy(git, t, "git", log);
      copies.push({ t, dirs: [ours, theirs] });
      if (!daemon) {
        await m.run(ours, ["daemon", "start"]);
        daemon = true;
      }
      const branches = ["-b", `change=git apply ${c.patch}`];
      let wide: { patch: string; changed: number } | null = null;
      if (dryRun === null) {
        const dir = join(scratch, "wide");
        await Deno.mkdir(dir);
        const edits = await wideChange(git, t.dir, opts.wideFiles ?? 1_000);
        wide = {
          patch: (await prepare(git, t.dir, t.files, edits, dir)).patch,
          changed: edits.length,
        };
        branches.push("-b", `wide=git apply ${wide.patch}`);
      }
      log(`resolve cli: ${t.files} files: marsh split (the first snapshot of the working copy)`);
      const handle = await m.run(ours, ["split", "-n", ...branches]);
      const id = /"id":"([a-z0-9]+)"/.exec(handle)?.[1];
      if (id === undefined) throw new Error(`marsh split printed no handle: ${handle}`);
      const both = await bothSidedPath(t);
      const merge = m.spec(ours, ["merge", id, "change"]);
      const apply = git.spec(theirs, ["apply", "--3way", c.patch]);
      const reset = () => git.run(theirs, ["reset", "-q", "--hard", "HEAD"]);
      const version = m.spec(ours, ["--version"]);
      const empty = join(scratch, "empty.js");
      await Deno.writeTextFile(empty, "");
      const denoRun: CommandSpec = {
        cmd: Deno.execPath(),
        args: ["run", "--quiet", "--no-prompt", "--no-config", empty],
        cwd: ours,
        env: m.env,
        clearEnv: true,
        timeoutMs: TIMEOUT_MS,
      };
      const starts: number[] = [], denoRuns: number[] = [];
      const cases = {
        clean: { marsh: [] as number[], git: [] as number[] },
        both: { marsh: [] as number[], git: [] as number[] },
      };
      // Run 0 is untimed: it warms the caches and checks each side works.
      for (let i = 0; i <= opts.runs; i++) {
        log(`resolve cli: ${t.files} files: run ${i}/${opts.runs}${i === 0 ? " (warm-up)" : ""}`);
        const keep = (xs: number[], ms: number) => {
          if (i > 0) xs.push(ms);
        };
        keep(starts, await timed(version));
        keep(denoRuns, await timed(denoRun));
        keep(cases.clean.marsh, await timed(merge));
        await m.run(ours, ["undo", await newestMerge(m, ours, id, "change")]);
        keep(cases.clean.git, await timed(apply));
        await reset();

        await userEdit(ours, both);
        keep(cases.both.marsh, await timed(merge));
        await checkBoth(ours, both, "marsh merge");
        await m.run(ours, ["undo", await newestMerge(m, ours, id, "change")]);
        await git.run(ours, ["checkout", "--", both]);
        await userEdit(theirs, both);
        await git.run(theirs, ["add", "--", both]);
        keep(cases.both.git, await timed(apply));
        await checkBoth(theirs, both, "git apply --3way");
        await reset();
      }
      for (const [name, k] of [["clean", cases.clean], ["both sides", cases.both]] as const) {
        const row = {
          marshMs: median(k.marsh),
          gitApplyMs: median(k.git),
          cliStartMs: median(starts),
          denoRunMs: median(denoRuns),
        };
        rows.push({
          files: t.files,
          case: name,
          changed: c.changed,
          ...row,
          beyondMs: row.marshMs - row.cliStartMs,
          ratio: row.marshMs / row.gitApplyMs,
        });
      }
      if (wide !== null) {
        log(`resolve cli: ${t.files} files: dry run of a ${wide.changed}-file change`);
        const dry = m.spec(ours, ["merge", id, "wide", "--dry-run"]);
        const d: number[] = [], v: number[] = [];
        for (let i = 0; i <= opts.runs; i++) {
          const dm = await timed(dry), vm = await timed(version);
          if (i > 0) {
            d.push(dm);
            v.push(vm);
          }
        }
        const dryRunMs = median(d), versionMs = median(v);
        dryRun = {
          files: t.files,
          changed: wide.changed,
          dryRunMs,
          versionMs,
          beyondMs: dryRunMs - versionMs,
        };
      }
      await m.run(ours, ["splits", "rm", id]);
    }
  } finally {
    if (daemon) await m.run(scratchRoot, ["daemon", "stop"]);
    await Deno.remove(scratchRoot, { recursive: true });
    for (const { t, dirs } of copies) {
      for (const dir of dirs) {
        await marshOps.removeState(dir);
        const dirty = await dirtyReason(dir, t.head, git);
        if (dirty !== null) {
          notes.push(
            `WARNING: the runs left "${dir}" changed (${dirty}); it is cloned again next time`,
          );
          await Deno.remove(`${dir}.json`);
        }
      }
    }
  }
  const clean = rows.filter((r) => r.case === "clean");
  const first = clean[0], last = clean.at(-1);
  return {
    runs: opts.runs,
    rows,
    growth: first === undefined || last === undefined || first === last
      ? null
      : { from: first.files, to: last.files, ratio: last.marshMs / first.marshMs },
    dryRun,
    commands: [
      "marsh merge: `./marsh merge ID change` in the working copy the split was made from; put " +
      "back untimed with `./marsh undo RID` (RID: the newest of `./marsh resolutions --json`)",
      "git apply --3way: `git apply --3way change.patch` in a second clone of the same tree; put " +
      "back untimed with `git reset -q --hard HEAD`",
      "both sides: first (untimed) one line added on top of one of the 20 files, in each working " +
      "copy (`git add`ed in the second: `git apply --3way` needs the file to match the index)",
      "dry run: `./marsh merge ID wide --dry-run` against `./marsh --version`; (CLI start): " +
      "`./marsh --version` timed in the same runs, part of the merge's time; beyond: the merge " +
      "less the CLI's start",
      "deno run: the pinned Deno running an empty module (`deno run --quiet --no-prompt " +
      "--no-config empty.js`), timed in the same runs: the floor of any Deno CLI",
      "the patch: `git diff --cached --binary --full-index` of the change; the split's branch " +
      "ran `git apply` of it",
    ],
    notes: [
      "medians of interleaved runs after one untimed warm-up, wall clock; the machine is shared " +
      "and noisy (2 cores, other sessions running): read the ratios as rough",
      ...notes,
    ],
  };
}

/** The result as a table, with the targets met or missed. */
export function renderResolveCli(r: ResolveCliResult): string {
  const lines = [
    `marsh merge through the CLI (--git apply): medians of ${r.runs} runs, interleaved`,
    "",
    `${"files".padStart(8)}  ${"case".padEnd(10)} ${"changed".padStart(7)} ${
      "marsh merge".padStart(11)
    } ${"(CLI start)".padStart(11)} ${"beyond".padStart(9)} ${"git apply --3way".padStart(16)} ${
      "deno run".padStart(9)
    } ${"ratio".padStart(7)}  target`,
  ];
  for (const row of r.rows) {
    const target = row.case === "clean"
      ? `≤ ${RATIO_TARGET}× ${row.ratio <= RATIO_TARGET ? "met" : "MISSED"}`
      : "(reported)";
    lines.push(
      `${String(row.files).padStart(8)}  ${row.case.padEnd(10)} ${
        String(row.changed).padStart(7)
      } ${fmtMs(row.marshMs).padStart(11)} ${fmtMs(row.cliStartMs).padStart(11)} ${
        fmtMs(row.beyondMs).padStart(9)
      } ${fmtMs(row.gitApplyMs).padStart(16)} ${fmtMs(row.denoRunMs).padStart(9)} ${
        fmtRatio(row.ratio).padStart(7)
      }  ${target}`,
    );
  }
  const clean = r.rows.filter((row) => row.case === "clean");
  for (const row of clean) {
    const floor = row.denoRunMs / row.gitApplyMs;
    lines.push(
      "",
      `At ${row.files} files an empty deno run alone is ${fmtRatio(floor)} git apply --3way ` +
        `(${fmtMs(row.denoRunMs)} against ${fmtMs(row.gitApplyMs)}): ` +
        (floor > RATIO_TARGET
          ? `no Deno CLI can meet ≤ ${RATIO_TARGET}× there; marsh spends ${
            fmtMs(row.beyondMs)
          } beyond its own CLI's start`
          : `marsh spends ${fmtMs(row.beyondMs)} beyond its own CLI's start`),
    );
  }
  if (r.growth !== null) {
    const g = r.growth;
    lines.push(
      "",
      `Clean merge at ${g.to} files over ${g.from}: ${fmtRatio(g.ratio)} (target: does not grow; ` +
        `≤ ${GROWTH_ALLOWANCE}× allowed for noise: ${
          g.ratio <= GROWTH_ALLOWANCE ? "met" : "MISSED"
        })`,
    );
  }
  if (r.dryRun !== null) {
    const d = r.dryRun;
    lines.push(
      "",
      `Dry run of a ${d.changed}-file change (${d.files} files): ${fmtMs(d.dryRunMs)}; ` +
        `./marsh --version ${fmtMs(d.versionMs)}; beyond the CLI's start: ${fmtMs(d.beyondMs)} ` +
        `(target ≤ ${DRY_RUN_TARGET_MS} ms: ${d.beyondMs <= DRY_RUN_TARGET_MS ? "met" : "MISSED"})`,
    );
  }
  lines.push("", ...r.commands.map((c) => `- ${c}`), ...r.notes.map((n) => `- ${n}`));
  return lines.join("\n");
}
