/**
 * What a branch's Git may leave in its fork's admin dir (`.admin/<label>/`),
 * as pure checks of names and bytes: no I/O, so the verifier
 * ({@linkcode ./admin.ts}) and a model can share them.
 *
 * The reason for every rule is one (docs/engine.md, "Capture and
 * verification"): a host `git -C <fork> status`, or an IDE, must never meet
 * anything a branch wrote that makes Git run a program (`core.fsmonitor`,
 * `core.hooksPath`, a hooks dir, an alias, a filter, an include) or that
 * sends Git elsewhere (`commondir`, `gitdir`, `core.worktree`, alternates).
 * Everything else Git itself writes while a branch works — a new branch and
 * HEAD on it, a detached HEAD, the committer's identity, upstream tracking,
 * what `git gc` and `git repack` write — is data, and allowed. The config is
 * checked against an allowlist of keys, never a denylist: a key Git learns
 * tomorrow that runs a program is refused today.
 *
 * @module
 */

import { parseGitConfig } from "../git/git_config.ts";
import { isValidRefName } from "../git/refname.ts";

/** The hash a repository's object ids use. */
export type ObjectFormat = "sha1" | "sha256";

/**
 * How an admin-dir entry is checked, by its path under the admin dir:
 *
 * - `state`: Git's own state, any content (its subtree is only checked for symlinks);
 * - `head`, `config`, `packed-refs`: parsed by {@linkcode headProblem},
 *   {@linkcode configProblem}, {@linkcode packedRefsProblem};
 * - `fixed`: byte-identical to what marsh wrote;
 * - `dir`: a directory whose every entry must have a rule of its own;
 * - `open-dir`: a directory whose unlisted entries are `state`.
 */
export type AdminRule = "state" | "head" | "config" | "packed-refs" | "fixed" | "dir" | "open-dir";

/**
 * Top-level entries that are Git's own state: files and dirs Git writes while
 * it works (index, objects, refs and reflogs, merge, rebase and bisect state,
 * locks, `git gc`'s pid and log). None is a config Git reads or a path it follows.
 */
const GIT_STATE: ReadonlySet<string> = new Set([
  "index",
  "index.lock",
  "refs",
  "logs",
  "ORIG_HEAD",
  "COMMIT_EDITMSG",
  "FETCH_HEAD",
  "MERGE_HEAD",
  "MERGE_MSG",
  "MERGE_MODE",
  "MERGE_RR",
  "AUTO_MERGE",
  "CHERRY_PICK_HEAD",
  "REVERT_HEAD",
  "REBASE_HEAD",
  "BISECT_LOG",
  "BISECT_START",
  "BISECT_TERMS",
  "BISECT_EXPECTED_REV",
  "BISECT_ANCESTORS_OK",
  "BISECT_NAMES",
  "rebase-merge",
  "rebase-apply",
  "sequencer",
  "rr-cache",
  "gc.log",
  "gc.pid",
  "HEAD.lock",
  // A `git config` killed mid-write leaves its lock; Git never reads one as config.
  "config.lock",
  "packed-refs.lock",
  "description",
]);

/** A split index's shared part, which Git writes (and expires) beside `index`. */
export const SHARED_INDEX_NAME = /^sharedindex\.[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** Rules by path; a path not here inherits from its parent (see {@linkcode adminRule}). */
const RULES: ReadonlyMap<string, AdminRule> = new Map<string, AdminRule>([
  ["HEAD", "head"],
  ["config", "config"],
  ["packed-refs", "packed-refs"],
  ["info", "dir"],
  ["info/exclude", "fixed"],
  // `git repack` and `git gc` run `update-server-info`: a list of refs.
  ["info/refs", "state"],
  // Loose objects' fan-out dirs, `pack/`, a receive's quarantine dirs.
  ["objects", "open-dir"],
  ["objects/info", "dir"],
  // Where Git looks for more objects: only what marsh wrote.
  ["objects/info/alternates", "fixed"],
  ["objects/info/packs", "state"],
  ["objects/info/commit-graph", "state"],
  ["objects/info/commit-graphs", "state"],
]);

/**
 * The rule for `path` (`/`-separated, under the admin dir), or `null` when
 * nothing may be there: `hooks`, `commondir`, `gitdir`, `config.worktree`,
 * `modules`, `worktrees`, `info/attributes`, `objects/info/http-alternates`, ...
 */
export function adminRule(path: string): AdminRule | null {
  const rule = RULES.get(path);
  if (rule !== undefined) return rule;
  const slash = path.lastIndexOf("/");
  if (slash < 0) return GIT_STATE.has(path) || SHARED_INDEX_NAME.test(path) ? "state" : null;
  const parent = adminRule(path.slice(0, slash));
  return parent === "open-dir" || parent === "state" ? "state" : null;
}

/** Entries that must exist: Git needs HEAD and config; the fixed files carry the fence. */
export const REQUIRED_FILES: readonly string[] = ["HEAD", "config"];

/** The most a HEAD or config may hold; what Git writes is far smaller. */
export const MAX_HEAD_BYTES = 4096;
export const MAX_CONFIG_BYTES = 64 * 1024;

const fatalUtf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

function decode(bytes: Uint8Array): string | null {
  try {
    return fatalUtf8.decode(bytes);
  } catch {
    // Not UTF-8: not anything Git wrote; the caller says what it refuses.
    return null;
  }
}

function hexLength(format: ObjectFormat): number {
  return format === "sha256" ? 64 : 40;
}

/** An object id as Git writes one: lowercase hex of the format's length. */
function isObjectId(s: string, format: ObjectFormat): boolean {
  return s.length === hexLength(format) && /^[0-9a-f]+$/.test(s);
}

/** A branch name Git accepts: `refs/heads/<name>` is a valid ref. */
export function isBranchName(name: string): boolean {
  return name !== "" && isValidRefName(`refs/heads/${name}`);
}

/**
 * Why a written `HEAD` is refused, or `null`. Allowed are the two forms Git
 * writes: `ref: refs/heads/<branch>\n` (`git checkout -b`, `git switch -c`)
 * and `<object id>\n` (a detached HEAD: `git checkout <commit>`, a rebase in
 * progress). Both are data. A symbolic ref outside `refs/heads/` is refused:
 * Git itself only puts HEAD on a branch.
 */
export function headProblem(bytes: Uint8Array, format: ObjectFormat): string | null {
  const text = decode(bytes);
  if (text === null || !text.endsWith("\n")) return "not a branch or a commit id";
  const line = text.slice(0, -1);
  if (line.startsWith("ref: refs/heads/")) {
    return isBranchName(line.slice("ref: refs/heads/".length))
      ? null
      : "not a branch or a commit id";
  }
  if (line.startsWith("ref:")) return "points outside refs/heads/";
  return isObjectId(line, format) ? null : "not a branch or a commit id";
}

/**
 * Why a written `packed-refs` is refused, or `null`. Git's own format only
 * (`git pack-refs`, which `git gc` runs): an optional `# pack-refs with:`
 * header, then `<id> <ref>` lines, each ref valid and under `refs/`, each
 * optionally followed by its peeled `^<id>`. Refs are data; the strict form
 * keeps anything else out.
 */
export function packedRefsProblem(bytes: Uint8Array, format: ObjectFormat): string | null {
  const text = decode(bytes);
  if (text === null) return "not UTF-8";
  if (text === "") return null;
  if (!text.endsWith("\n")) return "no newline at the end";
  const lines = text.slice(0, -1).split("\n");
  const len = hexLength(format);
  let lastWasRef = false;
  for (const [i, line] of lines.entries()) {
    if (i === 0 && line.startsWith("# pack-refs with:")) continue;
    if (line.startsWith("^") && lastWasRef && isObjectId(line.slice(1), format)) {
      lastWasRef = false;
      continue;
    }
    if (line[len] === " " && isObjectId(line.slice(0, len), format)) {
      if (isValidRefName(line.slice(len + 1))) {
        lastWasRef = true;
        continue;
      }
    }
    return `unexpected line ${i + 1}`;
  }
  return null;
}

/** A config key as Git names it: `section[.subsection].key`. */
function keyName(e: { section: string; subsection: string | null; key: string }): string {
  return e.subsection === null ? `${e.section}.${e.key}` : `${e.section}.${e.subsection}.${e.key}`;
}

/** A remote's name that can be neither a URL nor a path (`.` is this repository). */
const REMOTE_NAME = /^(?:\.|[A-Za-z0-9][A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+)*)$/;

/**
 * The harmless keys a branch's Git may add to its config, with the values
 * allowed. `user.name`/`user.email`: the committer's identity (`git config
 * user.name bot`). `branch.<name>.remote`/`.merge`: what `git checkout -b
 * --track` and `git switch -c X origin/X` write; a remote must be a plain name
 * (never a URL or path) and the merge target a valid ref. Refused among
 * others: `user.signingkey` (it picks which of the user's keys a host commit
 * signs with), `gc.*` and `maintenance.*` (they change what a host Git does in
 * the fork, and no command writes them on its own but `git maintenance
 * register`), and every key that runs a program or redirects Git.
 */
function harmless(
  e: { section: string; subsection: string | null; key: string; value: string | null },
): boolean {
  if (e.value === null) return false;
  if (e.section === "user" && e.subsection === null) {
    return e.key === "name" || e.key === "email";
  }
  if (e.section === "branch" && e.subsection !== null && isBranchName(e.subsection)) {
    if (e.key === "remote") return REMOTE_NAME.test(e.value);
    if (e.key === "merge") return isValidRefName(e.value);
  }
  return false;
}

/**
 * Why a written `config` is refused, or `null`. It is parsed as Git parses
 * it (docs/engine.md); once its harmless keys (see `harmless` above) are set
 * aside, every remaining key must hold exactly the values marsh wrote, in
 * Git's multi-value sense. Refused: anything that does not parse strictly
 * (not UTF-8, a NUL, a key before any section, a malformed line), any other
 * key (`core.fsmonitor`, `include.path`, `alias.*`, ...), a changed or
 * missing key of ours. The problem names the first such key.
 */
export function configProblem(written: Uint8Array, ours: Uint8Array): string | null {
  const text = decode(written);
  if (text === null) return "not UTF-8";
  if (text.includes("\0")) return "a NUL byte";
  if (text.startsWith("\uFEFF")) return "a byte order mark";
  const firstLine = leadingKeyLine(text);
  if (firstLine !== null) return `a key before any section at line ${firstLine}`;
  const got = parseGitConfig(text);
  if (got.error !== null) return got.error;
  const want = parseGitConfig(ours);
  if (want.error !== null) throw new Error(`marsh's own config does not parse: ${want.error}`);
  const values = (entries: typeof got.entries) => {
    const byKey = new Map<string, (string | null)[]>();
    for (const e of entries) {
      // Git matches section and key case-insensitively and the subsection exactly.
      const name = keyName(e);
      const list = byKey.get(name);
      if (list) list.push(e.value);
      else byKey.set(name, [e.value]);
    }
    return byKey;
  };
  const mine = values(want.entries);
  const theirs = values(got.entries.filter((e) => !harmless(e)));
  for (const [name, list] of theirs) {
    const expected = mine.get(name);
    if (!expected || !sameValues(list, expected)) return name;
  }
  for (const name of mine.keys()) if (!theirs.has(name)) return name;
  return null;
}

function sameValues(a: readonly (string | null)[], b: readonly (string | null)[]): boolean {
  return a.length === b.length && a.every((v, i) => v === b[i]);
}

/**
 * The 1-based line of the first key before any section header, or `null`.
 * Git's reader drops such a key without a word; a strict reading refuses it.
 */
function leadingKeyLine(text: string): number | null {
  const lines = text.split("\n");
  for (const [i, raw] of lines.entries()) {
    const line = raw.replace(/^[ \t\r]+/, "");
    if (line === "" || line.startsWith("#") || line.startsWith(";")) continue;
    return line.startsWith("[") ? null : i + 1;
  }
  return null;
}
