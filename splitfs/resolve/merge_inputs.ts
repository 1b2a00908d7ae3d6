/**
 * The inputs of a `--git` merge (docs/resolution.md, "The `--git` scope"):
 * for each path a branch's captured patch touches, the base's and the
 * branch's state as the patch gives them, and the source's state now, read
 * without following a symlink. Each source file's blob is written into the
 * split's `store.git` so Git can merge it there. Answers `merge-inputs`.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { ABSENT, comparePaths, type Signature } from "../../model/resolution_plan.ts";
import type {
  MergeInputsReply,
  MergeInputsRequest,
  PathInputs,
} from "../../protocol/splitfs_resolve.ts";
import { STORE_DIR } from "../../model/layout.ts";
import { MAX_FILE_BYTES } from "../capture/compare.ts";
import { openPatch } from "../capture/render.ts";
import { Dir, SymlinkRefusedError, WrongKindError } from "../fd/dir.ts";
import { E, FsError } from "../fd/ffi.ts";
import type { Stat } from "../fd/stat.ts";
import type { StatIndex } from "../capture/old_tree.ts";
import { fatalUtf8 } from "../fd/file_names.ts";
import { RefusedError, RejectedError } from "../errors.ts";
import { ObjectStore } from "../git/store.ts";
import { STATUS_FILE } from "../workspace/out_write.ts";
import type { ResolveView, SplitWorkspace } from "../workspace/workspace.ts";
import { blobIdOfFile, openParent } from "../apply/fs_extra.ts";
import { type PatchEntry, type PatchSide, readPatchEntries } from "./patch_headers.ts";
import { readRawList } from "./raw_list.ts";
import { storeHas, storeSourceFile, symlinkTarget } from "./store_blobs.ts";

const MAX_STATUS_BYTES = 64 * 1024;
const lossy = new TextDecoder();

/**
 * Answers `merge-inputs` for branch `req.label` of the open split `ws`.
 *
 * @throws {RefusedError} for a branch without a captured result, or a rejected one
 * @throws {PatchHeaderError} for a patch capture would not write
 */
export function mergeInputs(ws: SplitWorkspace, req: MergeInputsRequest): MergeInputsReply {
  using view = ws.resolveView(req.label, req.parent ?? null);
  const where = `branch ${req.label} of split ${ws.id}`;
  checkCaptured(view.out, req.label, where);
  const entries = changedEntries(view.out, req.label);
  using store = ObjectStore.open(view.split, STORE_DIR);
  using parents = new ParentDirs(view.source);
  const side = (s: PatchSide | null, blob: string | null): Signature => {
    if (s === null) return ABSENT;
    const id = s.blob ?? blob!;
    if (s.mode === 0o120000) return { kind: "symlink", target: symlinkTarget(view.objects, id) };
    return { kind: "file", mode: s.mode === 0o100755 ? 0o755 : 0o644, blob: id };
  };
  const paths: PathInputs[] = entries.map((e) => {
    // A change of mode alone names no blob: both sides hold the fork's bytes.
    const modeOnly = e.old?.blob === null || e.new?.blob === null;
    const shared = modeOnly ? forkBlob(view, e.path, where) : null;
    const base = side(e.old, shared);
    return {
      path: e.path,
      base,
      branch: side(e.new, shared),
      ...sourceOf(parents, store, e.path, base, view.baseStats),
    };
  });
  paths.sort((a, b) => comparePaths(a.path, b.path));
  return { v: 1, t: "merge-inputs", objects: view.objectsPath, paths };
}

/**
 * Every path the branch changed, with both sides' modes and blob ids: from
 * its raw list, or, for a branch captured before capture wrote one, from
 * its patch's headers (a change of mode alone then names no blob). None
 * when it changed nothing (neither is there).
 */
function changedEntries(out: Dir, label: string): PatchEntry[] {
  {
    using dir = out.openDir(label);
    const raw = readRawList(dir);
    if (raw !== null) return raw;
  }
  using patch = openPatch(out, label);
  return patch === null ? [] : readPatchEntries(patch);
}

/**
 * Refuses a branch capture has not finished (no `out/<label>/files`) or
 * rejected (its `status` says so): its patch, if any, is untrusted.
 */
function checkCaptured(out: Dir, label: string, where: string): void {
  let dir: Dir;
  try {
    dir = out.openDir(label);
  } catch (error) {
    if (error instanceof SymlinkRefusedError || error instanceof WrongKindError) {
      throw new RejectedError(`out/${label} was tampered with`, { cause: error });
    }
    throw notCaptured(where);
  }
  try {
    if (dir.statAt("files")?.kind !== "file") throw notCaptured(where);
    const status = dir.statAt(STATUS_FILE)?.kind === "file"
      ? lossy.decode(dir.readFile(STATUS_FILE, MAX_STATUS_BYTES)).trim()
      : "";
    if (status.startsWith("rejected")) {
      throw new RefusedError(
        `${where} was ${status}: its result is untrusted, so it cannot be merged; ` +
          `look at its fork, or choose another branch`,
      );
    }
  } finally {
    dir.close();
  }
}

function notCaptured(where: string): RefusedError {
  return new RefusedError(
    `${where} has no captured result (it is still running, or it ended before its capture), ` +
      `so there is nothing to merge; wait for it to finish, or choose another branch`,
  );
}

/**
 * The blob id of the fork's file at `path`, for a change of mode alone,
 * checked to be one capture stored (so the fork still holds what it captured).
 */
function forkBlob(view: ResolveView, path: string, where: string): string {
  const changed = new RefusedError(
    `the fork of ${where} no longer holds at ${path} what its capture recorded, ` +
      `so its merge cannot be computed; discard the branch, or merge another`,
  );
  if (view.fork === null) {
    throw new RefusedError(
      `${where} has no fork in this service, and its patch changes the mode of ${path} ` +
        `without naming its bytes; reopen the split with its forks`,
    );
  }
  const p = openParent(view.fork, path);
  if (!p.ok) throw changed;
  using dir = p.dir;
  if (dir.statAt(p.name)?.kind !== "file") throw changed;
  using f = dir.openFile(p.name);
  const blob = blobIdOfFile(f, 40);
  if (!storeHas(view.objects, blob)) throw changed;
  return blob;
}

const KIND_WORDS: Readonly<Record<string, string>> = {
  file: "a file",
  symlink: "a symlink",
};

/** The source's state at `path`, and why it cannot hold the branch's there, if it cannot. */
function sourceOf(
  parents: ParentDirs,
  store: ObjectStore,
  path: string,
  base: Signature,
  baseStats: StatIndex | null,
): { source: Signature; blocked?: string } {
  const p = parents.of(path);
  if (!p.ok) {
    if (p.kind === "absent") return { source: ABSENT };
    const what = KIND_WORDS[p.kind] ?? `a ${p.kind}`;
    return { source: ABSENT, blocked: `${p.at} is ${what} in the source, not a directory` };
  }
  const dir = p.dir;
  const st = dir.statAt(p.name);
  if (st === null) return { source: ABSENT };
  switch (st.kind) {
    case "dir":
      return { source: { kind: "dir" }, blocked: `${path} is a directory in the source` };
    case "symlink": {
      const raw = dir.readlink(p.name);
      try {
        return { source: { kind: "symlink", target: fatalUtf8.decode(raw) } };
      } catch (error) {
        if (!(error instanceof TypeError)) throw error;
        return {
          source: { kind: "symlink", target: lossy.decode(raw) },
          blocked: `${path} is a symlink whose target is not UTF-8 in the source`,
        };
      }
    }
    case "file": {
      // Untouched since the snapshot by its stats: the base's bytes, not read again. A write the
      // stats miss (same size within the same clock tick) is caught by the applier's re-check,
      // which hashes every path it changes.
      if (base.kind === "file" && sameStats(baseStats, path, st)) {
        return { source: { kind: "file", mode: st.perm & 0o100 ? 0o755 : 0o644, blob: base.blob } };
      }
      using f = dir.openFile(p.name);
      const { blob, stored } = storeSourceFile(f, store);
      const source: Signature = { kind: "file", mode: f.stat().perm & 0o100 ? 0o755 : 0o644, blob };
      if (stored) return { source };
      return {
        source,
        blocked: `${path} is larger than ${MAX_FILE_BYTES} bytes in the source, too large to merge`,
      };
    }
    default:
      return { source: ABSENT, blocked: `${path} is a ${st.kind} in the source` };
  }
}

/** Where a path's parent directory is in the source, or why it cannot be (`openParent`'s answer). */
type ParentOf =
  | { readonly ok: true; readonly dir: Dir; readonly name: string }
  | { readonly ok: false; readonly at: string; readonly kind: string };

/**
 * The source's directories, each opened once per request, one component at
 * a time and never through a symlink (as `openParent` does): a patch's
 * paths share their directories, and every open is a system call.
 */
class ParentDirs implements Disposable {
  readonly #root: Dir;
  readonly #dirs = new Map<string, Dir | { readonly at: string; readonly kind: string }>();

  constructor(root: Dir) {
    this.#root = root;
  }

  /** `path`'s parent, open (owned by this cache: do not close it), or why it is not a directory. */
  of(path: string): ParentOf {
    const slash = path.lastIndexOf("/");
    const name = path.slice(slash + 1);
    const d = this.#dir(slash === -1 ? "" : path.slice(0, slash));
    return d instanceof Dir ? { ok: true, dir: d, name } : { ok: false, ...d };
  }

  #dir(rel: string): Dir | { readonly at: string; readonly kind: string } {
    if (rel === "") return this.#root;
    const known = this.#dirs.get(rel);
    if (known !== undefined) return known;
    const slash = rel.lastIndexOf("/");
    const up = this.#dir(slash === -1 ? "" : rel.slice(0, slash));
    let found: Dir | { readonly at: string; readonly kind: string } = up;
    if (up instanceof Dir) {
      // Opened without a stat first: one system call for a directory, the common case.
      try {
        found = up.openDir(rel.slice(slash + 1));
      } catch (error) {
        if (error instanceof SymlinkRefusedError) found = { at: rel, kind: "symlink" };
        else if (error instanceof WrongKindError) found = { at: rel, kind: error.kind };
        else if (error instanceof FsError && error.errno === E.ENOENT) {
          found = { at: rel, kind: "absent" };
        } else throw error;
      }
    }
    this.#dirs.set(rel, found);
    return found;
  }

  [Symbol.dispose](): void {
    for (const d of this.#dirs.values()) if (d instanceof Dir) d.close();
    this.#dirs.clear();
  }
}

/** Whether the snapshot recorded `path` as a file with `st`'s size, permission bits and mtime. */
function sameStats(baseStats: StatIndex | null, path: string, st: Stat): boolean {
  if (baseStats === null) return false;
  const slash = path.lastIndexOf("/");
  const recorded = baseStats.get(slash === -1 ? "" : path.slice(0, slash))?.get(
    path.slice(slash + 1),
  );
  return recorded !== undefined && recorded.kind === "file" && recorded.size === st.size &&
    recorded.perm === st.perm && recorded.mtimeNs === st.mtimeNs;
}
