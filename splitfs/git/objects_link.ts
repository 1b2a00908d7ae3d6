/**
 * `<root>/.marsh/git-objects`, the name the forks' alternates give the
 * user's `<root>/.git/objects` (`protocol/fork_view.ts`): on the host a
 * relative symlink to `../.git/objects`, so the same admin dir works for a
 * host `git` in the fork, in a shell branch's view (where `<root>/.git` is
 * the fork's gitfile and the real object dir is bound there) and in a Kit
 * container.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import { GIT_OBJECTS_LINK, GIT_OBJECTS_LINK_TARGET } from "../../protocol/fork_view.ts";
import type { Dir } from "../fd/dir.ts";
import { SnapshotError } from "../errors.ts";
import { E, FsError } from "../fd/ffi.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

/**
 * Makes `git-objects` in the open `.marsh` dir, or keeps it when it is
 * already the link. A symlink with another target is replaced (marsh owns
 * the name; an old one could only send a host `git` elsewhere).
 *
 * @throws {SnapshotError} when something other than a symlink holds the name
 */
export function ensureObjectsLink(marsh: Dir): void {
  for (let tries = 0; tries < 3; tries++) {
    const st = marsh.statAt(GIT_OBJECTS_LINK);
    if (st === null) {
      try {
        marsh.symlink(enc.encode(GIT_OBJECTS_LINK_TARGET), GIT_OBJECTS_LINK);
        return;
      } catch (error) {
        // Another split made it meanwhile: look again.
        if (error instanceof FsError && error.errno === E.EEXIST) continue;
        throw error;
      }
    }
    if (st.kind !== "symlink") {
      throw new SnapshotError(
        `${marsh.path}/${GIT_OBJECTS_LINK} is a ${st.kind}, not marsh's link to ${GIT_OBJECTS_LINK_TARGET}: remove it and split again`,
      );
    }
    if (dec.decode(marsh.readlink(GIT_OBJECTS_LINK)) === GIT_OBJECTS_LINK_TARGET) return;
    marsh.unlink(GIT_OBJECTS_LINK);
  }
  throw new SnapshotError(`${marsh.path}/${GIT_OBJECTS_LINK} keeps changing`);
}
