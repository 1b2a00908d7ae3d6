/**
 * Git loose blob objects, ready to be written under an `objects/` directory.
 *
 * @module
 */

import { blobHeader, blobId } from "./blob_id.ts";
import { compresses, zlibDeflate } from "./_zlib.ts";

/**
 * Git's own level for loose objects (`core.looseCompression` unset): best
 * speed; contents that do not compress are stored (Git reads either).
 */
const LOOSE_LEVEL = 1;

/** A blob in Git's loose object format. */
export interface LooseObject {
  /** The blob's 40-hex object id. */
  readonly id: string;
  /** Where it lives relative to an objects directory: `ab/cdef…` (38 hex after the slash). */
  readonly path: string;
  /** The zlib-deflated `blob <len>\0<bytes>` to write at `path`. */
  readonly compressed: Uint8Array;
}

/**
 * Encodes `bytes` as a Git loose blob object. Writing `compressed` to
 * `<objects>/<path>` (creating the two-hex directory) makes the blob readable
 * by `git cat-file`, so `git apply --3way` can find a patch's preimage.
 *
 * This does no I/O; the caller writes the file (Git expects it read-only,
 * mode 0444, and never rewrites an existing object).
 */
export function looseObject(bytes: Uint8Array): LooseObject {
  const id = blobId(bytes);
  const header = blobHeader(bytes.length);
  const raw = new Uint8Array(header.length + bytes.length);
  raw.set(header);
  raw.set(bytes, header.length);
  return {
    id,
    path: `${id.slice(0, 2)}/${id.slice(2)}`,
    compressed: zlibDeflate(raw, compresses(bytes) ? LOOSE_LEVEL : 0),
  };
}
