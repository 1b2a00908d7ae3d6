/**
 * Test helper: a child process that writes to a journal and is killed with
 * SIGKILL, standing in for `kill -9` of the daemon.
 *
 * @module
 */

/** The Deno that runs the tests; the child runs on it too. */
export const DENO: string = Deno.env.get("MARSH_DENO") ?? Deno.execPath();

const CHILD = new URL("./testdata/journal_child.ts", import.meta.url).pathname;

/**
 * Runs `testdata/journal_child.ts MODE DB` with read and write on `dir`
 * only, waits until it prints `written`, and kills it with SIGKILL.
 * Needs `--allow-run` for {@linkcode DENO}.
 */
export async function killAfterWrite(mode: string, path: string, dir: string): Promise<void> {
  const child = new Deno.Command(DENO, {
    args: [
      "run",
      "--quiet",
      "--no-prompt",
      `--allow-read=${dir}`,
      `--allow-write=${dir}`,
      CHILD,
      mode,
      path,
    ],
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stderr = new Response(child.stderr).text();
  const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
  try {
    let out = "";
    for await (const chunk of child.stdout.pipeThrough(new TextDecoderStream())) {
      out += chunk;
      if (out.includes("written\n")) break;
    }
    if (!out.includes("written\n")) {
      throw new Error(`The child ended before writing: ${await stderr}`);
    }
    child.kill("SIGKILL");
    const status = await child.status;
    if (status.signal !== "SIGKILL") {
      throw new Error(`The child was not killed: ${JSON.stringify(status)}`);
    }
  } finally {
    clearTimeout(timer);
    // Reap the child in every case so no process outlives the test.
    await child.status;
    await stderr;
  }
}
