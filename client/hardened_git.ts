/**
 * Git as `marsh commit` runs it in the user's repository (docs/guide.md,
 * "Committing a checkpoint"): no hooks, no filters, no fsmonitor, no
 * signing program, no replace refs, no system or global config; of the
 * user's configuration only the identity (`user.name`, `user.email`, or the
 * `GIT_AUTHOR_*` / `GIT_COMMITTER_*` variables) is read, first, by a
 * separate `git config --get`, and passed in as variables.
 *
 * The CLI runs it, not the daemon: the CLI is the user (the commit and the
 * objects Git writes are theirs, and Git's ownership check of the
 * repository holds) and may already run programs; the daemon may run only
 * Deno and `unshare`.
 *
 * Needs `--allow-run` (git) and `--allow-env`.
 *
 * @module
 */

import { CliError } from "./cli_error.ts";

const dec = new TextDecoder();
const enc = new TextEncoder();

/** The options that switch off everything in a repository's config that could run a program. */
export const HARDENED_CONFIG = [
  "-c",
  "core.hooksPath=/dev/null",
  "-c",
  "core.fsmonitor=false",
  "-c",
  "commit.gpgSign=false",
  "-c",
  "core.useReplaceRefs=false",
] as const;

/** The identity variables Git reads, taken from the user's environment when set. */
const IDENTITY_VARS = [
  "GIT_AUTHOR_NAME",
  "GIT_AUTHOR_EMAIL",
  "GIT_AUTHOR_DATE",
  "GIT_COMMITTER_NAME",
  "GIT_COMMITTER_EMAIL",
  "GIT_COMMITTER_DATE",
] as const;

/** What one Git run said. */
export interface GitRun {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `git` with exactly `env`; a missing `git` is a {@linkcode CliError} (125). */
export async function runGit(
  git: string,
  args: readonly string[],
  env: Record<string, string>,
  stdin?: string,
): Promise<GitRun> {
  let child: Deno.ChildProcess;
  try {
    child = new Deno.Command(git, {
      args: [...args],
      clearEnv: true,
      env,
      stdin: stdin === undefined ? "null" : "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new CliError(`${git} is not on PATH: install Git; nothing was committed`, 125);
    }
    throw error;
  }
  if (stdin !== undefined) {
    const w = child.stdin.getWriter();
    await w.write(enc.encode(stdin));
    await w.close();
  }
  const out = await child.output();
  return { code: out.code, stdout: dec.decode(out.stdout), stderr: dec.decode(out.stderr) };
}

/** An identity to commit as, as the variables Git reads. */
export type Identity = Readonly<Record<string, string>>;

/**
 * The user's identity for a commit in the repository at `gitDir`: each of
 * `GIT_AUTHOR_*` and `GIT_COMMITTER_*` set in `userEnv` is kept; a missing
 * name or email comes from `user.name` / `user.email` as Git reads them for
 * this repository (its own config and the user's global one, not the
 * system's).
 *
 * @throws {CliError} 2 when no name or email can be found
 */
export async function readIdentity(
  git: string,
  gitDir: string,
  userEnv: Record<string, string>,
): Promise<Identity> {
  const out: Record<string, string> = {};
  for (const v of IDENTITY_VARS) if (userEnv[v]) out[v] = userEnv[v]!;
  const env: Record<string, string> = { GIT_CONFIG_NOSYSTEM: "1", LC_ALL: "C" };
  for (const v of ["PATH", "HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"]) {
    if (userEnv[v] !== undefined) env[v] = userEnv[v]!;
  }
  const read = async (key: string): Promise<string | null> => {
    const r = await runGit(git, [`--git-dir=${gitDir}`, "config", "--get", key], env);
    const value = r.stdout.trim();
    return r.code === 0 && value !== "" ? value : null;
  };
  for (const [what, key] of [["NAME", "user.name"], ["EMAIL", "user.email"]] as const) {
    if (out[`GIT_AUTHOR_${what}`] && out[`GIT_COMMITTER_${what}`]) continue;
    const value = await read(key);
    if (value === null) {
      throw new CliError(
        `no Git identity: ${key} is not set; set it with \`git config --global ${key} ...\` ` +
          `(or GIT_AUTHOR_${what}); nothing was committed`,
      );
    }
    out[`GIT_AUTHOR_${what}`] ??= value;
    out[`GIT_COMMITTER_${what}`] ??= value;
  }
  return out;
}

/**
 * The environment of a hardened run in the repository at `gitDir`: nothing
 * of the user's but `PATH` and the identity; no system or global config;
 * `HOME` points nowhere.
 */
export function hardenedEnv(
  gitDir: string,
  identity: Identity,
  userEnv: Record<string, string>,
): Record<string, string> {
  return {
    PATH: userEnv.PATH ?? "/usr/bin:/bin",
    HOME: "/nonexistent",
    GIT_DIR: gitDir,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_CONFIG_GLOBAL: "/dev/null",
    GIT_NO_REPLACE_OBJECTS: "1",
    GIT_TERMINAL_PROMPT: "0",
    LC_ALL: "C",
    ...identity,
  };
}
