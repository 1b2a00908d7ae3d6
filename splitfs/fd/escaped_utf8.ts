/**
 * Bytes that may not be UTF-8, as a string that keeps every byte apart:
 * valid UTF-8 decodes as usual, and each byte outside a valid sequence
 * becomes the lone surrogate U+DC00 + byte (Python's `surrogateescape`).
 * UTF-8 never encodes a surrogate, so two different byte strings never map
 * to the same string: Git's ignore patterns, which match bytes, match a
 * name that is not UTF-8 the same way after both are decoded here.
 *
 * @module
 */

/** A byte order mark is kept: it is part of a name, and a caller strips it where Git does. */
const fatal = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** `bytes` decoded as UTF-8, each byte of an invalid sequence as U+DC00 + byte. */
export function decodeEscaped(bytes: Uint8Array): string {
  try {
    return fatal.decode(bytes);
  } catch (error) {
    if (!(error instanceof TypeError)) throw error;
  }
  let out = "";
  let start = 0;
  let i = 0;
  while (i < bytes.length) {
    const n = sequenceLength(bytes, i);
    if (n > 0) {
      i += n;
      continue;
    }
    out += fatal.decode(bytes.subarray(start, i)) + String.fromCharCode(0xdc00 + bytes[i]!);
    i++;
    start = i;
  }
  return out + fatal.decode(bytes.subarray(start));
}

/** The length of the well-formed UTF-8 sequence at `i` (Unicode Table 3-7), or 0. */
function sequenceLength(b: Uint8Array, i: number): number {
  const b0 = b[i]!;
  if (b0 < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => {
    const v = b[i + k];
    return v !== undefined && v >= lo && v <= hi;
  };
  if (b0 >= 0xc2 && b0 <= 0xdf) return cont(1) ? 2 : 0;
  if (b0 === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if (b0 === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (b0 >= 0xe1 && b0 <= 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (b0 === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (b0 >= 0xf1 && b0 <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (b0 === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}
