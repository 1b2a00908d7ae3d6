/**
 * Per-fork Git metadata (spec 000 §8): a gitfile `<fork>/.git` pointing at
 * `<split>/.admin/<label>/`, which holds a daemon-written `HEAD`, `config`,
 * `info/`, `packed-refs`, the caller's `index`, and `objects/` borrowing the
 * store's and the user's objects through `info/alternates`. The user's `.git`
 * is never written.
 *
 * Verification regenerates the same bytes from the same spec, so nothing has
 * to be remembered but the spec (which the journal keeps).
 *
 * Every fork's index is a private copy: a branch that may write its admin
 * dir (every branch may) could write a shared inode in place, into a
 * sibling's index (ForkIsolation; docs/engine.md, "Forks").
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "./dir.ts";
import { RejectedError } from "./errors.ts";

/** The branch every fork's `HEAD` names, so `git commit` moves a ref, never HEAD. */
export const FORK_REF = "refs/heads/marsh-split";

/** Everything the admin files are made from. */
export interface AdminSpec {
  /** The absolute path of `<split>/.admin/<label>`, written into the gitfile. */
  readonly adminPath: string;
  /** The commit the caller's HEAD resolved to, or `null` on an unborn branch. */
  readonly head: string | null;
  readonly objectFormat: "sha1" | "sha256";
  /** The caller's index bytes, or `null` when it has none. */
  readonly index: Uint8Array | null;
  /** With a split index (`core.splitIndex`), the `sharedindex.<id>` files it builds on. */
  readonly sharedIndexes?: ReadonlyMap<string, Uint8Array>;
  readonly packedRefs: Uint8Array | null;
  readonly infoExclude: Uint8Array | null;
  /**
   * Absolute object directories, in lookup order: the split's store, then the
   * user's, as `alternateOf` (`protocol/fork_view.ts`) names them.
   */
  readonly alternates: readonly string[];
}

const enc = new TextEncoder();

/** The exact bytes of every file that must stay as written, by path under the admin dir. */
export function fixedFiles(spec: AdminSpec): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  files.set("HEAD", enc.encode(`ref: ${FORK_REF}\n`));
  files.set("config", enc.encode(configText(spec)));
  if (spec.packedRefs) files.set("packed-refs", spec.packedRefs);
  files.set("info/exclude", spec.infoExclude ?? new Uint8Array());
  files.set("objects/info/alternates", enc.encode(spec.alternates.map((a) => `${a}\n`).join("")));
  return files;
}

/** The gitfile's bytes. */
export function gitfileBytes(spec: AdminSpec): Uint8Array {
  return enc.encode(`gitdir: ${spec.adminPath}\n`);
}

function configText(spec: AdminSpec): string {
  // No hooks directory exists and hooksPath points at nothing, so no hook can
  // run; fsmonitor off so a host `git status` in the fork starts nothing.
  const lines = [
    "[core]",
    `\trepositoryformatversion = ${spec.objectFormat === "sha256" ? 1 : 0}`,
    "\tfilemode = true",
    "\tbare = false",
    "\tlogallrefupdates = true",
    "\tfsmonitor = false",
    "\thooksPath = /dev/null",
  ];
  if (spec.objectFormat === "sha256") lines.push("[extensions]", "\tobjectformat = sha256");
  return lines.join("\n") + "\n";
}

/**
 * The index files a fork's Git reads, by their name in its admin dir: `index`
 * and, with a split index, the `sharedindex.<id>` files it builds on. Empty
 * when the caller has no index.
 */
export function indexFiles(spec: AdminSpec): Map<string, Uint8Array> {
  const files = new Map<string, Uint8Array>();
  if (!spec.index) return files;
  files.set("index", spec.index);
  for (const [name, bytes] of spec.sharedIndexes ?? []) files.set(name, bytes);
  return files;
}

/**
 * Writes `.admin/<label>/` under `admins`, with private copies of the index
 * files, and the gitfile at the fork's root.
 */
export function writeAdmin(admins: Dir, label: string, fork: Dir, spec: AdminSpec): void {
  admins.mkdir(label, 0o755);
  using admin = admins.openDir(label);
  for (const [path, bytes] of fixedFiles(spec)) {
    const parts = path.split("/");
    const file = parts.pop()!;
    let dir = admin.dup();
    try {
      for (const part of parts) {
        const next = dir.ensureDir(part);
        dir.close();
        dir = next;
      }
      dir.writeNewFile(file, bytes, 0o644);
    } finally {
      dir.close();
    }
  }
  {
    using refs = admin.ensureDir("refs");
    using heads = refs.ensureDir("heads");
    refs.ensureDir("tags").close();
    if (spec.head) heads.writeNewFile("marsh-split", enc.encode(`${spec.head}\n`), 0o644);
  }
  for (const [name, bytes] of indexFiles(spec)) admin.writeNewFile(name, bytes, 0o644);
  fork.writeNewFile(".git", gitfileBytes(spec), 0o644);
}

/**
 * Git's own state: entries a branch's Git may create or change in its admin dir.
 * Anything else (`commondir`, `gitdir`, `config.worktree`, `hooks`, ...) rejects.
 */
const GIT_STATE = new Set([
  "index",
  "index.lock",
  "objects",
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
  "packed-refs.lock",
  "description",
]);

/** A split index's shared part, which Git writes (and expires) beside `index`. */
export const SHARED_INDEX_NAME = /^sharedindex\.[0-9a-f]{40}(?:[0-9a-f]{24})?$/;

/** Under `objects/info/`, what Git itself writes besides our `alternates`. */
const OBJECTS_INFO_STATE = new Set(["packs", "commit-graph", "commit-graphs"]);

/**
 * Checks the gitfile and admin dir against the spec. Throws
 * {@linkcode RejectedError} naming the first thing that differs.
 */
export function verifyAdmin(admins: Dir, label: string, fork: Dir, spec: AdminSpec): void {
  expectBytes(fork, ".git", gitfileBytes(spec), ".git");
  const admin = openAdmin(admins, label);
  try {
    const fixed = fixedFiles(spec);
    for (const e of admin.entries()) {
      const name = e.name;
      if (GIT_STATE.has(name) || SHARED_INDEX_NAME.test(name)) continue;
      if (name === "HEAD" || name === "config" || name === "packed-refs") continue;
      if (name === "info") continue;
      throw new RejectedError(`admin dir has an unexpected entry: ${name}`);
    }
    for (const [path, bytes] of fixed) {
      const parts = path.split("/");
      const file = parts.pop()!;
      let dir: Dir;
      try {
        dir = admin.openPath(parts.join("/"));
      } catch (cause) {
        throw new RejectedError(`admin file changed: ${path}`, { cause });
      }
      try {
        expectBytes(dir, file, bytes, path);
        if (parts.length > 0) {
          for (const e of dir.entries()) {
            if (e.name === file) continue;
            if (parts.join("/") === "objects/info" && OBJECTS_INFO_STATE.has(e.name)) continue;
            throw new RejectedError(
              `admin dir has an unexpected entry: ${parts.join("/")}/${e.name}`,
            );
          }
        }
      } finally {
        dir.close();
      }
    }
    if (!fixed.has("packed-refs") && admin.statAt("packed-refs") !== null) {
      // Git writes packed-refs when a ref is deleted; we wrote none, so ours
      // is absent by spec. A branch-made one only names its own refs.
      const st = admin.statAt("packed-refs");
      if (st?.kind !== "file") throw new RejectedError("admin file changed: packed-refs");
    }
    rejectSymlinks(admin, "");
  } finally {
    admin.close();
  }
}

function openAdmin(admins: Dir, label: string): Dir {
  try {
    return admins.openDir(label);
  } catch (cause) {
    throw new RejectedError(`admin dir is missing or replaced: .admin/${label}`, { cause });
  }
}

function expectBytes(dir: Dir, name: string, want: Uint8Array, shown: string): void {
  let got: Uint8Array;
  try {
    got = dir.readFile(name, want.length);
  } catch (cause) {
    throw new RejectedError(`admin file changed: ${shown}`, { cause });
  }
  if (got.length !== want.length || got.some((b, i) => b !== want[i])) {
    throw new RejectedError(`admin file changed: ${shown}`);
  }
}

/** A symlink anywhere in the admin dir could point a host `git` elsewhere. */
function rejectSymlinks(dir: Dir, rel: string): void {
  for (const e of dir.entries()) {
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    const path = rel === "" ? e.name : `${rel}/${e.name}`;
    if (kind === "symlink") throw new RejectedError(`admin dir has a symlink: ${path}`);
    if (kind === "dir") {
      using child = dir.openDir(e.name);
      rejectSymlinks(child, path);
    }
  }
}
