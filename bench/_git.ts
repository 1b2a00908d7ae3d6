/**
 * Git for the benchmarks, run under a hardened environment: no system or
 * global config (a private empty `HOME`), no hooks, no fsmonitor, fixed
 * identity and dates so generated commits are reproducible. Private to
 * `bench/`.
 *
 * @module
 */

import { type CommandSpec, runChecked, runText } from "./_command.ts";

const FIXED_DATE = "2024-01-01T00:00:00Z";

const CONFIG = [
  "user.name=marsh bench",
  "user.email=bench@marsh.invalid",
  "init.defaultBranch=main",
  "commit.gpgSign=false",
  "core.hooksPath=/dev/null",
  "core.fsmonitor=false",
  "advice.detachedHead=false",
];

/**
 * A handle on the hardened Git environment; owns its temporary `HOME`.
 *
 * Needs `--allow-run=git`, `--allow-env` (reads `PATH`, sets the child's
 * environment) and read/write on the temp dir.
 */
export class HardenedGit implements AsyncDisposable {
  #home: string;
  #env: Readonly<Record<string, string>>;
  #closed = false;

  private constructor(home: string) {
    this.#home = home;
    this.#env = {
      PATH: Deno.env.get("PATH") ?? "/usr/local/bin:/usr/bin:/bin",
      HOME: home,
      XDG_CONFIG_HOME: `${home}/.config`,
      GIT_CONFIG_NOSYSTEM: "1",
      GIT_TERMINAL_PROMPT: "0",
      GIT_AUTHOR_DATE: FIXED_DATE,
      GIT_COMMITTER_DATE: FIXED_DATE,
      LC_ALL: "C",
      TZ: "UTC",
    };
  }

  /** Makes the private `HOME`. */
  static async create(): Promise<HardenedGit> {
    return new HardenedGit(await Deno.makeTempDir({ prefix: "marsh-bench-home-" }));
  }

  /** The spec of `git -C cwd <hardening -c flags> ...args`, for timing or running. */
  spec(cwd: string, args: readonly string[]): CommandSpec {
    if (this.#closed) throw new Error("HardenedGit is closed");
    return {
      cmd: "git",
      args: ["-C", cwd, ...CONFIG.flatMap((c) => ["-c", c]), ...args],
      env: this.#env,
      clearEnv: true,
    };
  }

  /**
   * Runs git and returns stdout as text.
   *
   * @throws {Error} when git fails; the message carries git's stderr.
   */
  run(cwd: string, args: readonly string[]): Promise<string> {
    return runText(this.spec(cwd, args));
  }

  /** Runs git and returns stdout as bytes. */
  runBytes(cwd: string, args: readonly string[]): Promise<Uint8Array> {
    return runChecked(this.spec(cwd, args));
  }

  /** Removes the private `HOME`. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    await Deno.remove(this.#home, { recursive: true });
  }

  [Symbol.asyncDispose](): Promise<void> {
    return this.close();
  }
}
