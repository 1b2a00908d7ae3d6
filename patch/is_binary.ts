/**
 * Which contents get a binary patch instead of text hunks.
 *
 * @module
 */

/** How far Git looks for a NUL byte (xdiff-interface.c `FIRST_FEW_BYTES`). */
export const BINARY_SNIFF_BYTES = 8000;

/**
 * Reports whether Git treats `bytes` as binary: a NUL byte within the first
 * 8000 bytes (git/git `buffer_is_binary`).
 *
 * Everything else is safe as text for `git apply`, which splits lines on LF
 * only and copies the bytes after each line's one-character prefix
 * verbatim: bare CR, CRLF, invalid UTF-8, NUL bytes after the first 8000,
 * lines that look like patch syntax (`-`, `+`, ` `, `\`, `@@`, `diff --git`)
 * and very long lines all round-trip. A missing final newline is carried by
 * `\ No newline at end of file`.
 */
export function isBinary(bytes: Uint8Array): boolean {
  return bytes.subarray(0, BINARY_SNIFF_BYTES).indexOf(0) !== -1;
}
