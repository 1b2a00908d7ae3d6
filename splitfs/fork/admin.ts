/**
 * Per-fork Git metadata (docs/rules.md "Snapshot and forks"): a gitfile `<fork>/.git` pointing at
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

import {
  adminRule,
  configProblem,
  headProblem,
  MAX_CONFIG_BYTES,
  MAX_HEAD_BYTES,
  packedRefsProblem,
  REQUIRED_FILES,
} from "./admin_rules.ts";
import type { Dir, Stat } from "../fd/dir.ts";
import { RejectedError } from "../errors.ts";
import { MAX_PACKED_REFS_BYTES } from "../git/git_source.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";

export { SHARED_INDEX_NAME } from "./admin_rules.ts";

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
/** Phases (see `phase_times.ts`): a fork's admin dir, its index copy, its gitfile. */
export const PHASE_ADMIN = "fork admin dir";
export const PHASE_INDEX = "fork index copy";
export const PHASE_GITFILE = "fork gitfile";

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
  // A rejected fork is kept, perhaps with a nested repository the branch
  // made that could not be set aside: with submodules ignored, a host
  // `git status` never starts Git in one.
  lines.push("[diff]", "\tignoreSubmodules = all");
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
/**
 * Writes `.admin/<label>/` under `admins` and the gitfile at the fork's root.
 * Every fork gets its own index copy: a branch may write its index in place
 * (docs/engine.md, "Forks").
 */
export function writeAdmin(admins: Dir, label: string, fork: Dir, spec: AdminSpec): void {
  writeAdminDir(admins, label, spec);
  const t = phaseStart();
  fork.writeNewFile(".git", gitfileBytes(spec), 0o644);
  phaseEnd(PHASE_GITFILE, t);
}

/** Writes `.admin/<label>/` under `admins` as {@linkcode writeAdmin} does, without the gitfile. */
export function writeAdminDir(admins: Dir, label: string, spec: AdminSpec): void {
  let t = phaseStart();
  admins.mkdir(label, 0o755);
  using admin = admins.openDir(label);
  // Each directory made and opened once, by its path under the admin dir.
  const dirs = new Map<string, Dir>();
  const dirAt = (path: string): Dir => {
    if (path === "") return admin;
    let dir = dirs.get(path);
    if (dir === undefined) {
      const slash = path.lastIndexOf("/");
      dir = dirAt(slash < 0 ? "" : path.slice(0, slash)).ensureDir(path.slice(slash + 1));
      dirs.set(path, dir);
    }
    return dir;
  };
  try {
    for (const [path, bytes] of fixedFiles(spec)) {
      const slash = path.lastIndexOf("/");
      dirAt(slash < 0 ? "" : path.slice(0, slash)).writeNewFile(
        path.slice(slash + 1),
        bytes,
        0o644,
      );
    }
    // No refs/tags: Git makes it with the first tag, and a fork's Git needs only refs/.
    const heads = dirAt("refs/heads");
    if (spec.head) heads.writeNewFile("marsh-split", enc.encode(`${spec.head}\n`), 0o644);
  } finally {
    for (const dir of dirs.values()) dir.close();
  }
  phaseEnd(PHASE_ADMIN, t);
  t = phaseStart();
  for (const [name, bytes] of indexFiles(spec)) admin.writeNewFile(name, bytes, 0o644);
  phaseEnd(PHASE_INDEX, t);
}

/**
 * Checks the gitfile and admin dir against the spec and the rules of
 * {@linkcode ./admin_rules.ts}: the gitfile and the fixed files
 * byte-identical, `HEAD`, `config` and `packed-refs` holding only what Git
 * writes harmlessly, no entry without a rule, no symlink anywhere.
 *
 * @throws {RejectedError} naming the first thing refused
 */
export function verifyAdmin(admins: Dir, label: string, fork: Dir, spec: AdminSpec): void {
  expectBytes(fork, ".git", gitfileBytes(spec), ".git");
  const admin = openAdmin(admins, label);
  try {
    const fixed = fixedFiles(spec);
    checkEntries(admin, "", spec, fixed);
    // packed-refs may go: with no refs left to pack, Git needs none.
    const required = new Set([...REQUIRED_FILES, ...fixed.keys()]);
    required.delete("packed-refs");
    for (const path of required) {
      const parts = path.split("/");
      const name = parts.pop()!;
      let found: Stat | null = null;
      try {
        using dir = parts.length === 0 ? admin.dup() : admin.openPath(parts.join("/"));
        found = dir.statAt(name);
      } catch (cause) {
        throw new RejectedError(`admin file changed: ${path}`, { cause });
      }
      if (found === null) throw new RejectedError(`admin file changed: ${path}`);
    }
  } finally {
    admin.close();
  }
}

/** Checks each entry of `dir` (at `rel` under the admin dir) against its rule. */
function checkEntries(
  dir: Dir,
  rel: string,
  spec: AdminSpec,
  fixed: Map<string, Uint8Array>,
): void {
  for (const e of dir.entries()) {
    const path = rel === "" ? e.name : `${rel}/${e.name}`;
    const rule = adminRule(path);
    if (rule === null) throw new RejectedError(`admin dir has an unexpected entry: ${path}`);
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    if (kind === "symlink") throw new RejectedError(`admin dir has a symlink: ${path}`);
    switch (rule) {
      case "state":
        if (kind === "dir") {
          using child = dir.openDir(e.name);
          rejectSymlinks(child, path);
        }
        break;
      case "dir":
      case "open-dir": {
        if (kind !== "dir") throw new RejectedError(`admin file changed: ${path}`);
        using child = dir.openDir(e.name);
        checkEntries(child, path, spec, fixed);
        break;
      }
      case "fixed": {
        const want = fixed.get(path);
        if (want === undefined) {
          throw new RejectedError(`admin dir has an unexpected entry: ${path}`);
        }
        expectBytes(dir, e.name, want, path);
        break;
      }
      case "head":
      case "config":
      case "packed-refs": {
        const ours = fixed.get(path);
        const bytes = readAdminFile(
          dir,
          e.name,
          path,
          rule === "packed-refs"
            ? MAX_PACKED_REFS_BYTES
            : rule === "head"
            ? MAX_HEAD_BYTES
            : MAX_CONFIG_BYTES,
        );
        // What marsh wrote is always fine, even a caller's packed-refs Git would now write otherwise.
        if (ours !== undefined && sameBytes(bytes, ours)) break;
        const problem = rule === "head"
          ? headProblem(bytes, spec.objectFormat)
          : rule === "config"
          ? configProblem(bytes, ours!)
          : packedRefsProblem(bytes, spec.objectFormat);
        if (problem !== null) throw new RejectedError(`admin file changed: ${path} (${problem})`);
        break;
      }
    }
  }
}

function readAdminFile(dir: Dir, name: string, shown: string, limit: number): Uint8Array {
  try {
    return dir.readFile(name, limit);
  } catch (cause) {
    throw new RejectedError(`admin file changed: ${shown}`, { cause });
  }
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
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
  if (!sameBytes(got, want)) {
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
