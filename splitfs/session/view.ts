/**
 * A session's view (docs/checkpoints.md "The model"): the read-only overlay
 * of a stack at the stable path `<root>/.marsh/session/<name>/view`.
 *
 * A remount never leaves the path empty: the new overlay is mounted at
 * `.view-next`, moved beneath the old one at `view` (`move_mount` with
 * `MOVE_MOUNT_BENEATH`, Linux 6.5 and later), and the old one is then
 * detached lazily. A process whose working directory or open file is in the
 * old view keeps reading the old stack, consistently, until it lets go;
 * every path looked up afresh sees the new one. Where the kernel cannot
 * mount beneath, the old view is detached first and the new one moved onto
 * the path: for that instant the path shows the empty mount point.
 *
 * A view asked for the stack it shows already (a no-change checkpoint) is
 * left as it is, when the mount at the path is still the one this process
 * made for that stack (its mount id).
 *
 * Needs `--allow-ffi=<libc path>`, and the privilege to mount.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { AT, cstr, describeErrno, E, errno, FsError, libc, UMOUNT } from "../fd/ffi.ts";
import { MountError, mountReadOnly } from "../fork/overlay.ts";
import { findMount, readMounts } from "../fd/mountinfo.ts";
import type { LayerMeta, LayerStore } from "../layers/layers.ts";
import { mountsAt, NEXT_VIEW, type SessionPlace, unmountUnder, writePin } from "./session_dir.ts";
import { VIEW_DIR } from "../../model/checkpoint.ts";
import { PHASE } from "./session_phases.ts";
import { phaseEnd, phaseStart } from "../phase_times.ts";

const MOVE_MOUNT_BENEATH = 0x200;
const MS_MOVE = 8192n;

/** The mount this process last made at each view path, and the stack it shows. */
const shown = new Map<string, { readonly layers: string; readonly mountId: number }>();

/** What `view-mount` answers. */
export interface MountedView {
  readonly view: string;
  readonly rootId: string;
  readonly class: "virtual";
}

/**
 * The layer data dirs of `layers` (bottom first) as overlay lowers, top
 * first, with the empty layer added when a read-only overlay needs a second.
 * The caller closes them.
 */
export function openLowers(store: LayerStore, layers: readonly string[], readOnly: boolean): Dir[] {
  const out: Dir[] = [];
  try {
    for (const id of [...layers].reverse()) out.push(store.openData(id));
    if (readOnly && out.length < 2) out.push(store.emptyLayer());
    return out;
  } catch (error) {
    for (const d of out) d.close();
    throw error;
  }
}

/**
 * (Re)mounts the session's view on `layers` (bottom first, each sealed) and
 * pins them. The root id is read back from the top layer's sealed meta.
 *
 * @throws {LayerError} when a layer is missing, unsealed, or the stack is not `layers`
 * @throws {MountError} when a mount fails; the old view, if any, stays
 */
export function mountView(place: SessionPlace, layers: readonly string[]): MountedView {
  let t = phaseStart();
  const store = place.store();
  // A mount needs no index: only the metas (the root id is the top's).
  const metas = store.stackMetasOf(layers);
  const topMeta = metas[metas.length - 1] as LayerMeta;
  phaseEnd(PHASE.stack, t);
  const mode = place.mode();
  const viewPath = `${place.path}/${VIEW_DIR}`;
  const key = layers.join(",");
  // Shown already (a no-change checkpoint keeps its stack): the mount this
  // process made for exactly these layers is still the one at the path.
  const last = shown.get(viewPath);
  if (last !== undefined && last.layers === key) {
    const top = mountsAt(viewPath).at(-1);
    if (top !== undefined && top.id === last.mountId) {
      return { view: viewPath, rootId: topMeta.rootId, class: "virtual" };
    }
  }
  shown.delete(viewPath);
  t = phaseStart();
  // Pinned before the mount, so the collector never finds a mounted layer unnamed.
  // A stack of the journal's, for a mount: no fsync (see writePin).
  writePin(place.dir, layers, false);
  place.dir.ensureDir(VIEW_DIR, 0o755).close();
  phaseEnd(PHASE.viewPin, t);
  t = phaseStart();
  const lowers = openLowers(store, layers, true);
  try {
    const current = mountsAt(viewPath);
    if (current.length === 0) {
      using target = place.dir.openDir(VIEW_DIR);
      const record = mountReadOnly(mode, lowers, target);
      shown.set(viewPath, { layers: key, mountId: record.mountId });
      return { view: viewPath, rootId: topMeta.rootId, class: "virtual" };
    }
    // A leftover of an interrupted remount goes first.
    if (mountsAt(`${place.path}/${NEXT_VIEW}`).length > 0) {
      unmountUnder(`${place.path}/${NEXT_VIEW}`, place.path, "session-close");
    }
    place.dir.ensureDir(NEXT_VIEW, 0o755).close();
    let record;
    {
      using target = place.dir.openDir(NEXT_VIEW);
      record = mountReadOnly(mode, lowers, target);
    }
    phaseEnd(PHASE.viewMount, t);
    t = phaseStart();
    replaceView(place.dir, viewPath, record.mountId);
    place.dir.rmdir(NEXT_VIEW);
    shown.set(viewPath, { layers: key, mountId: record.mountId });
    phaseEnd(PHASE.viewReplace, t);
    return { view: viewPath, rootId: topMeta.rootId, class: "virtual" };
  } finally {
    for (const d of lowers) d.close();
  }
}

/** Puts the mount at `.view-next` (id `next`) in the place of the one at `view`. */
function replaceView(session: Dir, viewPath: string, next: number): void {
  const from = cstr(`${session.procPath}/${NEXT_VIEW}`);
  const to = cstr(`${session.procPath}/${VIEW_DIR}`);
  const move = libc().move_mount;
  let beneath = false;
  if (move !== null) {
    const r = move(AT.FDCWD, from, AT.FDCWD, to, MOVE_MOUNT_BENEATH);
    if (r === 0) beneath = true;
    else {
      const e = errno();
      // Older kernels do not know the flag (EINVAL) or the call (ENOSYS): detach first.
      if (e !== E.EINVAL && e !== E.ENOSYS) {
        throw new MountError("remount", viewPath, describeErrno(e), {
          cause: new FsError("move_mount", viewPath, e),
        });
      }
    }
  }
  // The old view is the top mount at the path now (or still): detach it lazily.
  if (libc().umount2(to, UMOUNT.DETACH | UMOUNT.NOFOLLOW) === -1) {
    const e = errno();
    throw new MountError("detach the old view at", viewPath, describeErrno(e), {
      cause: new FsError("umount2", viewPath, e),
    });
  }
  if (!beneath) {
    if (libc().mount(from, to, cstr(""), MS_MOVE, cstr("")) === -1) {
      const e = errno();
      throw new MountError("move the new view onto", viewPath, describeErrno(e), {
        cause: new FsError("mount", viewPath, e),
      });
    }
  }
  const top = findMount({ path: viewPath }, readMounts());
  if (top === null || top.id !== next) {
    throw new MountError(
      "remount",
      viewPath,
      `the new view (mount id ${next}) is not what the path shows (mount id ${top?.id ?? "none"})`,
    );
  }
}
