/**
 * `registry_check_main.ts [--write]`: checks (or, with `--write`, rewrites)
 * the blocks the entrypoint registry generates into `./marsh`, `bin/marshd`
 * and docs/architecture.md (`tools/registry_render.ts`). `deno task check`
 * runs it: a launcher whose flags disagree with `protocol/entrypoints.ts`
 * fails the check, with the command that fixes it.
 *
 * Usage: `deno run --allow-read=. --allow-write=. tools/registry_check_main.ts [--write]`
 *
 * @module
 */

import { generatedFiles, RegistryRenderError, replaceBlock } from "./registry_render.ts";

const root = new URL("../", import.meta.url).pathname;

/**
 * The files whose generated block differs from the registry's (after
 * rewriting them when `write`).
 *
 * @throws {RegistryRenderError} when a file's markers are missing or doubled
 */
export function checkGenerated(write: boolean, dir = root): string[] {
  const stale: string[] = [];
  for (const f of generatedFiles()) {
    const path = `${dir}${f.path}`;
    const text = Deno.readTextFileSync(path);
    let want: string;
    try {
      want = replaceBlock(text, f.leader, f.block);
    } catch (error) {
      if (error instanceof RegistryRenderError) {
        throw new RegistryRenderError(`${f.path}: ${error.message}`);
      }
      throw error;
    }
    if (want === text) continue;
    stale.push(f.path);
    if (write) Deno.writeTextFileSync(path, want);
  }
  return stale;
}

if (import.meta.main) {
  const write = Deno.args.includes("--write");
  try {
    const stale = checkGenerated(write);
    if (stale.length > 0 && !write) {
      console.error(
        `${stale.join(", ")}: differs from protocol/entrypoints.ts; run ` +
          "./bin/deno run --allow-read=. --allow-write=. tools/registry_check_main.ts --write",
      );
      Deno.exit(1);
    }
    if (write) { for (const f of stale) console.log(`rewrote ${f}`); }
  } catch (error) {
    if (!(error instanceof RegistryRenderError)) throw error;
    console.error(error.message);
    Deno.exit(1);
  }
}
