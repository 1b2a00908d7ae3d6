/**
 * Writing the small trees of a `--git` merge (docs/resolution.md, "Small
 * trees") into the split's objects dir, one of two ways, by size:
 *
 * - `mktree`: every tree of the three sides with one `git mktree -z
 *   --batch`. A parent names its subtrees by id, so the ids are computed
 *   here first (Git's tree format and order) and must agree with the ones
 *   `mktree` prints. One Git process, but `mktree` reads the type of every
 *   entry's object (an inflate per loose object), which grows with the
 *   entries.
 * - `index`: per side, `update-index --index-info` into the scratch index
 *   and `write-tree`, which only checks that each object exists. Six Git
 *   processes, cheaper per entry.
 *
 * Either way Git refuses an entry whose object is not in the object dirs.
 *
 * Needs what `ScratchGit` needs.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import { createHash } from "node:crypto";
import { ResolveGitError, type ScratchGit, textBytes } from "./git.ts";

/** One leaf of a tree: a path, its Git mode (`100644`, `100755`, `120000`) and blob id. */
export interface Leaf {
  readonly path: string;
  readonly mode: string;
  readonly oid: string;
}

/** How the trees are written; see the module's doc. */
export type TreeWay = "mktree" | "index";

/** Up to this many tree entries over the three sides, `mktree` is the faster way (measured). */
export const MKTREE_MAX_ENTRIES = 300;

const enc = new TextEncoder();
const dec = new TextDecoder();
const HEX = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** A directory: its leaves (name → mode, id) and its subdirectories. */
interface Dir {
  readonly leaves: Map<string, { readonly mode: string; readonly oid: string }>;
  readonly dirs: Map<string, Dir>;
}

function nest(leaves: readonly Leaf[]): Dir {
  const root: Dir = { leaves: new Map(), dirs: new Map() };
  for (const l of leaves) {
    const names = l.path.split("/");
    let d = root;
    for (const name of names.slice(0, -1)) {
      let sub = d.dirs.get(name);
      if (sub === undefined) d.dirs.set(name, sub = { leaves: new Map(), dirs: new Map() });
      d = sub;
    }
    d.leaves.set(names.at(-1)!, { mode: l.mode, oid: l.oid });
  }
  return root;
}

/** How many entries the trees of `dir` hold (leaves and subtrees). */
function entryCount(dir: Dir): number {
  let n = dir.leaves.size + dir.dirs.size;
  for (const sub of dir.dirs.values()) n += entryCount(sub);
  return n;
}

interface Entry {
  readonly name: string;
  /** The name as Git sorts it: a subtree's as if it ended in `/`. */
  readonly key: Buffer;
  readonly mode: string;
  readonly type: "tree" | "blob";
  readonly oid: string;
}

/**
 * Every tree of `dir`, children first, as `mktree -z` records with the id
 * Git gives it; returns `dir`'s id.
 */
function treeRecords(
  dir: Dir,
  hash: "sha1" | "sha256",
  out: { records: string; id: string }[],
): string {
  const entries: Entry[] = [];
  for (const [name, sub] of dir.dirs) {
    const oid = treeRecords(sub, hash, out);
    entries.push({ name, key: Buffer.from(`${name}/`), mode: "40000", type: "tree", oid });
  }
  for (const [name, l] of dir.leaves) {
    entries.push({ name, key: Buffer.from(name), mode: l.mode, type: "blob", oid: l.oid });
  }
  entries.sort((a, b) => Buffer.compare(a.key, b.key));
  const h = createHash(hash);
  const body = entries.map((e) =>
    Buffer.concat([enc.encode(`${e.mode} ${e.name}\0`), Buffer.from(e.oid, "hex")])
  );
  h.update(`tree ${body.reduce((n, b) => n + b.length, 0)}\0`);
  for (const b of body) h.update(b);
  out.push({
    records: entries.map((e) => `${e.mode.padStart(6, "0")} ${e.type} ${e.oid}\t${e.name}\0`)
      .join(""),
    id: h.digest("hex"),
  });
  return out.at(-1)!.id;
}

function missing(stderr: string, code: number, what: string): ResolveGitError {
  return new ResolveGitError(
    `${what} (a blob the merge inputs name is not in the split's objects?): ${
      stderr || `exit ${code}`
    }`,
  );
}

async function viaMktree(git: ScratchGit, dirs: readonly Dir[], hash: "sha1" | "sha256") {
  const trees: { records: string; id: string }[] = [];
  const roots = dirs.map((d) => treeRecords(d, hash, trees));
  // An empty record ends each tree.
  const out = await git.run(["mktree", "-z", "--batch"], {
    stdin: textBytes(trees.map((t) => `${t.records}\0`).join("")),
  });
  if (out.code !== 0) throw missing(out.stderr, out.code, "the small trees cannot be written");
  const ids = dec.decode(out.stdout).split("\n").filter((l) => l !== "");
  trees.forEach((t, i) => {
    if (ids[i] !== t.id) {
      throw new ResolveGitError(
        `git mktree wrote tree ${ids[i] ?? "(none)"} where ${t.id} was computed`,
      );
    }
  });
  return roots;
}

async function viaIndex(git: ScratchGit, sides: readonly (readonly Leaf[])[]) {
  const roots: string[] = [];
  for (const leaves of sides) {
    await Deno.remove(`${git.dir}/index`).catch((error: unknown) => {
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    });
    if (leaves.length > 0) {
      const records = leaves.map((l) => `${l.mode} ${l.oid}\t${l.path}\0`).join("");
      await git.ok(["update-index", "-z", "--index-info"], { stdin: textBytes(records) });
    }
    const out = await git.run(["write-tree"]);
    if (out.code !== 0) throw missing(out.stderr, out.code, "the small trees cannot be written");
    roots.push(dec.decode(out.stdout).trim());
  }
  return roots;
}

/**
 * Writes one tree per entry of `sides` (each a side's leaves; paths valid
 * and no leaf the parent of another) and returns their ids, in order.
 *
 * @throws {ResolveGitError} when Git refuses (a missing blob), or its ids
 *   disagree with the ones computed
 */
export async function writeTrees(
  git: ScratchGit,
  sides: readonly (readonly Leaf[])[],
  way?: TreeWay,
): Promise<string[]> {
  const dirs = sides.map(nest);
  const chosen = way ??
    (dirs.reduce((n, d) => n + entryCount(d), 0) <= MKTREE_MAX_ENTRIES ? "mktree" : "index");
  const anyId = sides.flat()[0]?.oid;
  const hash = (anyId === undefined ? git.objects.format === "sha256" : anyId.length === 64)
    ? "sha256"
    : "sha1";
  const roots = chosen === "mktree" ? await viaMktree(git, dirs, hash) : await viaIndex(git, sides);
  for (const r of roots) {
    if (!HEX.test(r)) throw new ResolveGitError(`git wrote a tree id that is not one: ${r}`);
  }
  return roots;
}
