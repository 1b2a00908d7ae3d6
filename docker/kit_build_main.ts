/**
 * The `marsh kit build` process, run by the CLI with `kitBuildFlags()`
 * (`flags.ts`): it reads host files and speaks to one engine socket.
 *
 *     kit_build_main.ts --socket=PATH [--progress] NAME [--bin PROG]... [--file SRC:DST]...
 *
 * Prints the image id on stdout and, on stderr, one summary line and the
 * next command (`next: marsh kits add NAME --image NAME`). Exit 0 on
 * success; 2 for a bad request, a missing input or no engine (nothing is
 * imported); 1 when the engine refuses the import.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DockerApi, DockerApiError, EngineUnreachableError } from "./docker_api.ts";
import { buildKit, KitBuildError } from "./kit_build.ts";
import { type FileCopy, parseFileCopy, RootfsError } from "./rootfs.ts";

const WHO = "marsh kit build";

function fail(message: string, code: number): never {
  console.error(`${WHO}: ${message}`);
  Deno.exit(code);
}

if (import.meta.main) {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      options: {
        socket: { type: "string" },
        progress: { type: "boolean", default: false },
        bin: { type: "string", multiple: true, default: [] },
        file: { type: "string", multiple: true, default: [] },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    fail((error as Error).message, 2);
  }
  const { values, positionals } = parsed;
  if (!values.socket || positionals.length !== 1) {
    fail("usage: kit_build_main.ts --socket=PATH NAME [--bin PROG]... [--file SRC:DST]...", 2);
  }
  const progress = values.progress ? (line: string) => console.error(`${WHO}: ${line}`) : undefined;
  try {
    const files: FileCopy[] = values.file.map(parseFileCopy);
    const api = new DockerApi(values.socket);
    // Fail on a missing engine before reading anything large.
    await api.ping();
    const result = await buildKit(api, {
      name: positionals[0]!,
      bins: values.bin,
      files,
      deno: Deno.env.get("MARSH_DENO") ?? Deno.execPath(),
      path: Deno.env.get("PATH") ?? "/usr/bin:/bin",
      cwd: Deno.cwd(),
      ...(progress ? { onProgress: progress } : {}),
    });
    console.log(result.id);
    console.error(
      result.built
        ? `${WHO}: built ${result.ref} (${
          (result.bytes / 1e6).toFixed(1)
        } MB), tagged ${result.latest}`
        : `${WHO}: ${result.ref} is up to date, tagged ${result.latest}`,
    );
    const name = positionals[0]!;
    console.error(`next: marsh kits add ${name} --image ${name}`);
  } catch (error) {
    if (error instanceof KitBuildError || error instanceof RootfsError) fail(error.message, 2);
    if (error instanceof EngineUnreachableError) {
      fail(
        `${error.message}: start a private engine with \`marsh engine start\`, or set DOCKER_HOST=unix:///path/to/docker.sock`,
        2,
      );
    }
    if (error instanceof DockerApiError) fail(`the engine refused: ${error.message}`, 1);
    throw error;
  }
}
