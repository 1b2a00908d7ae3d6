/**
 * The keyed digest of a job's starting variables (docs/rules.md,
 * "Environment forwarding"): HMAC-SHA256 of `NAME=VALUE` under a random key
 * the daemon makes at its start and hands the worker with each Kit
 * capability; the key never enters a container. The worker writes the
 * digests into `job.json`; the daemon checks a link's offer against them
 * (`acceptOffer` in `model/job_env.ts`).
 *
 * Needs no permission.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHmac, randomBytes, timingSafeEqual } from "node:crypto";

/** Bytes of a daemon's digest key. */
export const ENV_KEY_BYTES = 32;

/** A fresh random key, once per daemon. */
export function newEnvKey(): Uint8Array {
  return new Uint8Array(randomBytes(ENV_KEY_BYTES));
}

function checkKey(key: Uint8Array): void {
  if (key.length !== ENV_KEY_BYTES) {
    throw new TypeError(`an environment digest key has ${ENV_KEY_BYTES} bytes, not ${key.length}`);
  }
}

/**
 * HMAC-SHA256 of `NAME=VALUE` under `key`, lowercase hex.
 *
 * @throws {TypeError} for a key that is not {@linkcode ENV_KEY_BYTES} long
 */
export function envDigest(key: Uint8Array, name: string, value: string): string {
  checkKey(key);
  return createHmac("sha256", key).update(`${name}=${value}`, "utf8").digest("hex");
}

/**
 * Whether `digest` is `NAME=VALUE`'s under `key`, compared in constant
 * time; false for anything that is not 64 hex digits.
 */
export function envDigestMatches(
  key: Uint8Array,
  name: string,
  value: string,
  digest: string,
): boolean {
  if (!/^[0-9a-f]{64}$/.test(digest)) return false;
  const want = new Uint8Array(Buffer.from(envDigest(key, name, value), "hex"));
  return timingSafeEqual(want, new Uint8Array(Buffer.from(digest, "hex")));
}
