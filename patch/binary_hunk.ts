/**
 * Git's `GIT binary patch` body with `literal` hunks only (git/git `diff.c`
 * `emit_binary_diff_body`, read back by `apply.c` `parse_binary_hunk`).
 *
 * @module
 */

import { encodeBase85Into } from "./base85.ts";
import { compresses, zlibDeflate } from "./_zlib.ts";

/** Input bytes per base85 line; Git's line-length character says how many (A–Z 1–26, a–z 27–52). */
const LINE_BYTES = 52;

const encoder = new TextEncoder();

/**
 * The zlib level: 6 (zlib's default), or 0 (stored blocks) for contents
 * that do not compress (`compresses`), which the per-capture byte limit
 * would otherwise make slow to send.
 */
function deflateLevel(content: Uint8Array): 0 | 6 {
  return compresses(content) ? 6 : 0;
}

function lengthChar(bytes: number): number {
  return bytes <= 26 ? 0x41 + bytes - 1 : 0x61 + bytes - 27;
}

/**
 * Returns one literal hunk for `content`: `literal <size>\n`, the zlib
 * stream of `content` (deflated, or stored when it does not compress) in
 * base85 lines of up to 52 deflated bytes each
 * (a length character, then the base85 of that chunk), and a blank line.
 */
export function literalHunk(content: Uint8Array): Uint8Array {
  const deflated = zlibDeflate(content, deflateLevel(content));
  const header = encoder.encode(`literal ${content.length}\n`);
  const fullLines = Math.floor(deflated.length / LINE_BYTES);
  const rest = deflated.length % LINE_BYTES;
  const size = header.length +
    fullLines * (1 + (LINE_BYTES / 4) * 5 + 1) +
    (rest > 0 ? 1 + Math.ceil(rest / 4) * 5 + 1 : 0) +
    1;
  const out = new Uint8Array(size);
  out.set(header);
  let at = header.length;
  for (let i = 0; i < deflated.length; i += LINE_BYTES) {
    const end = Math.min(i + LINE_BYTES, deflated.length);
    out[at++] = lengthChar(end - i);
    at = encodeBase85Into(deflated, i, end, out, at);
    out[at++] = 0x0a;
  }
  out[at++] = 0x0a;
  return out;
}

/**
 * Returns the binary part of a file's patch: `GIT binary patch`, a literal
 * hunk of `newContent` (applied forwards) and one of `oldContent` (used by
 * `git apply -R`). Git would send a delta hunk when smaller; literal hunks
 * are always accepted, so none is ever produced.
 */
export function binaryPatch(oldContent: Uint8Array, newContent: Uint8Array): Uint8Array {
  const title = encoder.encode("GIT binary patch\n");
  const forward = literalHunk(newContent);
  const reverse = literalHunk(oldContent);
  const out = new Uint8Array(title.length + forward.length + reverse.length);
  out.set(title);
  out.set(forward, title.length);
  out.set(reverse, title.length + forward.length);
  return out;
}
