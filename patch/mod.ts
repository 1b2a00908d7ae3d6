/**
 * A pure-TypeScript writer of Git patches: given the changed paths of a
 * tree (as {@linkcode FileChange}s), it produces the same sections as
 * `git diff --full-index --binary --no-renames`, ready for `git apply`,
 * `git apply -R` and, with the blobs written as loose objects,
 * `git apply --3way`. It never runs Git and does no I/O.
 *
 * Text changes become unified hunks with full blob ids on the index lines;
 * binary changes (a NUL in the first 8000 bytes) and text diffs that run
 * past their deadline become `GIT binary patch` literal hunks (zlib and
 * base85, no delta).
 *
 * @example
 * ```ts
 * import { writeFilePatch } from "./mod.ts";
 * const enc = new TextEncoder();
 * const { status, patch } = writeFilePatch({
 *   path: "hello.txt",
 *   old: { mode: 0o100644, bytes: enc.encode("hi\n") },
 *   new: { mode: 0o100644, bytes: enc.encode("hello\n") },
 * });
 * // status === "M"; patch holds "diff --git a/hello.txt b/hello.txt\n…"
 * ```
 *
 * @module
 */

export type { ChangeStatus, FileChange, GitMode, Side } from "./change.ts";
export { blobId, ZERO_ID } from "./blob_id.ts";
export { type LooseObject, looseObject } from "./loose_object.ts";
export { cQuote, quotePrefixed, type QuotePrefixedOptions } from "./quote.ts";
export { BASE85_ALPHABET, decodeBase85, encodeBase85 } from "./base85.ts";
export { binaryPatch, literalHunk } from "./binary_hunk.ts";
export { type TextHunkOptions, textHunks } from "./text_hunk.ts";
export { BINARY_SNIFF_BYTES, isBinary } from "./is_binary.ts";
export { type FilePatch, filesLine, writeFilePatch, type WritePatchOptions } from "./writer.ts";
