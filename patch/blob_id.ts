/**
 * Git object ids for blobs.
 *
 * @module
 */

import { createHash } from "node:crypto";

/** The all-zero object id Git prints for a missing side (`index 0000…..abcd…`). */
export const ZERO_ID = "0".repeat(40);

/** The header Git hashes and stores before a blob's bytes: `blob <len>\0`. */
export function blobHeader(length: number): Uint8Array {
  return new TextEncoder().encode(`blob ${length}\0`);
}

/**
 * Returns Git's blob id for `bytes`: the hex SHA-1 of `blob <len>\0<bytes>`,
 * which is what `git hash-object` prints for the same content.
 *
 * @example
 * ```ts
 * import { blobId } from "./blob_id.ts";
 * blobId(new Uint8Array()); // "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
 * ```
 */
export function blobId(bytes: Uint8Array): string {
  return createHash("sha1").update(blobHeader(bytes.length)).update(bytes).digest("hex");
}
