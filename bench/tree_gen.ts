/**
 * Deterministic synthetic repositories for the benchmarks.
 *
 * {@linkcode generateTree} writes a tree that looks like a real project:
 * nested directories (depth up to 6, 10–40 entries in most), mostly small
 * source files (log-normal sizes, median 2.5 KiB, tail to 200 KiB), about 3%
 * binary files (random bytes with NULs) that take the rest of a byte budget
 * ({@linkcode targetBytes}: most of the bytes at 1k and 10k files), a few
 * symlinks and executables, a root and a few nested `.gitignore` files, and
 * files they ignore (`*.log`, `build/`, `*.tmp`). It then commits the tree in
 * a fresh Git repository under a hardened environment.
 *
 * The plan is bench/tree_plan.ts, its words and bodies bench/tree_text.ts;
 * `cachedTree` (bench/tree_cache.ts) keeps generated trees in
 * `bench/.trees/` across runs; bench/small_change.ts makes the small change
 * (10 modified, 5 added, 5 deleted) the capture benchmarks measure.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { HardenedGit } from "./_git.ts";
import { Prng } from "./_prng.ts";
import { planTree } from "./tree_plan.ts";
import { binaryBody, encoder, LinePools, textBody } from "./tree_text.ts";

/** What {@linkcode generateTree} wrote: entries other than directories (symlinks included, `.git` excluded) and regular-file bytes. */
export interface TreeStats {
  readonly files: number;
  readonly bytes: number;
}

/** Options of {@linkcode generateTree}. */
export interface GenerateOptions {
  /** Total bytes to aim for; defaults to {@linkcode targetBytes}`(files)`. */
  readonly bytes?: number;
  /** A Git runner to reuse; one is made (and closed) otherwise. */
  readonly git?: HardenedGit;
}

/** Bumped whenever the generator's output changes, so stale caches are rebuilt. */
export const GENERATOR_VERSION = 4;

/**
 * The total size aimed at for a tree of `files` files: the sizes in docs/engine.md
 * "Measured costs", 1k ≈ 23 MB and 10k ≈ 215 MB, but 100k ≈ 600 MB instead of its 1.2 GB:
 * generating and committing 1.2 GB took 81–126 s on these machines (Git's
 * hashing and zlib alone 46 s), so the 100k tree keeps its file count and
 * shape and halves the binary bytes. Interpolated log-log between those
 * points and held at their bytes-per-file outside them.
 */
export function targetBytes(files: number): number {
  const points: ReadonlyArray<readonly [number, number]> = [
    [1_000, 23e6],
    [10_000, 215e6],
    [100_000, 600e6],
  ];
  const [first, second, third] = points as [
    readonly [number, number],
    readonly [number, number],
    readonly [number, number],
  ];
  if (files <= first[0]) return Math.round((files * first[1]) / first[0]);
  if (files >= third[0]) return Math.round((files * third[1]) / third[0]);
  const [lo, hi] = files <= second[0] ? [first, second] : [second, third];
  const t = Math.log(files / lo[0]) / Math.log(hi[0] / lo[0]);
  return Math.round(Math.exp(Math.log(lo[1]) + t * (Math.log(hi[1]) - Math.log(lo[1]))));
}

/**
 * Writes a deterministic repository-like tree of `files` entries into `dir`
 * (created if missing; must not hold anything but what it would write), then
 * `git init`, `git add -A` and `git commit` there under a hardened
 * environment with fixed dates, so equal seeds give equal commits.
 *
 * Needs unscoped `--allow-read` and `--allow-write` (Deno refuses to make
 * symlinks under path-scoped grants), `--allow-run=git` and `--allow-env`.
 *
 * @throws {Error} when git fails or `dir` cannot be written.
 */
export async function generateTree(
  dir: string,
  files: number,
  seed: number,
  options: GenerateOptions = {},
): Promise<TreeStats> {
  if (!Number.isInteger(files) || files < 1) {
    throw new RangeError(`File count must be a positive integer: ${files}`);
  }
  const entries = planTree(seed, files, options.bytes ?? targetBytes(files));
  const rng = new Prng(seed ^ 0x5eed_c0de);
  const pools = new LinePools(rng);

  await Deno.mkdir(dir, { recursive: true });
  const made = new Set<string>();
  let bytes = 0;
  for (const e of entries) {
    const parent = dirname(e.path);
    if (parent !== "." && !made.has(parent)) {
      Deno.mkdirSync(join(dir, parent), { recursive: true });
      made.add(parent);
    }
    const abs = join(dir, e.path);
    let body: Uint8Array;
    switch (e.kind) {
      case "symlink":
        Deno.symlinkSync(e.target, abs);
        continue;
      case "gitignore":
        body = encoder.encode(e.content);
        break;
      case "text":
        body = textBody(rng, e.prose ? pools.prose : pools.code, `// ${e.path}`, e.size);
        break;
      case "exec":
        body = textBody(rng, pools.prose, `#!/bin/sh\n# ${e.path}\nset -eu`, e.size);
        break;
      case "ignored":
        body = textBody(rng, pools.prose, `[generated] ${e.path}`, e.size);
        break;
      case "binary":
        body = binaryBody(rng, e.magic, e.size);
        break;
    }
    Deno.writeFileSync(abs, body);
    if (e.kind === "exec") Deno.chmodSync(abs, 0o755);
    bytes += body.byteLength;
  }

  const git = options.git ?? await HardenedGit.create();
  try {
    await git.run(dir, ["init", "-q"]);
    // Blobs over bigFileThreshold are streamed into one pack instead of one
    // loose object file each; at 100k files that halves the commit time and
    // leaves a .git shaped like a fresh clone's (packed), not 100k loose files.
    await git.run(dir, ["-c", "core.bigFileThreshold=1", "-c", "core.compression=1", "add", "-A"]);
    await git.run(dir, [
      "commit",
      "-q",
      "--no-verify",
      "-m",
      `Generated tree: ${files} files, seed ${seed}`,
    ]);
  } finally {
    if (!options.git) await git.close();
  }
  return { files: entries.length, bytes };
}
