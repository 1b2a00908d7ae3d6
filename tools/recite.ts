/**
 * Citations of documents the repository does not hold (the specs, "spec 00N
 * §x", and the platform design, "DESIGN.md §x") replaced by the place in our
 * own `docs/` that states the same rule, from a mapping file
 * (`tools/citations.tsv`), and found where they are left.
 *
 * The mapping has one line per citation text, a tab, and its replacement,
 * such as `spec 00N §x<TAB>docs/rules.md "Cancel"` with a real spec number and
 * section. Lines that are empty or start with `#` are skipped. A citation may
 * run over a line break of its comment: each space of the mapped text matches
 * any run of blanks, or one line break followed by the comment's `*` or `//`.
 * The longest citations are replaced first, and one is replaced only where it
 * is whole (section 1 is not the start of section 13, and a citation that a
 * list of sections continues is not replaced alone), so a list never loses
 * its head to a shorter entry.
 *
 * In `.ts` files only comments change; in `.md` files the whole text is
 * documentation, and each `docs/X.md "Heading"` becomes a link. Every
 * replacement must name at least one `docs/X.md "Heading"` whose heading
 * exists ({@linkcode checkTargets}). Running it again changes nothing.
 *
 * `tools/recite_main.ts` is the command; the check in `deno task check` is its
 * `--check`.
 *
 * @module
 */

import { commentRegions, lexSpans } from "./ts_comments.ts";

/** One line of the mapping file. */
export interface Citation {
  /** The citation as it appears in a comment, with single spaces. */
  readonly text: string;
  /** What replaces it: text naming at least one `docs/X.md "Heading"`. */
  readonly replacement: string;
  /** Its line in the mapping file, for messages. */
  readonly line: number;
}

/** A citation left in a file: where, and the line that holds it. */
export interface Leftover {
  readonly path: string;
  readonly line: number;
  readonly text: string;
  /** Where it is: a comment, a string literal, or (Markdown) the document. */
  readonly where: "comment" | "string" | "code" | "document";
}

/**
 * Files whose string literals are stored data, never edited: a migration's
 * name is written into every journal that ran it. Their citations stay.
 */
export const STORED_STRINGS: readonly string[] = ["journal/migrations.ts"];

/** The mapping file is malformed. */
export class MappingError extends Error {
  override name = "MappingError";
}

/**
 * What counts as a citation of a document that is not in the repository:
 * `spec 00N` (any case of its first letter) followed by anything, and
 * `DESIGN.md §N`.
 */
export const CITATION = /\b[Ss]pec\s+00\d\b|\bDESIGN\.md\s+§\s*\d/g;

/** A `docs/X.md "Heading"` reference inside a replacement. */
export const DOCS_REF = /docs\/([A-Za-z0-9_.-]+\.md) "([^"\n]+)"/g;

/** Parses the mapping file's text. */
export function parseMapping(text: string): Citation[] {
  const out: Citation[] = [];
  const seen = new Map<string, number>();
  text.split("\n").forEach((raw, index) => {
    const line = index + 1;
    if (raw.trim() === "" || raw.startsWith("#")) return;
    const parts = raw.split("\t");
    if (parts.length !== 2 || parts[0]!.trim() === "" || parts[1]!.trim() === "") {
      throw new MappingError(
        `line ${line}: expected "<citation><TAB><replacement>", got ${JSON.stringify(raw)}`,
      );
    }
    const citation = parts[0]!.trim().replace(/\s+/g, " ");
    const replacement = parts[1]!.trim();
    const before = seen.get(citation);
    if (before !== undefined) {
      throw new MappingError(`line ${line}: "${citation}" is mapped already on line ${before}`);
    }
    if (!new RegExp(CITATION.source).test(citation)) {
      throw new MappingError(`line ${line}: "${citation}" cites neither a spec nor DESIGN.md`);
    }
    if (new RegExp(CITATION.source).test(replacement)) {
      throw new MappingError(`line ${line}: the replacement of "${citation}" cites a spec again`);
    }
    seen.set(citation, line);
    out.push({ text: citation, replacement, line });
  });
  return out;
}

/**
 * GitHub's anchor for a Markdown heading: lower case, punctuation dropped
 * (letters, digits, `-`, `_` and spaces kept), each space a `-`.
 */
export function slug(heading: string): string {
  return heading.trim().toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replace(/ /g, "-");
}

/** The headings of a Markdown text (any level), outside fenced code blocks. */
export function headings(markdown: string): string[] {
  const out: string[] = [];
  let fenced = false;
  for (const l of markdown.split("\n")) {
    if (/^\s*(```|~~~)/.test(l)) fenced = !fenced;
    else if (!fenced) {
      const m = /^#{1,6}\s+(.+?)\s*#*\s*$/.exec(l);
      if (m) out.push(m[1]!);
    }
  }
  return out;
}

/**
 * The problems with where the mapping points: a replacement that names no
 * `docs/X.md "Heading"`, a document that is not there, or a heading the
 * document does not have. `docs` maps a file name under `docs/` to its text.
 */
export function checkTargets(
  citations: readonly Citation[],
  docs: ReadonlyMap<string, string>,
): string[] {
  const problems: string[] = [];
  const heads = new Map([...docs].map(([name, text]) => [name, new Set(headings(text))]));
  for (const c of citations) {
    const refs = [...c.replacement.matchAll(DOCS_REF)];
    if (refs.length === 0) {
      problems.push(`line ${c.line}: "${c.replacement}" names no docs/X.md "Heading"`);
    }
    for (const [, file, heading] of refs) {
      const have = heads.get(file!);
      if (!have) problems.push(`line ${c.line}: docs/${file} does not exist`);
      else if (!have.has(heading!)) {
        problems.push(`line ${c.line}: docs/${file} has no heading "${heading}"`);
      }
    }
  }
  return problems;
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
/** A space of a citation: blanks, or one line break and the comment's own prefix. */
const GAP = String.raw`(?:[ \t]+|[ \t]*\r?\n[ \t]*(?:\*(?!\/)|\/\/)?[ \t]*)`;
/** What may not follow a whole citation: more digits of its last section, or more of a list. */
const NOT_CONTINUED = String
  .raw`(?!\.?\d)(?!${GAP}?(?:[,;]|and\b)?${GAP}?(?:§|[Ss]pec${GAP}00\d|DESIGN\.md|"))`;

/** The pattern that finds `c` whole, in any comment layout. */
function pattern(c: Citation): RegExp {
  const body = c.text.split(" ").map(escape).join(GAP);
  const tail = /[\w§]$/.test(c.text) ? NOT_CONTINUED : "";
  const head = /^\w/.test(c.text) ? String.raw`(?<![\w§])` : "";
  return new RegExp(head + body + tail, "g");
}

/** How a replacement reads in Markdown at `path` (relative to the root): each docs reference a link. */
export function asMarkdown(replacement: string, path: string): string {
  const dir = path.includes("/") ? path.slice(0, path.lastIndexOf("/")) : "";
  return replacement.replace(DOCS_REF, (_all, file: string, heading: string) => {
    const target = `docs/${file}`;
    const href = target === path
      ? ""
      : dir === "docs"
      ? file
      : `${"../".repeat(dir === "" ? 0 : dir.split("/").length)}${target}`;
    return `[${file}, "${heading}"](${href}#${slug(heading)})`;
  });
}

/** Lines longer than this get their comment reflowed after a replacement. */
export const LINE_WIDTH = 100;

const COMMENT_LINE = /^([ \t]*)(\/\*\*|\*|\/\/)( *)(.*)$/;
const ONE_LINE_DOC = /^([ \t]*)\/\*\* (.*) \*\/$/;
/** Text that starts a new item, not more of a paragraph. */
const NEW_ITEM = /^(?:$|[-*@|`]|\d+\.|\*\/)/;

/**
 * Reflows the comment lines marked `changed` that are longer than
 * {@linkcode LINE_WIDTH}: each is broken at the last space that fits and is
 * not inside a quoted heading, and the rest is carried into the next line when
 * that line continues the same paragraph (else onto a new line of the same
 * comment); a one-line `/** ... *\/` becomes a block first. Lines with code
 * before their comment are left as they are.
 */
export function reflow(lines: readonly string[], changed: ReadonlySet<number>): string[] {
  const out = lines.map((s, i) => ({ s, c: changed.has(i) }));
  for (let i = 0; i < out.length; i++) {
    const line = out[i]!;
    if (!line.c || line.s.length <= LINE_WIDTH) continue;
    const one = ONE_LINE_DOC.exec(line.s);
    if (one) {
      out.splice(i, 1, { s: `${one[1]}/**`, c: false }, { s: `${one[1]} * ${one[2]}`, c: true }, {
        s: `${one[1]} */`,
        c: false,
      });
      continue;
    }
    const m = COMMENT_LINE.exec(line.s);
    if (!m) continue;
    const [indent, mark, spaces, text] = [m[1]!, m[2]!, m[3]!, m[4]!];
    const prefix = indent.length + mark.length + spaces.length;
    let quoted = false;
    let cut = -1;
    for (let j = prefix; j < line.s.length && j <= LINE_WIDTH; j++) {
      if (line.s[j] === '"') quoted = !quoted;
      else if (line.s[j] === " " && !quoted) cut = j;
    }
    if (cut <= prefix) continue;
    const rest = line.s.slice(cut + 1);
    if (rest.trim() === "" || rest.trim() === "*/") continue;
    const cont = mark === "/**"
      ? `${indent} * `
      : `${indent}${mark}${spaces}${text.startsWith("- ") ? "  " : ""}`;
    line.s = line.s.slice(0, cut);
    const next = out[i + 1];
    const nextText = next?.s.startsWith(cont) ? next.s.slice(cont.length) : null;
    if (next && nextText !== null && !NEW_ITEM.test(nextText) && !/\*\/\s*$/.test(rest)) {
      next.s = `${cont}${rest} ${nextText}`;
      next.c = true;
    } else out.splice(i + 1, 0, { s: `${cont}${rest}`, c: true });
  }
  return out.map((l) => l.s);
}

/** Replaces every mapped citation in one piece of text; returns it and how many were replaced. */
function replaceIn(
  text: string,
  ordered: readonly { c: Citation; re: RegExp }[],
  render: (c: Citation) => string,
): { text: string; count: number } {
  let count = 0;
  for (const { c, re } of ordered) {
    text = text.replace(re, () => {
      count++;
      return render(c);
    });
  }
  return { text, count };
}

/** The citations, longest first, each with its pattern. */
export function compile(citations: readonly Citation[]): { c: Citation; re: RegExp }[] {
  return [...citations].sort((a, b) => b.text.length - a.text.length || (a.text < b.text ? -1 : 1))
    .map((c) => ({ c, re: pattern(c) }));
}

/**
 * Rewrites one file's text: in a `.ts` file each comment, in a `.md` file the
 * whole text. Returns the new text and the number of citations replaced.
 *
 * @throws {import("./ts_comments.ts").LexError} when a `.ts` file cannot be lexed.
 */
export function rewrite(
  path: string,
  text: string,
  compiled: readonly { c: Citation; re: RegExp }[],
): { text: string; count: number } {
  if (path.endsWith(".md")) {
    return replaceIn(text, compiled, (c) => asMarkdown(c.replacement, path));
  }
  let out = "";
  let at = 0;
  let count = 0;
  for (const r of commentRegions(text)) {
    const done = replaceIn(text.slice(r.start, r.end), compiled, (c) => c.replacement);
    out += text.slice(at, r.start) + done.text;
    count += done.count;
    at = r.end;
  }
  out += text.slice(at);
  if (count === 0) return { text, count };
  const before = new Set(text.split("\n"));
  const lines = out.split("\n");
  const changed = new Set(lines.flatMap((l, i) => before.has(l) ? [] : [i]));
  return { text: reflow(lines, changed).join("\n"), count };
}

/**
 * The citations left in one file. In a `.ts` file each is placed in a
 * comment, a string literal or code; `allowStrings` skips those in string
 * literals (a file whose strings are stored data, such as migration names).
 *
 * @throws {import("./ts_comments.ts").LexError} when a `.ts` file cannot be lexed.
 */
export function leftovers(path: string, text: string, allowStrings = false): Leftover[] {
  const spans = path.endsWith(".ts") ? lexSpans(text) : [];
  const out: Leftover[] = [];
  for (const m of text.matchAll(CITATION)) {
    const at = m.index!;
    const where = path.endsWith(".ts")
      ? spans.find((s) => s.start <= at && at < s.end)?.kind ?? "code"
      : "document";
    if (where === "string" && allowStrings) continue;
    const line = text.slice(0, at).split("\n").length;
    const lineText = text.split("\n")[line - 1]!.trim();
    out.push({ path, line, text: lineText, where });
  }
  return out;
}
