/**
 * The Git metadata of a project root, read as data (docs/rules.md "Snapshot and forks"): the commit
 * HEAD resolves to, the branch it names, and the raw bytes of the index and
 * `packed-refs`, which the daemon copies into each fork's admin directory.
 *
 * Nothing here executes `git` or opens a file: every read goes through the
 * caller's {@linkcode ReadFile}, rooted at the project root, and every path
 * read lies inside `.git/` (ref names are checked before they become paths).
 *
 * @module
 */

import { TooLargeError, WrongKindError } from "../fd/dir.ts";
import { type GitConfig, parseGitConfig } from "./git_config.ts";
import type { ReadFile } from "./git_reader.ts";
import { isValidRefName } from "./refname.ts";

/** How `marsh` refuses a project whose `.git` is a file. */
export const GITFILE_ROOT_REFUSAL =
  "project root has a gitfile .git (a linked worktree or submodule); run marsh from the main repository";

/** docs/rules.md "Snapshot and forks": the index bytes copied into a fork are bounded. */
export const MAX_INDEX_BYTES = 64 * 1024 * 1024;
/** `packed-refs` is copied into each fork like the index, under the same bound. */
export const MAX_PACKED_REFS_BYTES = 64 * 1024 * 1024;
/** `.git/config` is parsed in memory. */
export const MAX_CONFIG_BYTES = 4 * 1024 * 1024;
/** `HEAD` and loose refs hold one line: an object id or `ref: <name>`. */
export const MAX_REF_BYTES = 8 * 1024;
/** Git's `SYMREF_MAXDEPTH`: files read while resolving HEAD, HEAD included. */
export const MAX_SYMREF_READS = 5;

/** The object formats Git supports, by `extensions.objectFormat`. */
export type ObjectFormat = "sha1" | "sha256";

/** What a snapshot records of the project's Git repository. */
export interface GitSource {
  /** The commit id HEAD resolves to (lowercase hex), or `null` on an unborn branch. */
  readonly head: string | null;
  /**
   * The branch HEAD resolves to after following symbolic refs, e.g.
   * `refs/heads/main`; `null` when HEAD is detached.
   */
  readonly headRef: string | null;
  /** Raw `.git/index` bytes (at most {@linkcode MAX_INDEX_BYTES}), or `null` before the first `git add`. */
  readonly index: Uint8Array | null;
  /** Raw `.git/packed-refs` bytes, or `null`. */
  readonly packedRefs: Uint8Array | null;
  /** `.git/config` parsed (includes not followed), or `null` when absent. */
  readonly config: GitConfig | null;
  /** Object ids are 40 hex digits for SHA-1, 64 for SHA-256. */
  readonly objectFormat: ObjectFormat;
  /** Where the object store is, from the project root. */
  readonly objectsDir: ".git/objects";
}

/** The repository's metadata is unusable (bad ref, unknown format, oversized file). */
export class GitMetadataError extends Error {
  override name = "GitMetadataError";
  /** The file under the project root the problem is in, e.g. `.git/HEAD`. */
  readonly path: string;
  constructor(path: string, message: string, options?: ErrorOptions) {
    super(message, options);
    this.path = path;
  }
}

/**
 * Reads the Git metadata of the project root `read` is rooted at, or returns
 * `null` when the root has no `.git/HEAD` (not a Git repository). The caller
 * has already refused a gitfile `.git` with {@linkcode GITFILE_ROOT_REFUSAL}.
 *
 * Needs whatever `read` needs (read access to the project's `.git/`).
 *
 * @throws {GitMetadataError} for a malformed HEAD or ref, a ref name that
 *   could leave `.git/`, a symbolic ref chain deeper than Git follows, an
 *   unsupported repository format, or an index, packed-refs or config larger
 *   than its bound (`git index is larger than 64 MiB: <size> bytes`)
 */
export function readGitSource(read: ReadFile): GitSource | null {
  const headBytes = readBounded(read, ".git/HEAD", MAX_REF_BYTES, "HEAD");
  if (headBytes === null) return null;

  const configBytes = readBounded(read, ".git/config", MAX_CONFIG_BYTES, "config");
  const config = configBytes === null ? null : parseGitConfig(configBytes);
  const objectFormat = objectFormatOf(config);
  const refStorage = config?.get("extensions", "refstorage");
  if (typeof refStorage === "string" && refStorage !== "files") {
    throw new GitMetadataError(
      ".git/config",
      `unsupported git ref storage: "${refStorage}"`,
    );
  }

  const packedRefs = readBounded(read, ".git/packed-refs", MAX_PACKED_REFS_BYTES, "packed-refs");
  const { head, headRef } = resolveHead(read, headBytes, packedRefs, objectFormat);
  const index = readBounded(read, ".git/index", MAX_INDEX_BYTES, "index");
  return { head, headRef, index, packedRefs, config, objectFormat, objectsDir: ".git/objects" };
}

function objectFormatOf(config: GitConfig | null): ObjectFormat {
  const v = config?.get("extensions", "objectformat");
  if (v === undefined) return "sha1";
  // Git compares the name exactly (`hash_algo_by_name`).
  if (v === "sha1" || v === "sha256") return v;
  throw new GitMetadataError(
    ".git/config",
    `unsupported git object format: "${v ?? ""}"`,
  );
}

function describeLimit(limit: number): string {
  return limit % (1024 * 1024) === 0 ? `${limit / (1024 * 1024)} MiB` : `${limit} bytes`;
}

/** Reads `.git/<what>` under `limit`, turning an oversized file into Git's wording. */
function readBounded(
  read: ReadFile,
  path: string,
  limit: number,
  what: string,
): Uint8Array | null {
  let bytes: Uint8Array | null;
  try {
    bytes = read(path, limit);
  } catch (error) {
    if (error instanceof TooLargeError) throw tooLarge(path, what, limit, error.size, error);
    throw error;
  }
  // A reader that returned more than it was allowed still must not get through.
  if (bytes !== null && bytes.length > limit) throw tooLarge(path, what, limit, bytes.length);
  return bytes;
}

function tooLarge(
  path: string,
  what: string,
  limit: number,
  size: number,
  cause?: unknown,
): GitMetadataError {
  return new GitMetadataError(
    path,
    `git ${what} is larger than ${describeLimit(limit)}: ${size} bytes`,
    cause === undefined ? undefined : { cause },
  );
}

/** One loose ref file's meaning. */
type RefValue = { kind: "symref"; target: string } | { kind: "id"; id: string };

function resolveHead(
  read: ReadFile,
  headBytes: Uint8Array,
  packedRefs: Uint8Array | null,
  format: ObjectFormat,
): { head: string | null; headRef: string | null } {
  let value = parseRefFile(headBytes, ".git/HEAD", format);
  let packed: Map<string, string> | undefined;
  let name: string | null = null;
  let path = ".git/HEAD";
  for (let reads = 1;; reads++) {
    if (value.kind === "id") return { head: value.id, headRef: name };
    if (reads >= MAX_SYMREF_READS) {
      throw new GitMetadataError(path, `git symbolic refs nest too deep: "${value.target}"`);
    }
    name = checkRefName(value.target, path);
    path = `.git/${name}`;
    const loose = readLooseRef(read, path);
    if (loose !== null) {
      value = parseRefFile(loose, path, format);
      continue;
    }
    packed ??= packedRefs === null ? new Map() : parsePackedRefs(packedRefs, format);
    const id = packed.get(name);
    // A branch with no commit yet (a fresh repository, `git checkout --orphan`).
    if (id === undefined) return { head: null, headRef: name };
    return { head: id, headRef: name };
  }
}

/** A loose ref, or `null` when there is none (Git also reads a directory there as no ref). */
function readLooseRef(read: ReadFile, path: string): Uint8Array | null {
  try {
    return readBounded(read, path, MAX_REF_BYTES, "ref");
  } catch (error) {
    if (error instanceof WrongKindError && error.kind === "dir") return null;
    throw error;
  }
}

const decoder = new TextDecoder();

/** Git's `parse_loose_ref_contents`, after its trailing-whitespace trim. */
function parseRefFile(bytes: Uint8Array, path: string, format: ObjectFormat): RefValue {
  const text = decoder.decode(bytes).replace(/[ \t\n\v\f\r]+$/, "");
  if (text.startsWith("ref:")) {
    return { kind: "symref", target: text.slice(4).replace(/^[ \t\n\v\f\r]+/, "") };
  }
  const len = hexLength(format);
  const id = text.slice(0, len);
  const rest = text.slice(len);
  if (isHex(id, len) && (rest === "" || /^[ \t\n\v\f\r]/.test(rest))) {
    return { kind: "id", id: id.toLowerCase() };
  }
  throw new GitMetadataError(path, `git ref is not an object id or a symbolic ref: ${path}`);
}

function hexLength(format: ObjectFormat): number {
  return format === "sha256" ? 64 : 40;
}

function isHex(s: string, len: number): boolean {
  return s.length === len && /^[0-9a-fA-F]+$/.test(s);
}

export { isValidRefName };

function checkRefName(name: string, path: string): string {
  if (!isValidRefName(name)) {
    throw new GitMetadataError(path, `git symbolic ref has an invalid target: "${name}"`);
  }
  return name;
}

/**
 * The refs in a `packed-refs` file by name. Peeled (`^`) and comment lines
 * are skipped; any other malformed line is an error, as it is for Git.
 *
 * @throws {GitMetadataError} for a line that is not a ref, a peel, or a comment
 */
export function parsePackedRefs(bytes: Uint8Array, format: ObjectFormat): Map<string, string> {
  const refs = new Map<string, string>();
  const len = hexLength(format);
  const lines = decoder.decode(bytes).split("\n");
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!.replace(/\r$/, "");
    if (line === "" || line.startsWith("#")) continue;
    if (line.startsWith("^")) {
      if (isHex(line.slice(1), len)) continue;
    } else if (line[len] === " " && isHex(line.slice(0, len), len)) {
      // Git keeps a badly named ref as broken rather than failing; lookups
      // only ever use checked names, so it is simply never found.
      refs.set(line.slice(len + 1), line.slice(0, len).toLowerCase());
      continue;
    }
    throw new GitMetadataError(
      ".git/packed-refs",
      `git packed-refs has an unexpected line: ${i + 1}`,
    );
  }
  return refs;
}
