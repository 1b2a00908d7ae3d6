/**
 * A Kit container's starting environment and what `job.json` records of it
 * (docs/rules.md, "Environment forwarding"; docs/kits.md, "What a container
 * gets"):
 *
 * - the variables the daemon forwards (`launch.env`), checked again here so
 *   a daemon fault cannot hand a job a credential: one passes when it may
 *   cross to a job or is one of the Kit's `--env` names, and never when it
 *   is reserved (`HOME`, `PATH`, `MARSH_*`, `DOCKER_*`);
 * - then `HOME`, `MARSH_JOB`, and with a job capability `PATH` (the links,
 *   then the image's) and `MARSH_ENTRY=1`;
 * - underneath, the image's own `Env`, and Docker's `HOSTNAME`.
 *
 * `job.json`'s `env` digests every starting variable under the daemon's key
 * (the image's `ENV` too, so an unchanged one is never forwarded by a
 * child), `""` for what Docker and marsh set; `forwarded` lists the names
 * received. The key itself goes nowhere near the container.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { ENTRY_ENV, JOB_ENV, type JobJson, jobPath } from "../protocol/job_capability.ts";
import type { KitCap, KitLaunch } from "../protocol/kit_launch.ts";
import { isReservedEnvName } from "../model/env_name.ts";
import { crossesToJob, type JobEnvRecord, jobEnvRecord } from "../model/job_env.ts";
import { envDigest } from "../protocol/job_env_digest.ts";

/**
 * The image's `PATH`: the last `PATH=` of its config's `Env`, or `null`
 * when it has none (or an empty one, which the engine's default then
 * replaces rather than leaving the cwd on the search path).
 */
export function imagePath(env: readonly string[]): string | null {
  const path = env.findLast((e) => e.startsWith("PATH="))?.slice(5);
  return path === undefined || path === "" ? null : path;
}

/** The variables of `launch.env` the container receives, sorted by name. */
export function receivedEnv(launch: KitLaunch): Record<string, string> {
  const kitNames = new Set(launch.kit.env);
  const out: Record<string, string> = {};
  for (const name of Object.keys(launch.env).sort()) {
    const value = launch.env[name]!;
    if (isReservedEnvName(name)) continue;
    if (crossesToJob(name, value) || kitNames.has(name)) out[name] = value;
  }
  return out;
}

/**
 * The container's `Env`: the received variables, then `HOME` and
 * `MARSH_JOB`; with a job capability also the starting `PATH` (`jobPath` of
 * `basePath`, the image's `PATH` as {@linkcode imagePath} reads it) and
 * `MARSH_ENTRY=1`.
 */
export function kitEnv(launch: KitLaunch, home: string, basePath: string | null): string[] {
  const env = Object.entries(receivedEnv(launch)).map(([name, value]) => `${name}=${value}`);
  env.push(`HOME=${home}`, `${JOB_ENV}=${launch.job}`);
  if (launch.cap !== null) env.push(`PATH=${jobPath(basePath)}`, `${ENTRY_ENV}=1`);
  return env;
}

/** `NAME=VALUE` entries as a map; a later entry wins, one without `=` is skipped. */
function entries(list: readonly string[]): Record<string, string> {
  const out: Record<string, string> = {};
  for (const e of list) {
    const at = e.indexOf("=");
    if (at > 0) out[e.slice(0, at)] = e.slice(at + 1);
  }
  return out;
}

/**
 * The container's starting environment as its first process sees it: the
 * image's `Env` (`imageEnv`), the container's `Env` (`containerEnv`) over
 * it, and Docker's `HOSTNAME`.
 */
export function startEnv(
  imageEnv: readonly string[],
  containerEnv: readonly string[],
): Record<string, string> {
  return { ...entries(imageEnv), ...entries(containerEnv), HOSTNAME: "" };
}

/**
 * `job.json`'s `env` and `forwarded` for a container starting with
 * `containerEnv` on an image whose `Env` is `imageEnv`, under the launch's
 * key.
 */
export function kitEnvRecord(
  cap: KitCap,
  imageEnv: readonly string[],
  containerEnv: readonly string[],
  received: readonly string[],
): JobEnvRecord {
  const key = new Uint8Array(Buffer.from(cap.envKey, "hex"));
  return jobEnvRecord(
    startEnv(imageEnv, containerEnv),
    received,
    (name, value) => envDigest(key, name, value),
  );
}

/** `/run/marsh/job.json` for `cap`: the daemon's part, the starting `PATH` and `record`, in spec order. */
export function jobJson(cap: KitCap, basePath: string | null, record: JobEnvRecord): JobJson {
  const { version, job, name, spawn, registered, socket, limits } = cap.job;
  return {
    version,
    job,
    name,
    spawn,
    registered,
    socket,
    path: jobPath(basePath),
    limits,
    env: record.env,
    forwarded: record.forwarded,
  };
}
