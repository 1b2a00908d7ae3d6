/**
 * The in-job side of environment forwarding (docs/rules.md, "Environment
 * forwarding"): what a job's `marsh split` and its links offer the daemon
 * for a child job. Every variable of the process but those `job.json` marks
 * `""` (set by Docker or marsh), with the starting digest of each offered
 * name the job did not receive (`linkOffer` of `model/job_env.ts`); the
 * daemon drops those whose value still matches (`daemon/job_env_forward.ts`).
 *
 * The client is no boundary: a forged digest only loses the job a variable,
 * and what crosses is the daemon's decision.
 *
 * @module
 */

import { CliError } from "../client/cli_error.ts";
import type { CliIo } from "../client/io.ts";
import { type EnvOffer, type JobEnvRecord, linkOffer } from "../model/job_env.ts";

function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/**
 * `job.json`'s `env` and `forwarded` from its parsed JSON; a missing or
 * malformed field reads as empty (the offer then carries no digests, and the
 * daemon still filters what may cross).
 */
export function jobEnvOf(json: unknown): JobEnvRecord {
  const env: Record<string, string> = {};
  const forwarded: string[] = [];
  if (isObject(json)) {
    if (isObject(json.env)) {
      for (const [name, digest] of Object.entries(json.env)) {
        if (typeof digest === "string") env[name] = digest;
      }
    }
    if (Array.isArray(json.forwarded)) {
      for (const name of json.forwarded) if (typeof name === "string") forwarded.push(name);
    }
  }
  return { env, forwarded };
}

/**
 * The offer for a child launch from the process's `current` environment and
 * `job.json`'s text.
 *
 * @throws {SyntaxError} when `jobJson` is not JSON
 */
export function jobEnvOffer(current: Readonly<Record<string, string>>, jobJson: string): EnvOffer {
  return linkOffer(current, jobEnvOf(JSON.parse(jobJson)));
}

/**
 * `base` with `env()` the job's offer and `envDigests()` its digests, from
 * the process's environment and the `job.json` at `jobJsonPath`, read once
 * when a command first asks.
 *
 * Needs read access to `jobJsonPath` and the environment.
 */
export function offeringIo(base: CliIo, jobJsonPath: string): CliIo {
  let offer: EnvOffer | null = null;
  const get = (): EnvOffer => offer ??= readOffer(jobJsonPath);
  return Object.create(base, {
    env: { value: () => ({ ...get().env }) },
    envDigests: { value: () => ({ ...get().digests }) },
  }) as CliIo;
}

function readOffer(path: string): EnvOffer {
  try {
    return jobEnvOffer(Deno.env.toObject(), Deno.readTextFileSync(path));
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error);
    throw new CliError(`marsh: cannot read ${path} for this job's environment: ${why}`, 2, {
      cause: error,
    });
  }
}
