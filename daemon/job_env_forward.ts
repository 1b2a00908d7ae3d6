/**
 * The variables a new Kit job receives (docs/rules.md, "Environment
 * forwarding"), the one function the daemon calls for every job launch,
 * whoever asked for it:
 *
 * - the host or a shell branch (`caller`): its exported environment, of which
 *   only what may cross does (`crossingEnv`): credential-shaped names and
 *   values, `MARSH_*`, `DOCKER_*` and what Docker or marsh set never do;
 * - a job (`offer`, through its link or its in-job `marsh`): what its link
 *   offers, less what may not cross and what still matches its starting
 *   digest under this daemon's key (`acceptOffer`): an unchanged image `ENV`
 *   never passes to a child.
 *
 * Then the Kit's own `--env` names, from the caller's environment as it is:
 * registering a Kit with `--env NAME` is an explicit choice, so such a name
 * passes whatever it looks like (docs/kits.md, "Registering Kits"); only
 * the reserved names (`isReservedEnvName`) never do.
 *
 * @module
 */

import { acceptOffer, crossingEnv, type EnvDropReason, type EnvOffer } from "../model/job_env.ts";
import { isReservedEnvName } from "../model/env_name.ts";
import { envDigestMatches } from "../protocol/job_env_digest.ts";

/** Where a launch's variables come from. */
export type EnvSource =
  /** The host's or a shell branch's exported environment (a root job, or a shell branch's). */
  | { readonly kind: "caller"; readonly env: Readonly<Record<string, string>> }
  /** A job's offer (`linkOffer` of `model/job_env.ts`, made by the in-job client). */
  | { readonly kind: "offer"; readonly offer: EnvOffer };

/** What a new job gets: the container's received variables and `job.json`'s `forwarded`. */
export interface ForwardedEnv {
  /** The variables, beyond what Docker, marsh and the image set; sorted keys. */
  readonly env: Readonly<Record<string, string>>;
  /** Their names, sorted: `job.json`'s `forwarded`. */
  readonly forwarded: readonly string[];
  /** Offered variables the daemon dropped, and why (for the daemon's log; never values). */
  readonly dropped: readonly { readonly name: string; readonly why: EnvDropReason }[];
}

/**
 * The source of a request's variables: a job's connection makes an offer
 * (`env` with the link's starting `digests`), any other caller's `env` is its
 * exported environment. A caller that is not a job cannot make an offer, so
 * its `digests` are ignored.
 */
export function envSourceOf(
  fromJob: boolean,
  env: Readonly<Record<string, string>>,
  digests: Readonly<Record<string, string>> | undefined,
): EnvSource {
  return fromJob
    ? { kind: "offer", offer: { env, digests: digests ?? {} } }
    : { kind: "caller", env };
}

/**
 * The variables a new job receives from `source`, plus the Kit's own `--env`
 * names (`kitEnv`) the caller has, under this daemon's digest `key`
 * (`protocol/job_env_digest.ts`).
 */
export function forwardedEnv(
  key: Uint8Array,
  source: EnvSource,
  kitEnv: readonly string[],
): ForwardedEnv {
  let env: Record<string, string>;
  let dropped: { name: string; why: EnvDropReason }[] = [];
  let raw: Readonly<Record<string, string>>;
  if (source.kind === "caller") {
    raw = source.env;
    env = crossingEnv(raw);
  } else {
    raw = source.offer.env;
    const accepted = acceptOffer(
      source.offer,
      (name, value, digest) => envDigestMatches(key, name, value, digest),
    );
    env = { ...accepted.env };
    dropped = [...accepted.dropped];
  }
  for (const name of new Set(kitEnv)) {
    const value = raw[name];
    if (value === undefined || isReservedEnvName(name)) continue;
    env[name] = value;
    dropped = dropped.filter((d) => d.name !== name);
  }
  const sorted: Record<string, string> = {};
  for (const name of Object.keys(env).sort()) sorted[name] = env[name]!;
  return { env: sorted, forwarded: Object.keys(sorted), dropped };
}
