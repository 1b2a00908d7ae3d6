/**
 * Compaction of a deep session stack (docs/checkpoints.md "Compaction"): one
 * new sealed bottom layer holding the merged view of a stack, written as a
 * snapshot's first layer is (each file read once, hashed as Git would,
 * written from the same bytes), its root id computed again from what was
 * written and checked against the stack's, then sealed as a compacted layer
 * (`compacts`: the stack's top, whose layers sealed above it stand on the
 * new layer unchanged).
 *
 * Files are copied, not hard-linked: a link changes the shared inode's
 * ctime, which every sealed layer records for its data (docs/engine.md "The
 * seal covers the data"), so the layers the copy came from, still named by
 * the checkpoints from before the compaction and by the project's snapshot
 * chain, would fail their check from then on.
 *
 * The service answers one request at a time, so the copy runs in steps: each
 * `compact` request copies for about `budgetMs` and answers `compacting`
 * until the last one seals and answers `compacted`. A step's place is kept
 * in memory; a service restarted meanwhile starts that compaction again
 * from nothing. The work is done in `<session>/compact/<layer>/`, whose
 * `layers` pins the stack being merged (`session_pins.ts`), and the new
 * layer's pin stays there until `compact-drop`, once the journal names it.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { RefusedError } from "../errors.ts";
import { DATA, type HeadStack } from "../layers/layers.ts";
import {
  F_MODE,
  IndexNode,
  KIND_DIR,
  KIND_SYMLINK,
  kindOf,
  nameBytes,
  STRIDE,
} from "../layers/layer_index.ts";
import {
  blobHasher,
  blobId,
  EMPTY_TREE_HEX,
  hexOf,
  type TreeEntry,
  treeId,
} from "../git/tree_id.ts";
import { StackDir } from "../export/stack_view.ts";
import { COMPACT_DIR } from "./session_pins.ts";
import { readPin, type SessionPlace, STAGED, writePin } from "./session_dir.ts";
import { SESSION_CHAIN } from "./op_seal.ts";
import { isErrno } from "../layers/layers_dir.ts";
import { E } from "../fd/ffi.ts";

const CHUNK = 1 << 20;

/** What one `compact` step answers. */
export type CompactStep =
  | { readonly state: "compacting"; readonly layer: string; readonly files: number }
  | {
    readonly state: "compacted";
    readonly layer: string;
    readonly rootId: string;
    readonly files: number;
    readonly bytes: number;
  };

interface Counts {
  files: number;
  dirs: number;
  symlinks: number;
  bytes: number;
}

/** A compaction in progress: its copy's place, between steps. */
interface Job {
  readonly key: string;
  readonly stack: HeadStack;
  /** The staging dir's identity: a session closed meanwhile starts it again. */
  readonly ino: bigint;
  readonly copy: Generator<void, Uint8Array | null>;
  readonly counts: Counts;
  /** The copy's `data/` dir and the merged view's root bits (set last). */
  readonly data: Dir;
  readonly rootPerm: number;
  readonly closers: (() => void)[];
}

const jobs = new Map<string, Job>();

/** A merged view that does not match its index: the compaction is refused, nothing is sealed. */
export class CompactError extends RefusedError {
  override name = "CompactError";
}

/**
 * Runs one step of the compaction of `layers` (bottom first) of the session
 * at `place` into layer `layer` (a fresh id when `undefined`), for about
 * `budgetMs`. The same layer asked again once sealed answers `compacted`
 * again.
 *
 * @throws {LayerError} when `layers` is not a sealed stack
 * @throws {CompactError} when a layer's data does not match the stack's index
 */
export function compactStep(
  place: SessionPlace,
  layers: readonly string[],
  layer: string | undefined,
  budgetMs: number,
): CompactStep {
  const store = place.store();
  const stack = store.stackOf(layers);
  if (layer !== undefined) {
    const found = store.check(layer, stack.top.rootId);
    if (found.state === "durable") {
      return { state: "compacted", layer, rootId: stack.top.rootId, files: 0, bytes: 0 };
    }
    if (found.state !== "absent") {
      throw new RefusedError(`cannot compact into layer ${layer}: it is ${found.state}`);
    }
  }
  // The daemon runs one compaction of a session at a time: on a first step,
  // any other compaction dir is a leftover of an earlier service or daemon.
  if (layer === undefined) dropLeftovers(place);
  const id = layer ?? store.freshId();
  const key = `${place.path}\0${id}`;
  let job = jobs.get(key);
  if (job !== undefined && !sameJob(place, id, job, layers)) {
    endJob(job);
    job = undefined;
  }
  job ??= startJob(place, id, key, stack);
  const until = performance.now() + budgetMs;
  let tree: Uint8Array | null | undefined;
  try {
    for (;;) {
      const r = job.copy.next();
      if (r.done) {
        tree = r.value;
        break;
      }
      if (performance.now() >= until) break;
    }
  } catch (error) {
    endJob(job);
    dropWork(place, id);
    throw error;
  }
  if (tree === undefined) return { state: "compacting", layer: id, files: job.counts.files };
  job.data.chmod(job.rootPerm);
  endJob(job);
  // No file at all is Git's empty tree.
  const rootId = tree === null ? EMPTY_TREE_HEX : hexOf(tree);
  if (rootId !== stack.top.rootId) {
    dropWork(place, id);
    throw new CompactError(
      `the copy of stack ${layers.join(",")} gives root ${rootId}, not its ` +
        `root ${stack.top.rootId}: nothing was sealed`,
    );
  }
  using work = openWork(place, id);
  store.adopt(work, STAGED, {
    id,
    chain: SESSION_CHAIN,
    parent: stack.top,
    index: stack.index,
    rootId,
    counts: { ...job.counts, whiteouts: 0 },
    compacted: true,
  });
  // The new layer stays pinned here until the journal names it (`compact-drop`).
  writePin(work, [id]);
  return {
    state: "compacted",
    layer: id,
    rootId,
    files: job.counts.files,
    bytes: job.counts.bytes,
  };
}

/** Removes `compact/<layer>` (the new layer's pin, or an abandoned copy); gone already is fine. */
export function dropCompaction(place: SessionPlace, layer: string): void {
  for (const [key, job] of jobs) if (key === `${place.path}\0${layer}`) endJob(job);
  dropWork(place, layer);
}

/** Ends every compaction of the session in memory (its directory is about to go). */
export function endCompactions(place: SessionPlace): void {
  for (const [key, job] of jobs) if (key.startsWith(`${place.path}\0`)) endJob(job);
}

function dropLeftovers(place: SessionPlace): void {
  if (place.dir.statAt(COMPACT_DIR)?.kind !== "dir") return;
  let names: string[];
  {
    using compact = place.dir.openDir(COMPACT_DIR);
    names = compact.entries().map((e) => e.name);
  }
  for (const name of names) {
    const job = jobs.get(`${place.path}\0${name}`);
    if (job !== undefined) endJob(job);
    dropWork(place, name);
  }
}

function sameJob(place: SessionPlace, id: string, job: Job, layers: readonly string[]): boolean {
  const ids = job.stack.ids;
  if (ids.length !== layers.length || ids.some((l, i) => l !== layers[i])) return false;
  if (place.dir.statAt(COMPACT_DIR)?.kind !== "dir") return false;
  using compact = place.dir.openDir(COMPACT_DIR);
  if (compact.statAt(id)?.kind !== "dir") return false;
  using work = compact.openDir(id);
  return work.statAt(STAGED)?.ino === job.ino;
}

function endJob(job: Job): void {
  jobs.delete(job.key);
  try {
    // Closes the directories the copy holds open (its `finally` blocks).
    job.copy.return(null);
  } finally {
    for (const close of job.closers.splice(0)) close();
  }
}

/** `compact/<id>`, opened (made when missing). */
function openWork(place: SessionPlace, id: string): Dir {
  using compact = place.dir.ensureDir(COMPACT_DIR, 0o755);
  return compact.ensureDir(id, 0o755);
}

function dropWork(place: SessionPlace, id: string): void {
  if (place.dir.statAt(COMPACT_DIR)?.kind !== "dir") return;
  using compact = place.dir.openDir(COMPACT_DIR);
  try {
    compact.removeTree(id);
  } catch (error) {
    if (!isErrno(error, E.ENOENT)) throw error;
  }
}

/** A fresh staging dir (a leftover of an earlier service is removed), pinned, and the copy's start. */
function startJob(place: SessionPlace, id: string, key: string, stack: HeadStack): Job {
  dropWork(place, id);
  const closers: (() => void)[] = [];
  try {
    let staged: Dir;
    {
      using work = openWork(place, id);
      // Pinned before the first read: gc keeps the stack while it is copied.
      writePin(work, stack.ids);
      work.mkdir(STAGED, 0o700);
      staged = work.openDir(STAGED);
    }
    closers.push(() => staged.close());
    staged.mkdir(DATA, 0o700);
    const data = staged.openDir(DATA);
    closers.push(() => data.close());
    const store = place.store();
    const lowers: Dir[] = [];
    for (const l of [...stack.ids].reverse()) {
      const d = store.openData(l);
      lowers.push(d);
      closers.push(() => d.close());
    }
    const top = (lowers[0] as Dir).stat();
    const root = new StackDir(lowers.map((d) => d.dup()), "");
    closers.push(() => root.close());
    const counts: Counts = { files: 0, dirs: 0, symlinks: 0, bytes: 0 };
    const job: Job = {
      key,
      stack,
      ino: staged.stat().ino,
      copy: copyTree(stack.index.root, root, data, "", counts),
      counts,
      data,
      rootPerm: top.perm & 0o7777,
      closers,
    };
    jobs.set(key, job);
    return job;
  } catch (error) {
    for (const close of closers) close();
    throw error;
  }
}

function join(dir: string, name: string): string {
  return dir === "" ? name : `${dir}/${name}`;
}

function same(a: Uint8Array, b: Uint8Array): boolean {
  for (let i = 0; i < 20; i++) if (a[i] !== b[i]) return false;
  return true;
}

/**
 * Copies the merged view's directory `src` (index node `node`, at `path`)
 * into `dst`, yielding after each file, and returns its Git tree id from
 * what it wrote (`null`: no file below, as Git omits it). Each entry's kind
 * must be the index's and each blob id the index's; a directory's tree id
 * is checked against the index's too.
 */
function* copyTree(
  node: IndexNode,
  src: StackDir,
  dst: Dir,
  path: string,
  counts: Counts,
): Generator<void, Uint8Array | null> {
  const entries: TreeEntry[] = [];
  for (let i = 0; i < node.names.length; i++) {
    const name = node.names[i] as string;
    const here = join(path, name);
    const mode = node.st[i * STRIDE + F_MODE] as number;
    const kind = kindOf(mode);
    const oid = node.oids.subarray(i * 20, i * 20 + 20);
    const at = src.locate(name);
    const want = kind === KIND_DIR ? "dir" : kind === KIND_SYMLINK ? "symlink" : "file";
    if (at === null || at.st.kind !== want) {
      throw new CompactError(
        `${here} is a ${want} in the stack's index but ${
          at === null ? "absent" : `a ${at.st.kind}`
        } in its layers`,
      );
    }
    if (kind === KIND_DIR) {
      dst.mkdir(name, 0o700);
      let sub: Uint8Array | null;
      {
        using out = dst.openDir(name);
        using child = src.child(name);
        sub = yield* copyTree(node.kids[i] ?? IndexNode.empty(), child, out, here, counts);
        // Permissions last, so a read-only directory could still be filled.
        out.chmod(at.st.perm & 0o7777);
      }
      dst.setMtime(name, at.st.mtimeNs);
      counts.dirs++;
      const recorded = oid.every((b) => b === 0) ? null : oid;
      if ((sub === null) !== (recorded === null) || (sub !== null && !same(sub, oid))) {
        throw new CompactError(`${here}/ does not hold the tree the stack's index records`);
      }
      if (sub !== null) entries.push({ name: nameBytes(name), mode: "40000", oid: sub });
      continue;
    }
    if (kind === KIND_SYMLINK) {
      const target = at.dir.readlink(name);
      const got = blobId(target);
      if (!same(got, oid)) throw new CompactError(`${here} is not the symlink the index records`);
      dst.symlink(target, name);
      dst.setMtime(name, at.st.mtimeNs);
      counts.symlinks++;
      entries.push({ name: nameBytes(name), mode: "120000", oid: got });
      continue;
    }
    const got = copyFile(at.dir, dst, name, at.st.size, at.st.perm & 0o777, at.st.mtimeNs);
    if (!same(got, oid)) {
      throw new CompactError(`${here} does not hold the blob the stack's index records`);
    }
    if ((at.st.perm & 0o100) !== (mode & 0o100)) {
      throw new CompactError(`${here} does not have the executable bit the index records`);
    }
    counts.files++;
    counts.bytes += at.st.size;
    entries.push({
      name: nameBytes(name),
      mode: (at.st.perm & 0o100) !== 0 ? "100755" : "100644",
      oid: got,
    });
    yield;
  }
  return entries.length === 0 ? null : treeId(entries);
}

/** Reads `name` of `from` once, hashing it, into a new file of `to`; returns its blob id. */
function copyFile(
  from: Dir,
  to: Dir,
  name: string,
  size: number,
  perm: number,
  mtimeNs: bigint,
): Uint8Array {
  using src = from.openFile(name);
  using dst = to.createFile(name, 0o600);
  const hash = blobHasher(size);
  const buf = new Uint8Array(Math.min(CHUNK, Math.max(size, 1)));
  let len = 0;
  for (;;) {
    const n = src.read(buf);
    if (n === 0) break;
    len += n;
    if (len > size) break;
    hash.update(buf.subarray(0, n));
    dst.writeAll(buf.subarray(0, n));
  }
  if (len !== size) {
    throw new CompactError(`${name} changed size in a sealed layer (${len}, not ${size} bytes)`);
  }
  dst.chmod(perm);
  dst.setMtime(mtimeNs);
  return new Uint8Array(hash.digest());
}

/** The stack a compaction dir pins (for tests and recovery); empty when none. */
export function compactionPin(place: SessionPlace, layer: string): string[] {
  if (place.dir.statAt(COMPACT_DIR)?.kind !== "dir") return [];
  using compact = place.dir.openDir(COMPACT_DIR);
  if (compact.statAt(layer)?.kind !== "dir") return [];
  using work = compact.openDir(layer);
  return readPin(work);
}
