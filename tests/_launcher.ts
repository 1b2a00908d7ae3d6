/**
 * Runs a shell launcher (`./marsh`, `bin/marshd`) with a stand-in Deno that
 * records the arguments of every call and fails, so a test sees exactly
 * what the launcher passes to Deno without running anything.
 *
 * Needs `--allow-run` (bash and the launcher), read and write on the temp dir.
 *
 * @module
 */

/** The calls the stand-in Deno saw, each as its argument list. */
export interface LauncherCalls {
  /** Each call's arguments, in order. */
  readonly calls: string[][];
  /** The stand-in's path: what the launcher ran as Deno. */
  readonly deno: string;
  /** The environment the last call was given. */
  readonly env: Readonly<Record<string, string>>;
  /** What the launcher wrote on stderr. */
  readonly stderr: string;
}

/**
 * Runs `launcher args` with `MARSH_DENO` set to a recording stand-in and
 * `env` on top of a minimal environment.
 */
export async function launcherCalls(
  launcher: string,
  args: readonly string[],
  env: Readonly<Record<string, string>>,
): Promise<LauncherCalls> {
  const dir = await Deno.makeTempDir({ prefix: "marsh-launcher-" });
  try {
    const deno = `${dir}/deno`;
    // One record per call: the arguments NUL-terminated, then a newline.
    await Deno.writeTextFile(
      deno,
      `#!/usr/bin/env bash\n{ printf '%s\\0' "$@"; printf '\\n'; } >> '${dir}/calls'\nenv -0 > '${dir}/env'\nexit 3\n`,
    );
    await Deno.chmod(deno, 0o755);
    const out = await new Deno.Command(launcher, {
      args: [...args],
      clearEnv: true,
      env: { PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin", ...env, MARSH_DENO: deno },
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    const text = await Deno.readTextFile(`${dir}/calls`).catch((error) => {
      if (error instanceof Deno.errors.NotFound) return "";
      throw error;
    });
    const calls = text.split("\n").filter((r) => r !== "").map((r) => r.split("\0").slice(0, -1));
    // The environment of the last call.
    const envText = await Deno.readTextFile(`${dir}/env`).catch((error) => {
      if (error instanceof Deno.errors.NotFound) return "";
      throw error;
    });
    const given = Object.fromEntries(
      envText.split("\0").filter((e) => e !== "").map((
        e,
      ) => [e.slice(0, e.indexOf("=")), e.slice(e.indexOf("=") + 1)]),
    );
    return { calls, deno, env: given, stderr: new TextDecoder().decode(out.stderr) };
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
