/**
 * The `marsh kits add` check, run by the CLI with `kitCheckFlags()`
 * (`flags.ts`) before it asks the daemon to register anything: the CLI
 * has no network and reads only the control dir, and the daemon has no
 * Docker permission (docs/architecture.md "Permissions"), so what needs the engine socket or a
 * chosen home directory is done here.
 *
 *     kit_check_main.ts --socket=PATH --control-dir=DIR [--home=DIR] IMAGE
 *
 * Checks that `--home` (when given) is an existing directory whose real
 * path obeys `checkKitHome`, and that the engine has IMAGE, or for a bare
 * Kit name its last build `marsh-kit/NAME:latest` (`findKitImage`). Prints
 * one JSON line,
 * `{"image_id":"sha256:…","image":"<the reference found>","home":"<real path>"|null}`. Exit 0
 * on success; 2 for a bad request, a missing image or home, or no engine;
 * 1 when the engine fails the call. Nothing is registered here.
 *
 * @module
 */

import { parseArgs } from "node:util";
import { DockerApi, DockerApiError, EngineUnreachableError } from "./docker_api.ts";
import { checkKitHome, checkKitImage, KitRuleError } from "../model/kit_rules.ts";
import { findKitImage, imageCandidates, KitBuildError } from "./kit_build.ts";

const WHO = "marsh kits add";

function fail(message: string, code: number): never {
  console.error(`${WHO}: ${message}`);
  Deno.exit(code);
}

/**
 * The real path of a chosen home, checked.
 *
 * @throws {KitRuleError} when it is missing, not a directory, or breaks `checkKitHome`
 */
function checkHome(home: string, controlDir: string): string {
  checkKitHome(home, controlDir);
  let real: string;
  try {
    real = Deno.realPathSync(home);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) {
      throw new KitRuleError(
        `invalid --home ${
          JSON.stringify(home)
        }: no such directory; make it first (mkdir -p ${home})`,
      );
    }
    if (error instanceof Deno.errors.PermissionDenied) {
      throw new KitRuleError(`invalid --home ${JSON.stringify(home)}: ${error.message}`);
    }
    throw error;
  }
  // Read permission covers the path given, not where a symlink leads: stat that path.
  if (!Deno.statSync(home).isDirectory) {
    throw new KitRuleError(`invalid --home ${JSON.stringify(home)}: not a directory`);
  }
  // A symlink may lead into a project's .marsh or the control dir: check where it lands.
  checkKitHome(real, controlDir, home);
  checkKitHome(real, Deno.realPathSync(controlDir), home);
  return real;
}

if (import.meta.main) {
  let parsed;
  try {
    parsed = parseArgs({
      args: Deno.args,
      options: {
        socket: { type: "string" },
        "control-dir": { type: "string" },
        home: { type: "string" },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    fail((error as Error).message, 2);
  }
  const { values, positionals } = parsed;
  const controlDir = values["control-dir"];
  const image = positionals[0];
  if (!values.socket || !controlDir || positionals.length !== 1 || image === undefined) {
    fail("usage: kit_check_main.ts --socket=PATH --control-dir=DIR [--home=DIR] IMAGE", 2);
  }
  try {
    checkKitImage(image);
    const home = values.home === undefined ? null : checkHome(values.home, controlDir);
    const api = new DockerApi(values.socket);
    const found = await findKitImage(api, image);
    if (found === null) {
      const tried = imageCandidates(image).slice(1).map((ref) => ` (nor a Kit build ${ref})`);
      fail(
        `no image ${JSON.stringify(image)}${tried.join("")} in the engine at ${values.socket}; ` +
          "build one with `marsh kit build NAME --from-host`, or load it into that engine " +
          "(`docker load`, `docker pull`); nothing was registered",
        2,
      );
    }
    console.log(JSON.stringify({ image_id: found.info.id, image: found.ref, home }));
  } catch (error) {
    if (error instanceof KitRuleError || error instanceof KitBuildError) fail(error.message, 2);
    if (error instanceof EngineUnreachableError) {
      fail(
        `${error.message}: start a private engine with \`marsh engine start\`, or set ` +
          "DOCKER_HOST=unix:///path/to/docker.sock; nothing was registered",
        2,
      );
    }
    if (error instanceof DockerApiError) {
      if (error.statusCode === 400) {
        fail(`the engine refused the image reference: ${error.message}`, 2);
      }
      fail(`the engine refused: ${error.message}; nothing was registered`, 1);
    }
    throw error;
  }
}
