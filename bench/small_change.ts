/**
 * The small change the capture benchmarks measure (10 modified, 5 added, 5
 * deleted): {@linkcode planSmallChange} chooses it from a generated tree's
 * committed files, {@linkcode applySmallChange} writes it to any copy of the
 * tree, and {@linkcode backupSmallChange} / {@linkcode restoreSmallChange}
 * put a live tree back after it.
 *
 * @module
 */

import { dirname, join } from "node:path";
import { HardenedGit } from "./_git.ts";
import { Prng } from "./_prng.ts";
import { exists } from "./_fs.ts";
import { BINARY_KINDS, binaryBody, encoder, LinePools, textBody } from "./tree_text.ts";

/** One planned edit: new bytes for a modified or added path, null for a deletion. */
export interface PlannedEdit {
  readonly path: string;
  readonly status: "M" | "A" | "D";
  readonly bytes: Uint8Array | null;
}

/** The paths a small change touched, each list sorted. */
export interface SmallChange {
  readonly modified: readonly string[];
  readonly added: readonly string[];
  readonly deleted: readonly string[];
}

function isBinary(head: Uint8Array): boolean {
  return head.subarray(0, 8000).includes(0);
}

/**
 * Plans the benchmarks' small change against the committed files of the Git
 * tree `dir`: 10 modified (9 text, 1 binary when the tree has one), 5 added
 * (4 text, 1 binary) and 5 deleted, chosen by `seed`. `.gitignore` files and
 * symlink targets are never touched, so `git status` shows exactly those 20.
 * The plan holds the new bytes, so it can be applied to any copy of the tree
 * (a fork without `.git` included) with {@linkcode applySmallChange}.
 *
 * Needs read on `dir`, `--allow-run=git` and `--allow-env`.
 *
 * @throws {RangeError} when the tree has too few files to choose from.
 */
export async function planSmallChange(
  dir: string,
  seed: number,
  git: HardenedGit,
): Promise<PlannedEdit[]> {
  const rng = new Prng(seed ^ 0x0c4a_46e5);
  const listing = await git.run(dir, ["ls-files", "-s", "-z"]);
  const tracked: Array<{ mode: string; path: string }> = [];
  for (const rec of listing.split("\0")) {
    if (rec === "") continue;
    const tab = rec.indexOf("\t");
    tracked.push({ mode: rec.slice(0, 6), path: rec.slice(tab + 1) });
  }
  const symlinkTargets = new Set<string>();
  for (const t of tracked) {
    if (t.mode !== "120000") continue;
    const target = await Deno.readLink(join(dir, t.path));
    symlinkTargets.add(join(dirname(t.path), target));
  }
  const candidates = rng.shuffle(
    tracked.filter((t) =>
      t.mode !== "120000" && !t.path.endsWith(".gitignore") && !symlinkTargets.has(t.path)
    ).map((t) => t.path),
  );

  const edits: PlannedEdit[] = [];
  const used = new Set<string>();
  let text = 0;
  let binary = 0;
  for (const path of candidates) {
    if (text === 9 && binary === 1) break;
    const old = await Deno.readFile(join(dir, path));
    if (isBinary(old)) {
      if (binary === 1) continue;
      binary++;
      const bytes = old.slice();
      const patch = new Uint8Array(64);
      rng.fill(patch);
      bytes.set(patch.subarray(0, Math.min(64, bytes.length)), Math.floor(bytes.length / 2));
      edits.push({ path, status: "M", bytes });
    } else {
      if (text === 9) continue;
      text++;
      const lines = new TextDecoder().decode(old).split("\n");
      const at = Math.floor(lines.length / 2);
      lines.splice(
        at,
        1,
        `  // changed by the bench (seed ${seed})`,
        `  const edited = ${rng.int(0, 1e6)};`,
      );
      lines.push(`// appended ${rng.next().toString(16)}`, "");
      edits.push({ path, status: "M", bytes: encoder.encode(lines.join("\n")) });
    }
    used.add(path);
  }
  // With fewer than one binary file, the tenth modification is a text one.
  for (const path of candidates) {
    if (edits.length >= 10) break;
    if (used.has(path)) continue;
    const old = await Deno.readFile(join(dir, path));
    if (isBinary(old)) continue;
    edits.push({
      path,
      status: "M",
      bytes: encoder.encode(new TextDecoder().decode(old) + "// more\n"),
    });
    used.add(path);
  }
  const deletions = candidates.filter((p) => !used.has(p)).slice(0, 5);
  for (const path of deletions) edits.push({ path, status: "D", bytes: null });

  const trackedPaths = new Set(tracked.map((t) => t.path));
  const dirs = rng.shuffle([...new Set(candidates.map((p) => dirname(p)))]);
  const pools = new LinePools(rng);
  for (let i = 0; i < 5; i++) {
    const parent = dirs[i % Math.max(1, dirs.length)] ?? ".";
    const name = i === 4 ? `bench_added_${seed}_${i}.png` : `bench_added_${seed}_${i}.go`;
    const path = parent === "." ? name : `${parent}/${name}`;
    if (trackedPaths.has(path)) throw new Error(`Added path is already tracked: "${path}"`);
    const bytes = i === 4
      ? binaryBody(rng, BINARY_KINDS[0]?.[1] ?? [0], 3000)
      : textBody(rng, pools.code, `// ${path}`, rng.int(1500, 6000));
    edits.push({ path, status: "A", bytes });
  }
  if (edits.length !== 20) {
    throw new RangeError(`Tree "${dir}" has too few files for the small change: ${tracked.length}`);
  }
  return edits;
}

/**
 * Applies planned edits under `dir` (writes keep the existing file's mode).
 *
 * Needs read/write on `dir`.
 */
export async function applySmallChange(
  dir: string,
  plan: readonly PlannedEdit[],
): Promise<SmallChange> {
  for (const e of plan) {
    const abs = join(dir, e.path);
    if (e.bytes === null) await Deno.remove(abs);
    else await Deno.writeFile(abs, e.bytes);
  }
  const of = (s: PlannedEdit["status"]) =>
    plan.filter((e) => e.status === s).map((e) => e.path).sort();
  return { modified: of("M"), added: of("A"), deleted: of("D") };
}

/** One file a small change overwrites or deletes, as it was before. */
interface SavedFile {
  readonly path: string;
  readonly bytes: Uint8Array;
  readonly mode: number;
  readonly atime: Date;
  readonly mtime: Date;
}

/** What {@linkcode applySmallChange} will overwrite, delete and add under a tree. */
export interface ChangeBackup {
  readonly dir: string;
  readonly files: readonly SavedFile[];
  readonly added: readonly string[];
  /** The directories holding the edited paths, with their times. */
  readonly dirs: readonly { readonly path: string; readonly atime: Date; readonly mtime: Date }[];
}

function timesOf(info: Deno.FileInfo, path: string): { atime: Date; mtime: Date } {
  if (info.atime === null || info.mtime === null) {
    throw new Error(`No atime or mtime for "${path}" on this platform`);
  }
  return { atime: info.atime, mtime: info.mtime };
}

/**
 * Reads what `plan` will overwrite or delete under `dir` (bytes, mode bits,
 * times) and the times of the directories it touches, so that
 * {@linkcode restoreSmallChange} can put the tree back after the change
 * was applied to it. For running the change on a live cached tree.
 *
 * Needs read on `dir`.
 *
 * @throws {Error} when a path to be added already exists or one to be
 * changed is not a regular file.
 */
export async function backupSmallChange(
  dir: string,
  plan: readonly PlannedEdit[],
): Promise<ChangeBackup> {
  const added = plan.filter((e) => e.status === "A").map((e) => e.path);
  for (const path of added) {
    const abs = join(dir, path);
    if (await exists(abs)) throw new Error(`Path to be added already exists: "${abs}"`);
  }
  const files: SavedFile[] = [];
  for (const e of plan) {
    if (e.status === "A") continue;
    const abs = join(dir, e.path);
    const info = await Deno.lstat(abs);
    if (!info.isFile) throw new Error(`Path to be changed is not a regular file: "${abs}"`);
    files.push({
      path: e.path,
      bytes: await Deno.readFile(abs),
      mode: (info.mode ?? 0o644) & 0o7777,
      ...timesOf(info, abs),
    });
  }
  const dirs = [];
  for (const parent of new Set(plan.map((e) => dirname(e.path)))) {
    const abs = join(dir, parent);
    dirs.push({ path: parent, ...timesOf(await Deno.lstat(abs), abs) });
  }
  return { dir, files, added, dirs };
}

/**
 * Puts back what {@linkcode backupSmallChange} saved: removes the added
 * files, rewrites the modified and deleted ones with their bytes, mode bits
 * and times, then resets the directories' times. Inode numbers and ctimes
 * cannot be restored, so Git re-hashes those 15 files once and finds them
 * unchanged.
 *
 * Needs read/write on the backup's tree.
 */
export async function restoreSmallChange(backup: ChangeBackup): Promise<void> {
  for (const path of backup.added) {
    await Deno.remove(join(backup.dir, path)).catch((err) => {
      if (!(err instanceof Deno.errors.NotFound)) throw err;
    });
  }
  for (const f of backup.files) {
    const abs = join(backup.dir, f.path);
    await Deno.writeFile(abs, f.bytes, { mode: f.mode });
    await Deno.chmod(abs, f.mode);
    await Deno.utime(abs, f.atime, f.mtime);
  }
  for (const d of backup.dirs) await Deno.utime(join(backup.dir, d.path), d.atime, d.mtime);
}

/**
 * Plans the small change from `dir`'s own committed files and applies it
 * there. Operate on a copy: the cached trees must stay pristine.
 *
 * Needs read/write on `dir`, `--allow-run=git` and `--allow-env`.
 */
export async function smallChange(
  dir: string,
  seed: number,
  git?: HardenedGit,
): Promise<SmallChange> {
  const runner = git ?? await HardenedGit.create();
  try {
    return await applySmallChange(dir, await planSmallChange(dir, seed, runner));
  } finally {
    if (!git) await runner.close();
  }
}
