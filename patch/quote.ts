/**
 * Git's C-style path quoting (git/git `quote.c`, `quote_c_style` and
 * `quote_two`) with `core.quotePath=false`: bytes from 0x80 up stay raw.
 *
 * @module
 */

// Escapes Git spells with a letter; every other control byte becomes octal.
const LETTER_ESCAPES: Readonly<Record<number, string>> = {
  0x07: "\\a",
  0x08: "\\b",
  0x09: "\\t",
  0x0a: "\\n",
  0x0b: "\\v",
  0x0c: "\\f",
  0x0d: "\\r",
  0x22: '\\"',
  0x5c: "\\\\",
};

// Only ASCII bytes need quoting, and in UTF-8 an ASCII byte always stands
// for that character, so the test can run on UTF-16 code units.
function isQuoted(code: number): boolean {
  return code < 0x20 || code === 0x7f || code === 0x22 || code === 0x5c;
}

function mustQuote(text: string): boolean {
  for (let i = 0; i < text.length; i++) if (isQuoted(text.charCodeAt(i))) return true;
  return false;
}

function escapeBody(text: string): string {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (isQuoted(code)) {
      out += LETTER_ESCAPES[code] ?? "\\" + code.toString(8).padStart(3, "0");
    } else {
      out += text[i];
    }
  }
  return out;
}

/**
 * Quotes `path` the way Git prints it in patches and name lists: unchanged
 * unless it holds a control character (below U+0020, or U+007F), `"` or
 * `\`; then wrapped in double quotes with `\a \b \t \n \v \f \r \" \\`
 * and other control bytes as three-digit octal (`\001`). Non-ASCII
 * characters are kept as they are, like `core.quotePath=false`.
 *
 * @example
 * ```ts
 * import { cQuote } from "./quote.ts";
 * cQuote("a b"); // "a b"
 * cQuote("a\tb"); // "\"a\\tb\""
 * ```
 */
export function cQuote(path: string): string {
  return mustQuote(path) ? `"${escapeBody(path)}"` : path;
}

/** Options for {@linkcode quotePrefixed}. */
export interface QuotePrefixedOptions {
  /** Quote even when Git would not (any name may be quoted; `git apply` unquotes it). */
  readonly always?: boolean;
}

/**
 * Quotes `prefix` + `path` as one name, like Git's `quote_two`: the prefix
 * goes inside the quotes (`"a/x\ty"`), so `git apply` strips it after
 * unquoting.
 *
 * @example
 * ```ts
 * import { quotePrefixed } from "./quote.ts";
 * quotePrefixed("a/", "x"); // "a/x"
 * quotePrefixed("a/", "x\"y"); // "\"a/x\\\"y\""
 * ```
 */
export function quotePrefixed(
  prefix: string,
  path: string,
  options: QuotePrefixedOptions = {},
): string {
  if (!options.always && !mustQuote(prefix) && !mustQuote(path)) return prefix + path;
  return `"${escapeBody(prefix)}${escapeBody(path)}"`;
}

const UNESCAPES: Readonly<Record<string, number>> = {
  a: 0x07,
  b: 0x08,
  t: 0x09,
  n: 0x0a,
  v: 0x0b,
  f: 0x0c,
  r: 0x0d,
  '"': 0x22,
  "\\": 0x5c,
};

/**
 * The C-quoted name at the start of `s` (which starts with `"`), as
 * {@linkcode cQuote} writes it: its text (octal escapes are bytes, so a
 * quoted UTF-8 name decodes whole) and the index just past its closing
 * quote; `null` for a bad escape or no closing quote.
 */
export function cUnquoteAt(s: string): { text: string; end: number } | null {
  const bytes: number[] = [];
  const enc = new TextEncoder();
  for (let i = 1; i < s.length; i++) {
    const c = s[i]!;
    if (c === '"') return { text: new TextDecoder().decode(new Uint8Array(bytes)), end: i + 1 };
    if (c !== "\\") {
      bytes.push(...enc.encode(c));
      continue;
    }
    const oct = /^[0-3][0-7]{2}/.exec(s.slice(i + 1, i + 4));
    if (oct) {
      bytes.push(parseInt(oct[0], 8));
      i += 3;
      continue;
    }
    const letter = UNESCAPES[s[++i] ?? ""];
    if (letter === undefined) return null;
    bytes.push(letter);
  }
  return null;
}

/**
 * The inverse of {@linkcode cQuote}: a name as Git prints it, quoted or not.
 *
 * @throws {SyntaxError} for a quoted name with a bad escape, no closing quote, or text after it
 */
export function cUnquote(text: string): string {
  if (!text.startsWith('"')) return text;
  const q = cUnquoteAt(text);
  if (q === null || q.end !== text.length) throw new SyntaxError(`malformed quoted path ${text}`);
  return q.text;
}
