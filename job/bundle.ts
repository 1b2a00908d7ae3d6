/**
 * Bundles the in-job client (`job/main.ts`, with commander and the shared
 * command line) into one JS file for `/run/marsh/marsh.js` (docs/architecture.md
 * "Platform choices"): the host's own Deno runs it inside Kit containers, so nothing is fetched,
 * compiled or cached there. Bundling takes about 0.1 s and needs no network
 * once `deno.json`'s npm packages are cached.
 *
 * Needs `--allow-run` for `deno`, and read and write on `out`'s directory.
 *
 * @module
 */

import { denoToolCommand, entryModule } from "../protocol/entrypoints.ts";

/** The entry the bundle is made from. */
export const JOB_CLIENT_ENTRY = entryModule("job-client");

/** `deno bundle` failed, or its output could not be put in place. */
export class JobBundleError extends Error {
  override name = "JobBundleError";
}

/**
 * Writes the in-job client to `out` (mode 0644), atomically: bundled to a
 * temp file beside it, then renamed over it.
 *
 * @param deno the Deno executable to bundle with (the pinned one, `denoPath()`)
 * @param out an absolute path whose directory exists
 * @throws {JobBundleError} with deno's stderr when bundling fails
 */
export async function bundleJobClient(deno: string, out: string): Promise<void> {
  const tmp = `${out}.tmp-${Deno.pid}`;
  let result: Deno.CommandOutput;
  try {
    result = await denoToolCommand(deno, "bundle", ["-o", tmp, JOB_CLIENT_ENTRY], {
      stdin: "null",
      stdout: "piped",
      stderr: "piped",
    }).output();
  } catch (cause) {
    throw new JobBundleError(`cannot run ${deno} to bundle the in-job client: ${message(cause)}`, {
      cause,
    });
  }
  try {
    if (!result.success) {
      const stderr = new TextDecoder().decode(result.stderr).trim();
      throw new JobBundleError(
        `${deno} bundle ${JOB_CLIENT_ENTRY} failed (exit ${result.code})${
          stderr ? `: ${stderr}` : ""
        }`,
      );
    }
    try {
      await Deno.chmod(tmp, 0o644);
      await Deno.rename(tmp, out);
    } catch (cause) {
      throw new JobBundleError(`cannot write the in-job client to ${out}: ${message(cause)}`, {
        cause,
      });
    }
  } finally {
    await Deno.remove(tmp).catch((error) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
      // Renamed into place, or never written.
    });
  }
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
