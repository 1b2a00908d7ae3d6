/**
 * What an argv branch's container mounts (docs/containment.md "An argv branch (Kit container)"),
 * and where the image user's home is. The fork and Git rows come from the table shared with shell
 * branches (`protocol/fork_view.ts`).
 *
 * | mount | at | access |
 * |---|---|---|
 * | the fork | its host path | read-write |
 * | `.admin/<label>/` | its host path | read-write (Git makes `index.lock`, objects, refs) |
 * | the gitfile `<fork>/.git`; `<admin>/config`, `HEAD`, `info/`, `packed-refs` | their host paths, over the two above | read-only (AdminReadOnly); `packed-refs` only if it exists |
 * | each object dir (`store.git/objects`; the user's `.git/objects` at `<root>/.marsh/git-objects`, the name the alternates use) | its host path | read-only (SnapshotImmutable) |
 * | the kit's home dir | the image user's home | read-write |
 * | the capability dir | `/run/marsh` | read-only |
 * | the attempt's socket, the host Deno, the in-job client | `/run/marsh/cap.sock`, `deno`, `marsh.js`, over their placeholders | read-only (`connect(2)` on a socket ignores `MS_RDONLY`) |
 *
 * Nothing else of the project is mounted (NoWriteToUserTree,
 * ForkIsolation). Every bind is non-recursive, so a mount below a source
 * (none is expected) is not carried in, and a read-only bind is read-only
 * all the way down. The engine sorts mounts by target depth, so the
 * read-only binds land on top of the read-write ones.
 *
 * @module
 */

import { CAP_SOCKET, CAP_TARGET, JOB_CLIENT, JOB_DENO } from "../protocol/job_capability.ts";
import { isCleanAbsolute, isWithin, type KitLaunch } from "../protocol/kit_launch.ts";
import { ADMIN_READ_ONLY, type ForkBind, forkBinds } from "../protocol/fork_view.ts";
import { KitLaunchError } from "./kit_errors.ts";

/**
 * Where the capability dir is bound in every Kit container (docs/rules.md "The job capability").
 */
export { CAP_TARGET };
/** An image label that names its user's home when neither `HOME` nor the user tells it. */
export const HOME_LABEL = "marsh.kit.home";

/**
 * One bind mount. For an optional one the engine is the one that looks
 * (the worker has no read access to projects): a create naming a missing
 * source fails, and the runner retries without it.
 */
export type KitMount = ForkBind;

/**
 * The read-only binds over the admin dir, by name under it (docs/rules.md "Snapshot and forks").
 */
export { ADMIN_READ_ONLY };

/**
 * The image user's home: the image's `marsh.kit.home` label, else `HOME`
 * in its config's `Env`, else `/root` for root (no `User`, `root`, or uid
 * 0), else `/home/<name>` for a named user. A numeric non-root user with
 * neither label nor `HOME` cannot be told without reading the image's
 * `/etc/passwd`, which would need a probe container (docs/rules.md "The job capability": the
 * worker reads only the image config), so it is refused.
 *
 * @throws {KitLaunchError} when the home cannot be told or is not a clean absolute path
 */
export function guestHome(
  attempt: string,
  image: string,
  config: {
    readonly user: string;
    readonly env: readonly string[];
    readonly labels: Readonly<Record<string, string>>;
  },
): string {
  const check = (home: string, from: string): string => {
    if (!isCleanAbsolute(home) || home === "/") {
      throw new KitLaunchError(
        attempt,
        `the home directory ${
          JSON.stringify(home)
        } from ${from} of image ${image} is not a usable absolute path`,
      );
    }
    return home;
  };
  const label = config.labels[HOME_LABEL];
  if (label !== undefined) return check(label, `its label ${HOME_LABEL}`);
  const env = config.env.findLast((e) => e.startsWith("HOME="));
  if (env !== undefined) return check(env.slice(5), "its HOME");
  const user = config.user.split(":")[0] ?? "";
  if (user === "" || user === "root" || user === "0") return "/root";
  if (/^[A-Za-z_][A-Za-z0-9_.-]*$/.test(user)) return check(`/home/${user}`, `its user ${user}`);
  throw new KitLaunchError(
    attempt,
    `cannot tell the home directory of user ${
      JSON.stringify(config.user)
    } of image ${image}: set HOME in the image's config or label it ${HOME_LABEL}`,
  );
}

/**
 * The mounts of `launch` with the kit home at `home` (inside the container).
 *
 * @throws {KitLaunchError} when two mounts would land on one target, the
 *   home or capability dir would cover the fork, admin dir or object dirs,
 *   or (with a capability) anything else would land inside `/run/marsh`
 */
export function planMounts(launch: KitLaunch, home: string): KitMount[] {
  const mounts: KitMount[] = forkBinds({
    fork: launch.fork,
    forkTarget: launch.fork,
    admin: launch.admin,
    objectDirs: launch.objectDirs,
    adminReadOnly: ADMIN_READ_ONLY,
  });
  for (const p of launch.readOnly ?? []) {
    mounts.push({ source: p, target: p, readOnly: true, optional: true, role: `read-only ${p}` });
  }
  const project = mounts.map((m) => m.target);
  const extra: KitMount[] = [
    { source: launch.kit.home, target: home, readOnly: false, optional: false, role: "kit home" },
  ];
  if (launch.cap !== null) {
    const cap: KitMount[] = [];
    // The socket is bound read-only too: connect(2) ignores MS_RDONLY, and
    // the job can neither remove nor replace it.
    const ro = (source: string, target: string, role: string) =>
      cap.push({ source, target, readOnly: true, optional: false, role });
    ro(launch.cap.dir, CAP_TARGET, "capability dir");
    ro(launch.cap.socket, CAP_SOCKET, "capability socket");
    ro(launch.cap.deno, JOB_DENO, "job deno");
    ro(launch.cap.client, JOB_CLIENT, "job client");
    // /run/marsh is marsh's alone: a project or home mount there would hide part of it.
    const inside = [...mounts, ...extra].find((m) => isWithin(m.target, CAP_TARGET));
    if (inside !== undefined) {
      throw new KitLaunchError(
        launch.attempt,
        `the ${inside.role} would be mounted at ${inside.target}, inside ${CAP_TARGET}`,
      );
    }
    extra.push(...cap);
  }
  for (const m of extra) {
    // A home above the fork is fine (the engine makes the mount points inside
    // it); one at or below a project mount would hide or replace project files.
    const covered = project.find((p) => isWithin(m.target, p));
    if (covered !== undefined) {
      throw new KitLaunchError(
        launch.attempt,
        `the ${m.role} would be mounted at ${m.target}, inside ${covered}`,
      );
    }
    mounts.push(m);
  }
  const seen = new Set<string>();
  for (const m of mounts) {
    if (seen.has(m.target)) {
      throw new KitLaunchError(launch.attempt, `two mounts at ${m.target}`);
    }
    seen.add(m.target);
  }
  return mounts;
}

/** Docker's `HostConfig.Mounts` entries for `mounts`. */
export function engineMounts(mounts: readonly KitMount[]): Record<string, unknown>[] {
  return mounts.map((m) => ({
    Type: "bind",
    Source: m.source,
    Target: m.target,
    ReadOnly: m.readOnly,
    BindOptions: { Propagation: "rprivate", NonRecursive: true },
  }));
}
