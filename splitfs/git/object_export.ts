/**
 * Writes the blobs a split's patches need into the project's own object
 * store before join's consumer runs (docs/guide.md, "Applying a branch's
 * patch"). `git apply --3way` with the split's `store.git` as an alternate
 * finds those blobs there and never copies them; once join removes the split,
 * the user's index would name objects that no longer exist.
 *
 * Objects are copied only as loose blobs, each checked against its name
 * first, written under a temporary name and renamed without replacing, so an
 * object already in the project is never touched.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { createHash } from "node:crypto";
import { Unzlib, zlibSync } from "fflate";
import { ZERO_ID } from "../../patch/blob_id.ts";
import { MAX_FILE_BYTES } from "../capture/compare.ts";
import type { Dir, FileHandle } from "../fd/dir.ts";
import { check, E, FsError, libc } from "../fd/ffi.ts";
import { parseGitConfig } from "./git_config.ts";
import { MAX_CONFIG_BYTES } from "./git_source.ts";
import { readRel } from "../fd/read_rel.ts";
import { openPatch } from "../capture/render.ts";

/** A store object is not what its name says, or the export could not finish. */
export class ObjectExportError extends Error {
  override name = "ObjectExportError";
}

/** What {@linkcode exportObjects} did. */
export interface ExportSummary {
  /** Objects written into the target. */
  readonly written: number;
  /** Objects the target already had (left untouched). */
  readonly present: number;
}

/** `index <40 hex>..<40 hex>[ <mode>]`: the longest header line the scan keeps. */
const INDEX_LINE_MAX = 6 + 40 + 2 + 40 + 7;
/** A patch's `index <old id>..<new id>[ <mode>]` line: the two ids and the mode, when given. */
export const INDEX_LINE = /^index ([0-9a-f]{40})\.\.([0-9a-f]{40})(?: ([0-7]{6}))?$/;
const LF = 0x0a;
const READ_CHUNK = 1 << 20;
const latin1 = new TextDecoder("latin1");

/**
 * Collects the blob ids a patch's `index` lines name (both sides, without the
 * all-zero id of a missing side), streaming it in bounded pieces. Only a
 * header can match: hunk lines start with ` `, `+`, `-` or `\`, and binary
 * hunk lines are base85, which has no space.
 */
export function patchBlobIds(patch: FileHandle, into: Set<string>): void {
  const line = new Uint8Array(INDEX_LINE_MAX);
  let len = 0;
  let long = false;
  const end = () => {
    if (!long && len > 0) {
      const m = INDEX_LINE.exec(latin1.decode(line.subarray(0, len)));
      if (m) { for (const id of [m[1]!, m[2]!]) if (id !== ZERO_ID) into.add(id); }
    }
    len = 0;
    long = false;
  };
  const buf = new Uint8Array(READ_CHUNK);
  for (let n = patch.read(buf); n > 0; n = patch.read(buf)) {
    for (let i = 0; i < n;) {
      const nl = buf.subarray(0, n).indexOf(LF, i);
      const stop = nl === -1 ? n : nl;
      const take = Math.min(stop - i, INDEX_LINE_MAX - len);
      if (!long) {
        line.set(buf.subarray(i, i + take), len);
        len += take;
        if (take < stop - i) long = true;
      }
      if (nl === -1) break;
      end();
      i = nl + 1;
    }
  }
  end();
}

/** The largest store object read: a blob capture took (at most MAX_FILE_BYTES), deflated. */
const MAX_COMPRESSED = MAX_FILE_BYTES + MAX_FILE_BYTES / 64 + 4096;
/** `blob <len>\0` plus the blob. */
const MAX_RAW = MAX_FILE_BYTES + 32;
/** Input fed to the inflater per step: bounds what one step can produce (deflate expands at most ~1032x). */
const INFLATE_STEP = 16 * 1024;
const HEX_ID = /^[0-9a-f]{40}$/;
const BLOB_HEADER = /^blob (0|[1-9][0-9]{0,9})$/;

/** Inflates a loose object, refusing one that grows past {@linkcode MAX_RAW}. */
function inflateBounded(data: Uint8Array, what: string): Uint8Array {
  const parts: Uint8Array[] = [];
  let total = 0;
  const inflater = new Unzlib((chunk) => {
    total += chunk.length;
    if (total > MAX_RAW) throw new ObjectExportError(`${what} inflates past ${MAX_RAW} bytes`);
    parts.push(chunk);
  });
  try {
    for (let off = 0; off < data.length; off += INFLATE_STEP) {
      inflater.push(data.subarray(off, off + INFLATE_STEP), off + INFLATE_STEP >= data.length);
    }
  } catch (error) {
    if (error instanceof ObjectExportError) throw error;
    throw new ObjectExportError(`${what} is not a zlib stream: ${error}`, { cause: error });
  }
  const raw = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    raw.set(p, at);
    at += p.length;
  }
  return raw;
}

/**
 * Reads store object `id` and checks it: a blob whose header states its
 * length and whose SHA-1 is `id`. Returns the raw `blob <len>\0<bytes>`.
 */
function readVerified(store: Dir, id: string, storePath: string): Uint8Array {
  const what = `object ${id} in ${storePath}`;
  let compressed: Uint8Array;
  try {
    using fan = store.openDir(id.slice(0, 2));
    compressed = fan.readFile(id.slice(2), MAX_COMPRESSED);
  } catch (error) {
    if (error instanceof FsError && error.errno === E.ENOENT) {
      throw new ObjectExportError(`${what} is missing`, { cause: error });
    }
    throw new ObjectExportError(`${what} cannot be read: ${(error as Error).message}`, {
      cause: error,
    });
  }
  const raw = inflateBounded(compressed, what);
  const nul = raw.indexOf(0);
  const header = nul === -1 ? null : BLOB_HEADER.exec(latin1.decode(raw.subarray(0, nul)));
  if (header === null || Number(header[1]) !== raw.length - nul - 1) {
    throw new ObjectExportError(`${what} is not a well-formed blob`);
  }
  const actual = createHash("sha1").update(raw).digest("hex");
  if (actual !== id) {
    throw new ObjectExportError(`${what} is corrupt: its content hashes to ${actual}`);
  }
  return raw;
}

/**
 * The bytes of blob `id` in `store` (a `store.git/objects`), checked to be
 * a well-formed blob whose SHA-1 is `id` (docs/resolution.md: an apply takes
 * a file's bytes from the split's store).
 *
 * @throws {ObjectExportError} for an id the store lacks or holds corrupt
 */
export function readStoreBlob(store: Dir, id: string): Uint8Array {
  if (!HEX_ID.test(id)) throw new ObjectExportError(`not a SHA-1 object id: ${id}`);
  const raw = readVerified(store, id, store.path);
  return raw.subarray(raw.indexOf(0) + 1);
}

/** `fchown(fd, uid, -1)`: the group stays (a setgid objects dir already gave its own). */
function giveTo(fd: number, uid: number, path: string): void {
  check(libc().fchown(fd, uid, 0xffffffff), "fchown", path);
}

/**
 * Who new entries in `target` belong to. A root service writing into a
 * user's repository hands them to the objects dir's owner, or the user's
 * own Git could no longer add objects to a fan-out dir marsh created. A
 * service running as that owner (or a non-root one in a shared repository,
 * where the copied mode and a setgid dir give the group its access, as for
 * Git's own writes) changes nothing.
 */
export function ownerFix(target: Dir): (fd: number, uid: number, path: string) => void {
  const owner = target.stat().uid;
  return (fd, uid, path) => {
    if (uid === owner) return;
    try {
      giveTo(fd, owner, path);
    } catch (error) {
      // Not root (EPERM), or an owner a user namespace does not map (EINVAL):
      // the entry stays ours, readable by all (0444) as Git's own objects are.
      if (!(error instanceof FsError && (error.errno === E.EPERM || error.errno === E.EINVAL))) {
        throw error;
      }
    }
  };
}

/**
 * Copies the loose blobs `ids` from `store` (a `store.git/objects`) into
 * `target` (a repository's `objects`): each verified first, written `0444`
 * as `<fan>/tmp_obj_marsh_*` with `O_EXCL` and renamed into place without
 * replacing. An object `target` already holds is skipped and never touched;
 * a new fan-out dir gets the objects dir's mode and owner. Everything
 * written is synced before this returns.
 *
 * @throws {ObjectExportError} for an id the store lacks or holds corrupt
 *   (nothing is written for it, nor for ids after it)
 * @throws {FsError} when the target refuses a write
 */
export function exportObjects(
  store: Dir,
  target: Dir,
  ids: Iterable<string>,
): ExportSummary {
  const sorted = [...new Set(ids)].sort();
  for (const id of sorted) {
    if (!HEX_ID.test(id)) throw new ObjectExportError(`not a SHA-1 object id: ${id}`);
  }
  const fix = ownerFix(target);
  const fanMode = target.stat().perm;
  const fans = new Map<string, Dir>();
  let written = 0, present = 0;
  try {
    for (const id of sorted) {
      const [fanName, rest] = [id.slice(0, 2), id.slice(2)];
      let fan = fans.get(fanName);
      if (fan === undefined) {
        fan = openFan(target, fanName, fanMode, fix);
        fans.set(fanName, fan);
      }
      if (fan.statAt(rest) !== null) {
        present++;
        continue;
      }
      const raw = readVerified(store, id, store.path);
      if (writeObject(fan, rest, zlibSync(raw), fix)) written++;
      else present++;
    }
    if (written > 0) target.syncFs();
  } finally {
    for (const d of fans.values()) d.close();
  }
  return { written, present };
}

/**
 * Opens `target/<name>`, creating it like Git does (the objects dir's mode
 * and owner); `fix` is {@linkcode ownerFix}'s answer for `target`.
 */
export function openFan(
  target: Dir,
  name: string,
  mode: number,
  fix: (fd: number, uid: number, path: string) => void,
): Dir {
  let made = false;
  try {
    target.mkdir(name, mode);
    made = true;
  } catch (error) {
    if (!(error instanceof FsError && error.errno === E.EEXIST)) throw error;
  }
  const fan = target.openDir(name);
  if (made) {
    try {
      // mkdirat applied the umask; Git's shared-repository modes need the bits exactly.
      fan.chmod(mode);
      fix(fan.fd, fan.stat().uid, fan.path);
    } catch (error) {
      fan.close();
      throw error;
    }
  }
  return fan;
}

/**
 * Writes one object under a temporary name and renames it to `name` without
 * replacing. Returns `false` when `name` appeared meanwhile (Git wrote it):
 * the temporary file is removed and the existing object left as it is.
 */
export function writeObject(
  fan: Dir,
  name: string,
  compressed: Uint8Array,
  fix: (fd: number, uid: number, path: string) => void,
): boolean {
  const tmp = `tmp_obj_marsh_${crypto.randomUUID().slice(0, 8)}`;
  try {
    using file = fan.createFile(tmp, 0o444);
    file.writeAll(compressed);
    file.chmod(0o444);
    fix(file.fd, file.stat().uid, file.path);
  } catch (error) {
    dropTemp(fan, tmp, error);
    throw error;
  }
  try {
    fan.rename(tmp, fan, name);
    return true;
  } catch (error) {
    dropTemp(fan, tmp, error);
    if (error instanceof FsError && error.errno === E.EEXIST) return false;
    throw error;
  }
}

/** Removes a temporary object after `cause`; a failure to do so is reported with it. */
export function dropTemp(fan: Dir, tmp: string, cause: unknown): void {
  try {
    if (fan.statAt(tmp) !== null) fan.unlink(tmp);
  } catch (error) {
    throw new ObjectExportError(
      `${
        cause instanceof Error ? cause.message : cause
      }; and ${fan.path}/${tmp} could not be removed: ${
        error instanceof Error ? error.message : error
      }`,
      { cause },
    );
  }
}

/**
 * Exports the blobs the patches `out/<label>/diff.patch` of `labels` name
 * from `store` into `target` ({@linkcode exportObjects}); a branch without a
 * patch names none.
 *
 * @throws {RejectedError} for a tampered `out/<label>`
 */
export function exportPatchObjects(
  out: Dir,
  labels: readonly string[],
  store: Dir,
  target: Dir,
): ExportSummary {
  const ids = new Set<string>();
  for (const label of labels) {
    const patch = openPatch(out, label);
    if (patch === null) continue;
    try {
      patchBlobIds(patch, ids);
    } finally {
      patch.close();
    }
  }
  return exportObjects(store, target, ids);
}

/**
 * Whether the project at `root` stores SHA-1 objects (its `.git/config` has
 * no `extensions.objectFormat = sha256`). Patches carry SHA-1 blob ids, which
 * name nothing in a SHA-256 repository.
 */
export function storesSha1(root: Dir): boolean {
  const bytes = readRel(root, ".git/config", MAX_CONFIG_BYTES);
  if (bytes === null) return true;
  const format = parseGitConfig(bytes).get("extensions", "objectformat");
  return format === undefined || format === "sha1";
}
