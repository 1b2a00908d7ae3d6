/**
 * File system helpers for the benchmarks. Private to `bench/`.
 *
 * @module
 */

/** Whether `path` exists (without following a final symlink). */
export async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}
