/**
 * What `marsh commit` leaves out (docs/guide.md, "Committing a checkpoint"):
 * paths the root's own `.gitignore` files (and `.git/info/exclude`) ignore
 * and that the commit's parent does not track, as `git add -A` would. A
 * checkpoint keeps an operation's build output (`target/`, `node_modules/`)
 * so that the next operation and a rollback find it; Git history should not.
 *
 * With hardened Git only (`hardened_git.ts`), in a scratch dir under the
 * control dir that holds nothing but the `.gitignore` files on the candidate
 * paths' directories:
 *
 * 1. the candidates: the root's paths the parent lacks (`diff-tree
 *    --diff-filter=A`), or every path for a commit without a parent;
 * 2. `check-ignore --no-index` of the candidates against those files;
 * 3. when some are ignored: a scratch index read from the root, the ignored
 *    paths removed, `write-tree`.
 *
 * A path that is not UTF-8 is never left out: its name would not survive
 * the round trip through text.
 *
 * @module
 */

import type { GitRun } from "./hardened_git.ts";

/** Runs hardened Git with extra environment (the scratch index or work tree). */
export type RunGit = (
  args: readonly string[],
  extraEnv?: Readonly<Record<string, string>>,
  stdin?: string,
) => Promise<GitRun>;

/** The tree to commit and the paths left out of it. */
export interface WithoutIgnored {
  /** The root's tree id when nothing was left out, else the filtered tree's. */
  readonly tree: string;
  /** The paths left out, sorted; empty when none. */
  readonly ignored: readonly string[];
}

const OID = /^[0-9a-f]{40}$/;

function nulList(out: string): string[] {
  return out.split("\0").filter((p) => p !== "");
}

function failed(step: string, r: GitRun): Error {
  return new Error(`git ${step} failed (exit ${r.code}): ${r.stderr.trim()}`);
}

/** Every directory a path lies in, the top (`""`) included. */
function dirsOf(paths: readonly string[]): string[] {
  const dirs = new Set<string>([""]);
  for (const p of paths) {
    for (let i = p.indexOf("/"); i !== -1; i = p.indexOf("/", i + 1)) dirs.add(p.slice(0, i));
  }
  return [...dirs].sort();
}

/** A tree path that is safe to recreate under the scratch dir. */
function safePath(p: string): boolean {
  return !p.includes("\n") &&
    p.split("/").every((c) => c !== "" && c !== "." && c !== ".." && c !== ".git");
}

/**
 * The tree `marsh commit` commits for `root` on top of `parent` (a commit
 * id, or null for a commit without one): the root without the paths Git
 * ignores that the parent does not track.
 *
 * @param scratch a directory that does not exist yet, removed before this returns
 * @throws {Error} naming the Git step that failed
 */
export async function withoutIgnored(
  run: RunGit,
  root: string,
  parent: string | null,
  scratch: string,
): Promise<WithoutIgnored> {
  const listed = parent === null
    ? await run(["ls-tree", "-r", "-z", "--name-only", root])
    : await run([
      "diff-tree",
      "-r",
      "-z",
      "--no-renames",
      "--name-only",
      "--diff-filter=A",
      parent,
      root,
    ]);
  if (listed.code !== 0) throw failed(parent === null ? "ls-tree" : "diff-tree", listed);
  const candidates = nulList(listed.stdout).filter((p) => !p.includes("\uFFFD") && safePath(p));
  if (candidates.length === 0) return { tree: root, ignored: [] };
  Deno.mkdirSync(scratch, { recursive: false, mode: 0o700 });
  try {
    const work = `${scratch}/work`;
    Deno.mkdirSync(work, { mode: 0o700 });
    const dirs = dirsOf(candidates);
    const files = dirs.map((d) => d === "" ? ".gitignore" : `${d}/.gitignore`);
    const kinds = await run(
      ["cat-file", "--batch-check=%(objectname) %(objecttype)"],
      {},
      files.map((f) => `${root}:${f}\n`).join(""),
    );
    if (kinds.code !== 0) throw failed("cat-file --batch-check", kinds);
    const lines = kinds.stdout.split("\n").filter((l) => l !== "");
    for (const [i, line] of lines.entries()) {
      const [oid, type] = line.split(" ");
      if (type !== "blob" || !OID.test(oid ?? "")) continue;
      const blob = await run(["cat-file", "blob", oid!]);
      if (blob.code !== 0) throw failed("cat-file blob", blob);
      const dir = dirs[i]!;
      if (dir !== "") Deno.mkdirSync(`${work}/${dir}`, { recursive: true, mode: 0o700 });
      Deno.writeTextFileSync(`${work}/${files[i]}`, blob.stdout, { mode: 0o600 });
    }
    const checked = await run(
      ["-C", work, "check-ignore", "--no-index", "-z", "--stdin"],
      { GIT_WORK_TREE: work },
      candidates.join("\0") + "\0",
    );
    // check-ignore exits 1 when no path is ignored.
    if (checked.code !== 0 && checked.code !== 1) throw failed("check-ignore", checked);
    const ignored = nulList(checked.stdout).sort();
    if (ignored.length === 0) return { tree: root, ignored: [] };
    const index = { GIT_INDEX_FILE: `${scratch}/index` };
    const read = await run(["read-tree", root], index);
    if (read.code !== 0) throw failed("read-tree", read);
    const removed = await run(
      ["update-index", "-z", "--force-remove", "--stdin"],
      index,
      ignored.join("\0") + "\0",
    );
    if (removed.code !== 0) throw failed("update-index", removed);
    const written = await run(["write-tree"], index);
    const tree = written.stdout.trim();
    if (written.code !== 0 || !OID.test(tree)) throw failed("write-tree", written);
    return { tree, ignored };
  } finally {
    Deno.removeSync(scratch, { recursive: true });
  }
}
