/**
 * A small deterministic tar writer (POSIX ustar, with pax extended headers
 * for names and link targets that do not fit), and a reader for the same
 * subset. Written by hand rather than taken from `npm:tar-stream` because
 * the Kit image's tag is the hash of these bytes: every header field must
 * be ours to fix (no uname/gname lookup, no clock, no padding choices made
 * elsewhere), and the subset needed (directories, regular files, symlinks)
 * is a few dozen lines.
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** One member of an archive. `path` is relative, without a leading `/` or a trailing `/`. */
export type TarEntry =
  | {
    readonly type: "dir";
    readonly path: string;
    readonly mode: number;
    readonly uid: number;
    readonly gid: number;
  }
  | {
    readonly type: "file";
    readonly path: string;
    readonly mode: number;
    readonly uid: number;
    readonly gid: number;
    readonly data: Uint8Array;
  }
  | {
    readonly type: "symlink";
    readonly path: string;
    readonly mode: number;
    readonly uid: number;
    readonly gid: number;
    readonly target: string;
  };

/** An archive this module cannot write or read. */
export class TarError extends Error {
  override name = "TarError";
}

const BLOCK = 512;
/** Every member's mtime: the archive must not depend on when or where it was made. */
export const FIXED_MTIME = 0;

const enc = new TextEncoder();
const dec = new TextDecoder();

function checkPath(path: string): void {
  if (
    path === "" || path.startsWith("/") || path.endsWith("/") || path.includes("\0") ||
    path.split("/").some((c) => c === "" || c === "." || c === "..")
  ) {
    throw new TarError(`invalid member path: ${JSON.stringify(path)}`);
  }
}

function octal(value: number, width: number): string {
  // width - 1 digits and a NUL, as ustar asks.
  const s = value.toString(8);
  if (s.length > width - 1) {
    throw new TarError(`value too large for a ${width}-byte field: ${value}`);
  }
  return s.padStart(width - 1, "0");
}

function put(header: Uint8Array, offset: number, width: number, text: string | Uint8Array): void {
  const bytes = typeof text === "string" ? enc.encode(text) : text;
  if (bytes.length > width) throw new TarError(`field overflow at ${offset}`);
  header.set(bytes, offset);
}

function header(
  name: Uint8Array,
  prefix: string,
  typeflag: string,
  mode: number,
  uid: number,
  gid: number,
  size: number,
  linkname: Uint8Array,
): Uint8Array {
  const h = new Uint8Array(BLOCK);
  put(h, 0, 100, name);
  put(h, 100, 8, octal(mode & 0o7777, 8));
  put(h, 108, 8, octal(uid, 8));
  put(h, 116, 8, octal(gid, 8));
  put(h, 124, 12, octal(size, 12));
  put(h, 136, 12, octal(FIXED_MTIME, 12));
  put(h, 148, 8, "        ");
  put(h, 156, 1, typeflag);
  put(h, 157, 100, linkname);
  put(h, 257, 6, "ustar\0");
  put(h, 263, 2, "00");
  put(h, 345, 155, prefix);
  let sum = 0;
  for (const b of h) sum += b;
  put(h, 148, 8, `${sum.toString(8).padStart(6, "0")}\0 `);
  return h;
}

/** One pax record: `"<len> <key>=<value>\n"`, where len counts itself. */
function paxRecord(key: string, value: string): string {
  const body = ` ${key}=${value}\n`;
  const bodyLen = enc.encode(body).length;
  let len = bodyLen + 1;
  while (String(len).length + bodyLen !== len) len = String(len).length + bodyLen;
  return `${len}${body}`;
}

function padded(data: Uint8Array): Uint8Array[] {
  const rest = data.length % BLOCK;
  return rest === 0 ? [data] : [data, new Uint8Array(BLOCK - rest)];
}

/** Whether a value fits a ustar field as is: ASCII without NUL, at most `width` bytes. */
function fits(text: string, width: number): boolean {
  // deno-lint-ignore no-control-regex
  return text.length <= width && /^[\x01-\x7f]*$/.test(text);
}

/**
 * Splits a name into ustar's `prefix` (155 bytes) and `name` (100 bytes) at
 * a `/`, or says it needs a pax record.
 */
function ustarSplit(name: string): { prefix: string; name: string } | null {
  if (fits(name, 100)) return { prefix: "", name };
  if (!fits(name, 256)) return null;
  const trailing = name.endsWith("/") ? 1 : 0;
  for (let i = name.length - 1 - trailing; i > 0; i--) {
    if (name[i] !== "/") continue;
    const prefix = name.slice(0, i);
    const rest = name.slice(i + 1);
    if (prefix.length > 155) continue;
    return rest.length <= 100 && rest !== "" ? { prefix, name: rest } : null;
  }
  return null;
}

/**
 * Writes `entries` in the order given (callers sort them) and the two zero
 * blocks that end an archive. Every member gets mtime {@linkcode FIXED_MTIME},
 * no user or group name, and the uid, gid and mode bits given; so the same
 * entries always give the same bytes.
 *
 * @throws {TarError} on a path that is absolute, empty or has `.`/`..` components
 */
export function writeTar(entries: Iterable<TarEntry>): Uint8Array {
  const parts: Uint8Array[] = [];
  for (const e of entries) {
    checkPath(e.path);
    const name = e.type === "dir" ? `${e.path}/` : e.path;
    const link = e.type === "symlink" ? e.target : "";
    if (e.type === "symlink" && (link === "" || link.includes("\0"))) {
      throw new TarError(`invalid symlink target for ${e.path}: ${JSON.stringify(link)}`);
    }
    const split = ustarSplit(name);
    const pax: string[] = [];
    if (!split) pax.push(paxRecord("path", name));
    if (!fits(link, 100)) pax.push(paxRecord("linkpath", link));
    if (pax.length > 0) {
      const body = enc.encode(pax.join(""));
      // The pax header's own name only needs to be stable and short.
      const paxName = enc.encode(`PaxHeaders/${enc.encode(name).length}`);
      parts.push(
        header(paxName, "", "x", 0o644, 0, 0, body.length, new Uint8Array()),
        ...padded(body),
      );
    }
    const shortLink = fits(link, 100) ? enc.encode(link) : new Uint8Array();
    const typeflag = e.type === "dir" ? "5" : e.type === "symlink" ? "2" : "0";
    const size = e.type === "file" ? e.data.length : 0;
    // With a pax `path` record the ustar name stays empty: no reader mistakes a truncation for it.
    const name100 = enc.encode(split?.name ?? "");
    parts.push(
      header(name100, split?.prefix ?? "", typeflag, e.mode, e.uid, e.gid, size, shortLink),
    );
    if (e.type === "file") parts.push(...padded(e.data));
  }
  parts.push(new Uint8Array(2 * BLOCK));
  let total = 0;
  for (const p of parts) total += p.length;
  const out = new Uint8Array(total);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

function field(h: Uint8Array, offset: number, width: number): string {
  const raw = h.subarray(offset, offset + width);
  const nul = raw.indexOf(0);
  return dec.decode(nul < 0 ? raw : raw.subarray(0, nul));
}

function number(h: Uint8Array, offset: number, width: number): number {
  const s = field(h, offset, width).trim();
  if (!/^[0-7]*$/.test(s)) {
    throw new TarError(`not an octal number at ${offset}: ${JSON.stringify(s)}`);
  }
  return s === "" ? 0 : parseInt(s, 8);
}

function parsePax(body: Uint8Array): Map<string, string> {
  const out = new Map<string, string>();
  const text = dec.decode(body);
  for (const m of text.matchAll(/(\d+) ([^=]+)=([^\n]*)\n/g)) out.set(m[2]!, m[3]!);
  return out;
}

/**
 * Reads an archive of directories, regular files and symlinks (ustar, with
 * pax `path`/`linkpath` records, and the `prefix` field).
 *
 * @throws {TarError} on a checksum mismatch, a truncated archive or another member type
 */
export function readTar(bytes: Uint8Array): TarEntry[] {
  const out: TarEntry[] = [];
  let off = 0;
  let pax = new Map<string, string>();
  while (off + BLOCK <= bytes.length) {
    const h = bytes.subarray(off, off + BLOCK);
    if (h.every((b) => b === 0)) break;
    let sum = 0;
    for (let i = 0; i < BLOCK; i++) sum += i >= 148 && i < 156 ? 32 : h[i]!;
    if (sum !== number(h, 148, 8)) throw new TarError(`bad header checksum at offset ${off}`);
    const size = number(h, 124, 12);
    const typeflag = String.fromCharCode(h[156]!);
    const dataStart = off + BLOCK;
    if (dataStart + size > bytes.length) throw new TarError(`truncated member at offset ${off}`);
    const data = bytes.slice(dataStart, dataStart + size);
    off = dataStart + Math.ceil(size / BLOCK) * BLOCK;
    if (typeflag === "x") {
      pax = parsePax(data);
      continue;
    }
    const prefix = field(h, 345, 155);
    let path = pax.get("path") ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
    const target = pax.get("linkpath") ?? field(h, 157, 100);
    pax = new Map();
    path = path.replace(/^\.\//, "").replace(/\/+$/, "");
    const base = { path, mode: number(h, 100, 8), uid: number(h, 108, 8), gid: number(h, 116, 8) };
    if (typeflag === "5") out.push({ type: "dir", ...base });
    else if (typeflag === "2") out.push({ type: "symlink", ...base, target });
    else if (typeflag === "0" || typeflag === "\0") out.push({ type: "file", ...base, data });
    else throw new TarError(`unsupported member type ${JSON.stringify(typeflag)} for ${path}`);
  }
  return out;
}
