/**
 * Test helpers for this folder: temp dirs, trees on disk, and Git run with a
 * hardened environment. Imported only by `*_test.ts` files.
 *
 * @module
 */

import { dirname, join } from "node:path";
import type { FileChange, GitMode } from "./change.ts";
import { looseObject } from "./loose_object.ts";
import { type FilePatch, writeFilePatch, type WritePatchOptions } from "./writer.ts";

/** One file or symlink of an in-memory tree. */
export interface Entry {
  readonly mode: GitMode;
  readonly bytes: Uint8Array;
}

/** A tree: path (relative, `/`-separated) to entry. Directories are implied. */
export type Tree = Map<string, Entry>;

const enc = new TextEncoder();
const dec = new TextDecoder();

/** Encodes text as UTF-8. */
export function utf8(text: string): Uint8Array {
  return enc.encode(text);
}

/** A temp directory removed on dispose. */
export interface TempDir extends AsyncDisposable {
  readonly path: string;
}

/** Creates a temp directory that `await using` removes. */
export async function tempDir(prefix = "marsh_patch_"): Promise<TempDir> {
  const path = await Deno.makeTempDir({ prefix });
  return {
    path,
    async [Symbol.asyncDispose]() {
      await Deno.remove(path, { recursive: true });
    },
  };
}

/** What a finished Git process said. */
export interface GitResult {
  readonly code: number;
  readonly stdout: Uint8Array;
  readonly stderr: string;
}

/**
 * Runs git in `cwd` with no system or global config, an empty HOME, the C
 * locale and a ceiling at `cwd`'s parent, so nothing outside the test's temp
 * dirs is read. Needs `--allow-run=git` and `--allow-env=PATH`.
 */
export async function git(
  cwd: string,
  args: string[],
  options: { stdin?: Uint8Array; env?: Record<string, string> } = {},
): Promise<GitResult> {
  const home = await Deno.makeTempDir({ prefix: "marsh_patch_home_" });
  try {
    const child = new Deno.Command("git", {
      args,
      cwd,
      clearEnv: true,
      env: {
        PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
        HOME: home,
        GIT_CONFIG_NOSYSTEM: "1",
        GIT_CONFIG_GLOBAL: "/dev/null",
        GIT_ATTR_NOSYSTEM: "1",
        GIT_CEILING_DIRECTORIES: dirname(cwd),
        LC_ALL: "C",
        ...options.env,
      },
      stdin: options.stdin ? "piped" : "null",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    if (options.stdin) {
      const writer = child.stdin.getWriter();
      await writer.write(options.stdin);
      await writer.close();
    }
    const { code, stdout, stderr } = await child.output();
    return { code, stdout, stderr: dec.decode(stderr) };
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

/** Runs git like {@linkcode git} and throws with its stderr unless it exits 0. */
export async function gitOk(
  cwd: string,
  args: string[],
  options: { stdin?: Uint8Array; env?: Record<string, string> } = {},
): Promise<Uint8Array> {
  const result = await git(cwd, args, options);
  if (result.code !== 0) {
    throw new Error(`git ${args.join(" ")} failed with ${result.code}: ${result.stderr}`);
  }
  return result.stdout;
}

/** Writes `tree` under `root` (which exists): files with their mode, symlinks with their target. */
export async function materialize(root: string, tree: Tree): Promise<void> {
  for (const [path, entry] of tree) {
    const full = join(root, path);
    await Deno.mkdir(dirname(full), { recursive: true });
    if (entry.mode === 0o120000) {
      await Deno.symlink(dec.decode(entry.bytes), full);
    } else {
      await Deno.writeFile(full, entry.bytes, { mode: entry.mode & 0o777 });
      await Deno.chmod(full, entry.mode & 0o777);
    }
  }
}

/** Reads the files and symlinks under `root` (skipping a top-level `.git`) into a tree. */
export async function readTree(root: string): Promise<Tree> {
  const tree: Tree = new Map();
  async function walk(dir: string, prefix: string): Promise<void> {
    for await (const item of Deno.readDir(dir)) {
      if (prefix === "" && item.name === ".git") continue;
      const full = join(dir, item.name);
      const path = prefix + item.name;
      const info = await Deno.lstat(full);
      if (info.isSymlink) {
        tree.set(path, { mode: 0o120000, bytes: utf8(await Deno.readLink(full)) });
      } else if (info.isDirectory) {
        await walk(full, path + "/");
      } else {
        const mode = (info.mode ?? 0) & 0o100 ? 0o100755 : 0o100644;
        tree.set(path, { mode, bytes: await Deno.readFile(full) });
      }
    }
  }
  await walk(root, "");
  return tree;
}

/** Returns `length` random bytes (any length, unlike one `getRandomValues` call). */
export function randomBytes(length: number): Uint8Array {
  const out = new Uint8Array(length);
  for (let at = 0; at < length; at += 65536) {
    crypto.getRandomValues(out.subarray(at, Math.min(length, at + 65536)));
  }
  return out;
}

/** Compares two byte arrays. */
export function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** Describes how `actual` differs from `expected` (empty when they are the same tree). */
export function treeDifferences(actual: Tree, expected: Tree): string[] {
  const problems: string[] = [];
  for (const [path, want] of expected) {
    const got = actual.get(path);
    if (got === undefined) problems.push(`missing ${JSON.stringify(path)}`);
    else if (got.mode !== want.mode) {
      problems.push(
        `mode of ${JSON.stringify(path)}: ${got.mode.toString(8)} != ${want.mode.toString(8)}`,
      );
    } else if (!bytesEqual(got.bytes, want.bytes)) {
      problems.push(
        `bytes of ${JSON.stringify(path)} differ (${got.bytes.length} vs ${want.bytes.length})`,
      );
    }
  }
  for (const path of actual.keys()) {
    if (!expected.has(path)) problems.push(`unexpected ${JSON.stringify(path)}`);
  }
  return problems;
}

/** Orders paths by their UTF-8 bytes, as Git sorts its index. */
export function comparePaths(a: string, b: string): number {
  const x = utf8(a);
  const y = utf8(b);
  const n = Math.min(x.length, y.length);
  for (let i = 0; i < n; i++) if (x[i] !== y[i]) return x[i]! - y[i]!;
  return x.length - y.length;
}

/** Writes `bytes` as a loose blob into `objectsDir` (if absent) and returns its id. */
export async function writeLooseBlob(objectsDir: string, bytes: Uint8Array): Promise<string> {
  const object = looseObject(bytes);
  const file = join(objectsDir, object.path);
  await Deno.mkdir(dirname(file), { recursive: true });
  try {
    await Deno.writeFile(file, object.compressed, { createNew: true, mode: 0o444 });
  } catch (error) {
    if (!(error instanceof Deno.errors.AlreadyExists)) throw error;
  }
  return object.id;
}

/** The changes from `oldTree` to `newTree`, sorted by path bytes, as capture hands them over. */
export function changesBetween(oldTree: Tree, newTree: Tree): FileChange[] {
  const paths = [...new Set([...oldTree.keys(), ...newTree.keys()])].sort(comparePaths);
  const changes: FileChange[] = [];
  for (const path of paths) {
    const before = oldTree.get(path) ?? null;
    const after = newTree.get(path) ?? null;
    if (
      before !== null && after !== null && before.mode === after.mode &&
      bytesEqual(before.bytes, after.bytes)
    ) continue;
    changes.push({ path, old: before, new: after });
  }
  return changes;
}

/** Writes every change and concatenates the sections into one patch. */
export function patchFor(
  changes: FileChange[],
  options: WritePatchOptions = {},
): { patch: Uint8Array; results: FilePatch[] } {
  const results = changes.map((change) => writeFilePatch(change, options));
  const patch = new Uint8Array(results.reduce((n, r) => n + r.patch.length, 0));
  let at = 0;
  for (const result of results) {
    patch.set(result.patch, at);
    at += result.patch.length;
  }
  return { patch, results };
}

function describe(problems: string[], what: string): void {
  if (problems.length > 0) throw new Error(`${what}: ${problems.slice(0, 10).join("; ")}`);
}

/**
 * Checks `patch` with real Git outside any repository: `git apply --check`,
 * `git apply` on a copy of `oldTree` must give exactly `newTree` (bytes, modes,
 * symlink targets), and `git apply -R` must give `oldTree` back.
 */
export async function assertApplies(
  root: string,
  oldTree: Tree,
  newTree: Tree,
  patch: Uint8Array,
): Promise<void> {
  const work = await Deno.makeTempDir({ dir: root, prefix: "work_" });
  const patchFile = join(root, `patch_${crypto.randomUUID()}.diff`);
  await Deno.writeFile(patchFile, patch);
  await materialize(work, oldTree);
  await gitOk(work, ["apply", "--check", patchFile]);
  await gitOk(work, ["apply", patchFile]);
  describe(treeDifferences(await readTree(work), newTree), "git apply");
  await gitOk(work, ["apply", "-R", "--check", patchFile]);
  await gitOk(work, ["apply", "-R", patchFile]);
  describe(treeDifferences(await readTree(work), oldTree), "git apply -R");
}

/**
 * Checks `git apply --3way` in a fresh repository whose index is built only
 * from our blob ids and loose objects: `git update-index --refresh` proves
 * the ids match the files, and after the apply the index must hold the new
 * sides' ids and the work tree `newTree`.
 */
export async function assertAppliesThreeWay(
  root: string,
  oldTree: Tree,
  newTree: Tree,
  patch: Uint8Array,
  results: FilePatch[],
  changes: FileChange[],
): Promise<void> {
  const repo = await Deno.makeTempDir({ dir: root, prefix: "repo_" });
  const patchFile = join(root, `patch_${crypto.randomUUID()}.diff`);
  await Deno.writeFile(patchFile, patch);
  await gitOk(repo, ["init", "--quiet", "."]);
  const objects = join(repo, ".git", "objects");
  let indexInfo = "";
  for (const [path, entry] of oldTree) {
    const id = await writeLooseBlob(objects, entry.bytes);
    indexInfo += `${entry.mode.toString(8)} ${id}\t${path}\0`;
  }
  for (const change of changes) if (change.new) await writeLooseBlob(objects, change.new.bytes);
  await gitOk(repo, ["update-index", "-z", "--index-info"], { stdin: utf8(indexInfo) });
  await materialize(repo, oldTree);
  await gitOk(repo, ["update-index", "--refresh"]);
  await gitOk(repo, ["apply", "--3way", patchFile]);
  describe(treeDifferences(await readTree(repo), newTree), "git apply --3way");
  const staged = new Map<string, string>();
  const listing = new TextDecoder().decode(await gitOk(repo, ["ls-files", "-s", "-z"]));
  for (const record of listing.split("\0")) {
    const match = /^(\d+) ([0-9a-f]{40}) (\d)\t(.*)$/s.exec(record);
    if (match) staged.set(match[4]!, `${match[1]} ${match[2]} ${match[3]}`);
  }
  const problems: string[] = [];
  changes.forEach((change, i) => {
    const want = change.new ? `${change.new.mode.toString(8)} ${results[i]!.newId} 0` : undefined;
    if (staged.get(change.path) !== want) {
      problems.push(`index entry of ${JSON.stringify(change.path)}: ${staged.get(change.path)}`);
    }
  });
  describe(problems, "git apply --3way index");
}
