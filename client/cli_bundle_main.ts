/**
 * `cli_bundle_main.ts --deno=DENO --dir=DIR`: bundles the host CLI into DIR
 * (`buildCliBundle`) and prints the bundle's path. The launcher (`./marsh`)
 * runs it when its bundle is missing or stale, with the `cli-bundle` flags of
 * `protocol/entrypoints.ts`.
 * On failure it prints why on stderr and exits 1; the launcher then runs the
 * sources.
 *
 * @module
 */

import { buildCliBundle, CliBundleError } from "./cli_bundle.ts";

function arg(name: string): string {
  const prefix = `--${name}=`;
  const found = Deno.args.find((a) => a.startsWith(prefix))?.slice(prefix.length);
  if (!found?.startsWith("/")) {
    console.error(`cli_bundle_main.ts: --${name}=ABSOLUTE_PATH is required`);
    Deno.exit(2);
  }
  return found;
}

if (import.meta.main) {
  try {
    console.log(await buildCliBundle(arg("deno"), arg("dir")));
  } catch (error) {
    if (!(error instanceof CliBundleError)) throw error;
    console.error(`marsh: the CLI is not bundled: ${error.message}`);
    Deno.exit(1);
  }
}
