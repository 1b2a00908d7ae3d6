/**
 * Writing a new layer (docs/engine.md, "The layered snapshot store"): its
 * wrapper and data directories, made on first use, and each changed file or
 * symlink read once from the live tree through no-follow descriptors,
 * hashed as Git would, and written into the layer. A file that changes while
 * it is read is read again.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir, FileHandle, Stat } from "../fd/dir.ts";
import { SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { SnapshotError } from "../errors.ts";
import { E } from "../fd/ffi.ts";
import { isErrno } from "./layers_dir.ts";
import { COPY_ATTEMPTS } from "./snapshot.ts";
import { blobHasher, blobId } from "../git/tree_id.ts";

const SPILL = ".spill";
/** Files up to this size are read into memory once, hashed, and written from memory. */
const IN_MEMORY_LIMIT = 64 * 1024 * 1024;
const CHUNK = 1 << 20;

/** What the new layer holds. */
export interface Written {
  files: number;
  dirs: number;
  symlinks: number;
  whiteouts: number;
  bytes: number;
}

/** The new layer's wrapper directory, made on the first write. */
export class LayerOut {
  readonly #layers: Dir;
  readonly id: string;
  #wrapper: Dir | null = null;
  created = false;

  constructor(layers: Dir, id: string) {
    this.#layers = layers;
    this.id = id;
  }

  wrapper(): Dir {
    if (this.#wrapper === null) {
      this.#layers.mkdir(this.id, 0o700);
      this.created = true;
      this.#wrapper = this.#layers.openDir(this.id);
    }
    return this.#wrapper;
  }

  close(): void {
    this.#wrapper?.close();
    this.#wrapper = null;
  }

  /** Removes the unsealed layer directory, if it was made. */
  discard(): void {
    this.close();
    if (this.created) this.#layers.removeTree(this.id);
    this.created = false;
  }
}

/**
 * A directory of the new layer, made (with its parents) on first use and
 * given the live directory's permission bits when the walk leaves it.
 */
export class OutDir {
  #dir: Dir | null = null;

  constructor(
    readonly parent: OutDir | LayerOut,
    readonly name: string,
    readonly perm: number,
  ) {}

  get(): Dir {
    if (this.#dir === null) {
      const p = this.parent instanceof LayerOut ? this.parent.wrapper() : this.parent.get();
      p.mkdir(this.name, 0o700);
      this.#dir = p.openDir(this.name);
    }
    return this.#dir;
  }

  /** Permissions last, so a read-only directory could still be filled. */
  finish(): void {
    if (this.#dir === null) return;
    this.#dir.chmod(this.perm);
    this.#dir.close();
    this.#dir = null;
  }

  close(): void {
    this.#dir?.close();
    this.#dir = null;
  }
}

/** File or symlink content read for one entry. */
export interface Read {
  readonly st: Stat;
  readonly oid: Uint8Array;
  /** The bytes (a view valid until the next read), or `null` when they were spilled. */
  readonly bytes: Uint8Array | null;
}

let smallBuf = new Uint8Array(CHUNK);

function sameFile(a: Stat, b: Stat): boolean {
  return a.size === b.size && a.mtimeSec === b.mtimeSec && a.mtimeNsec === b.mtimeNsec &&
    a.perm === b.perm && a.ctimeSec === b.ctimeSec && a.ctimeNsec === b.ctimeNsec;
}

/** Opens a file of the source, or `null` when it vanished or is no longer a regular file. */
function openSource(src: Dir, name: string): FileHandle | null {
  try {
    return src.openFile(name);
  } catch (error) {
    // Replaced or removed since it was listed: the next snapshot sees what it became.
    if (isErrno(error, E.ENOENT)) return null;
    if (error instanceof WrongKindError || error instanceof SymlinkRefusedError) return null;
    throw error;
  }
}

/**
 * Reads a file once, hashing it as Git would: into memory up to
 * {@linkcode IN_MEMORY_LIMIT}, else streamed into the layer's spill file.
 * A file that changes while being read is read again, up to
 * {@linkcode COPY_ATTEMPTS} times.
 */
export function readStable(out: LayerOut, src: Dir, name: string, path: string): Read | null {
  for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
    const f = openSource(src, name);
    if (f === null) return null;
    try {
      const before = f.stat();
      if (before.size > IN_MEMORY_LIMIT) {
        const r = spill(out, f, before);
        if (r !== null) return r;
        continue;
      }
      let buf = before.size < smallBuf.length ? smallBuf : new Uint8Array(before.size + 1);
      let len = 0;
      // Up to the stat size, with no read for the end of file: a file that
      // grew or shrank meanwhile has another size in the stat after, and one
      // rewritten in place another mtime and ctime.
      while (len < before.size) {
        const n = f.read(buf.subarray(len, before.size));
        if (n === 0) break;
        len += n;
      }
      const after = f.stat();
      if (len === after.size && sameFile(before, after)) {
        if (buf !== smallBuf && buf.length <= CHUNK * 4) smallBuf = buf;
        return { st: after, oid: blobId(buf.subarray(0, len)), bytes: buf.subarray(0, len) };
      }
      buf = smallBuf;
    } finally {
      f.close();
    }
  }
  throw new SnapshotError(`file kept changing: ${path}`);
}

/** Streams a large file into `<layer>/.spill`, hashing each chunk; `null` when it changed meanwhile. */
function spill(out: LayerOut, f: FileHandle, before: Stat): Read | null {
  const wrapper = out.wrapper();
  if (wrapper.statAt(SPILL) !== null) wrapper.unlink(SPILL);
  const hash = blobHasher(before.size);
  let len = 0;
  let after: Stat;
  {
    using dst = wrapper.createFile(SPILL, 0o600);
    const chunk = new Uint8Array(CHUNK);
    for (;;) {
      const n = f.read(chunk);
      if (n === 0) break;
      len += n;
      if (len > before.size) break;
      hash.update(chunk.subarray(0, n));
      dst.writeAll(chunk.subarray(0, n));
    }
    after = f.stat();
    dst.chmod(after.perm & 0o777);
    dst.setMtime(after.mtimeNs);
  }
  if (len !== after.size || !sameFile(before, after)) {
    wrapper.unlink(SPILL);
    return null;
  }
  return { st: after, oid: new Uint8Array(hash.digest()), bytes: null };
}

/** Drops the spill file of a large file that turned out unchanged. */
export function discardSpill(out: LayerOut, read: Read): void {
  if (read.st.kind === "file" && read.bytes === null) out.wrapper().unlink(SPILL);
}

/** A symlink's target, stable across a stat before and after. */
export function readLink(src: Dir, name: string, path: string): Read | null {
  for (let attempt = 0; attempt < COPY_ATTEMPTS; attempt++) {
    const before = src.statAt(name);
    if (before === null || before.kind !== "symlink") return null;
    let target: Uint8Array;
    try {
      target = src.readlink(name);
    } catch (error) {
      // Replaced by another kind, or removed, since the stat: look again.
      if (isErrno(error, E.EINVAL) || isErrno(error, E.ENOENT)) continue;
      throw error;
    }
    const after = src.statAt(name);
    if (after !== null && after.kind === "symlink" && sameFile(before, after)) {
      return { st: after, oid: blobId(target), bytes: target };
    }
  }
  throw new SnapshotError(`file kept changing: ${path}`);
}

/** Writes a changed file or symlink into the new layer's `dst`, counting it in `written`. */
export function writeEntry(
  out: LayerOut,
  dst: OutDir,
  name: string,
  read: Read,
  written: Written,
): void {
  const dir = dst.get();
  const st = read.st;
  if (st.kind === "symlink") {
    dir.symlink(read.bytes as Uint8Array, name);
    dir.setMtime(name, st.mtimeNs);
    written.symlinks++;
  } else {
    if (read.bytes === null) {
      out.wrapper().rename(SPILL, dir, name);
    } else {
      using f = dir.createFile(name, 0o600);
      f.writeAll(read.bytes);
      f.chmod(st.perm & 0o777);
      f.setMtime(st.mtimeNs);
    }
    written.files++;
    written.bytes += st.size;
  }
}
