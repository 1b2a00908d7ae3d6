/**
 * The project's own Git object store as `marsh commit` writes into it
 * (docs/checkpoints.md, "Checkout and commit"): found from the project root
 * (`.git/objects`, or the gitdir a gitfile names and its `commondir`), asked
 * which objects it already has (loose, in a pack's index, or through its
 * alternates, as Git looks), and given the ones it lacks as loose objects.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { Dir } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import { parseGitConfig } from "../git/git_config.ts";
import { MAX_CONFIG_BYTES } from "../git/git_source.ts";
import { openFan, ownerFix } from "../git/object_export.ts";
import { ExportError } from "./export_errors.ts";

const dec = new TextDecoder();
/** A gitfile or `commondir` holds one line: a path. */
const MAX_POINTER_BYTES = 4096;
/** Git follows alternates this deep (`objects/info/alternates` of alternates). */
const MAX_ALTERNATE_DEPTH = 5;
/** The most objects a pack index may list here (its names are read whole). */
const MAX_PACK_OBJECTS = 64 * 1024 * 1024;
const IDX_MAGIC = 0xff744f63; // "\377tOc"

/** Where the project's repository is. */
export interface GitLocation {
  /** The repository's gitdir (`<root>/.git`, or what a gitfile names). */
  readonly gitDir: string;
  /** The object dir objects are written into. */
  readonly objectsDir: string;
}

function isErrno(error: unknown, errno: number): boolean {
  return error instanceof FsError && error.errno === errno;
}

function readPointer(dir: Dir, name: string, what: string): string | null {
  const bytes = dir.readFileIfExists(name, MAX_POINTER_BYTES);
  if (bytes === null) return null;
  const line = dec.decode(bytes).split("\n")[0]!.trim();
  if (line === "" || line.includes("\0")) {
    throw new ExportError(`${dir.path}/${name} is not a ${what}`);
  }
  return line;
}

function resolveFrom(base: string, p: string): string {
  if (p.startsWith("/")) return p;
  return `${base.replace(/\/+$/, "")}/${p}`;
}

/**
 * The repository of the project at `root` (an open, canonical project root).
 *
 * @throws {ExportError} when there is no `.git`, a gitfile or `commondir` is
 *   malformed, or the repository stores SHA-256 objects
 */
export function locateGit(root: Dir): GitLocation {
  const st = root.statAt(".git");
  if (st === null) {
    throw new ExportError(
      `${root.path} is not a Git repository (no .git): run \`git init\` there first`,
    );
  }
  let gitDir: string;
  if (st.kind === "dir") gitDir = `${root.path}/.git`;
  else if (st.kind === "file") {
    const line = readPointer(root, ".git", "gitfile");
    const m = /^gitdir: (.+)$/.exec(line ?? "");
    if (m === null) throw new ExportError(`${root.path}/.git is a file but not a gitfile`);
    gitDir = Dir.realPath(resolveFrom(root.path, m[1]!));
  } else {
    throw new ExportError(`${root.path}/.git is a ${st.kind}, not a directory or a gitfile`);
  }
  using git = Dir.openAbsolute(gitDir);
  const common = readPointer(git, "commondir", "commondir file");
  const commonDir = common === null ? gitDir : Dir.realPath(resolveFrom(gitDir, common));
  using commonHandle = Dir.openAbsolute(commonDir);
  const config = commonHandle.readFileIfExists("config", MAX_CONFIG_BYTES);
  const format = config === null
    ? undefined
    : parseGitConfig(config).get("extensions", "objectformat");
  if (format !== undefined && format !== "sha1") {
    throw new ExportError(
      `the repository at ${commonDir} stores ${format} objects; marsh's root ids are SHA-1 tree ids`,
    );
  }
  return { gitDir, objectsDir: `${commonDir}/objects` };
}

/** One pack's index: its sorted object names, read on first use. */
class PackIndex {
  #names: Uint8Array | null = null;
  #fanout: Uint32Array | null = null;
  #dead = false;

  constructor(readonly dir: Dir, readonly name: string) {}

  has(oid: Uint8Array): boolean {
    if (!this.#load()) return false;
    const fan = this.#fanout!, names = this.#names!;
    const first = oid[0] as number;
    let lo = first === 0 ? 0 : fan[first - 1] as number;
    let hi = (fan[first] as number) - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const c = compareOid(names, mid * 20, oid);
      if (c === 0) return true;
      if (c < 0) lo = mid + 1;
      else hi = mid - 1;
    }
    return false;
  }

  /** Reads the index; `false` for one that vanished (a repack) or is not version 2. */
  #load(): boolean {
    if (this.#dead) return false;
    if (this.#names !== null) return true;
    try {
      using f = this.dir.openFile(this.name);
      const head = readExactly(f, 8 + 256 * 4);
      const view = new DataView(head.buffer, head.byteOffset, head.length);
      if (view.getUint32(0) !== IDX_MAGIC || view.getUint32(4) !== 2) {
        this.#dead = true;
        return false;
      }
      const fan = new Uint32Array(256);
      for (let i = 0; i < 256; i++) fan[i] = view.getUint32(8 + i * 4);
      const n = fan[255] as number;
      if (n > MAX_PACK_OBJECTS) {
        throw new ExportError(`${this.dir.path}/${this.name} lists ${n} objects; too many to read`);
      }
      this.#names = readExactly(f, n * 20);
      this.#fanout = fan;
      return true;
    } catch (error) {
      if (isErrno(error, E.ENOENT)) {
        this.#dead = true;
        return false;
      }
      throw error;
    }
  }
}

function readExactly(f: { read(buf: Uint8Array): number; path: string }, n: number): Uint8Array {
  const out = new Uint8Array(n);
  let at = 0;
  while (at < n) {
    const got = f.read(out.subarray(at));
    if (got === 0) throw new ExportError(`${f.path} is truncated`);
    at += got;
  }
  return out;
}

function compareOid(names: Uint8Array, at: number, oid: Uint8Array): number {
  for (let i = 0; i < 20; i++) {
    const d = (names[at + i] as number) - (oid[i] as number);
    if (d !== 0) return d;
  }
  return 0;
}

/** An object dir asked for what it has: loose objects, packs, alternates. */
class ObjectDir implements Disposable {
  readonly #packs: PackIndex[] = [];
  readonly #alternates: ObjectDir[] = [];
  readonly #fans = new Map<string, Dir | null>();

  constructor(readonly dir: Dir, depth: number) {
    try {
      const pack = dir.statAt("pack")?.kind === "dir" ? dir.openDir("pack") : null;
      if (pack !== null) {
        for (const e of pack.entries()) {
          if (/^pack-[0-9a-f]{40}\.idx$/.test(e.name)) {
            this.#packs.push(new PackIndex(pack, e.name));
          }
        }
        if (this.#packs.length === 0) pack.close();
      }
      if (depth < MAX_ALTERNATE_DEPTH) this.#openAlternates(depth);
    } catch (error) {
      this.close();
      throw error;
    }
  }

  #openAlternates(depth: number): void {
    if (this.dir.statAt("info")?.kind !== "dir") return;
    using info = this.dir.openDir("info");
    const bytes = info.readFileIfExists("alternates", MAX_CONFIG_BYTES);
    if (bytes === null) return;
    for (const raw of dec.decode(bytes).split("\n")) {
      const line = raw.trim();
      if (line === "" || line.startsWith("#") || line.startsWith('"')) continue;
      let alt: Dir;
      try {
        alt = Dir.openAbsolute(Dir.realPath(resolveFrom(this.dir.path, line)));
      } catch (error) {
        // Git skips an alternate it cannot open, with a warning; so do we.
        if (error instanceof FsError) continue;
        throw error;
      }
      this.#alternates.push(new ObjectDir(alt, depth + 1));
    }
  }

  has(hex: string, oid: Uint8Array): boolean {
    const fanName = hex.slice(0, 2);
    let fan = this.#fans.get(fanName);
    if (fan === undefined) {
      fan = this.dir.statAt(fanName)?.kind === "dir" ? this.dir.openDir(fanName) : null;
      this.#fans.set(fanName, fan);
    }
    if (fan !== null && fan.statAt(hex.slice(2))?.kind === "file") return true;
    for (const p of this.#packs) if (p.has(oid)) return true;
    for (const a of this.#alternates) if (a.has(hex, oid)) return true;
    return false;
  }

  /** Forgets the open fan-out dirs (one was made since it was found missing). */
  forgetFan(fanName: string): void {
    const fan = this.#fans.get(fanName);
    fan?.close();
    this.#fans.delete(fanName);
  }

  close(): void {
    for (const f of this.#fans.values()) f?.close();
    this.#fans.clear();
    const packDirs = new Set(this.#packs.map((p) => p.dir));
    for (const d of packDirs) d.close();
    this.#packs.length = 0;
    for (const a of this.#alternates) a.close();
    this.#alternates.length = 0;
    this.dir.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}

/**
 * The project's object store, open for one export: what it has, and the
 * fan-out dirs new loose objects go into (made as Git makes them: the
 * objects dir's mode, handed to its owner).
 */
export class GitStore implements Disposable {
  readonly #objects: ObjectDir;
  readonly #write = new Map<string, Dir>();
  readonly #fix: (fd: number, uid: number, path: string) => void;
  readonly #fanMode: number;
  readonly location: GitLocation;

  private constructor(location: GitLocation, objects: Dir) {
    this.location = location;
    this.#objects = new ObjectDir(objects, 0);
    this.#fix = ownerFix(objects);
    this.#fanMode = objects.stat().perm;
  }

  /** Opens the store of the project at `root`. @throws {ExportError} as {@linkcode locateGit} */
  static open(root: Dir): GitStore {
    const location = locateGit(root);
    let objects: Dir;
    try {
      objects = Dir.openAbsolute(location.objectsDir);
    } catch (error) {
      if (error instanceof FsError) {
        throw new ExportError(`cannot open ${location.objectsDir}: ${error.message}`, {
          cause: error,
        });
      }
      throw error;
    }
    return new GitStore(location, objects);
  }

  /** The open objects dir. */
  get objects(): Dir {
    return this.#objects.dir;
  }

  /** What new loose objects need: their fan-out dir's owner fix. */
  get fix(): (fd: number, uid: number, path: string) => void {
    return this.#fix;
  }

  /** Whether Git has object `hex` (20 bytes `oid`): loose, packed or in an alternate. */
  has(hex: string, oid: Uint8Array): boolean {
    return this.#objects.has(hex, oid);
  }

  /** The fan-out dir of `hex`, made when missing. Borrowed. */
  fanOf(hex: string): Dir {
    const name = hex.slice(0, 2);
    let fan = this.#write.get(name);
    if (fan === undefined) {
      fan = openFan(this.#objects.dir, name, this.#fanMode, this.#fix);
      this.#write.set(name, fan);
      this.#objects.forgetFan(name);
    }
    return fan;
  }

  close(): void {
    for (const d of this.#write.values()) d.close();
    this.#write.clear();
    this.#objects.close();
  }

  [Symbol.dispose](): void {
    this.close();
  }
}
