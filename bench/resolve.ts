/**
 * `deno task bench --resolve` (issue 13 §4): the `--git` merge of a 20-file
 * change (10 modified, 5 added, 5 deleted: bench/small_change.ts) in the
 * generated trees of 10k and 100k files, against `git apply --3way --check`
 * of the same patch (`git diff --binary --full-index`) in a checkout of the
 * same tree; medians of interleaved runs, as a ratio (target ≤ 1.5×) and
 * per tree size (the merge must not grow with it). Then a dry-run plan of a
 * 1,000-file change, in ms.
 *
 * "Our side" is a {@linkcode OurSide} function, swappable: today
 * {@linkcode plannerSide} (the git planner entrypoint, `runGitPlanner`, on
 * merge inputs built here directly, as the split-filesystem service would
 * give them); {@linkcode inProcessSide} is the same plan without the
 * process start. The full `marsh merge` command through the CLI is
 * measured in bench/resolve_cli.ts, which reuses {@linkcode prepare} and
 * {@linkcode wideChange}.
 *
 * Needs `--allow-run` (git, deno), `--allow-env`, read/write on
 * `bench/.trees/` and the temp dir.
 *
 * @module
 */

import { join } from "node:path";
import { runGitPlanner } from "../daemon/git_planner.ts";
import type { Signature } from "../model/resolution_plan.ts";
import type { MergeInputsReply, PathInputs } from "../protocol/splitfs_resolve.ts";
import { planSmallMerge } from "../resolve/small_trees.ts";
import type { HardenedGit } from "./_git.ts";
import { type PlannedEdit, planSmallChange } from "./small_change.ts";
import { cachedTree } from "./tree_cache.ts";

/** Timed runs of each side, unless `--runs` says otherwise. */
export const RESOLVE_RUNS = 11;
/** The tree sizes of the ratio table. */
export const RESOLVE_SIZES: readonly number[] = [10_000, 100_000];
/** Files in the dry run's change. */
export const DRY_RUN_FILES = 1_000;
/** The limit on our side over `git apply --3way`. */
export const RATIO_TARGET = 1.5;

/** One prepared merge: a checkout of the tree, the patch, and the merge inputs of the same change. */
export interface ResolveCase {
  /** Files in the tree. */
  readonly files: number;
  /** Paths the change touches. */
  readonly changed: number;
  /** A clone of the tree (full index; the changed paths checked out), the source. */
  readonly source: string;
  /** The change as `git diff --binary --full-index`, applicable to `source`. */
  readonly patch: string;
  /** What the service's `merge-inputs` would answer (source = base: a clean source). */
  readonly inputs: MergeInputsReply;
  /** A temp dir our side may use. */
  readonly tmp: string;
}

/** Measures one run of our side on a case (its result is checked, not timed). */
export type OurSide = (c: ResolveCase) => Promise<void>;

/** Our side today: the git planner entrypoint, as the daemon starts it. */
export const plannerSide: OurSide = async (c) => {
  const plan = await runGitPlanner(c.inputs, { tmpDir: c.tmp });
  checkTaken(plan.entries.length, c);
};

/** The same plan in this process: the planner without its process start. */
export const inProcessSide: OurSide = async (c) => {
  const plan = await planSmallMerge(c.inputs, { tmpDir: c.tmp });
  checkTaken(plan.entries.length, c);
};

function checkTaken(entries: number, c: ResolveCase): void {
  if (entries !== c.changed) {
    throw new Error(`the plan has ${entries} entries for a ${c.changed}-path change`);
  }
}

/** One row of the ratio table. */
export interface ResolveRow {
  readonly files: number;
  readonly changed: number;
  readonly oursMs: number;
  readonly inProcessMs: number;
  readonly gitApplyMs: number;
  /** `oursMs / gitApplyMs`. */
  readonly ratio: number;
}

/** What `--resolve` measured. */
export interface ResolveResult {
  readonly runs: number;
  readonly rows: readonly ResolveRow[];
  /** The dry-run plan of a {@linkcode DRY_RUN_FILES}-file change. */
  readonly dryRun: {
    readonly files: number;
    readonly changed: number;
    readonly oursMs: number;
    readonly inProcessMs: number;
    /** The first run of our side: every tree object new in the store. */
    readonly coldMs: number;
  };
  readonly notes: readonly string[];
}

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

async function timed(f: () => Promise<void>): Promise<number> {
  const t0 = performance.now();
  await f();
  return performance.now() - t0;
}

/** Runs git with stdin bytes, for the pipes `git` commands in {@linkcode HardenedGit} cannot take. */
async function gitPiped(
  git: HardenedGit,
  cwd: string,
  args: readonly string[],
  stdin: Uint8Array,
): Promise<Uint8Array> {
  const spec = git.spec(cwd, args);
  const child = new Deno.Command(spec.cmd, {
    args: [...spec.args],
    env: { ...spec.env },
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const w = child.stdin.getWriter();
  const [out] = await Promise.all([child.output(), w.write(stdin).then(() => w.close())]);
  if (!out.success) {
    throw new Error(`git ${args[0]} failed: ${new TextDecoder().decode(out.stderr).trim()}`);
  }
  return out.stdout;
}

const enc = new TextEncoder();

/** `path → (mode, blob)` from `git ls-tree`/`ls-files -s` style lines. */
function stateMap(text: string, blobField: number): Map<string, Signature> {
  const out = new Map<string, Signature>();
  for (const rec of text.split("\0")) {
    if (rec === "") continue;
    const tab = rec.indexOf("\t");
    const f = rec.slice(0, tab).split(" ");
    const mode = f[0]!;
    const id = f[blobField]!;
    const path = rec.slice(tab + 1);
    if (mode === "120000") {
      throw new Error(`the bench change touches a symlink (${path}); it should not`);
    }
    out.set(path, { kind: "file", mode: mode === "100755" ? 0o755 : 0o644, blob: id });
  }
  return out;
}

/**
 * A shared clone of `tree` with a full index and only `paths` checked out
 * (what `git apply --index` looks at), the change applied and diffed, then
 * undone; the merge inputs of the same change, with the blobs copied into a
 * fresh `store.git`.
 */
export async function prepare(
  git: HardenedGit,
  tree: string,
  files: number,
  edits: readonly PlannedEdit[],
  scratch: string,
): Promise<ResolveCase> {
  const source = join(scratch, "source");
  await git.run(scratch, ["clone", "-q", "--shared", "--no-checkout", tree, source]);
  await git.run(source, ["read-tree", "HEAD"]);
  const paths = edits.map((e) => e.path);
  const existing = edits.filter((e) => e.status !== "A").map((e) => e.path);
  await git.run(source, ["checkout", "HEAD", "--", ...existing]);
  const base = stateMap(await git.run(source, ["ls-tree", "-z", "HEAD", "--", ...paths]), 2);
  for (const e of edits) {
    const p = join(source, e.path);
    if (e.bytes === null) await Deno.remove(p);
    else {
      await Deno.mkdir(join(p, ".."), { recursive: true });
      await Deno.writeFile(p, e.bytes);
    }
  }
  await git.run(source, ["add", "-A", "--", ...paths]);
  const branch = stateMap(await git.run(source, ["ls-files", "-s", "-z", "--", ...paths]), 1);
  const patch = join(scratch, "change.patch");
  await Deno.writeFile(
    patch,
    await git.runBytes(source, ["diff", "--cached", "--binary", "--full-index"]),
  );
  // Back to the tree as committed: the patch applies to it.
  await git.run(source, ["reset", "-q", "HEAD", "--", ...paths]);
  for (const e of edits) if (e.status === "A") await Deno.remove(join(source, e.path));
  await git.run(source, ["checkout", "HEAD", "--", ...existing]);

  const store = join(scratch, "store.git");
  await git.run(scratch, ["init", "-q", "--bare", store]);
  const ids = [...base.values(), ...branch.values()].map((s) => s.kind === "file" ? s.blob : "");
  const pack = await gitPiped(
    git,
    source,
    ["pack-objects", "--stdout"],
    enc.encode(ids.join("\n") + "\n"),
  );
  await gitPiped(git, store, ["unpack-objects", "-q"], pack);
  const absent: Signature = { kind: "absent" };
  const pathInputs: PathInputs[] = paths.map((p) => ({
    path: p,
    base: base.get(p) ?? absent,
    source: base.get(p) ?? absent,
    branch: branch.get(p) ?? absent,
  }));
  const tmp = join(scratch, "tmp");
  await Deno.mkdir(tmp);
  return {
    files,
    changed: paths.length,
    source,
    patch,
    inputs: { v: 1, t: "merge-inputs", objects: join(store, "objects"), paths: pathInputs },
    tmp,
  };
}

/**
 * `count` modified text files spread over the tree (every k-th tracked
 * regular file, `.gitignore` files left alone), each with one line added.
 */
export async function wideChange(
  git: HardenedGit,
  tree: string,
  count: number,
): Promise<PlannedEdit[]> {
  const listing = await git.run(tree, ["ls-files", "-s", "-z"]);
  const candidates = listing.split("\0").filter((r) => r.startsWith("100644 ")).map((r) =>
    r.slice(r.indexOf("\t") + 1)
  ).filter((p) => !p.endsWith(".gitignore"));
  if (candidates.length < count) throw new RangeError(`the tree has too few files for ${count}`);
  const step = Math.floor(candidates.length / count);
  const out: PlannedEdit[] = [];
  for (let i = 0; i < count; i++) {
    const path = candidates[i * step]!;
    const old = await Deno.readFile(join(tree, path));
    const bytes = new Uint8Array(old.length + 24);
    bytes.set(old);
    bytes.set(enc.encode("\nmarsh bench: one line\n"), old.length);
    out.push({ path, status: "M", bytes });
  }
  return out;
}

/**
 * Runs the `--resolve` benchmark.
 *
 * @param ours our side (default {@linkcode plannerSide})
 */
export async function measureResolve(opts: {
  readonly git: HardenedGit;
  readonly runs: number;
  readonly seed: number;
  readonly sizes?: readonly number[];
  readonly ours?: OurSide;
  readonly log: (line: string) => void;
}): Promise<ResolveResult> {
  const ours = opts.ours ?? plannerSide;
  const rows: ResolveRow[] = [];
  const scratchRoot = await Deno.makeTempDir({ prefix: "marsh-bench-resolve-" });
  try {
    let dryRun: ResolveResult["dryRun"] | null = null;
    for (const files of opts.sizes ?? RESOLVE_SIZES) {
      const tree = await cachedTree(files, opts.seed, opts.git, opts.log);
      const edits = await planSmallChange(tree.dir, opts.seed, opts.git);
      const scratch = join(scratchRoot, String(files));
      await Deno.mkdir(scratch);
      opts.log(`resolve: ${files} files: preparing a ${edits.length}-file change`);
      const c = await prepare(opts.git, tree.dir, files, edits, scratch);
      const apply = () =>
        opts.git.run(c.source, ["apply", "--3way", "--check", c.patch]).then(() => {});
      // Untimed: warm the caches, and check each side works.
      await apply();
      await ours(c);
      await inProcessSide(c);
      const t = { ours: [] as number[], inProcess: [] as number[], apply: [] as number[] };
      for (let i = 0; i < opts.runs; i++) {
        opts.log(`resolve: ${files} files: run ${i + 1}/${opts.runs}`);
        t.apply.push(await timed(apply));
        t.ours.push(await timed(() => ours(c)));
        t.inProcess.push(await timed(() => inProcessSide(c)));
      }
      const row = {
        files,
        changed: c.changed,
        oursMs: median(t.ours),
        inProcessMs: median(t.inProcess),
        gitApplyMs: median(t.apply),
      };
      rows.push({ ...row, ratio: row.oursMs / row.gitApplyMs });
      if (dryRun === null) {
        opts.log(`resolve: ${files} files: a ${DRY_RUN_FILES}-file change, dry run`);
        const wide = join(scratch, "wide");
        await Deno.mkdir(wide);
        const w = await prepare(
          opts.git,
          tree.dir,
          files,
          await wideChange(opts.git, tree.dir, DRY_RUN_FILES),
          wide,
        );
        const coldMs = await timed(() => ours(w));
        const o: number[] = [], p: number[] = [];
        for (let i = 0; i < opts.runs; i++) {
          o.push(await timed(() => ours(w)));
          p.push(await timed(() => inProcessSide(w)));
        }
        dryRun = { files, changed: w.changed, oursMs: median(o), inProcessMs: median(p), coldMs };
      }
    }
    return {
      runs: opts.runs,
      rows,
      dryRun: dryRun ?? { files: 0, changed: 0, oursMs: NaN, inProcessMs: NaN, coldMs: NaN },
      notes: [
        "medians of interleaved runs, wall clock, warm cache; the machine is shared and noisy " +
        "(2 cores, other sessions running): read the ratios as rough",
        "ours: the git planner entrypoint (a Deno process start, then Git on small trees), on " +
        "merge inputs built directly; the service's merge-inputs step and the applier are not " +
        "in it yet",
        "in process: the same plan without the process start (planSmallMerge)",
        "runs after the first find their small trees and commits in the store already (Git " +
        "only freshens them); the dry run's first run is shown apart",
        "git apply --3way --check: in a clone with the full index and the changed paths " +
        "checked out; the patch applies plainly, so the three-way fallback is not taken",
      ],
    };
  } finally {
    await Deno.remove(scratchRoot, { recursive: true });
  }
}

/** The result as tables. */
export function renderResolve(r: ResolveResult): string {
  const lines = [
    `--git merge planning: medians of ${r.runs} runs, interleaved`,
    "",
    `${"files".padStart(8)} ${"changed".padStart(7)} ${"ours".padStart(10)} ${
      "in process".padStart(10)
    } ${"git apply --3way".padStart(16)} ${"ratio".padStart(7)}  target`,
  ];
  for (const row of r.rows) {
    lines.push(
      `${String(row.files).padStart(8)} ${String(row.changed).padStart(7)} ${
        row.oursMs.toFixed(1).padStart(7)
      } ms ${row.inProcessMs.toFixed(1).padStart(7)} ms ${
        row.gitApplyMs.toFixed(1).padStart(13)
      } ms ${row.ratio.toFixed(2).padStart(6)}×  ≤ ${RATIO_TARGET}× ${
        row.ratio <= RATIO_TARGET ? "met" : "MISSED"
      }`,
    );
  }
  const d = r.dryRun;
  lines.push(
    "",
    `Dry-run plan of a ${d.changed}-file change (${d.files} files): ${
      d.oursMs.toFixed(1)
    } ms (in process ${d.inProcessMs.toFixed(1)} ms); the first run, its trees new in the ` +
      `store: ${d.coldMs.toFixed(1)} ms`,
    "",
    ...r.notes.map((n) => `- ${n}`),
  );
  return lines.join("\n");
}
