/**
 * The source side of a `--git` merge (docs/resolution.md, "The source
 * side"): the Git tree id of the project's working tree as it is now,
 * dirty or not, admitted by the same rules as a snapshot (every file Git's
 * exclude rules do not ignore, tracked or not; never `.git` or `.marsh`),
 * with the bytes on disk hashed as they are (no filter, no line-ending
 * conversion).
 *
 * It is `git add -A` and `git write-tree` into a scratch repository's own
 * index ({@linkcode ScratchGit}): the project's `.git` (index, refs, HEAD,
 * config, hooks) is never read or written, and its objects only through the
 * read-only alternates the caller gives. New blobs go to the write object
 * dir. Without an index cache it reads every admitted file.
 *
 * Needs what {@linkcode ScratchGit} needs, plus read access to the project.
 *
 * @module
 */

import { MARSH_DIR } from "../model/layout.ts";
import { ResolveGitError, type ScratchGit } from "./git.ts";
import { nulFields, pathText } from "./git_raw.ts";

/** The project's exclude inputs, as the snapshot reads them (`splitfs/git/ignore_load.ts`). */
export interface SourceExcludes {
  /** The user's global excludes file, or `null`. */
  readonly globalExcludes: Uint8Array | null;
  /** The project's `.git/info/exclude`, or `null`. */
  readonly infoExclude: Uint8Array | null;
}

const enc = new TextEncoder();

/**
 * One exclude file with Git's precedence kept: a later line wins, and
 * `info/exclude` outranks the global file, so it comes last.
 */
function excludeBytes(x: SourceExcludes): Uint8Array {
  const parts = [x.globalExcludes, x.infoExclude].filter((b): b is Uint8Array => b !== null);
  const nl = enc.encode("\n");
  const all = parts.flatMap((p) => [p, nl]);
  const out = new Uint8Array(all.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of all) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Options of {@linkcode sourceTreeOf}. */
export interface SourceTreeOptions {
  /**
   * An index file kept between calls for this one project root (in marsh's
   * state, never the project's `.git/index`). Git then reads only the files
   * whose stat changed, racy-clean rule included (the file's mtime is kept
   * when it is copied). Made when absent, replaced after each success, and
   * ignored (rebuilt) when Git cannot use it.
   */
  readonly indexCache?: string;
}

/**
 * The tree id of `root`'s working tree now. `git`'s own index is rebuilt
 * here (from `indexCache` when given).
 *
 * @throws {ResolveGitError} when Git fails, or the tree holds a nested Git
 *   repository (it would be a submodule entry, which a snapshot never has)
 */
export async function sourceTreeOf(
  git: ScratchGit,
  root: string,
  excludes: SourceExcludes,
  opts: SourceTreeOptions = {},
): Promise<string> {
  await git.setExclude(excludeBytes(excludes));
  const index = `${git.dir}/index`;
  const seeded = opts.indexCache !== undefined && await copyKeepingMtime(opts.indexCache, index);
  let tree: string;
  try {
    tree = await buildTree(git, root, seeded);
  } catch (error) {
    if (!seeded || isNestedRepo(error)) throw error;
    // A cache Git cannot use costs a full read, never a wrong tree.
    await removeIfThere(index);
    tree = await buildTree(git, root, false);
  }
  if (opts.indexCache !== undefined) {
    const tmp = `${opts.indexCache}.tmp`;
    await copyKeepingMtime(index, tmp);
    await Deno.rename(tmp, opts.indexCache);
  }
  return tree;
}

async function removeIfThere(path: string): Promise<void> {
  await Deno.remove(path).catch((error: unknown) => {
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  });
}

/**
 * Copies `from` to `to` with `from`'s mtime, which Git's racy-clean check
 * compares entries against; `false` when `from` is absent.
 */
async function copyKeepingMtime(from: string, to: string): Promise<boolean> {
  await removeIfThere(to);
  let st: Deno.FileInfo;
  try {
    st = await Deno.stat(from);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
  await Deno.copyFile(from, to);
  await Deno.utime(to, st.atime ?? new Date(), st.mtime ?? new Date(0));
  return true;
}

class NestedRepoError extends ResolveGitError {}

function isNestedRepo(error: unknown): boolean {
  return error instanceof NestedRepoError;
}

async function buildTree(git: ScratchGit, root: string, seeded: boolean): Promise<string> {
  const opts = { workTree: root };
  await git.ok(["add", "-A", "--", "."], opts);
  if (seeded) {
    // An entry a kept index tracks that the rules now ignore: `add -A` keeps
    // tracked files, a snapshot does not.
    const ignored = await git.ok(["ls-files", "-z", "-c", "-i", "--exclude-standard"], opts);
    if (ignored.length > 0) {
      await git.ok(
        ["rm", "-q", "--cached", "--pathspec-from-file=-", "--pathspec-file-nul"],
        { ...opts, stdin: ignored },
      );
    }
  }
  // marsh's own state is never part of a tree, whatever a .gitignore says.
  await git.ok(["rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", MARSH_DIR], opts);
  const staged = await git.ok(["ls-files", "-s", "-z"]);
  for (const f of nulFields(staged)) {
    if (f[0] === 0x31 && f[1] === 0x36 && f[2] === 0x30) { // "160000"
      const path = pathText(f.subarray(f.indexOf(0x09) + 1));
      throw new NestedRepoError(
        `${path} is a nested Git repository: the --git scope cannot plan it (use --filesystem or --paths)`,
      );
    }
  }
  return await git.line(["write-tree"]);
}
