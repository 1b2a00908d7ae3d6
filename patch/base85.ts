/**
 * Git's base85 (git/git `base85.c`): each group of 4 bytes, read big-endian,
 * becomes 5 characters; a short last group is padded with zero bytes.
 *
 * @module
 */

/** Git's base85 alphabet, in digit order. */
export const BASE85_ALPHABET =
  "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz!#$%&()*+-;<=>?@^_`{|}~";

const EN85 = new Uint8Array(85);
const DE85 = new Int16Array(256).fill(-1);
for (let i = 0; i < 85; i++) {
  const code = BASE85_ALPHABET.charCodeAt(i);
  EN85[i] = code;
  DE85[code] = i;
}

/**
 * Writes the base85 of `src[start, end)` into `dst` at `at` and returns the
 * position after the last character written (`at + ceil((end-start)/4)*5`).
 * Private to this folder: `binary_hunk.ts` uses it to fill a preallocated
 * patch without going through strings.
 */
export function encodeBase85Into(
  src: Uint8Array,
  start: number,
  end: number,
  dst: Uint8Array,
  at: number,
): number {
  let i = start;
  const whole = start + ((end - start) & ~3);
  for (; i < whole; i += 4) {
    at = put85(
      ((src[i]! << 24) | (src[i + 1]! << 16) | (src[i + 2]! << 8) | src[i + 3]!) >>> 0,
      dst,
      at,
    );
  }
  if (i < end) {
    // Git pads the last group with zero bytes.
    const b1 = i + 1 < end ? src[i + 1]! : 0;
    const b2 = i + 2 < end ? src[i + 2]! : 0;
    at = put85(((src[i]! << 24) | (b1 << 16) | (b2 << 8)) >>> 0, dst, at);
  }
  return at;
}

/** Writes the 5 base85 digits of the 32-bit `acc`, most significant first. */
function put85(acc: number, dst: Uint8Array, at: number): number {
  // Only the first quotient needs a float division; after it everything fits
  // in 31 bits, where `| 0` keeps V8 on integer arithmetic (10x faster).
  let q = Math.floor(acc / 85);
  dst[at + 4] = EN85[acc - q * 85]!;
  let r = q;
  q = (r / 85) | 0;
  dst[at + 3] = EN85[r - q * 85]!;
  r = q;
  q = (r / 85) | 0;
  dst[at + 2] = EN85[r - q * 85]!;
  r = q;
  q = (r / 85) | 0;
  dst[at + 1] = EN85[r - q * 85]!;
  dst[at] = EN85[q]!;
  return at + 5;
}

/**
 * Encodes `bytes` in Git's base85: `ceil(length/4)*5` characters.
 *
 * @example
 * ```ts
 * import { encodeBase85 } from "./base85.ts";
 * encodeBase85(new Uint8Array([0, 0, 0, 0])); // "00000"
 * ```
 */
export function encodeBase85(bytes: Uint8Array): string {
  const out = new Uint8Array(Math.ceil(bytes.length / 4) * 5);
  encodeBase85Into(bytes, 0, bytes.length, out, 0);
  return new TextDecoder().decode(out);
}

/**
 * Decodes `length` bytes from Git base85 `text`, which must hold exactly
 * `ceil(length/4)*5` characters (padding bytes are dropped).
 *
 * @throws {SyntaxError} When the text has the wrong length, a character
 * outside the alphabet, or a group above 0xffffffff.
 */
export function decodeBase85(text: string, length: number): Uint8Array {
  const groups = Math.ceil(length / 4);
  if (text.length !== groups * 5) {
    throw new SyntaxError(
      `Base85 text has the wrong length: ${text.length} characters for ${length} bytes`,
    );
  }
  const out = new Uint8Array(groups * 4);
  for (let g = 0; g < groups; g++) {
    let acc = 0;
    for (let k = 0; k < 5; k++) {
      const ch = text.charCodeAt(g * 5 + k);
      const digit = ch < 256 ? DE85[ch]! : -1;
      if (digit < 0) {
        throw new SyntaxError(`Invalid base85 character: "${text[g * 5 + k]}"`);
      }
      acc = acc * 85 + digit;
    }
    if (acc > 0xffffffff) {
      throw new SyntaxError(`Invalid base85 group: "${text.slice(g * 5, g * 5 + 5)}"`);
    }
    out[g * 4] = acc >>> 24;
    out[g * 4 + 1] = (acc >>> 16) & 0xff;
    out[g * 4 + 2] = (acc >>> 8) & 0xff;
    out[g * 4 + 3] = acc & 0xff;
  }
  return out.slice(0, length);
}
