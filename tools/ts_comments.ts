/**
 * Where the comments and string literals of a TypeScript source are, found by
 * a small lexer: enough of the language to tell a comment from a `//` inside a
 * string, a template literal (with `${}` nested to any depth) or a regular
 * expression literal. `tools/recite.ts` rewrites citations only inside
 * comments, and checks string literals apart.
 *
 * A `/` starts a regular expression where an expression may start (after an
 * operator, an opening bracket, a comma, a keyword such as `return`), else it
 * divides: the rule every JavaScript tokenizer without a parser uses.
 *
 * @module
 */

/** What a span of the source is. */
export type SpanKind = "comment" | "string";

/** A comment (`//` to the end of the line, or `/* ... *\/`) or a string literal, quotes included. */
export interface Span {
  readonly kind: SpanKind;
  /** Offset of the first character. */
  readonly start: number;
  /** Offset after the last character. */
  readonly end: number;
  /** Only for comments: whether it is a `//` comment. */
  readonly line?: boolean;
}

/** The source cannot be lexed: an unterminated comment, string, template or regular expression. */
export class LexError extends Error {
  override name = "LexError";
}

const KEYWORDS_BEFORE_EXPRESSION = new Set([
  "return",
  "typeof",
  "instanceof",
  "in",
  "of",
  "new",
  "delete",
  "void",
  "throw",
  "case",
  "do",
  "else",
  "yield",
  "await",
]);
const PUNCT_BEFORE_EXPRESSION = new Set("(,=:[!&|?{};+-*%<>~^");
const WORD = /[A-Za-z0-9_$\u0080-\uffff]/;

/**
 * The comments and string literals of `src`, in order. Template literals are
 * strings; the code inside their `${}` is lexed as code (its comments and
 * strings are listed too).
 *
 * @throws {LexError} when a comment, string, template or regular expression
 * does not end.
 */
export function lexSpans(src: string): Span[] {
  const spans: Span[] = [];
  // One entry per open `{`: whether it opened a template's `${`.
  const braces: boolean[] = [];
  let last = ""; // the last significant token: a punctuator or a word
  let i = 0;
  const n = src.length;
  const line = (at: number) => src.slice(0, at).split("\n").length;

  /** Scans template text from `from` (after a backtick or a `}`), to its end or its next `${`. */
  const template = (from: number, open: number): number => {
    let j = from;
    while (j < n) {
      const c = src[j];
      if (c === "\\") j += 2;
      else if (c === "`") {
        spans.push({ kind: "string", start: open, end: j + 1 });
        last = "string";
        return j + 1;
      } else if (c === "$" && src[j + 1] === "{") {
        spans.push({ kind: "string", start: open, end: j + 2 });
        braces.push(true);
        last = "{";
        return j + 2;
      } else j++;
    }
    throw new LexError(`unterminated template literal from line ${line(open)}`);
  };

  while (i < n) {
    const c = src[i]!;
    const next = src[i + 1];
    if (c === "/" && next === "/") {
      const eol = src.indexOf("\n", i);
      const end = eol < 0 ? n : eol;
      spans.push({ kind: "comment", start: i, end, line: true });
      i = end;
    } else if (c === "/" && next === "*") {
      const close = src.indexOf("*/", i + 2);
      if (close < 0) throw new LexError(`unterminated comment from line ${line(i)}`);
      spans.push({ kind: "comment", start: i, end: close + 2, line: false });
      i = close + 2;
    } else if (c === "'" || c === '"') {
      let j = i + 1;
      while (j < n && src[j] !== c) {
        if (src[j] === "\n") throw new LexError(`unterminated string on line ${line(i)}`);
        j += src[j] === "\\" ? 2 : 1;
      }
      if (j >= n) throw new LexError(`unterminated string on line ${line(i)}`);
      spans.push({ kind: "string", start: i, end: j + 1 });
      i = j + 1;
      last = "string";
    } else if (c === "`") {
      i = template(i + 1, i);
    } else if (c === "/") {
      if (
        PUNCT_BEFORE_EXPRESSION.has(last) || last === "" || KEYWORDS_BEFORE_EXPRESSION.has(last)
      ) {
        let j = i + 1;
        let inClass = false;
        while (j < n) {
          const d = src[j];
          if (d === "\n") throw new LexError(`unterminated regular expression on line ${line(i)}`);
          if (d === "\\") j += 2;
          else {
            if (d === "[") inClass = true;
            else if (d === "]") inClass = false;
            else if (d === "/" && !inClass) break;
            j++;
          }
        }
        if (j >= n) throw new LexError(`unterminated regular expression on line ${line(i)}`);
        i = j + 1;
        while (i < n && WORD.test(src[i]!)) i++;
        last = "regex";
      } else {
        last = "/";
        i++;
      }
    } else if (c === "{") {
      braces.push(false);
      last = "{";
      i++;
    } else if (c === "}") {
      const wasTemplate = braces.pop();
      if (wasTemplate) i = template(i + 1, i);
      else {
        last = "}";
        i++;
      }
    } else if (WORD.test(c)) {
      let j = i + 1;
      while (j < n && WORD.test(src[j]!)) j++;
      last = src.slice(i, j);
      i = j;
    } else if (/\s/.test(c)) i++;
    else {
      last = c;
      i++;
    }
  }
  return spans;
}

/**
 * The comment regions of `src`: each comment, with consecutive `//` comments
 * that only whitespace and one line break separate merged into one region, so
 * that a sentence running over several `//` lines is one text.
 */
export function commentRegions(src: string): { start: number; end: number }[] {
  const regions: { start: number; end: number; line: boolean }[] = [];
  for (const s of lexSpans(src)) {
    if (s.kind !== "comment") continue;
    const prev = regions.at(-1);
    const between = prev ? src.slice(prev.end, s.start) : "";
    if (
      prev && prev.line && s.line && /^[ \t]*\n[ \t]*$/.test(between)
    ) prev.end = s.end;
    else regions.push({ start: s.start, end: s.end, line: s.line === true });
  }
  return regions.map(({ start, end }) => ({ start, end }));
}
