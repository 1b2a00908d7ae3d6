/**
 * Overlay forks (docs/engine.md "Forks"): a split's base is a read-only overlay
 * of a stack of sealed layer dirs, and each fork is an overlay of the same
 * stack with a private upper dir, made in O(1) and captured in O(changes) by
 * walking that upper dir ({@linkcode upperCandidates}).
 *
 * Two mount modes: `"overlay"` in the host mount namespace (root or
 * `CAP_SYS_ADMIN`; overlay metadata in `trusted.overlay.*` xattrs) and
 * `"userns-overlay"` inside `unshare -Urm` (`userxattr`: `user.overlay.*`).
 * Neither makes redirects or metacopies, so an upper dir is plain files,
 * directories, symlinks, whiteouts (0/0 character devices) and opaque
 * markers, and a rename of a merged directory fails with `EXDEV` (tools then
 * copy and delete).
 *
 * Every layer, upper, work dir and mount point goes to mount(2) as
 * `/proc/self/fd/N` of a directory opened without following symlinks, so
 * nothing is re-resolved by name; each mount is then identified by its
 * mount id in `/proc/self/mountinfo` and an unmount is verified there.
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to mount.
 *
 * @module
 */

import type { CandidateDir } from "../capture/compare.ts";
import type { Dir } from "../fd/dir.ts";
import { cstr, describeErrno, E, errno, FsError, libc, UMOUNT } from "../fd/ffi.ts";
import type { Fork, ForkStrategy } from "./fork.ts";
import { OVERLAY_DIR } from "../../model/layout.ts";
import {
  findMount,
  kernelPath,
  mountAt,
  mountAtPath,
  type MountInfo,
  mountOf,
  readMounts,
  readMountsOn,
} from "../fd/mountinfo.ts";
import type { MountRecord, OverlayMode } from "./mount_record.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";

// Part of this module's API; declared in the leaf so that fork.ts need not import overlay.ts.
export type { MountRecord, OverlayMode };

/**
 * The overlay features each mode fixes. `nofollow` neither creates nor
 * follows redirects (on this kernel `off` still follows one found in a lower
 * layer, and `userxattr` refuses `off`), so the upper layer holds plain
 * files, whiteouts and opaque dirs only.
 */
export const OVERLAY_OPTIONS: Readonly<Record<OverlayMode, string>> = {
  overlay: "redirect_dir=nofollow,metacopy=off,index=off,xino=off",
  "userns-overlay": "userxattr,redirect_dir=nofollow,metacopy=off,index=off",
};

/** The xattr namespace overlay keeps its markers in (`<prefix>opaque`, `<prefix>redirect`). */
export function xattrPrefix(mode: OverlayMode): string {
  return mode === "overlay" ? "trusted.overlay." : "user.overlay.";
}

/** Under `.overlay/<label>/`: the fork's upper layer and overlay's work dir. */
export const UPPER_DIR = "upper";
export const WORK_DIR = "work";

/** A mount or unmount that failed, naming the path and why. */
export class MountError extends Error {
  override name = "MountError";
  constructor(
    readonly action: string,
    readonly path: string,
    readonly reason: string,
    options?: ErrorOptions,
  ) {
    super(`cannot ${action} "${path}": ${reason}`, options);
  }
}

/** An unmount refused because the mount is in use (`EBUSY`); everything is left in place. */
export class MountBusyError extends MountError {
  override name = "MountBusyError";
}

const MS_RDONLY = 1n;
const MS_NOSUID = 2n;
const MS_NODEV = 4n;
/** mount(2) copies at most one page of options. */
const OPTIONS_PAGE = 4096;
/** The source mountinfo shows, so an operator can tell marsh's mounts. */
const SOURCE = "marsh";
const enc = new TextEncoder();
/** Not (yet) among ffi.ts's errno names: no such file system type. */
const ENODEV = E.ENODEV;
/** Phases (see `phase_times.ts`): reading mountinfo around a mount, mount(2), a fork's dirs. */
export const PHASE_MOUNTINFO = "overlay: mountinfo";
export const PHASE_MOUNT = "overlay: mount(2)";
export const PHASE_FORK_DIRS = "overlay: fork dirs";

interface UpperLayer {
  readonly upper: Dir;
  readonly work: Dir;
}

function optionsFor(
  mode: OverlayMode,
  lowers: readonly string[],
  layer: string[] | null,
  volatile = false,
): string {
  const parts = [`lowerdir=${lowers.join(":")}`];
  if (layer) parts.push(`upperdir=${layer[0]}`, `workdir=${layer[1]}`);
  parts.push(OVERLAY_OPTIONS[mode]);
  if (volatile) parts.push("volatile");
  return parts.join(",");
}

function checkOptionsFit(options: string, layers: number, target: string): void {
  const bytes = enc.encode(options).length + 1;
  if (bytes > OPTIONS_PAGE) {
    throw new MountError(
      "mount",
      target,
      `the overlay options for ${layers} layers take ${bytes} bytes, over the ${OPTIONS_PAGE}-byte page mount(2) accepts`,
    );
  }
}

/** Why mount(2) said no, in words an operator can act on. */
function mountFailure(e: number, mode: OverlayMode): string {
  switch (e) {
    case E.EPERM:
      return mode === "overlay"
        ? "the daemon may not mount (not root, no CAP_SYS_ADMIN)"
        : "the daemon may not mount (not in a user and mount namespace of its own: unshare -Urm)";
    case ENODEV:
      return "the kernel has no overlay file system";
    case E.EINVAL:
      return mode === "userns-overlay"
        ? `the kernel refused "${OVERLAY_OPTIONS[mode]}" (userxattr needs Linux 5.11 or later)`
        : `the kernel refused "${OVERLAY_OPTIONS[mode]}", or a layer's file system cannot be used`;
    case E.EACCES:
      return "permission denied on a layer or the mount point";
    default:
      return describeErrno(e);
  }
}

/**
 * Mounts an overlay on `target` and identifies the new mount in mountinfo:
 * the one mount stacked directly on `target` (on `target`'s mount, at
 * `target`'s path), where there was none before. Mount ids are reused as
 * soon as they are freed (other processes mount and unmount all the time),
 * so the mount is named by its parent and place, never by "an id not seen
 * before".
 */
function mountOverlay(
  mode: OverlayMode,
  lowers: readonly Dir[],
  layer: UpperLayer | null,
  target: Dir,
  flags: bigint,
  upperPath: string | null,
  volatile = false,
): MountRecord {
  const options = optionsFor(
    mode,
    lowers.map((d) => d.procPath),
    layer && [layer.upper.procPath, layer.work.procPath],
    volatile,
  );
  checkOptionsFit(options, lowers.length, target.path);
  const under = mountOf(target);
  const point = kernelPath(target);
  let t = phaseStart();
  const already = readMountsOn(under.id, point);
  phaseEnd(PHASE_MOUNTINFO, t);
  if (already.length > 0) {
    throw new MountError(
      "mount",
      target.path,
      `something is mounted on it already (mount id ${already[0]!.id}, ${already[0]!.fsType})`,
    );
  }
  t = phaseStart();
  const r = libc().mount(
    cstr(SOURCE),
    cstr(target.procPath),
    cstr("overlay"),
    flags,
    cstr(options),
  );
  phaseEnd(PHASE_MOUNT, t);
  if (r === -1) {
    const e = errno();
    throw new MountError("mount", target.path, mountFailure(e, mode), {
      cause: new FsError("mount", target.path, e),
    });
  }
  t = phaseStart();
  const made = readMountsOn(under.id, point);
  phaseEnd(PHASE_MOUNTINFO, t);
  const m = made[0];
  if (made.length !== 1 || m === undefined || m.fsType !== "overlay" || m.source !== SOURCE) {
    throw new MountError(
      "mount",
      target.path,
      `mounted, but /proc/self/mountinfo shows ${made.length} mounts on "${point}", not our overlay; check and unmount by hand`,
    );
  }
  return {
    mode,
    mountId: m.id,
    major: m.major,
    minor: m.minor,
    mountPoint: m.mountPoint,
    upper: upperPath,
  };
}

/**
 * Mounts a read-only merged view of `lowers` (top first, at least two:
 * overlay needs two lower dirs when there is no upper, so add an empty one)
 * on `target`, an empty directory. `target` itself keeps naming the
 * directory under the mount: open the mounted root again by name from its
 * parent.
 *
 * @throws {MountError} when mount(2) refuses, or the options would not fit one page
 */
export function mountReadOnly(mode: OverlayMode, lowers: readonly Dir[], target: Dir): MountRecord {
  if (lowers.length < 2) {
    throw new TypeError(
      `a read-only overlay needs at least 2 lower dirs, got ${lowers.length}: add an empty one`,
    );
  }
  return mountOverlay(mode, lowers, null, target, MS_RDONLY | MS_NOSUID | MS_NODEV, null);
}

/**
 * Mounts a read-write overlay of `lowers` (top first, at least one) with
 * `upper` and `work` (empty directories on one file system) on `target`:
 * an operation's private view (splitfs/session/op_dir.ts). `upperPath` is
 * recorded for messages. `volatile` (Linux 5.10 and later): the overlay
 * skips every sync of its upper dir, its unmount too; the caller makes the
 * upper dir durable itself.
 *
 * @throws {MountError} when mount(2) refuses, or the options would not fit one page
 */
export function mountReadWrite(
  mode: OverlayMode,
  lowers: readonly Dir[],
  layer: { readonly upper: Dir; readonly work: Dir },
  target: Dir,
  upperPath: string,
  volatile = false,
): MountRecord {
  if (lowers.length === 0) throw new TypeError("an overlay needs at least one lower dir");
  return mountOverlay(mode, lowers, layer, target, MS_NOSUID | MS_NODEV, upperPath, volatile);
}

/**
 * Forks as overlay mounts: `split/<label>` is the merged view of the lower
 * stack and the fork's own `split/.overlay/<label>/upper`. O(1) in the size
 * of the tree; capture compares only what the upper dir holds.
 */
export class OverlayForkStrategy implements ForkStrategy {
  readonly #lowers: readonly Dir[];

  /**
   * @param mode how to mount (see {@linkcode OverlayMode})
   * @param lowers the layer dirs, top first, borrowed: they must stay open
   *   while forks are made
   * @throws {MountError} when the options for this many layers cannot fit one page
   */
  constructor(readonly mode: OverlayMode, lowers: readonly Dir[]) {
    if (lowers.length === 0) throw new TypeError("an overlay fork needs at least one lower dir");
    this.#lowers = [...lowers];
    // The widest descriptor numbers, so a stack that can never fit fails here.
    const widest = "/proc/self/fd/2147483647";
    checkOptionsFit(
      optionsFor(mode, lowers.map((d) => d.procPath), [widest, widest]),
      lowers.length,
      "(every fork)",
    );
  }

  /**
   * Makes `split/<label>` (the mount point) and `split/.overlay/<label>/`
   * with `upper/` and `work/`, mounts the overlay and opens its root as
   * {@linkcode Fork.dir}: that held descriptor keeps a plain `umount` by
   * anyone else failing with `EBUSY`, and after a lazy `umount -l` it still
   * reads the same overlay. All or nothing: on failure what was made is
   * unmounted and removed.
   *
   * @throws {MountError} when the mount fails
   */
  create(split: Dir, base: Dir, label: string): Omit<Fork, "readyNs"> {
    split.mkdir(label, 0o700);
    let made = false;
    let upper: Dir | null = null;
    let root: Dir | null = null;
    let record: MountRecord | null = null;
    const t = phaseStart();
    try {
      {
        using overlays = split.ensureDir(OVERLAY_DIR, 0o700);
        overlays.mkdir(label, 0o700);
        made = true;
        using layer = overlays.openDir(label);
        layer.mkdir(UPPER_DIR, 0o700);
        layer.mkdir(WORK_DIR, 0o700);
        upper = layer.openDir(UPPER_DIR);
        using work = layer.openDir(WORK_DIR);
        // The merged root takes the upper root's mode, as a copy takes the base's.
        upper.chmod(base.stat().perm);
        using target = split.openDir(label);
        phaseEnd(PHASE_FORK_DIRS, t);
        record = mountOverlay(
          this.mode,
          this.#lowers,
          { upper, work },
          target,
          MS_NOSUID | MS_NODEV,
          `${layer.path}/${UPPER_DIR}`,
        );
      }
      root = split.openDir(label);
      const on = mountOf(root);
      if (on.id !== record.mountId) {
        throw new MountError(
          "mount",
          root.path,
          `another mount (id ${on.id}) covers the fork's overlay (id ${record.mountId})`,
        );
      }
      const st = root.stat();
      const dir = root, held = upper, mode = this.mode;
      return {
        label,
        strategy: mode,
        dir,
        identity: [st.dev, st.ino],
        mount: record,
        candidates: () => ({ kind: "tree", tree: upperCandidates(held, mode) }),
        close: () => {
          dir.close();
          held.close();
        },
      };
    } catch (error) {
      root?.close();
      upper?.close();
      undoFork(split, label, made, record, error);
      throw error;
    }
  }
}

function undoFork(
  split: Dir,
  label: string,
  made: boolean,
  record: MountRecord | null,
  original: unknown,
): void {
  try {
    if (record) unmount(split, label, record);
    split.rmdir(label);
    if (made) {
      using overlays = split.openDir(OVERLAY_DIR);
      overlays.removeTree(label);
    }
  } catch (error) {
    throw new MountError(
      "remove the partial fork",
      `${split.path}/${label}`,
      `${error instanceof Error ? error.message : error}`,
      { cause: original },
    );
  }
}

/**
 * The names an overlay fork's upper dir holds, as capture candidates: per
 * directory every entry of any kind (files, symlinks, whiteouts, ...), each
 * subdirectory with its own entries, and an opaque directory (which hides
 * everything below it in the lower layers) as `"all"`. Read through `upper`,
 * never through the mount.
 *
 * @throws {FsError} when the upper dir cannot be read
 */
export function upperCandidates(upper: Dir, mode: OverlayMode): CandidateDir {
  return readUpper(upper, `${xattrPrefix(mode)}opaque`);
}

function readUpper(dir: Dir, opaqueKey: string): CandidateDir {
  const out = new Map<string, CandidateDir | null>();
  const { entries, invalid } = dir.listing();
  // A name that is not UTF-8 cannot be a candidate's key: the comparison
  // lists this whole directory instead, where the ignore rules decide on it.
  if (invalid.length > 0) return "all";
  for (const e of entries) {
    const kind = e.kind ?? dir.statAt(e.name)?.kind;
    if (kind !== "dir") {
      out.set(e.name, null);
      continue;
    }
    const opaque = dir.xattrAt(e.name, opaqueKey);
    if (opaque?.length === 1 && opaque[0] === 0x79 /* "y" */) {
      out.set(e.name, "all");
      continue;
    }
    using child = dir.openDir(e.name);
    out.set(e.name, readUpper(child, opaqueKey));
  }
  return out;
}

/**
 * The live mount a record names: the same id, device and mount point (ids
 * and anonymous devices are both reused once freed, so another process's
 * new mount can share either), or `null` when it is gone.
 */
export function findRecordedMount(
  record: MountRecord,
  mounts: readonly MountInfo[] = readMounts(),
): MountInfo | null {
  const m = findMount({ id: record.mountId }, mounts);
  return m !== null && isSame(m, record.mountId, record.major, record.minor, record.mountPoint)
    ? m
    : null;
}

function isSame(m: MountInfo, id: number, major: number, minor: number, point: string): boolean {
  return m.id === id && m.major === major && m.minor === minor && m.mountPoint === point;
}

/**
 * Opens the root of a recorded mount at `parent/<name>` (after a daemon
 * restart), checking that what is there is that very mount.
 *
 * @throws {MountError} when something else is mounted there, or nothing
 */
export function openMounted(parent: Dir, name: string, record: MountRecord): Dir {
  const dir = parent.openDir(name);
  const on = mountOf(dir);
  if (on.id !== record.mountId || on.major !== record.major || on.minor !== record.minor) {
    dir.close();
    throw new MountError(
      "open",
      dir.path,
      `it is not the recorded overlay (mount id ${record.mountId}, device ${record.major}:${record.minor}) but mount id ${on.id}, device ${on.major}:${on.minor}`,
    );
  }
  return dir;
}

/**
 * Unmounts the recorded overlay at `split/<name>`: `umount2` without a lazy
 * detach, then `/proc/self/mountinfo` must no longer list its id. A mount
 * already gone (a second call, or someone's `umount -l`) is success. The
 * caller closes its own descriptors in the mount first ({@linkcode Fork.close}).
 *
 * @throws {MountBusyError} when a process still uses the mount; nothing changes
 * @throws {MountError} when what is mounted there is not the recorded
 *   overlay, or the unmount fails or does not take
 */
export function unmount(split: Dir, name: string, record: MountRecord): void {
  const path = `${split.path}/${name}`;
  const live = findRecordedMount(record);
  if (live === null) return;
  let at;
  try {
    at = mountAt(split, name);
  } catch (cause) {
    throw new MountError("unmount", path, "the mount point is gone", { cause });
  }
  if (at.id !== record.mountId || at.major !== record.major || at.minor !== record.minor) {
    throw new MountError(
      "unmount",
      path,
      `the overlay recorded (mount id ${record.mountId}) is not what is there (mount id ${at.id}): it is covered or was moved`,
    );
  }
  umountVerified(`${split.procPath}/${name}`, path, live);
}

/**
 * Unmounts a mount found in the mount table by its mount point (cleaning up
 * below a split dir), then verifies its id is gone.
 *
 * @throws {MountBusyError} when a process still uses the mount
 * @throws {MountError} when another mount now covers it, or the unmount fails
 */
export function unmountPath(m: MountInfo): void {
  let at;
  try {
    at = mountAtPath(m.mountPoint);
  } catch (cause) {
    throw new MountError("unmount", m.mountPoint, "the mount point is gone", { cause });
  }
  if (at.id !== m.id) {
    throw new MountError(
      "unmount",
      m.mountPoint,
      `mount id ${m.id} is not what is there (mount id ${at.id}): it is covered or was moved`,
    );
  }
  umountVerified(m.mountPoint, m.mountPoint, m);
}

/**
 * Waits between `EBUSY` answers, in ms. Any process that forks copies every
 * descriptor until its exec closes them (they are all close-on-exec), so a
 * mount this process holds is busy for that instant whenever it, or a test
 * running beside it, starts a child: retry briefly before calling it busy.
 */
const BUSY_RETRIES_MS = [1, 2, 4, 8, 16, 32, 64];
const sleeper = new Int32Array(new SharedArrayBuffer(4));

function umountVerified(call: string, path: string, m: MountInfo): void {
  const target = cstr(call);
  // UMOUNT_NOFOLLOW: a symlink planted at the last component is not followed.
  let r = libc().umount2(target, UMOUNT.NOFOLLOW);
  for (let i = 0; r === -1 && errno() === E.EBUSY && i < BUSY_RETRIES_MS.length; i++) {
    Atomics.wait(sleeper, 0, 0, BUSY_RETRIES_MS[i]);
    r = libc().umount2(target, UMOUNT.NOFOLLOW);
  }
  if (r === -1) {
    const e = errno();
    const cause = new FsError("umount2", path, e);
    if (e === E.EBUSY) {
      throw new MountBusyError(
        "unmount",
        path,
        "it is busy: a process has a file or its working directory in it, or something is mounted below it",
        { cause },
      );
    }
    throw new MountError("unmount", path, describeErrno(e), { cause });
  }
  const still = findMount({ id: m.id });
  if (still !== null && isSame(still, m.id, m.major, m.minor, m.mountPoint)) {
    throw new MountError("unmount", path, `mount id ${m.id} is still listed after umount2`);
  }
}

/**
 * Removes an overlay fork whose descriptors are closed: unmounts it
 * (verified), then deletes the mount point and `.overlay/<label>/`.
 *
 * @throws {MountBusyError} when it is still in use; nothing is deleted
 */
export function removeOverlayFork(split: Dir, label: string, record: MountRecord): void {
  unmount(split, label, record);
  split.rmdir(label);
  using overlays = split.openDir(OVERLAY_DIR);
  overlays.removeTree(label);
}

/** Which overlay mode works here, or `null` and why not. */
export interface OverlayProbe {
  readonly mode: OverlayMode | null;
  readonly reason: string;
}

/**
 * Finds which overlay mode works in `scratch` (a directory on the file system
 * forks will live on) by mounting a tiny overlay there in each mode, making a
 * whiteout and an opaque directory through it and reading them back from
 * the upper dir, then unmounting and removing it.
 *
 * @throws {MountError} only when a probe mount cannot be unmounted again
 */
export function probeOverlay(scratch: Dir): OverlayProbe {
  const refusals: string[] = [];
  for (const mode of ["overlay", "userns-overlay"] as const) {
    const why = probeMode(scratch, mode);
    if (why === null) {
      refusals.push(`${mode} mounts work in ${scratch.path}`);
      return { mode, reason: refusals.join("; ") };
    }
    refusals.push(`${mode}: ${why}`);
  }
  return { mode: null, reason: refusals.join("; ") };
}

const PROBE_LAYERS = ["lower", "lower2", UPPER_DIR, WORK_DIR, "merged"];

/** `null` when `mode` works in `scratch`, else why not. */
function probeMode(scratch: Dir, mode: OverlayMode): string | null {
  const name = `.marsh-overlay-probe-${crypto.randomUUID().slice(0, 8)}`;
  try {
    scratch.mkdir(name, 0o700);
  } catch (error) {
    return `cannot make a probe dir: ${error instanceof Error ? error.message : error}`;
  }
  try {
    using top = scratch.openDir(name);
    for (const d of PROBE_LAYERS) top.mkdir(d, 0o755);
    using lower = top.openDir("lower");
    lower.writeNewFile("gone", enc.encode("gone\n"));
    lower.mkdir("dir");
    {
      using d = lower.openDir("dir");
      d.writeNewFile("file", enc.encode("file\n"));
    }
    using lower2 = top.openDir("lower2");
    using upper = top.openDir(UPPER_DIR);
    using work = top.openDir(WORK_DIR);
    let record: MountRecord;
    {
      using target = top.openDir("merged");
      try {
        record = mountOverlay(mode, [lower, lower2], { upper, work }, target, MS_NOSUID, null);
      } catch (error) {
        if (error instanceof MountError) return error.reason;
        throw error;
      }
    }
    let broken: string | null = null;
    try {
      using root = top.openDir("merged");
      root.unlink("gone");
      {
        using d = root.openDir("dir");
        d.unlink("file");
      }
      root.rmdir("dir");
      root.mkdir("dir");
      if (upper.statAt("gone")?.kind !== "char") {
        broken = "a deletion left no whiteout in the upper dir";
      } else if (upper.xattrAt("dir", `${xattrPrefix(mode)}opaque`)?.[0] !== 0x79) {
        broken = `an opaque directory carries no readable ${xattrPrefix(mode)}opaque xattr`;
      }
    } catch (error) {
      broken = `the mount does not work: ${error instanceof Error ? error.message : error}`;
    } finally {
      unmount(top, "merged", record);
    }
    return broken;
  } finally {
    scratch.removeTree(name);
  }
}
