/**
 * The layered snapshot of a project's own tree, as `marsh split` and a
 * checkpoint session both take it (docs/engine.md "The layered snapshot
 * store", docs/checkpoints.md "The model"): the chain (`tracked`, or
 * `with-ignored`), the ignore rules and their key, and what is never
 * admitted (`.git` at any depth, the top-level `.marsh`). One code path, so
 * a session and a split of the same tree share the chain's layers.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { readGitSource } from "../git/git_source.ts";
import { type IgnoreInputs, ignoreRulesOf, loadIgnoreInputs } from "../git/ignore_load.ts";
import { ignoreKeyOf, type LayerSnapshot, type LayerStore } from "../layers/layers.ts";
import type { Progress } from "../layers/snapshot.ts";
import { readRel } from "../fd/read_rel.ts";
import { MARSH_DIR } from "../../model/layout.ts";

/** The chain a project's snapshots go on. */
export function projectChain(withIgnored: boolean): string {
  return withIgnored ? "with-ignored" : "tracked";
}

/**
 * Takes the snapshot of the project tree `rootDir` on its chain: ignored
 * paths left out by `ignore` unless `withIgnored`.
 */
export function snapshotProject(
  store: LayerStore,
  rootDir: Dir,
  ignore: IgnoreInputs | null,
  withIgnored: boolean,
  progress?: Progress,
): LayerSnapshot {
  return store.snapshot({
    source: rootDir,
    ignore: ignore && !withIgnored ? ignoreRulesOf(ignore) : null,
    skipTop: new Set([MARSH_DIR]),
    chain: projectChain(withIgnored),
    ignoreKey: ignoreKeyOf(withIgnored ? null : ignore),
    progress,
  });
}

/**
 * The ignore inputs of the project at `root` (open as `rootDir`) as a split
 * reads them: none when it is not a Git work tree (`isGit`).
 */
export function projectIgnore(
  rootDir: Dir,
  root: string,
  isGit: boolean,
  env: { readonly HOME?: string; readonly XDG_CONFIG_HOME?: string },
): IgnoreInputs | null {
  if (!isGit) return null;
  const git = readGitSource((rel, max) => readRel(rootDir, rel, max));
  if (git === null) return null;
  return loadIgnoreInputs(rootDir, root, git, env);
}
