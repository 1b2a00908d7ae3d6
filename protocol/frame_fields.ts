/**
 * The field rules the daemon socket's frame parsers share (`protocol/daemon.ts` and its family
 * modules): each reader throws the family's own error, so a malformed frame is answered as that
 * family's protocol error.
 *
 * @module
 */

/** Longest string field, unless a reader is given less. */
export const MAX_STRING = 256 * 1024;
/** Most variables in an `env` or `envDigests` record, and the longest name. */
export const MAX_ENV_VARS = 4096;
export const MAX_ENV_NAME = 1024;
/** An HMAC-SHA256 in lowercase hex: an offer's starting digest (`protocol/job_env_digest.ts`). */
export const ENV_DIGEST_HEX = /^[0-9a-f]{64}$/;

/** A plain object (not null, not an array). */
export function isObject(x: unknown): x is Record<string, unknown> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

/** The shared readers, each throwing `new E(message)` for what it rejects. */
export interface FieldReaders {
  /** A string field of at most `max` characters. */
  str(x: Record<string, unknown>, key: string, max?: number): string;
  /** A boolean field. */
  bool(x: Record<string, unknown>, key: string): boolean;
  /** A list of at most `maxItems` strings of at most `max` characters each. */
  strings(x: Record<string, unknown>, key: string, maxItems: number, max: number): string[];
  /** An environment record: names to strings, bounded; `what` names it in the error. */
  env(x: unknown, what?: string): Record<string, string>;
  /** An offer's starting digests: an environment record whose values are {@linkcode ENV_DIGEST_HEX}. */
  envDigests(x: unknown, what?: string): Record<string, string>;
}

/** The readers for a family whose malformed frames throw `E`. */
export function fieldReaders(E: new (message: string) => Error): FieldReaders {
  const env = (x: unknown, what = "env"): Record<string, string> => {
    if (!isObject(x)) throw new E(`malformed ${what}`);
    const out: Record<string, string> = {};
    const entries = Object.entries(x);
    if (entries.length > MAX_ENV_VARS) throw new E(`malformed ${what}: too many variables`);
    for (const [k, v] of entries) {
      if (typeof v !== "string" || k.length > MAX_ENV_NAME || v.length > MAX_STRING) {
        throw new E(`malformed ${what}`);
      }
      out[k] = v;
    }
    return out;
  };
  return {
    str(x, key, max = MAX_STRING) {
      const v = x[key];
      if (typeof v !== "string" || v.length > max) {
        throw new E(`malformed ${String(x.t)} frame: ${key}`);
      }
      return v;
    },
    bool(x, key) {
      const v = x[key];
      if (typeof v !== "boolean") throw new E(`malformed ${String(x.t)} frame: ${key}`);
      return v;
    },
    strings(x, key, maxItems, max) {
      const v = x[key];
      if (
        !Array.isArray(v) || v.length > maxItems ||
        !v.every((s) => typeof s === "string" && s.length <= max)
      ) {
        throw new E(`malformed ${String(x.t)} frame: ${key}`);
      }
      return v;
    },
    env,
    envDigests(x, what = "env digests") {
      const out = env(x, what);
      for (const digest of Object.values(out)) {
        if (!ENV_DIGEST_HEX.test(digest)) throw new E(`malformed ${what}`);
      }
      return out;
    },
  };
}
