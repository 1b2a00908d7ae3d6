/**
 * What a branch sees of its fork and of the fork's Git metadata: the one
 * table of binds behind a Kit container's mounts (`worker/kit_mounts.ts`)
 * and a shell branch's project view (`worker/shell_view.ts`), and the name
 * the forks' alternates give the user's object store.
 *
 * | bind | at | Kit container | shell branch's view |
 * |---|---|---|---|
 * | the fork | Kit: its host path; view: the project root | read-write | read-write |
 * | `.admin/<label>/` | its host path | read-write | read-write |
 * | the gitfile `<fork>/.git` | over the fork's | read-only | read-only |
 * | `<admin>/config`, `HEAD`, `packed-refs` | their host paths | read-only | (left read-write) |
 * | `<admin>/info` | its host path | read-only | read-only |
 * | each object dir | {@linkcode alternateOf} it | read-only | read-only |
 *
 * A Kit container runs untrusted code: every admin file whose change could
 * make a host `git` in the fork run something is read-only there
 * (docs/containment.md "An argv branch (Kit container)"). A shell branch is the user's own code;
 * Git replaces `HEAD`, `config` and `packed-refs` by renaming a lock file over
 * them (`git checkout -b`, `git config`, `git gc`), which a bind would
 * refuse (`EBUSY`), so the view leaves them to capture's verification
 * (docs/engine.md, "Capture and verification").
 *
 * @module
 */

import { MARSH_DIR } from "../model/layout.ts";

/**
 * Under `<root>/.marsh`: the name the forks' alternates use for the user's
 * `<root>/.git/objects`. On the host it is a relative symlink to
 * `../.git/objects`; where a branch sees its fork at the project's own path
 * (`<root>/.git` is then the fork's gitfile), the real object dir is bound
 * read-only there.
 */
export const GIT_OBJECTS_LINK = "git-objects";
/** The {@linkcode GIT_OBJECTS_LINK} symlink's target. */
export const GIT_OBJECTS_LINK_TARGET = "../.git/objects";

const USER_OBJECTS = "/.git/objects";

/**
 * How the forks' alternates name the object dir `dir`: the user's
 * `<root>/.git/objects` as `<root>/.marsh/git-objects`; marsh's own object
 * dirs (`store.git/objects`, a creator fork's `.admin/<label>/objects`) as
 * they are, since each lies under `<root>/.marsh/split` and is bound at its
 * own path.
 */
export function alternateOf(dir: string): string {
  if (!dir.endsWith(USER_OBJECTS)) return dir;
  return `${dir.slice(0, -USER_OBJECTS.length)}/${MARSH_DIR}/${GIT_OBJECTS_LINK}`;
}

/** The admin files a Kit container gets read-only, by name under the admin dir. */
export const ADMIN_READ_ONLY = ["config", "HEAD", "info", "packed-refs"] as const;
/** The admin files a shell branch's view binds read-only (see the module documentation). */
export const VIEW_ADMIN_READ_ONLY = ["info"] as const;

/** One bind of a fork or of its Git metadata. */
export interface ForkBind {
  readonly source: string;
  readonly target: string;
  readonly readOnly: boolean;
  /** Bound only if the source exists (`packed-refs`); every other source must. */
  readonly optional: boolean;
  /** What it is, for errors and the report. */
  readonly role: string;
}

/** What {@linkcode forkBinds} binds. */
export interface ForkBindSpec {
  /** The fork's host path. */
  readonly fork: string;
  /** Where the fork appears: its host path in a Kit container, the project root in a view. */
  readonly forkTarget: string;
  /** `<split>/.admin/<label>` for a Git project, else `null`. */
  readonly admin: string | null;
  /** The object dirs the admin dir's alternates name, as real paths. */
  readonly objectDirs: readonly string[];
  /** Which admin files are bound read-only. */
  readonly adminReadOnly: readonly string[];
}

/**
 * The binds of a fork and its Git metadata, in mount order: the fork, the
 * admin dir, the gitfile over the fork's, the read-only admin files, then
 * each object dir at its alternates name.
 */
export function forkBinds(spec: ForkBindSpec): ForkBind[] {
  const binds: ForkBind[] = [];
  const bind = (
    source: string,
    target: string,
    readOnly: boolean,
    role: string,
    optional = false,
  ) => binds.push({ source, target, readOnly, optional, role });
  bind(spec.fork, spec.forkTarget, false, "fork");
  if (spec.admin !== null) {
    bind(spec.admin, spec.admin, false, "admin dir");
    // splitfs writes all of these but packed-refs for every Git fork: one
    // missing means this is not the fork it made (say, an overlay fork
    // mounted in another mount namespace, seen as its empty mount point).
    bind(`${spec.fork}/.git`, `${spec.forkTarget}/.git`, true, "gitfile");
    for (const name of spec.adminReadOnly) {
      bind(
        `${spec.admin}/${name}`,
        `${spec.admin}/${name}`,
        true,
        `admin ${name}`,
        name === "packed-refs",
      );
    }
  }
  for (const dir of spec.objectDirs) bind(dir, alternateOf(dir), true, "object dir");
  return binds;
}
