/**
 * Running a child process for the benchmarks, and failing loudly when it
 * fails. Private to `bench/`.
 *
 * @module
 */

/** One command line with where and how to run it. */
export interface CommandSpec {
  readonly cmd: string;
  readonly args: readonly string[];
  readonly cwd?: string;
  /** Environment of the child; with `clearEnv`, the only variables it sees. */
  readonly env?: Readonly<Record<string, string>>;
  readonly clearEnv?: boolean;
  /** Kill the command after this long (ms); the failure says it was killed. */
  readonly timeoutMs?: number;
}

/** The command line of a spec, for messages. */
export function describeCommand(spec: CommandSpec): string {
  return [spec.cmd, ...spec.args].join(" ");
}

/**
 * Runs `spec` to completion and returns its stdout.
 *
 * Needs `--allow-run` for `spec.cmd` (and `--allow-env` to clear or set the
 * environment).
 *
 * @throws {Error} when the command exits non-zero or is killed by a signal;
 * the message names the command and carries its stderr.
 */
export async function runChecked(spec: CommandSpec): Promise<Uint8Array> {
  const out = await new Deno.Command(spec.cmd, {
    args: [...spec.args],
    cwd: spec.cwd,
    env: spec.env ? { ...spec.env } : undefined,
    clearEnv: spec.clearEnv ?? false,
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
    signal: spec.timeoutMs === undefined ? undefined : AbortSignal.timeout(spec.timeoutMs),
  }).output();
  if (!out.success) {
    const stderr = new TextDecoder().decode(out.stderr).trim();
    const how = out.signal === null ? `exited with ${out.code}` : `was killed by ${out.signal}`;
    throw new Error(`Command "${describeCommand(spec)}" ${how}: ${stderr || "(no stderr)"}`);
  }
  return out.stdout;
}

/** Like {@linkcode runChecked}, decoding stdout as UTF-8. */
export async function runText(spec: CommandSpec): Promise<string> {
  return new TextDecoder().decode(await runChecked(spec));
}
