/**
 * A layer's seal (docs/engine.md, "The layered snapshot store"): what makes
 * a layer of the snapshot store trusted, and the check that its data is
 * still what was sealed before a new split's base stacks it again.
 *
 * Under `layers/<id>/`:
 *
 * - `stat`: one record per entry of `data/` (the data dir itself first, then
 *   a pre-order walk with names in Git order), taken after the last write
 *   into the layer: path, kind, permission bits, size, inode, mtime and
 *   ctime in ns. No content is read.
 * - `meta.json` holds the sha256, size and record count of `stat`.
 * - `SEALED`: `sha256 <hex of meta.json>`, written last.
 *
 * Layers are shared by every split of a project and read-only only by their
 * mode: root, or the owner after a `chmod`, can still write them. A write,
 * append, `chmod`, `chown`, `touch` (even one that puts the old mtime back),
 * a new, removed or renamed entry, or a file replaced by another inode all
 * change a record: each moves the entry's ctime, which no writer can set
 * back, or its inode, or its parent directory's. {@linkcode checkData}
 * stats each entry `stat` records by its name, through descriptors
 * (`statx`, no listing: a directory whose own record holds has the same
 * names), and compares, O(entries), so a snapshot reuses a layer only while
 * its data is intact.
 *
 * The seal is a checksum, not a signature: a process with the layer
 * owner's rights that rewrites `stat`, `meta.json` and `SEALED` consistently
 * is not detected. Keeping branches away from the store is the mount
 * namespace's job (docs/engine.md, "Forks").
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import {
  compareNames,
  type Dir,
  InvalidNameError,
  type Stat,
  SymlinkRefusedError,
  WrongKindError,
} from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";

/** A layer that is missing, unsealed, or does not match its seal. */
export class LayerError extends Error {
  override name = "LayerError";
  constructor(readonly id: string, readonly detail: string, options?: ErrorOptions) {
    super(`layer "${id}" ${detail}`, options);
  }
}

/** Layer ids: time-ordered base36 then random base36. */
export const LAYER_ID = /^[a-z0-9]{8,24}$/;
/** Chain names (`tracked`, `with-ignored`). */
export const CHAIN = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** Under `layers/<id>/`: the overlay lower dir. */
export const DATA = "data";
/** Under `layers/<id>/`: the layer's description, covered by the seal. */
export const META = "meta.json";
/** Under `layers/<id>/`: the seal, written last; a layer without it is not trusted. */
export const SEALED = "SEALED";
/** Under `layers/<id>/`: the stat records of `data/` at seal time. */
export const STAT = "stat";
/** The largest `meta.json` read. */
export const MAX_META_BYTES = 64 * 1024;
const enc = new TextEncoder();
const dec = new TextDecoder();

/** What `meta.json` says of `stat`: enough to check `data/` without reading `stat`. */
export interface DataSeal {
  /** The sha256 of `stat`, hex. */
  readonly sha256: string;
  readonly size: number;
  /** Records in `stat`: the entries of `data/`, itself included. */
  readonly entries: number;
}

/** A layer's `meta.json`. Version 1 (before the stat seal) has no `data`. */
export interface LayerMeta {
  readonly version: 1 | 2;
  readonly id: string;
  readonly parent: string | null;
  /** 1 for a bottom layer. */
  readonly depth: number;
  readonly chain: string;
  /** The root id of the stack this layer tops. */
  readonly rootId: string;
  /** Creation time, ms since the epoch. */
  readonly created: number;
  readonly full: boolean;
  /** Regular files in this layer. */
  readonly files: number;
  readonly dirs: number;
  readonly symlinks: number;
  readonly whiteouts: number;
  /** Bytes of the regular files in this layer. */
  readonly bytes: number;
  readonly index: { readonly sha256: string; readonly size: number };
  readonly data?: DataSeal;
  /**
   * A compacted layer (docs/checkpoints.md "Compaction"): the id of the
   * layer whose whole stack this one holds merged, as one bottom layer
   * (`parent` null, `depth` that layer's). A layer sealed on that one may
   * stand on this instead. Absent for every other layer.
   */
  readonly compacts?: string;
}

/** A parsed `meta.json`, or `null` when it is not one. */
export function parseMeta(bytes: Uint8Array): LayerMeta | null {
  let v: unknown;
  try {
    v = JSON.parse(dec.decode(bytes));
  } catch {
    return null; // a torn or foreign file: callers report it as malformed
  }
  if (typeof v !== "object" || v === null) return null;
  const m = v as Record<string, unknown>;
  const nat = (x: unknown) => typeof x === "number" && Number.isSafeInteger(x) && x >= 0;
  const hash = (x: unknown) => typeof x === "string" && /^[0-9a-f]{64}$/.test(x);
  const ix = m.index as Record<string, unknown> | undefined;
  const data = m.data as Record<string, unknown> | undefined;
  const ok = (m.version === 1 || m.version === 2) && typeof m.id === "string" &&
    LAYER_ID.test(m.id) &&
    (m.parent === null || (typeof m.parent === "string" && LAYER_ID.test(m.parent))) &&
    nat(m.depth) && (m.depth as number) >= 1 && typeof m.chain === "string" &&
    CHAIN.test(m.chain) && typeof m.rootId === "string" && /^[0-9a-f]{40}$/.test(m.rootId) &&
    nat(m.created) && typeof m.full === "boolean" && nat(m.files) && nat(m.dirs) &&
    nat(m.symlinks) && nat(m.whiteouts) && nat(m.bytes) && typeof ix === "object" &&
    ix !== null && typeof ix.sha256 === "string" && nat(ix.size) &&
    (m.version === 1
      ? data === undefined
      : typeof data === "object" && data !== null && hash(data.sha256) && nat(data.size) &&
        nat(data.entries)) &&
    (m.compacts === undefined ||
      (typeof m.compacts === "string" && LAYER_ID.test(m.compacts) && m.parent === null));
  return ok ? m as unknown as LayerMeta : null;
}

/** The hex sha256 of `bytes`. */
export function sha256Hex(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** The text of `SEALED` for these `meta.json` bytes. */
export function sealOf(meta: Uint8Array): string {
  return `sha256 ${sha256Hex(meta)}\n`;
}

/**
 * The layer's meta after checking `SEALED` against `meta.json` (not its
 * data: see {@linkcode checkData}).
 *
 * @throws {LayerError} when either is missing or they do not match
 */
export function readSealedMeta(id: string, wrapper: Dir): LayerMeta {
  const seal = wrapper.readFileIfExists(SEALED, 256);
  if (seal === null) throw new LayerError(id, "is not sealed: SEALED is missing");
  const metaBytes = wrapper.readFileIfExists(META, MAX_META_BYTES);
  if (metaBytes === null) throw new LayerError(id, "is not sealed: meta.json is missing");
  if (dec.decode(seal) !== sealOf(metaBytes)) {
    throw new LayerError(id, "is not sealed: meta.json does not match its seal");
  }
  const meta = parseMeta(metaBytes);
  if (meta === null) throw new LayerError(id, "has a malformed meta.json");
  if (meta.id !== id) throw new LayerError(id, `has the meta.json of layer "${meta.id}"`);
  return meta;
}

// ---------------------------------------------------------------------------
// Stat records

/** One entry of `data/` as `stat` records it. */
interface Rec {
  readonly path: string;
  /** {@linkcode KINDS} index; 0 for an entry listed but gone by its stat. */
  readonly kind: number;
  readonly perm: number;
  readonly size: number;
  readonly inoLo: number;
  readonly inoHi: number;
  readonly mtimeSec: number;
  readonly mtimeNsec: number;
  readonly ctimeSec: number;
  readonly ctimeNsec: number;
}

const KINDS = ["gone", "file", "dir", "symlink", "char", "block", "fifo", "socket"] as const;
/** Bytes of a record after its path: u8 kind, u16 perm, u8 pad, f64 × 7. */
const FIXED = 4 + 7 * 8;
const BUF = 64 * 1024;

type StatBits = Stat & { readonly inoLo?: number; readonly inoHi?: number };

function recOf(path: string, st: Stat | null): Rec {
  if (st === null) {
    return {
      path,
      kind: 0,
      perm: 0,
      size: 0,
      inoLo: 0,
      inoHi: 0,
      mtimeSec: 0,
      mtimeNsec: 0,
      ctimeSec: 0,
      ctimeNsec: 0,
    };
  }
  const b = st as StatBits;
  return {
    path,
    kind: KINDS.indexOf(st.kind),
    perm: st.perm,
    size: st.size,
    inoLo: b.inoLo ?? Number(st.ino & 0xffffffffn),
    inoHi: b.inoHi ?? Number(st.ino >> 32n),
    mtimeSec: st.mtimeSec,
    mtimeNsec: st.mtimeNsec,
    ctimeSec: st.ctimeSec,
    ctimeNsec: st.ctimeNsec,
  };
}

/** Encodes records into 64 KiB chunks, handed to `sink` as they fill. */
class Encoder {
  #buf = new Uint8Array(BUF);
  #view = new DataView(this.#buf.buffer);
  #len = 0;
  entries = 0;
  size = 0;

  constructor(readonly sink: (chunk: Uint8Array) => void) {}

  add(r: Rec): void {
    const need = 4 + r.path.length * 3 + FIXED;
    if (this.#len + need > this.#buf.length) {
      this.flush();
      if (need > this.#buf.length) {
        this.#buf = new Uint8Array(need);
        this.#view = new DataView(this.#buf.buffer);
      }
    }
    const v = this.#view;
    const o = this.#len;
    const n = enc.encodeInto(r.path, this.#buf.subarray(o + 4)).written;
    v.setUint32(o, n, true);
    let p = o + 4 + n;
    v.setUint8(p, r.kind);
    v.setUint16(p + 1, r.perm, true);
    v.setUint8(p + 3, 0);
    p += 4;
    for (
      const x of [r.size, r.inoLo, r.inoHi, r.mtimeSec, r.mtimeNsec, r.ctimeSec, r.ctimeNsec]
    ) {
      v.setFloat64(p, x, true);
      p += 8;
    }
    this.#len = p;
    this.entries++;
  }

  flush(): void {
    if (this.#len === 0) return;
    this.size += this.#len;
    this.sink(this.#buf.subarray(0, this.#len));
    this.#len = 0;
  }
}

/** Decodes `stat` bytes. @throws {RangeError} when they are torn */
function decodeRecords(bytes: Uint8Array): Rec[] {
  return [...records(bytes)];
}

/** The records of `stat` bytes, one at a time. @throws {RangeError} when they are torn */
function* records(bytes: Uint8Array): Generator<Rec> {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const fatal = new TextDecoder("utf-8", { fatal: true });
  for (let o = 0; o < bytes.length;) {
    const n = v.getUint32(o, true);
    const raw = bytes.subarray(o + 4, o + 4 + n);
    // Most paths are ASCII: no decoder call for them.
    const path = raw.every((b) => b < 0x80)
      ? String.fromCharCode.apply(null, raw as unknown as number[])
      : fatal.decode(raw);
    let p = o + 4 + n;
    const kind = v.getUint8(p);
    const perm = v.getUint16(p + 1, true);
    p += 4;
    if (p + 7 * 8 > bytes.length) throw new RangeError("torn stat record");
    const f = (i: number) => v.getFloat64(p + i * 8, true);
    yield {
      path,
      kind,
      perm,
      size: f(0),
      inoLo: f(1),
      inoHi: f(2),
      mtimeSec: f(3),
      mtimeNsec: f(4),
      ctimeSec: f(5),
      ctimeNsec: f(6),
    };
    o = p + 7 * 8;
  }
}

/** Visits `data` itself, then every entry below it in pre-order, names in Git order. */
function walk(data: Dir, visit: (r: Rec) => void): void {
  visit(recOf("", data.stat()));
  walkDir(data, "", visit);
}

function walkDir(dir: Dir, rel: string, visit: (r: Rec) => void): void {
  const names = dir.entries().map((e) => e.name).sort(compareNames);
  for (const name of names) {
    const path = rel === "" ? name : `${rel}/${name}`;
    const st = dir.statAt(name);
    visit(recOf(path, st));
    if (st?.kind !== "dir") continue;
    using child = dir.openDir(name);
    walkDir(child, path, visit);
  }
}

/**
 * Records `wrapper/data` into a new `wrapper/stat` (mode `0o444`, left to
 * the caller's `syncfs`) and returns what `meta.json` keeps of it. Call it
 * after the last write into the layer's data.
 */
export function recordData(wrapper: Dir): DataSeal {
  using data = wrapper.openDir(DATA);
  using f = wrapper.createFile(STAT, 0o600);
  const hash = createHash("sha256");
  const out = new Encoder((chunk) => {
    hash.update(chunk);
    f.writeAll(chunk);
  });
  walk(data, (r) => out.add(r));
  out.flush();
  f.chmod(0o444);
  return { sha256: hash.digest("hex"), size: out.size, entries: out.entries };
}

/** Whether an error means `data/` changed under the walk (a listed entry went or changed kind). */
function changedUnderWalk(error: unknown): boolean {
  return error instanceof SymlinkRefusedError || error instanceof WrongKindError ||
    error instanceof InvalidNameError ||
    (error instanceof FsError && (error.errno === E.ENOENT || error.errno === E.ENOTDIR));
}

/** The hash and count of the live records of `data`. */
function liveDigest(data: Dir): { sha256: string; entries: number } {
  const hash: Hash = createHash("sha256");
  const out = new Encoder((chunk) => hash.update(chunk));
  walk(data, (r) => out.add(r));
  out.flush();
  return { sha256: hash.digest("hex"), entries: out.entries };
}

/**
 * Checks that the layer's `data/` is still what its seal recorded. Reads no
 * file content: one `statx` per entry, by the names in `stat` (or, when
 * `stat` is not the file the seal names, one listing per directory and the
 * records hashed as the seal was).
 *
 * @returns `null` when it is intact, else what changed, for a
 *   {@linkcode LayerError} detail (`was changed after it was sealed: a.txt:
 *   size 2 → 11, mtime and ctime changed`)
 */
export function checkData(wrapper: Dir, meta: LayerMeta): string | null {
  const seal = meta.data;
  if (seal === undefined) {
    return "has no record of its data (sealed by an older marsh), " +
      "so a change to it cannot be detected";
  }
  let data: Dir;
  try {
    data = wrapper.openDir(DATA);
  } catch (error) {
    if (changedUnderWalk(error)) return `was changed after it was sealed: data/ is gone`;
    throw error;
  }
  try {
    const sealed = sealedRecords(wrapper, seal);
    if (sealed !== null) {
      if (matchesRecords(data, sealed, seal.entries)) return null;
    } else {
      // The records are not ours to go by: the data must then hash to the seal as walked.
      let live: { sha256: string; entries: number };
      try {
        live = liveDigest(data);
      } catch (error) {
        if (!changedUnderWalk(error)) throw error;
        return `was changed after it was sealed: ${error instanceof Error ? error.message : error}`;
      }
      if (live.sha256 === seal.sha256 && live.entries === seal.entries) return null;
    }
    return `was changed after it was sealed: ${explain(wrapper, data, seal)}`;
  } finally {
    data.close();
  }
}

/** The bytes of `stat` when they are the ones the seal names, else `null`. */
function sealedRecords(wrapper: Dir, seal: DataSeal): Uint8Array | null {
  const bytes = wrapper.readFileIfExists(STAT, seal.size);
  return bytes !== null && bytes.length === seal.size && sha256Hex(bytes) === seal.sha256
    ? bytes
    : null;
}

/**
 * Whether every entry `stat` records is live and unchanged, stat-ing each by
 * its recorded name. A directory whose own record is unchanged has the
 * entries it was sealed with (adding, removing or renaming an entry moves its
 * ctime, which no writer can set back), so none is listed; an entry changed
 * in place moves its own ctime. One `statx` per entry, one open per
 * directory with entries, no `getdents64`: the full walk's result whenever
 * it holds.
 */
function matchesRecords(data: Dir, bytes: Uint8Array, entries: number): boolean {
  /** The directories below `data` on the current path; each opened when a child is met. */
  const open: { path: string; name: string; dir: Dir | null }[] = [];
  let count = 0;
  try {
    for (const r of records(bytes)) {
      count++;
      let st: Stat | null;
      if (count === 1) {
        if (r.path !== "") return false;
        st = data.stat();
      } else {
        const slash = r.path.lastIndexOf("/");
        const parent = slash < 0 ? "" : r.path.slice(0, slash);
        while (open.length > 0 && open.at(-1)!.path !== parent) open.pop()!.dir?.close();
        const top = open.at(-1);
        // Out of pre-order: not a record marsh wrote.
        if (parent !== "" && top === undefined) return false;
        let dir = data;
        if (top !== undefined) dir = top.dir ??= (open.at(-2)?.dir ?? data).openDir(top.name);
        st = dir.statAt(r.path.slice(slash + 1));
        if (st?.kind === "dir") {
          open.push({ path: r.path, name: r.path.slice(slash + 1), dir: null });
        }
      }
      // An entry gone while it was sealed is listed no more: the full walk would differ.
      if (r.kind === 0 || !sameRecord(r, recOf(r.path, st))) return false;
    }
  } catch (error) {
    if (error instanceof RangeError || changedUnderWalk(error)) return false;
    throw error;
  } finally {
    for (const o of open) o.dir?.close();
  }
  return count === entries;
}

/** The first changed path, from `stat` against a second walk; the seal failed already. */
function explain(wrapper: Dir, data: Dir, seal: DataSeal): string {
  const bytes = wrapper.readFileIfExists(STAT, seal.size);
  let sealed: Rec[] | null = null;
  if (bytes !== null && bytes.length === seal.size && sha256Hex(bytes) === seal.sha256) {
    try {
      sealed = decodeRecords(bytes);
    } catch (error) {
      if (!(error instanceof RangeError || error instanceof TypeError)) throw error;
      // Hashed right yet torn: not ours; said below.
    }
  }
  if (sealed === null) return "its data and its stat records no longer match its seal";
  const live: Rec[] = [];
  try {
    walk(data, (r) => live.push(r));
  } catch (error) {
    if (!changedUnderWalk(error)) throw error;
    return error instanceof Error ? error.message : String(error);
  }
  const before = new Map(sealed.map((r) => [r.path, r]));
  const seen = new Set<string>();
  const diffs: { path: string; what: string; parentOnly: boolean }[] = [];
  for (const r of live) {
    seen.add(r.path);
    const old = before.get(r.path);
    if (old === undefined) {
      diffs.push({
        path: r.path,
        what: r.kind === 0 ? "added, then gone" : "added",
        parentOnly: false,
      });
      continue;
    }
    const what = differences(old, r);
    if (what === null) continue;
    // A directory's times move with every entry added or removed in it: a symptom, said last.
    const parentOnly = old.kind === 2 && r.kind === 2 && old.perm === r.perm &&
      old.inoLo === r.inoLo && old.inoHi === r.inoHi;
    diffs.push({ path: r.path, what, parentOnly });
  }
  for (const r of sealed) {
    if (!seen.has(r.path)) diffs.push({ path: r.path, what: "removed", parentOnly: false });
  }
  const first = diffs.find((d) => !d.parentOnly) ?? diffs[0];
  if (first === undefined) return "its stat records differ from its seal";
  const where = first.path === "" ? "data/" : first.path;
  const more = diffs.length > 1 ? ` (${diffs.length} entries differ)` : "";
  return `${where}: ${first.what}${more}`;
}

/** Whether two records of one path agree in every field {@linkcode differences} compares. */
function sameRecord(a: Rec, b: Rec): boolean {
  return a.kind === b.kind && a.inoLo === b.inoLo && a.inoHi === b.inoHi && a.perm === b.perm &&
    a.size === b.size && a.mtimeSec === b.mtimeSec && a.mtimeNsec === b.mtimeNsec &&
    a.ctimeSec === b.ctimeSec && a.ctimeNsec === b.ctimeNsec;
}

/** What differs between two records of one path, or `null`. */
function differences(a: Rec, b: Rec): string | null {
  if (a.kind !== b.kind) return `replaced: a ${KINDS[a.kind]} became a ${KINDS[b.kind]}`;
  if (a.inoLo !== b.inoLo || a.inoHi !== b.inoHi) return "replaced by another inode";
  const out: string[] = [];
  if (a.perm !== b.perm) {
    out.push(
      `mode ${a.perm.toString(8).padStart(4, "0")} → ${b.perm.toString(8).padStart(4, "0")}`,
    );
  }
  if (a.size !== b.size) out.push(`size ${a.size} → ${b.size}`);
  const times: string[] = [];
  if (a.mtimeSec !== b.mtimeSec || a.mtimeNsec !== b.mtimeNsec) times.push("mtime");
  if (a.ctimeSec !== b.ctimeSec || a.ctimeNsec !== b.ctimeNsec) times.push("ctime");
  if (times.length > 0) out.push(`${times.join(" and ")} changed`);
  return out.length === 0 ? null : out.join(", ");
}
