/**
 * Environment forwarding through a job tree (docs/rules.md, "Environment
 * forwarding"): which variables cross from a caller to a job, what a job's
 * `job.json` records of its starting environment, what the link offers
 * when the job starts a child, and which offered variables the daemon
 * drops.
 *
 * - A root job receives the user's exported variables; a child receives
 *   what its parent received plus what the parent set or changed.
 * - Never crossing: credential-shaped names and values (the split filter,
 *   `model/env_filter.ts`), marsh's and the engine's own names
 *   (`MARSH_*`, `DOCKER_*`), and what Docker or marsh sets for every
 *   container (`HOSTNAME`, `HOME`, `PATH`); names that are not shell
 *   variable names (`model/env_name.ts`).
 * - The image's own `ENV` crosses only when the job changed it: `job.json`
 *   holds, per starting variable, a keyed digest of `NAME=VALUE` (`""` for
 *   the never-forwarded ones), the link attaches the starting digest of
 *   every offered name the job did not receive, and the daemon drops an
 *   offered variable whose value still matches it. The key is the
 *   daemon's, never in the container, so a job cannot test guesses of a
 *   value against `job.json`.
 *
 * Pure: the keyed digest itself (HMAC-SHA256) is passed in
 * (`protocol/job_env_digest.ts` computes it), so this module imports only
 * `model/`.
 *
 * @module
 */

import { isForwardable } from "./env_filter.ts";
import { isEnvName, isReservedEnvName } from "./env_name.ts";

/**
 * Set for every container by Docker (`HOSTNAME`) or marsh (`HOME`, `PATH`,
 * and the reserved `MARSH_*`): recorded with a `""` digest and never
 * forwarded; a child gets its own.
 */
export const CONTAINER_SET_ENV: readonly string[] = ["HOSTNAME", "HOME", "PATH"];

/** Whether `NAME=value` may cross from a caller or a job to a job. */
export function crossesToJob(name: string, value: string): boolean {
  return isEnvName(name) && !isReservedEnvName(name) &&
    !CONTAINER_SET_ENV.includes(name.toUpperCase()) && isForwardable(name, value);
}

/** The variables of `env` that cross, as a new object with sorted keys. */
export function crossingEnv(env: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const name of Object.keys(env).sort()) {
    if (crossesToJob(name, env[name]!)) out[name] = env[name]!;
  }
  return out;
}

/** The keyed digest of `NAME=VALUE` (lowercase hex), as the worker and daemon compute it. */
export type EnvDigest = (name: string, value: string) => string;

/** `job.json`'s `env` and `forwarded` (docs/rules.md, "Environment forwarding"). */
export interface JobEnvRecord {
  /** Every starting variable's digest; `""` for those set by Docker or marsh. */
  readonly env: Readonly<Record<string, string>>;
  /** The names received from the parent (or, for a root job, the user), sorted. */
  readonly forwarded: readonly string[];
}

/**
 * What `job.json` records of a container's starting environment `start`
 * (the image's `ENV`, the received variables and what Docker and marsh
 * set), given the `received` names.
 */
export function jobEnvRecord(
  start: Readonly<Record<string, string>>,
  received: readonly string[],
  digest: EnvDigest,
): JobEnvRecord {
  const env: Record<string, string> = {};
  for (const name of Object.keys(start).sort()) {
    const never = isReservedEnvName(name) || CONTAINER_SET_ENV.includes(name.toUpperCase());
    env[name] = never ? "" : digest(name, start[name]!);
  }
  return { env, forwarded: [...new Set(received)].sort() };
}

/** What a link sends with a child's launch: the variables, and starting digests of some. */
export interface EnvOffer {
  readonly env: Readonly<Record<string, string>>;
  /** The starting digest of each offered name the job did not receive. */
  readonly digests: Readonly<Record<string, string>>;
}

/**
 * The link's offer from the job's `current` environment: every variable
 * except those `job.json` marks `""`, with the starting digest of each
 * offered name the job did not receive (a received name passes on as is,
 * changed or not).
 */
export function linkOffer(
  current: Readonly<Record<string, string>>,
  job: JobEnvRecord,
): EnvOffer {
  const env: Record<string, string> = {};
  const digests: Record<string, string> = {};
  for (const name of Object.keys(current).sort()) {
    const d = job.env[name];
    if (d === "") continue;
    env[name] = current[name]!;
    if (d !== undefined && !job.forwarded.includes(name)) digests[name] = d;
  }
  return { env, digests };
}

/** Why the daemon dropped an offered variable. */
export type EnvDropReason = "unchanged" | "filtered";

/**
 * The daemon's rule for an offer: a variable that may not cross is dropped
 * (`filtered`), one whose value still matches its starting digest is
 * dropped (`unchanged`: the image's own `ENV`), the rest is the child's
 * environment. `matches` compares a value's digest with the offered one
 * (in constant time; `protocol/job_env_digest.ts`). A forged digest can
 * only forward the job's own variables, which it could do by changing them.
 */
export function acceptOffer(
  offer: EnvOffer,
  matches: (name: string, value: string, digest: string) => boolean,
): {
  readonly env: Readonly<Record<string, string>>;
  readonly dropped: readonly { readonly name: string; readonly why: EnvDropReason }[];
} {
  const env: Record<string, string> = {};
  const dropped: { name: string; why: EnvDropReason }[] = [];
  for (const name of Object.keys(offer.env).sort()) {
    const value = offer.env[name]!;
    const digest = offer.digests[name];
    if (!crossesToJob(name, value)) dropped.push({ name, why: "filtered" });
    else if (digest !== undefined && matches(name, value, digest)) {
      dropped.push({ name, why: "unchanged" });
    } else env[name] = value;
  }
  return { env, dropped };
}
