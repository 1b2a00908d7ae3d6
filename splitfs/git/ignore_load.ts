/**
 * Reads the inputs of Git's exclude rules for a project: the user's global
 * excludes file (located through `core.excludesFile` or the XDG default) and
 * `.git/info/exclude`, as data. Nothing here runs `git`.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { type GitConfig, parseGitConfig } from "./git_config.ts";
import {
  type GitUserEnv,
  globalConfigPaths,
  IgnoreRules,
  resolveGlobalExcludesPath,
} from "./ignore_rules.ts";
import { readRel } from "../fd/read_rel.ts";

/** The largest exclude file read. */
export const MAX_EXCLUDES_BYTES = 16 * 1024 * 1024;

/** The bytes the ignore rules are built from, kept so capture can rebuild them per fork. */
export interface IgnoreInputs {
  readonly globalExcludes: Uint8Array | null;
  readonly infoExclude: Uint8Array | null;
  readonly ignoreCase: boolean;
}

/** Reads a file of the user's own (global config, excludes), or `null` when absent. */
function readUserFile(path: string): Uint8Array | null {
  try {
    return Dir.readAbsolute(path, MAX_EXCLUDES_BYTES);
  } catch (error) {
    if (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR)) {
      return null;
    }
    throw error;
  }
}

/**
 * Collects the exclude inputs of a Git project rooted at `root`: `git.config`
 * is the repository's config (`core.excludesFile`, `core.ignoreCase`), and
 * `infoExclude`, when given, replaces `.git/info/exclude` (a nested split
 * reads its creator fork's own).
 */
export function loadIgnoreInputs(
  root: Dir,
  rootPath: string,
  git: { readonly config: GitConfig | null },
  env: GitUserEnv,
  infoExclude?: Uint8Array | null,
): IgnoreInputs {
  const globalConfigs: GitConfig[] = [];
  for (const path of globalConfigPaths(env)) {
    const bytes = readUserFile(path);
    if (bytes) globalConfigs.push(parseGitConfig(bytes));
  }
  const excludesPath = resolveGlobalExcludesPath({
    repoConfig: git.config,
    globalConfigs,
    env,
    projectRoot: rootPath,
  });
  return {
    globalExcludes: excludesPath ? readUserFile(excludesPath) : null,
    infoExclude: infoExclude !== undefined
      ? infoExclude
      : readRel(root, ".git/info/exclude", MAX_EXCLUDES_BYTES),
    ignoreCase: git.config?.getBool("core", "ignorecase") ?? false,
  };
}

/** The tree-wide rules from these inputs, with `infoExclude` replaced when given (a fork's own). */
export function ignoreRulesOf(inputs: IgnoreInputs, infoExclude?: Uint8Array | null): IgnoreRules {
  return IgnoreRules.load({
    globalExcludes: inputs.globalExcludes,
    infoExclude: infoExclude === undefined ? inputs.infoExclude : infoExclude,
    ignoreCase: inputs.ignoreCase,
  });
}
