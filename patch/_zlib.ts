/**
 * zlib streams for loose objects and binary hunks, private to `patch/`,
 * through Deno's native `node:zlib`: the pure-JS deflater it replaces took
 * most of a small capture's time on a binary file (docs/engine.md,
 * "Capture cost").
 *
 * @module
 */

import { deflateSync } from "node:zlib";

/** Contents at least this big are sampled to see whether deflating pays. */
const SAMPLE_FROM = 64 << 10;
const SAMPLE_BYTES = 16 << 10;

/** The zlib stream (RFC 1950) of `bytes` at `level` (0 stores, 1 fastest, 9 smallest). */
export function zlibDeflate(bytes: Uint8Array, level: number): Uint8Array {
  const out = deflateSync(bytes, { level });
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

/**
 * Whether `bytes` is worth deflating: true below 64 KiB, else when one of
 * its samples at a quarter, half and three quarters shrinks. Compressed
 * media and archives are common among large changed files; storing them
 * costs a few bytes per 64 KiB and saves most of the time.
 */
export function compresses(bytes: Uint8Array): boolean {
  if (bytes.length < SAMPLE_FROM) return true;
  for (const fraction of [0.25, 0.5, 0.75]) {
    const from = Math.floor(bytes.length * fraction);
    const sample = bytes.subarray(from, from + SAMPLE_BYTES);
    if (zlibDeflate(sample, 1).length < sample.length * 0.97) return true;
  }
  return false;
}
