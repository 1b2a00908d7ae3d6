/**
 * Deterministic synthetic repositories for the benchmarks.
 *
 * {@linkcode generateTree} writes a tree that looks like a real project:
 * nested directories (depth up to 6, 10–40 entries in most), mostly small
 * source files (log-normal sizes, median 2.5 KiB, tail to 200 KiB), about 3%
 * binary files (random bytes with NULs) that take the rest of a byte budget
 * ({@linkcode targetBytes}: most of the bytes at 1k and 10k files), a few
 * symlinks and executables, a root and a few nested `.gitignore` files, and
 * files they ignore (`*.log`, `build/`, `*.tmp`). It then commits the tree in
 * a fresh Git repository under a hardened environment.
 *
 * {@linkcode cachedTree} keeps generated trees in `bench/.trees/` across runs;
 * {@linkcode planSmallChange} / {@linkcode applySmallChange} make the small
 * change (10 modified, 5 added, 5 deleted) the capture benchmarks measure.
 *
 * @module
 */

import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { HardenedGit } from "./_git.ts";
import { Prng } from "./_prng.ts";

/** What {@linkcode generateTree} wrote: entries other than directories (symlinks included, `.git` excluded) and regular-file bytes. */
export interface TreeStats {
  readonly files: number;
  readonly bytes: number;
}

/** Options of {@linkcode generateTree}. */
export interface GenerateOptions {
  /** Total bytes to aim for; defaults to {@linkcode targetBytes}`(files)`. */
  readonly bytes?: number;
  /** A Git runner to reuse; one is made (and closed) otherwise. */
  readonly git?: HardenedGit;
}

/** Bumped whenever the generator's output changes, so stale caches are rebuilt. */
export const GENERATOR_VERSION = 4;

const MAX_DEPTH = 6;
const TEXT_MEDIAN = 2560;
const TEXT_SIGMA = 1.1;
const TEXT_MAX = 200 * 1024;
const BINARY_MIN = 2 * 1024;
const BINARY_MAX = 16 * 1024 * 1024;

/**
 * The total size aimed at for a tree of `files` files: DESIGN.md §12's
 * 1k ≈ 23 MB and 10k ≈ 215 MB, but 100k ≈ 600 MB instead of its 1.2 GB:
 * generating and committing 1.2 GB took 81–126 s on these machines (Git's
 * hashing and zlib alone 46 s), so the 100k tree keeps its file count and
 * shape and halves the binary bytes. Interpolated log-log between those
 * points and held at their bytes-per-file outside them.
 */
export function targetBytes(files: number): number {
  const points: ReadonlyArray<readonly [number, number]> = [
    [1_000, 23e6],
    [10_000, 215e6],
    [100_000, 600e6],
  ];
  const [first, second, third] = points as [
    readonly [number, number],
    readonly [number, number],
    readonly [number, number],
  ];
  if (files <= first[0]) return Math.round((files * first[1]) / first[0]);
  if (files >= third[0]) return Math.round((files * third[1]) / third[0]);
  const [lo, hi] = files <= second[0] ? [first, second] : [second, third];
  const t = Math.log(files / lo[0]) / Math.log(hi[0] / lo[0]);
  return Math.round(Math.exp(Math.log(lo[1]) + t * (Math.log(hi[1]) - Math.log(lo[1]))));
}

// ---------------------------------------------------------------------------
// Names and content

const DIR_WORDS = [
  "src",
  "lib",
  "core",
  "util",
  "internal",
  "pkg",
  "api",
  "server",
  "client",
  "common",
  "model",
  "view",
  "store",
  "net",
  "io",
  "parse",
  "render",
  "config",
  "plugin",
  "test",
  "docs",
  "tools",
  "scripts",
  "cmd",
  "app",
  "components",
  "hooks",
  "services",
  "handlers",
  "routes",
  "schema",
  "types",
  "db",
  "auth",
  "queue",
  "worker",
  "events",
  "metrics",
  "assets",
  "fixtures",
  "vendor",
  "examples",
  "proto",
  "codec",
  "runtime",
];

const FILE_WORDS = [
  "index",
  "main",
  "utils",
  "helpers",
  "parser",
  "lexer",
  "reader",
  "writer",
  "client",
  "server",
  "handler",
  "router",
  "config",
  "types",
  "errors",
  "state",
  "store",
  "cache",
  "queue",
  "worker",
  "buffer",
  "stream",
  "codec",
  "format",
  "render",
  "layout",
  "table",
  "list",
  "tree",
  "graph",
  "node",
  "edge",
  "path",
  "file",
  "session",
  "token",
  "auth",
  "user",
  "account",
  "order",
  "item",
  "event",
  "signal",
  "timer",
  "clock",
  "retry",
  "limit",
  "pool",
  "batch",
  "sync",
  "fetch",
  "request",
  "response",
  "schema",
  "query",
];

// No .ts/.js/.mjs/...: `deno check .` walks bench/.trees/ (it does not honour
// .gitignore the way fmt and lint do) and would type-check the generated junk.
const TEXT_EXTS = [
  "go",
  "go",
  "go",
  "rs",
  "rs",
  "rs",
  "py",
  "py",
  "py",
  "c",
  "h",
  "java",
  "rb",
  "md",
  "md",
  "json",
  "yaml",
  "toml",
  "txt",
  "css",
  "html",
];

const BINARY_KINDS: ReadonlyArray<readonly [string, readonly number[]]> = [
  ["png", [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 0x0d]],
  ["jpg", [0xff, 0xd8, 0xff, 0xe0, 0, 0x10, 0x4a, 0x46, 0x49, 0x46, 0]],
  ["woff2", [0x77, 0x4f, 0x46, 0x32, 0, 1, 0, 0]],
  ["zip", [0x50, 0x4b, 0x03, 0x04, 0x14, 0, 0, 0]],
  ["bin", [0x7f, 0x45, 0x4c, 0x46, 2, 1, 1, 0]],
];

const PROSE_WORDS = (
  "the a of to and in is it for on with as by this that be are from at or an " +
  "value state cache request handler error buffer stream token user path " +
  "returns when if each every first last next before after without only " +
  "config option default limit timeout retry queue worker event signal"
).split(" ");

const encoder = new TextEncoder();

function identifier(rng: Prng): string {
  const word = rng.pick(FILE_WORDS);
  return rng.chance(0.5) ? word : word + rng.pick(FILE_WORDS).replace(/^./, (c) => c.toUpperCase());
}

function prose(rng: Prng, words: number): string {
  const out: string[] = [];
  for (let i = 0; i < words; i++) out.push(rng.pick(PROSE_WORDS));
  return out.join(" ");
}

function codeLine(rng: Prng): string {
  const indent = "  ".repeat(rng.int(0, 3));
  switch (rng.int(0, 9)) {
    case 0:
      return `${indent}const ${identifier(rng)} = ${identifier(rng)}(${identifier(rng)}, ${
        rng.int(0, 4096)
      });`;
    case 1:
      return `${indent}if (${identifier(rng)} > ${rng.int(0, 999)}) return ${identifier(rng)};`;
    case 2:
      return `${indent}// ${prose(rng, rng.int(3, 12))}`;
    case 3:
      return `export function ${identifier(rng)}(${identifier(rng)}: number, ${
        identifier(rng)
      }: string): boolean {`;
    case 4:
      return `${indent}}`;
    case 5:
      return `${indent}for (let i = 0; i < ${identifier(rng)}.length; i++) {`;
    case 6:
      return `${indent}${identifier(rng)}.push(${identifier(rng)}[i] ?? ${rng.int(0, 99)});`;
    case 7:
      return `import { ${identifier(rng)} } from "./${rng.pick(FILE_WORDS)}";`;
    case 8:
      return "";
    default:
      return `${indent}${identifier(rng)}.${identifier(rng)} = "${prose(rng, rng.int(1, 5))}";`;
  }
}

/** Pre-encoded lines that file bodies are assembled from, so generation is mostly memcpy. */
class LinePools {
  readonly code: Uint8Array[] = [];
  readonly prose: Uint8Array[] = [];

  constructor(rng: Prng) {
    for (let i = 0; i < 4096; i++) this.code.push(encoder.encode(codeLine(rng) + "\n"));
    for (let i = 0; i < 1024; i++) {
      this.prose.push(encoder.encode(prose(rng, rng.int(4, 14)) + ".\n"));
    }
  }
}

/** A text body of exactly `size` bytes: a unique header line, then pooled lines. */
function textBody(
  rng: Prng,
  pool: readonly Uint8Array[],
  header: string,
  size: number,
): Uint8Array {
  const out = new Uint8Array(size);
  const head = encoder.encode(header + "\n");
  let at = Math.min(head.byteLength, size);
  out.set(head.subarray(0, at));
  let n = 0;
  while (at < size) {
    // Every eighth line is unique to this file, so no two blobs share long runs.
    const line = ++n % 8 === 0
      ? encoder.encode(`  const k${n} = 0x${rng.next().toString(16)};\n`)
      : pool[rng.next() % pool.length] as Uint8Array;
    const take = Math.min(line.byteLength, size - at);
    out.set(line.subarray(0, take), at);
    at += take;
  }
  if (size > 0) out[size - 1] = 0x0a;
  return out;
}

function binaryBody(rng: Prng, magic: readonly number[], size: number): Uint8Array {
  const out = new Uint8Array(size);
  rng.fill(out);
  out.set(magic.slice(0, size));
  return out;
}

// ---------------------------------------------------------------------------
// The plan: every path, kind and size, decided before anything is written

type Entry =
  | { kind: "text"; path: string; size: number; prose: boolean }
  | { kind: "exec"; path: string; size: number }
  | { kind: "binary"; path: string; size: number; magic: readonly number[] }
  | { kind: "ignored"; path: string; size: number }
  | { kind: "gitignore"; path: string; content: string }
  | { kind: "symlink"; path: string; target: string };

interface Slot {
  dir: string;
  kind: Entry["kind"] | "ignored-build" | "ignored-tmp";
}

class NameBook {
  #taken = new Map<string, Set<string>>();

  unique(dir: string, stem: string, ext: string): string {
    let set = this.#taken.get(dir);
    if (!set) this.#taken.set(dir, set = new Set());
    const dot = ext === "" ? "" : `.${ext}`;
    let name = stem + dot;
    for (let i = 2; set.has(name); i++) name = `${stem}${i}${dot}`;
    set.add(name);
    return dir === "" ? name : `${dir}/${name}`;
  }
}

function planDirs(
  rng: Prng,
  names: NameBook,
  files: number,
): Array<{ dir: string; files: number }> {
  const out: Array<{ dir: string; files: number }> = [];
  const visit = (dir: string, depth: number, n: number) => {
    if (n <= 40 || depth >= MAX_DEPTH) {
      out.push({ dir, files: n });
      return;
    }
    const entries = rng.int(10, 40);
    let subdirs = rng.int(2, Math.min(12, entries - 2));
    const local = entries - subdirs;
    const remaining = n - local;
    subdirs = Math.max(1, Math.min(subdirs, Math.floor(remaining / 10)));
    out.push({ dir, files: local });
    const base = Math.min(10, Math.floor(remaining / subdirs));
    const weights = Array.from({ length: subdirs }, () => rng.logNormal(1, 0.8));
    const total = weights.reduce((a, b) => a + b, 0);
    let left = remaining - base * subdirs;
    const shares = weights.map((w) => Math.floor(((remaining - base * subdirs) * w) / total));
    for (const s of shares) left -= s;
    for (let i = 0; i < subdirs; i++) {
      const share = base + (shares[i] ?? 0) + (i === subdirs - 1 ? left : 0);
      visit(names.unique(dir, rng.pick(DIR_WORDS), ""), depth + 1, share);
    }
  };
  visit("", 0, files);
  return out;
}

function planTree(seed: number, files: number, bytes: number): Entry[] {
  const rng = new Prng(seed);
  const names = new NameBook();
  const dirs = planDirs(rng, names, files);

  const slots: Slot[] = [];
  for (const d of dirs) for (let i = 0; i < d.files; i++) slots.push({ dir: d.dir, kind: "text" });
  rng.shuffle(slots);

  // The root .gitignore takes slot 0; the other special kinds take the next slots
  // of the shuffled list, so their places are random but their counts exact.
  const counts: Array<[Slot["kind"], number]> = [
    ["gitignore", Math.max(1, Math.round(files / 2500))],
    ["binary", Math.round(files * 0.03)],
    ["exec", Math.max(1, Math.round(files * 0.01))],
    ["symlink", files >= 50 ? Math.max(2, Math.round(files * 0.002)) : 0],
    ["ignored", Math.max(1, Math.round(files * 0.008))],
    ["ignored-build", Math.max(2, Math.round(files * 0.008))],
    ["ignored-tmp", Math.max(1, Math.round(files * 0.004))],
  ];
  let next = 1;
  for (const [kind, count] of counts) {
    for (let i = 0; i < count && next < slots.length; i++) {
      const slot = slots[next++] as Slot;
      slot.kind = kind;
    }
  }

  const entries: Entry[] = [];
  const nestedIgnoreDirs: string[] = [];
  const rootIgnore = "# Generated by marsh bench\n*.log\nbuild/\nnode_modules/\n.cache/\n";
  if (slots.length > 0) {
    entries.push({ kind: "gitignore", path: ".gitignore", content: rootIgnore });
  }
  for (const slot of slots.slice(1)) {
    if (slot.kind === "gitignore") {
      // Nested ignore files go one level down when the root drew the slot.
      const dir = slot.dir === "" ? names.unique("", "tmpdata", "") : slot.dir;
      if (nestedIgnoreDirs.includes(dir)) {
        slot.kind = "text";
      } else {
        nestedIgnoreDirs.push(dir);
        entries.push({ kind: "gitignore", path: `${dir}/.gitignore`, content: "*.tmp\n/out/\n" });
      }
    }
  }
  if (nestedIgnoreDirs.length === 0) nestedIgnoreDirs.push(names.unique("", "tmpdata", ""));
  const buildDirCount = Math.max(1, Math.round(files / 2000));
  const buildParents = rng.shuffle([...new Set(slots.map((s) => s.dir))]).slice(0, buildDirCount);

  const textSize = () =>
    Math.max(40, Math.min(TEXT_MAX, Math.round(rng.logNormal(TEXT_MEDIAN, TEXT_SIGMA))));
  const symlinkSlots: Slot[] = [];
  const binaries: Array<{ kind: "binary"; path: string; size: number; magic: readonly number[] }> =
    [];
  for (const slot of slots.slice(1)) {
    const stem = () =>
      rng.chance(0.4) ? `${rng.pick(FILE_WORDS)}_${rng.pick(FILE_WORDS)}` : rng.pick(FILE_WORDS);
    switch (slot.kind) {
      case "gitignore":
        break;
      case "text": {
        const ext = rng.pick(TEXT_EXTS);
        entries.push({
          kind: "text",
          path: names.unique(slot.dir, stem(), ext),
          size: textSize(),
          prose: ext === "md" || ext === "txt",
        });
        break;
      }
      case "exec":
        entries.push({
          kind: "exec",
          path: names.unique(slot.dir, stem(), rng.chance(0.7) ? "sh" : ""),
          size: Math.max(60, Math.round(rng.logNormal(900, 0.8))),
        });
        break;
      case "binary": {
        const [ext, magic] = rng.pick(BINARY_KINDS);
        const b = {
          kind: "binary" as const,
          path: names.unique(slot.dir, stem(), ext),
          size: 0,
          magic,
        };
        binaries.push(b);
        entries.push(b);
        break;
      }
      case "symlink":
        symlinkSlots.push(slot);
        break;
      case "ignored":
        entries.push({
          kind: "ignored",
          path: names.unique(slot.dir, stem(), "log"),
          size: Math.round(rng.logNormal(4096, 1)),
        });
        break;
      case "ignored-build": {
        const dir = `${rng.pick(buildParents)}/build`.replace(/^\//, "");
        entries.push({
          kind: "ignored",
          path: names.unique(dir, stem(), rng.pick(["o", "a", "map", "d"])),
          size: Math.round(rng.logNormal(8192, 1)),
        });
        break;
      }
      case "ignored-tmp":
        entries.push({
          kind: "ignored",
          path: names.unique(rng.pick(nestedIgnoreDirs), stem(), "tmp"),
          size: Math.round(rng.logNormal(2048, 1)),
        });
        break;
    }
  }

  // Symlinks point (relatively) at tracked text files elsewhere in the tree.
  const targets = entries.filter((e) => e.kind === "text");
  for (const slot of symlinkSlots) {
    if (targets.length === 0) break;
    const target = rng.pick(targets).path;
    const ext = target.includes(".") ? target.slice(target.lastIndexOf(".") + 1) : "";
    const path = names.unique(slot.dir, `link_${rng.pick(FILE_WORDS)}`, ext);
    entries.push({ kind: "symlink", path, target: relative(dirname(path), target) || "." });
  }

  // Binaries take whatever is left of the byte budget, in log-normal shares.
  let used = 0;
  for (const e of entries) {
    if (e.kind === "gitignore") used += e.content.length;
    else if (e.kind !== "symlink" && e.kind !== "binary") used += e.size;
  }
  const weights = binaries.map(() => rng.logNormal(1, 1));
  const weightSum = weights.reduce((a, b) => a + b, 0);
  const left = Math.max(0, bytes - used);
  binaries.forEach((b, i) => {
    const share = weightSum > 0 ? (left * (weights[i] ?? 0)) / weightSum : 0;
    b.size = Math.max(BINARY_MIN, Math.min(BINARY_MAX, Math.round(share)));
  });
  return entries;
}

// ---------------------------------------------------------------------------
// Writing

/**
 * Writes a deterministic repository-like tree of `files` entries into `dir`
 * (created if missing; must not hold anything but what it would write), then
 * `git init`, `git add -A` and `git commit` there under a hardened
 * environment with fixed dates, so equal seeds give equal commits.
 *
 * Needs unscoped `--allow-read` and `--allow-write` (Deno refuses to make
 * symlinks under path-scoped grants), `--allow-run=git` and `--allow-env`.
 *
 * @throws {Error} when git fails or `dir` cannot be written.
 */
export async function generateTree(
  dir: string,
  files: number,
  seed: number,
  options: GenerateOptions = {},
): Promise<TreeStats> {
  if (!Number.isInteger(files) || files < 1) {
    throw new RangeError(`File count must be a positive integer: ${files}`);
  }
  const entries = planTree(seed, files, options.bytes ?? targetBytes(files));
  const rng = new Prng(seed ^ 0x5eed_c0de);
  const pools = new LinePools(rng);

  await Deno.mkdir(dir, { recursive: true });
  const made = new Set<string>();
  let bytes = 0;
  for (const e of entries) {
    const parent = dirname(e.path);
    if (parent !== "." && !made.has(parent)) {
      Deno.mkdirSync(join(dir, parent), { recursive: true });
      made.add(parent);
    }
    const abs = join(dir, e.path);
    let body: Uint8Array;
    switch (e.kind) {
      case "symlink":
        Deno.symlinkSync(e.target, abs);
        continue;
      case "gitignore":
        body = encoder.encode(e.content);
        break;
      case "text":
        body = textBody(rng, e.prose ? pools.prose : pools.code, `// ${e.path}`, e.size);
        break;
      case "exec":
        body = textBody(rng, pools.prose, `#!/bin/sh\n# ${e.path}\nset -eu`, e.size);
        break;
      case "ignored":
        body = textBody(rng, pools.prose, `[generated] ${e.path}`, e.size);
        break;
      case "binary":
        body = binaryBody(rng, e.magic, e.size);
        break;
    }
    Deno.writeFileSync(abs, body);
    if (e.kind === "exec") Deno.chmodSync(abs, 0o755);
    bytes += body.byteLength;
  }

  const git = options.git ?? await HardenedGit.create();
  try {
    await git.run(dir, ["init", "-q"]);
    // Blobs over bigFileThreshold are streamed into one pack instead of one
    // loose object file each; at 100k files that halves the commit time and
    // leaves a .git shaped like a fresh clone's (packed), not 100k loose files.
    await git.run(dir, ["-c", "core.bigFileThreshold=1", "-c", "core.compression=1", "add", "-A"]);
    await git.run(dir, [
      "commit",
      "-q",
      "--no-verify",
      "-m",
      `Generated tree: ${files} files, seed ${seed}`,
    ]);
  } finally {
    if (!options.git) await git.close();
  }
  return { files: entries.length, bytes };
}

// ---------------------------------------------------------------------------
// The cache in bench/.trees/

/** The folder that holds cached trees: `bench/.trees/` (git-ignored). */
export const TREE_CACHE = fileURLToPath(new URL("./.trees/", import.meta.url));

/** A cached tree and how it came to be. */
export interface CachedTree {
  /** The tree (a Git worktree with one commit). */
  readonly dir: string;
  readonly stats: TreeStats;
  /** The generated commit. */
  readonly head: string;
  /** True when an existing complete cache entry was reused. */
  readonly reused: boolean;
  /** Seconds spent generating (0 when reused). */
  readonly generationSeconds: number;
}

interface Marker {
  version: number;
  files: number;
  seed: number;
  stats: TreeStats;
  head: string;
}

function isMarker(x: unknown): x is Marker {
  if (typeof x !== "object" || x === null) return false;
  const m = x as Record<string, unknown>;
  const stats = m.stats as Record<string, unknown> | undefined;
  return typeof m.version === "number" && typeof m.files === "number" &&
    typeof m.seed === "number" && typeof m.head === "string" &&
    typeof stats === "object" && stats !== null &&
    typeof stats.files === "number" && typeof stats.bytes === "number";
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.lstat(path);
    return true;
  } catch (err) {
    if (err instanceof Deno.errors.NotFound) return false;
    throw err;
  }
}

/**
 * Why a cached tree is not as generated, or null when it is: its HEAD must be
 * the generated commit and `git status --porcelain --untracked-files=all` must
 * be empty (modified, deleted and new unignored files all show there).
 */
export async function dirtyReason(
  dir: string,
  head: string,
  git: HardenedGit,
): Promise<string | null> {
  const actual = (await git.run(dir, ["rev-parse", "HEAD"])).trim();
  if (actual !== head) return `HEAD is ${actual}, not ${head}`;
  const status = await git.run(dir, ["status", "--porcelain", "--untracked-files=all"]);
  if (status !== "") {
    return `git status shows changes: ${status.split("\n").slice(0, 3).join("; ")}`;
  }
  return null;
}

/**
 * Returns the tree for `files`/`seed` from `bench/.trees/<files>-<seed>/tree`,
 * generating it when the entry is missing, incomplete (no completion marker,
 * which is written last), from another generator version, or dirty. A
 * leftover `.marsh/` from an engine run is removed first: the generator
 * never writes one.
 *
 * Needs read/write on `bench/.trees/`, `--allow-run=git` and `--allow-env`.
 */
export async function cachedTree(
  files: number,
  seed: number,
  git: HardenedGit,
  log: (line: string) => void = () => {},
): Promise<CachedTree> {
  const entry = join(TREE_CACHE, `${files}-${seed}`);
  const dir = join(entry, "tree");
  const markerPath = join(entry, "complete.json");
  let marker: unknown = null;
  try {
    marker = JSON.parse(await Deno.readTextFile(markerPath));
  } catch (err) {
    if (!(err instanceof Deno.errors.NotFound) && !(err instanceof SyntaxError)) throw err;
  }
  if (isMarker(marker) && marker.version === GENERATOR_VERSION && await exists(dir)) {
    const leftover = join(dir, ".marsh");
    if (await exists(leftover)) {
      log(`removing leftover engine state "${leftover}"`);
      await Deno.remove(leftover, { recursive: true });
    }
    const dirty = await dirtyReason(dir, marker.head, git);
    if (dirty === null) {
      return { dir, stats: marker.stats, head: marker.head, reused: true, generationSeconds: 0 };
    }
    log(`cached tree "${dir}" is not pristine (${dirty}); regenerating`);
  }
  await Deno.remove(entry, { recursive: true }).catch((err) => {
    if (!(err instanceof Deno.errors.NotFound)) throw err;
  });
  await Deno.mkdir(entry, { recursive: true });
  log(`generating ${files} files (seed ${seed}) in "${dir}"`);
  const t0 = performance.now();
  const stats = await generateTree(dir, files, seed, { git });
  const head = (await git.run(dir, ["rev-parse", "HEAD"])).trim();
  const generationSeconds = (performance.now() - t0) / 1000;
  const done: Marker = { version: GENERATOR_VERSION, files, seed, stats, head };
  await Deno.writeTextFile(markerPath, JSON.stringify(done, null, 2) + "\n");
  return { dir, stats, head, reused: false, generationSeconds };
}

// ---------------------------------------------------------------------------
// The small change

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
