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
