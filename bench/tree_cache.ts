/**
 * The cache of generated trees in `bench/.trees/`: reuse a complete,
 * pristine tree of the same generator version, regenerate otherwise.
 *
 * @module
 */

import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { HardenedGit } from "./_git.ts";
import { exists } from "./_fs.ts";
import { generateTree, GENERATOR_VERSION, type TreeStats } from "./tree_gen.ts";

/** The folder that holds cached trees: `bench/.trees/` (git-ignored). */
export const TREE_CACHE = fileURLToPath(new URL("./.trees/", import.meta.url));

/** A cached tree and how it came to be. */
export interface CachedTree {
  /** The tree (a Git worktree with one commit). */
  readonly dir: string;
  readonly stats: TreeStats;
  /** The generated commit. */
  readonly head: string;
  /** True when an existing complete cache entry was reused. */
  readonly reused: boolean;
  /** Seconds spent generating (0 when reused). */
  readonly generationSeconds: number;
}

interface Marker {
  version: number;
  files: number;
  seed: number;
  stats: TreeStats;
  head: string;
}

function isMarker(x: unknown): x is Marker {
  if (typeof x !== "object" || x === null) return false;
  const m = x as Record<string, unknown>;
  const stats = m.stats as Record<string, unknown> | undefined;
  return typeof m.version === "number" && typeof m.files === "number" &&
    typeof m.seed === "number" && typeof m.head === "string" &&
    typeof stats === "object" && stats !== null &&
    typeof stats.files === "number" && typeof stats.bytes === "number";
}

/**
 * Why a cached tree is not as generated, or null when it is: its HEAD must be
 * the generated commit and `git status --porcelain --untracked-files=all` must
 * be empty (modified, deleted and new unignored files all show there).
 */
export async function dirtyReason(
  dir: string,
  head: string,
  git: HardenedGit,
): Promise<string | null> {
  const actual = (await git.run(dir, ["rev-parse", "HEAD"])).trim();
  if (actual !== head) return `HEAD is ${actual}, not ${head}`;
  const status = await git.run(dir, ["status", "--porcelain", "--untracked-files=all"]);
  if (status !== "") {
    return `git status shows changes: ${status.split("\n").slice(0, 3).join("; ")}`;
  }
  return null;
}

/**
 * Returns the tree for `files`/`seed` from `bench/.trees/<files>-<seed>/tree`,
 * generating it when the entry is missing, incomplete (no completion marker,
 * which is written last), from another generator version, or dirty. A
 * leftover `.marsh/` from an engine run is removed first: the generator
 * never writes one.
 *
 * Needs read/write on `bench/.trees/`, `--allow-run=git` and `--allow-env`.
 */
export async function cachedTree(
  files: number,
  seed: number,
  git: HardenedGit,
  log: (line: string) => void = () => {},
): Promise<CachedTree> {
  const entry = join(TREE_CACHE, `${files}-${seed}`);
  const dir = join(entry, "tree");
  const markerPath = join(entry, "complete.json");
  let marker: unknown = null;
  try {
    marker = JSON.parse(await Deno.readTextFile(markerPath));
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) && !(err instanceof SyntaxError)) throw err;
  }
  if (isMarker(marker) && marker.version === GENERATOR_VERSION && await exists(dir)) {
    const leftover = join(dir, ".marsh");
    if (await exists(leftover)) {
      log(`removing leftover engine state "${leftover}"`);
      await Deno.remove(leftover, { recursive: true });
    }
    const dirty = await dirtyReason(dir, marker.head, git);
    if (dirty === null) {
      return { dir, stats: marker.stats, head: marker.head, reused: true, generationSeconds: 0 };
    }
    log(`cached tree "${dir}" is not pristine (${dirty}); regenerating`);
  }
  await Deno.remove(entry, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.mkdir(entry, { recursive: true });
  log(`generating ${files} files (seed ${seed}) in "${dir}"`);
  const t0 = performance.now();
  const stats = await generateTree(dir, files, seed, { git });
  const head = (await git.run(dir, ["rev-parse", "HEAD"])).trim();
  const generationSeconds = (performance.now() - t0) / 1000;
  const done: Marker = { version: GENERATOR_VERSION, files, seed, stats, head };
  await Deno.writeTextFile(markerPath, JSON.stringify(done, null, 2) + "\n");
  return { dir, stats, head, reused: false, generationSeconds };
}
