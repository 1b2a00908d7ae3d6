/**
 * Git's exclude rules as data, matched with `npm:ignore`, for walks that
 * read each `.gitignore` once through their own descriptors.
 *
 * Sources, highest precedence first (Git's `dir.c`): the `.gitignore` files
 * from the deepest directory up to the root, then `.git/info/exclude`, then
 * the global excludes file (`core.excludesFile`, else
 * `$XDG_CONFIG_HOME/git/ignore`). Within a source the last matching pattern
 * wins; across sources the deepest source with any verdict (ignored or
 * re-included with `!`) decides. Once a directory is ignored nothing below it
 * can be re-included: entering it yields a scope that ignores everything.
 *
 * A walker holds an {@linkcode IgnoreScope} per directory:
 *
 * ```ts
 * const rules = IgnoreRules.load({ globalExcludes, infoExclude, ignoreCase });
 * const root = rules.enter("", rootGitignoreBytes);
 * if (!root.isIgnored("src", true)) {
 *   const src = root.enter("src", srcGitignoreBytes);
 *   src.isIgnored("src/main.o", false);
 * }
 * ```
 *
 * Paths are relative to the project root, `/`-separated, and an entry must
 * be tested (and a directory entered) from its parent directory's scope.
 *
 * @module
 */

import ignore from "ignore";
import type { Ignore } from "ignore";
import { decodeEscaped } from "../fd/escaped_utf8.ts";
import type { GitConfig } from "./git_config.ts";

/** The ignore rules that apply inside one directory of the tree. */
export interface IgnoreScope {
  /**
   * Whether an entry of this scope's directory is excluded. `relPath` is the
   * entry's path from the project root; `isDir` is true only for a real
   * directory (a symlink to one is not a directory to Git).
   *
   * @throws {RangeError} when `relPath` is not a direct entry of this scope's directory
   */
  isIgnored(relPath: string, isDir: boolean): boolean;
  /**
   * The scope of a subdirectory, given the bytes of its `.gitignore` (`null`
   * when it has none). Entering an ignored directory yields a scope in which
   * everything is ignored, so its `.gitignore` need not (and should not) be read.
   *
   * @throws {RangeError} when `childDirRel` is not a direct entry of this scope's directory
   */
  enter(childDirRel: string, gitignore: Uint8Array | null): IgnoreScope;
}

/** The rules that apply to the whole tree, before any `.gitignore` is read. */
export interface IgnoreRulesOptions {
  /** The global excludes file's bytes (see {@linkcode resolveGlobalExcludesPath}), or `null`. */
  readonly globalExcludes: Uint8Array | null;
  /** `.git/info/exclude`'s bytes, or `null`. */
  readonly infoExclude: Uint8Array | null;
  /**
   * Match case-insensitively, as Git does when the repository's
   * `core.ignorecase` is true (`git init` sets it on case-insensitive file
   * systems such as macOS's default). Default `false`.
   */
  readonly ignoreCase?: boolean;
}

/** One exclude file, and the directory its patterns are relative to. */
interface Source {
  /** Directory from the project root, `""` for the root-level files. */
  readonly base: string;
  /** Number of components in `base`. */
  readonly depth: number;
  readonly ig: Ignore;
  /** `rehomed[k]`: the same patterns, testing entries at depth `k + 1` below `base` on their own. */
  readonly rehomed: Ignore[];
}

/** A source as one directory sees it. */
interface Matcher {
  readonly source: Source;
  /** `source.ig`, or a rehomed copy once the source ignores an ancestor directory. */
  readonly ig: Ignore;
}

/**
 * The tree-wide rules, and the scope above the project root: its one entry
 * is the root itself, `""`.
 */
export class IgnoreRules implements IgnoreScope {
  readonly #ignoreCase: boolean;
  readonly #matchers: readonly Matcher[];

  private constructor(ignoreCase: boolean, matchers: readonly Matcher[]) {
    this.#ignoreCase = ignoreCase;
    this.#matchers = matchers;
  }

  /** Parses the global excludes and `info/exclude`. Needs no permission. */
  static load(opts: IgnoreRulesOptions): IgnoreRules {
    const ignoreCase = opts.ignoreCase ?? false;
    const matchers: Matcher[] = [];
    // Deepest first: info/exclude outranks the global file.
    for (const bytes of [opts.infoExclude, opts.globalExcludes]) {
      if (bytes !== null) matchers.push(matcherOf(newSource(ignoreCase, "", bytes)));
    }
    return new IgnoreRules(ignoreCase, matchers);
  }

  /** The project root is never ignored. @throws {RangeError} for any other path */
  isIgnored(relPath: string, _isDir: boolean): boolean {
    if (relPath !== "") throw new RangeError(`not an entry above the project root: "${relPath}"`);
    return false;
  }

  /**
   * The root scope, given the root `.gitignore`'s bytes.
   *
   * @throws {RangeError} unless `dirRel` is `""`
   */
  enter(dirRel: string, gitignore: Uint8Array | null): IgnoreScope {
    if (dirRel !== "") throw new RangeError(`not the project root: "${dirRel}"`);
    const matchers = gitignore === null
      ? this.#matchers
      : [matcherOf(newSource(this.#ignoreCase, "", gitignore)), ...this.#matchers];
    return new Scope(this.#ignoreCase, "", 0, matchers);
  }
}

class Scope implements IgnoreScope {
  readonly #ignoreCase: boolean;
  readonly #dir: string;
  /** `dir/`, or `""` at the root: what every entry's path starts with. */
  readonly #prefix: string;
  readonly #depth: number;
  /** Deepest source first; `null` when this directory is itself ignored. */
  readonly #matchers: readonly Matcher[] | null;

  constructor(
    ignoreCase: boolean,
    dir: string,
    depth: number,
    matchers: readonly Matcher[] | null,
  ) {
    this.#ignoreCase = ignoreCase;
    this.#dir = dir;
    this.#prefix = dir === "" ? "" : `${dir}/`;
    this.#depth = depth;
    this.#matchers = matchers;
  }

  isIgnored(relPath: string, isDir: boolean): boolean {
    this.#checkEntry(relPath);
    if (this.#matchers === null) return true;
    for (const m of this.#matchers) {
      const r = m.ig.test(pathIn(m.source, relPath, isDir));
      if (r.ignored) return true;
      if (r.unignored) return false;
    }
    return false;
  }

  enter(childDirRel: string, gitignore: Uint8Array | null): IgnoreScope {
    const depth = this.#depth + 1;
    if (this.#matchers === null || this.isIgnored(childDirRel, true)) {
      return new Scope(this.#ignoreCase, childDirRel, depth, null);
    }
    // `npm:ignore` answers "ignored" for every path below a directory the
    // source itself ignores. Git does not: it tests the path against each
    // source's patterns, and only the combined verdict on a directory stops
    // the descent. So a source that ignores this directory while a deeper
    // source re-includes it must from now on test entries without their
    // ancestors; that rehomed copy is shared by all directories at a depth.
    let matchers = this.#matchers;
    for (let i = 0; i < matchers.length; i++) {
      const m = matchers[i]!;
      const rehomed = m.ig !== m.source.ig ||
        m.source.ig.test(pathIn(m.source, childDirRel, true)).ignored;
      if (!rehomed) continue;
      if (matchers === this.#matchers) matchers = matchers.slice();
      (matchers as Matcher[])[i] = {
        source: m.source,
        ig: rehome(m.source, this.#ignoreCase, depth - m.source.depth),
      };
    }
    if (gitignore !== null) {
      matchers = [
        matcherOf(newSource(this.#ignoreCase, childDirRel, gitignore, depth)),
        ...matchers,
      ];
    }
    return new Scope(this.#ignoreCase, childDirRel, depth, matchers);
  }

  #checkEntry(relPath: string): void {
    const p = this.#prefix;
    const ok = relPath.length > p.length && relPath.startsWith(p) &&
      relPath.indexOf("/", p.length) < 0;
    if (!ok) {
      throw new RangeError(`not an entry of "${this.#dir}": "${relPath}"`);
    }
    const name = relPath.slice(p.length);
    if (name === "." || name === "..") throw new RangeError(`not an entry name: "${relPath}"`);
  }
}

function newSource(ignoreCase: boolean, base: string, bytes: Uint8Array, depth = 0): Source {
  // Git skips a leading byte order mark; names that are not UTF-8 match byte for byte.
  const text = decodeEscaped(bytes);
  const ig = ignore({ ignoreCase }).add(text.startsWith("\ufeff") ? text.slice(1) : text);
  return { base, depth, ig, rehomed: [] };
}

function matcherOf(source: Source): Matcher {
  return { source, ig: source.ig };
}

/** `relPath` relative to the source's directory, with a trailing `/` for a directory. */
function pathIn(source: Source, relPath: string, isDir: boolean): string {
  const p = source.base === "" ? relPath : relPath.slice(source.base.length + 1);
  return isDir ? `${p}/` : p;
}

/**
 * The source's patterns, then `!/*\/`, `!/*\/*\/`, … down to depth `k`: every
 * directory at depth ≤ k is re-included, so an entry at depth `k + 1` is
 * judged by its own matches alone. The rules are shared with the source
 * (`add(ignore)` copies references), so this costs no recompilation.
 */
function rehome(source: Source, ignoreCase: boolean, k: number): Ignore {
  let ig = source.rehomed[k];
  if (ig === undefined) {
    const negations = Array.from({ length: k }, (_, j) => `!/${"*/".repeat(j + 1)}`);
    ig = ignore({ ignoreCase }).add(source.ig).add(negations);
    source.rehomed[k] = ig;
  }
  return ig;
}

/** The environment that decides where Git's user-level files are. */
export interface GitUserEnv {
  readonly HOME?: string;
  readonly XDG_CONFIG_HOME?: string;
}

/** Inputs of {@linkcode resolveGlobalExcludesPath}. */
export interface GlobalExcludesOptions {
  /** The repository's `.git/config`, or `null`. */
  readonly repoConfig: GitConfig | null;
  /**
   * The user's global config files that could be read, lowest precedence
   * first, as {@linkcode globalConfigPaths} lists them
   * (`$XDG_CONFIG_HOME/git/config`, then `~/.gitconfig`).
   */
  readonly globalConfigs: readonly GitConfig[];
  readonly env: GitUserEnv;
  /** Absolute project root: Git resolves a relative path from the top of the worktree. */
  readonly projectRoot: string;
}

/**
 * The absolute path of the global excludes file the caller should read, or
 * `null` when Git would read none: `core.excludesFile` (repository config
 * over `~/.gitconfig` over the XDG config; a leading `~/` is expanded with
 * `HOME`), else `$XDG_CONFIG_HOME/git/ignore` or `$HOME/.config/git/ignore`.
 *
 * An empty `core.excludesFile` disables the file, as in Git. A value Git
 * would die on (`~user/…`, or `~/` without `HOME`) yields `null`; a key
 * without `=` is skipped. The system config (`/etc/gitconfig`) is not
 * consulted. Needs no permission.
 */
export function resolveGlobalExcludesPath(opts: GlobalExcludesOptions): string | null {
  let value: string | undefined;
  for (const config of [...opts.globalConfigs, opts.repoConfig]) {
    const v = config?.get("core", "excludesfile");
    if (typeof v === "string") value = v;
  }
  const { HOME, XDG_CONFIG_HOME } = opts.env;
  if (value === undefined) {
    if (XDG_CONFIG_HOME) return absolute(`${XDG_CONFIG_HOME}/git/ignore`, opts.projectRoot);
    if (HOME !== undefined) return absolute(`${HOME}/.config/git/ignore`, opts.projectRoot);
    return null;
  }
  if (value === "") return null;
  if (value.startsWith("~")) {
    const slash = value.indexOf("/");
    const user = slash < 0 ? value.slice(1) : value.slice(1, slash);
    // `~user/` would need the password database; Git dies when it cannot expand.
    if (user !== "" || HOME === undefined) return null;
    value = HOME + (slash < 0 ? "" : value.slice(slash));
  }
  return absolute(value, opts.projectRoot);
}

/**
 * The user-level config files Git reads, lowest precedence first:
 * `$XDG_CONFIG_HOME/git/config` (or `$HOME/.config/git/config`), then
 * `$HOME/.gitconfig`. Needs no permission.
 */
export function globalConfigPaths(env: GitUserEnv): string[] {
  const paths: string[] = [];
  if (env.XDG_CONFIG_HOME) paths.push(`${env.XDG_CONFIG_HOME}/git/config`);
  else if (env.HOME !== undefined) paths.push(`${env.HOME}/.config/git/config`);
  if (env.HOME !== undefined) paths.push(`${env.HOME}/.gitconfig`);
  return paths;
}

function absolute(path: string, root: string): string {
  if (path.startsWith("/")) return path;
  return root.endsWith("/") ? root + path : `${root}/${path}`;
}
