/**
 * The daemon's environment digest key (docs/rules.md, "Environment
 * forwarding"): random, made once at each daemon start, handed to the worker
 * with each Kit launch and never into a container. A copy is kept in the
 * control dir (`env.key`, hex, 0600, replaced at each start) so that the
 * daemon's user can check a `job.json`'s digests; nothing reads it back: a
 * restarted daemon has a new key, and no job outlives its daemon.
 *
 * Needs write access to the control dir.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { ENV_KEY_NAME } from "../protocol/control_dir.ts";
import { ENV_KEY_BYTES, newEnvKey } from "../protocol/job_env_digest.ts";

/** A fresh key, its copy written to `<home>/env.key` (atomically, mode 0600). */
export function makeEnvKey(home: string): Uint8Array {
  const key = newEnvKey();
  const path = `${home}/${ENV_KEY_NAME}`;
  const tmp = `${path}.${Deno.pid}.tmp`;
  try {
    Deno.removeSync(tmp);
  } catch (error) {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
  Deno.writeTextFileSync(tmp, `${Buffer.from(key).toString("hex")}\n`, {
    createNew: true,
    mode: 0o600,
  });
  Deno.chmodSync(tmp, 0o600);
  Deno.renameSync(tmp, path);
  return key;
}

/**
 * Reads the key a running daemon wrote at `<home>/env.key` (for checks of
 * `job.json`'s digests).
 *
 * @throws {TypeError} when the file holds no key
 */
export function readEnvKey(home: string): Uint8Array {
  const hex = Deno.readTextFileSync(`${home}/${ENV_KEY_NAME}`).trim();
  if (!new RegExp(`^[0-9a-f]{${ENV_KEY_BYTES * 2}}$`).test(hex)) {
    throw new TypeError(`${home}/${ENV_KEY_NAME} holds no environment digest key`);
  }
  return new Uint8Array(Buffer.from(hex, "hex"));
}
