/**
 * The service dies with the process that started it. A service that outlived
 * a `kill -9` of its daemon kept writing a split's `out/` while the next
 * daemon had already marked the split uncertain, and held its mounts busy
 * (docs/engine.md "Processes").
 *
 * The kernel sends the parent-death signal when the thread that forked this
 * process exits; the daemon starts the service from its JS thread, which
 * lives as long as the daemon does.
 *
 * Needs `--allow-ffi` (libc).
 *
 * @module
 */

import { check, libc } from "./fd/ffi.ts";

const PR_SET_PDEATHSIG = 1;
const SIGKILL = 9n;

/** The parent was gone before the service could bind itself to it. */
export class OrphanedError extends Error {
  override name = "OrphanedError";
}

/**
 * Asks for SIGKILL when the parent exits, then checks that the parent is
 * still `parent`: one that died before the request was made has left this
 * process reparented, and no signal would ever come.
 *
 * @throws {OrphanedError} when the parent is no longer `parent`
 * @throws {FsError} when `prctl` fails
 */
export function dieWithParent(parent: number): void {
  const c = libc();
  check(c.prctl(PR_SET_PDEATHSIG, SIGKILL, 0n, 0n, 0n), "prctl", "PR_SET_PDEATHSIG");
  const now = c.getppid();
  if (now !== parent) {
    throw new OrphanedError(
      `the process that started this service (pid ${parent}) is gone (parent now ${now})`,
    );
  }
}
