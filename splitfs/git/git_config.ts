/**
 * Git config files read as data, following the grammar of Git's own parser
 * (`config.c`): sections `[core]`, subsections `[remote "origin"]` and the
 * older `[remote.origin]`, `key = value`, keys without `=` (which Git reads
 * as true), comments after `#` or `;`, quoted values with the escapes
 * `\" \\ \n \t \b`, and lines continued by a trailing `\`. Section and key
 * names are case-insensitive; a quoted subsection is not.
 *
 * `include.path` and `includeIf.<cond>.path` are kept as ordinary entries
 * and never followed: an include would let a config file reach any path on
 * the host, and marsh reads Git metadata only through descriptors it opened.
 *
 * Parsing never throws. Like Git, it stops at the first malformed line; the
 * entries before it are kept and {@linkcode GitConfig.error} says where it
 * stopped (Git itself would refuse the whole file).
 *
 * @module
 */

/** One `key = value` line of a config file. */
export interface GitConfigEntry {
  /** Lowercased section name, e.g. `remote`. */
  readonly section: string;
  /** The subsection as written (`[remote "Origin"]`), lowercased in `[remote.origin]` form, or `null`. */
  readonly subsection: string | null;
  /** Lowercased key name, e.g. `excludesfile`. */
  readonly key: string;
  /** The value with quotes and escapes resolved, or `null` for a key without `=`. */
  readonly value: string | null;
  /** 1-based line the entry started on. */
  readonly line: number;
}

/** A parsed config file. Lookups follow Git: the last value wins. */
export class GitConfig {
  /** Every entry in file order. */
  readonly entries: readonly GitConfigEntry[];
  /** Where parsing stopped, e.g. `bad config line 7`, or `null` when the whole file parsed. */
  readonly error: string | null;
  readonly #index = new Map<string, (string | null)[]>();

  constructor(entries: readonly GitConfigEntry[], error: string | null = null) {
    this.entries = entries;
    this.error = error;
    for (const e of entries) {
      const k = indexKey(e.section, e.key, e.subsection);
      const list = this.#index.get(k);
      if (list) list.push(e.value);
      else this.#index.set(k, [e.value]);
    }
  }

  /**
   * The last value of `section.[subsection.]key`: `undefined` when absent,
   * `null` when the last occurrence has no `=` (an implicit true).
   * Section and key are matched case-insensitively, the subsection exactly.
   */
  get(section: string, key: string, subsection?: string): string | null | undefined {
    const all = this.#index.get(indexKey(section, key, subsection ?? null));
    return all === undefined ? undefined : all[all.length - 1];
  }

  /** Every value of `section.[subsection.]key` in file order (empty when absent). */
  getAll(section: string, key: string, subsection?: string): readonly (string | null)[] {
    return this.#index.get(indexKey(section, key, subsection ?? null)) ?? [];
  }

  /**
   * The last value read as a Git boolean (`true`/`yes`/`on`/`1`, `false`/`no`/
   * `off`/`0`/empty, a bare key is true, any other integer is true when
   * non-zero). `undefined` when absent or not a boolean Git would accept.
   */
  getBool(section: string, key: string, subsection?: string): boolean | undefined {
    const v = this.get(section, key, subsection);
    return v === undefined ? undefined : parseGitBool(v);
  }
}

/** Reads a Git boolean the way `git_parse_maybe_bool` does; `undefined` when Git would refuse it. */
export function parseGitBool(value: string | null): boolean | undefined {
  if (value === null) return true;
  if (value === "") return false;
  const v = value.toLowerCase();
  if (v === "true" || v === "yes" || v === "on") return true;
  if (v === "false" || v === "no" || v === "off") return false;
  const m = /^[ \t\n\v\f\r]*([+-]?)(0x[0-9a-f]+|0[0-7]*|[1-9][0-9]*)[kmg]?$/.exec(v);
  if (m === null) return undefined;
  return !/^(0x0+|0+)$/.test(m[2]!);
}

/**
 * Parses the text of a Git config file. Bytes are decoded as UTF-8 (a
 * leading BOM is dropped, as Git does). Never throws; see {@linkcode GitConfig.error}.
 */
export function parseGitConfig(input: string | Uint8Array): GitConfig {
  const text = typeof input === "string" ? input : new TextDecoder().decode(input);
  const parser = new Parser(text.startsWith("\uFEFF") ? text.slice(1) : text);
  const error = parser.run();
  return new GitConfig(parser.entries, error);
}

function indexKey(section: string, key: string, subsection: string | null): string {
  // NUL cannot occur in a section or key name, so the joined key is unambiguous.
  return subsection === null
    ? `${section.toLowerCase()}\0${key.toLowerCase()}`
    : `${section.toLowerCase()}\0${key.toLowerCase()}\0${subsection}`;
}

// Git's ctype is ASCII-only (`sane-ctype.h`); JavaScript's \s and \w are wider.
function isSpace(c: string): boolean {
  return c === " " || c === "\t" || c === "\n" || c === "\r";
}
function isAlpha(c: string): boolean {
  return (c >= "a" && c <= "z") || (c >= "A" && c <= "Z");
}
function isKeyChar(c: string): boolean {
  return isAlpha(c) || (c >= "0" && c <= "9") || c === "-";
}
function lower(c: string): string {
  return c >= "A" && c <= "Z" ? String.fromCharCode(c.charCodeAt(0) + 32) : c;
}

/** A direct port of the reader loop in Git's `config.c` (`git_parse_source`). */
class Parser {
  readonly entries: GitConfigEntry[] = [];
  readonly #text: string;
  #pos = 0;
  #line = 1;
  #eof = false;
  #section = "";
  #subsection: string | null = null;

  constructor(text: string) {
    this.#text = text;
  }

  /** Like Git's `get_next_char`: CRLF reads as LF, and the end reads as a final LF. */
  #next(): string {
    if (this.#pos >= this.#text.length) {
      this.#eof = true;
      return "\n";
    }
    let c = this.#text[this.#pos++]!;
    if (c === "\r" && this.#text[this.#pos] === "\n") {
      this.#pos++;
      c = "\n";
    }
    if (c === "\n") this.#line++;
    return c;
  }

  /** Returns `null` when the whole text parsed, else the error. */
  run(): string | null {
    let comment = false;
    for (;;) {
      const start = this.#line;
      const c = this.#next();
      if (c === "\n") {
        if (this.#eof) return null;
        comment = false;
        continue;
      }
      if (comment || isSpace(c)) continue;
      if (c === "#" || c === ";") {
        comment = true;
        continue;
      }
      if (c === "[") {
        if (!this.#header()) return `bad config line ${start}`;
        continue;
      }
      if (!isAlpha(c)) return `bad config line ${start}`;
      if (!this.#keyValue(lower(c), start)) return `bad config line ${start}`;
    }
  }

  /** `get_base_var`: after `[`, up to and including `]`. */
  #header(): boolean {
    let name = "";
    let subsection: string | null = null;
    for (;;) {
      const c = this.#next();
      if (this.#eof) return false;
      if (c === "]") break;
      if (isSpace(c)) {
        subsection = this.#quotedSubsection(c);
        if (subsection === null) return false;
        break;
      }
      if (!isKeyChar(c) && c !== ".") return false;
      name += lower(c);
    }
    if (name === "") return false;
    if (subsection === null) {
      // The older `[section.sub]` form: everything after the first dot, lowercased.
      const dot = name.indexOf(".");
      if (dot >= 0) {
        subsection = name.slice(dot + 1);
        name = name.slice(0, dot);
      }
    } else if (name.includes(".")) {
      // `[a.b "c"]` names the variable `a.b.c.<key>`: section `a`, subsection `b.c`.
      const dot = name.indexOf(".");
      subsection = `${name.slice(dot + 1)}.${subsection}`;
      name = name.slice(0, dot);
    }
    this.#section = name;
    this.#subsection = subsection;
    return true;
  }

  /** `get_extended_base_var`: ` "sub"]`; `c` is the first whitespace. */
  #quotedSubsection(c: string): string | null {
    do {
      if (c === "\n") return null;
      c = this.#next();
    } while (isSpace(c));
    if (c !== '"') return null;
    let sub = "";
    for (;;) {
      let ch = this.#next();
      if (ch === "\n") return null;
      if (ch === '"') break;
      if (ch === "\\") {
        ch = this.#next();
        if (ch === "\n") return null;
      }
      sub += ch;
    }
    return this.#next() === "]" ? sub : null;
  }

  /** `get_value`: the rest of a key, then `= value` or the end of the line. */
  #keyValue(first: string, line: number): boolean {
    let key = first;
    let c: string;
    for (;;) {
      c = this.#next();
      if (this.#eof || !isKeyChar(c)) break;
      key += lower(c);
    }
    while (c === " " || c === "\t") c = this.#next();
    let value: string | null = null;
    if (c !== "\n") {
      if (c !== "=") return false;
      value = this.#value();
      if (value === null) return false;
    }
    // A key before any section header has no name Git can look up; it is dropped.
    if (this.#section !== "") {
      this.entries.push({
        section: this.#section,
        subsection: this.#subsection,
        key,
        value,
        line,
      });
    }
    return true;
  }

  /** `parse_value`: up to the end of the line; `null` for a bad escape or an open quote. */
  #value(): string | null {
    let quote = false, comment = false, spaces = 0;
    let out = "";
    for (;;) {
      let c = this.#next();
      if (c === "\n") return quote ? null : out;
      if (comment) continue;
      if (isSpace(c) && !quote) {
        if (out.length > 0) spaces++;
        continue;
      }
      if (!quote && (c === ";" || c === "#")) {
        comment = true;
        continue;
      }
      // Whitespace between words survives as one space per character.
      if (spaces > 0) {
        out += " ".repeat(spaces);
        spaces = 0;
      }
      if (c === "\\") {
        c = this.#next();
        switch (c) {
          case "\n":
            // A continued line; Git also drops a final `\` at the end of the text.
            continue;
          case "t":
            out += "\t";
            continue;
          case "b":
            out += "\b";
            continue;
          case "n":
            out += "\n";
            continue;
          case "\\":
          case '"':
            out += c;
            continue;
          default:
            return null;
        }
      }
      if (c === '"') {
        quote = !quote;
        continue;
      }
      out += c;
    }
  }
}
