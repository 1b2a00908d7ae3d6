/**
 * File names as `dir.ts` handles them: the checks that keep a
 * name inside its directory, raw (non-UTF-8) names as bytes and as shown in
 * messages, and Git's byte order of names.
 *
 * @module
 */

/** Decodes UTF-8, throwing `TypeError` on anything that is not. */
export const fatalUtf8 = new TextDecoder("utf-8", { fatal: true });

const encoder = new TextEncoder();

/** A raw name with printable ASCII kept and every other byte as `\xNN`. */
export function showName(raw: Uint8Array): string {
  return Array.from(
    raw,
    (b) => b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`,
  ).join("");
}

/** A listed name's bytes, NUL-terminated; refuses what a listing never yields. */
export function rawName(raw: Uint8Array): Uint8Array<ArrayBuffer> {
  if (raw.length === 0 || raw.includes(0) || raw.includes(0x2f)) {
    throw new TypeError(`invalid file name: "${showName(raw)}"`);
  }
  const out = new Uint8Array(raw.length + 1);
  out.set(raw);
  return out;
}

/** Rejects names that could leave the directory or that a path cannot carry. */
export function checkName(name: string, where: string): void {
  if (name === "" || name === "." || name === ".." || name.includes("/") || name.includes("\0")) {
    throw new TypeError(`invalid file name in ${where}: ${JSON.stringify(name)}`);
  }
}

/** The path of `name` in directory path `dir`, for messages. */
export function childPath(dir: string, name: string): string {
  return dir.endsWith("/") ? dir + name : `${dir}/${name}`;
}

/** A string's UTF-8 bytes. */
export function utf8(s: string): Uint8Array {
  return encoder.encode(s);
}

/** Orders names by their UTF-8 bytes, as Git sorts paths. */
export function compareNames(a: string, b: string): number {
  // For strings without surrogates, UTF-16 order equals code point order,
  // which equals UTF-8 byte order; fall back to bytes only when needed.
  if (a === b) return 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i), y = b.charCodeAt(i);
    if (x !== y) {
      if (x >= 0xd800 || y >= 0xd800) return compareBytes(encoder.encode(a), encoder.encode(b));
      return x - y;
    }
  }
  return a.length - b.length;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const d = (a[i] ?? 0) - (b[i] ?? 0);
    if (d !== 0) return d;
  }
  return a.length - b.length;
}
