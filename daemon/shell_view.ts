/**
 * Which view shell branches get from this daemon (docs/engine.md,
 * "Containment"), decided once at start and shown by `marsh status`; each
 * launched branch records it in the manifest (`view`, `view_reason`).
 *
 * - `project`: a private mount namespace per branch with its fork at the
 *   project's own path (`worker/shell_view.ts`). A root daemon makes it in the
 *   host's user namespace; an unprivileged one inside its split-filesystem
 *   service's user namespace.
 * - `fork`: where neither can be had, the branch runs as before, in the
 *   host's mount namespace from its fork's directory, where absolute paths
 *   and `../` reach the project.
 *
 * Needs `--allow-run=unshare` (root only).
 *
 * @module
 */

import type { View } from "../journal/records.ts";
import { isWithin } from "../protocol/kit_launch.ts";
import type { ShellView } from "../protocol/worker.ts";
import { UNSHARE } from "../protocol/splitfs_client.ts";
import { MARSH_DIR } from "../model/layout.ts";

/** The view shell branches get, and why. */
export interface ShellViewChoice {
  readonly view: View;
  readonly reason: string;
}

const FORK_VIEW =
  "shell branches run in their fork's directory in the host's mount namespace, where absolute paths and ../ reach the project";
const PROJECT_VIEW =
  "each shell branch sees its fork at the project's path, in a private mount namespace";

/**
 * Tries `unshare --mount --propagation private -- true`: whether this (root)
 * process may make a mount namespace. Never throws; `null` means it can.
 */
export async function probeMountNamespace(): Promise<string | null> {
  try {
    const out = await new Deno.Command(UNSHARE, {
      args: ["--mount", "--propagation", "private", "--", "true"],
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).output();
    if (out.success) return null;
    const said = new TextDecoder().decode(out.stderr).trim().split("\n")[0]?.slice(0, 200);
    return `${UNSHARE} --mount was refused (exit ${out.code}${said ? `: ${said}` : ""})`;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return `${UNSHARE} (util-linux) is not on PATH`;
    return `cannot run ${UNSHARE} --mount: ${error instanceof Error ? error.message : error}`;
  }
}

/**
 * The view for a daemon that is `root` or not, whose split-filesystem
 * service does or does not run in a user namespace of its own (`why`: why
 * not, when known).
 */
export async function chooseShellView(opts: {
  readonly root: boolean;
  readonly serviceNamespace: boolean;
  readonly why?: string;
  readonly probe?: () => Promise<string | null>;
  /** Why the `project` view is not wanted (`MARSH_SHELL_VIEW=fork`); absent: it is. */
  readonly refused?: string;
}): Promise<ShellViewChoice> {
  if (opts.refused !== undefined) return { view: "fork", reason: `${opts.refused}: ${FORK_VIEW}` };
  if (opts.root) {
    const refused = await (opts.probe ?? probeMountNamespace)();
    return refused === null ? { view: "project", reason: `root: ${PROJECT_VIEW}` } : {
      view: "fork",
      reason: `root, but no mount namespace can be made (${refused}): ${FORK_VIEW}`,
    };
  }
  if (opts.serviceNamespace) {
    return {
      view: "project",
      reason: `not root: ${PROJECT_VIEW} made in the split-filesystem service's user namespace`,
    };
  }
  return {
    view: "fork",
    reason: `not root, and the split-filesystem service has no user namespace${
      opts.why ? ` (${opts.why})` : ""
    }: ${FORK_VIEW}`,
  };
}

/** Where a shell branch runs: its cwd, and the view to build (absent: none). */
export interface ShellPlace {
  readonly cwd: string;
  readonly view?: ShellView;
}

/**
 * A shell branch's cwd and view. `split` is as journaled (`root` canonical,
 * `cwd` relative to it, `git.objects` the forks' object dirs); `control` is
 * the canonical control dir.
 */
export function shellPlace(
  choice: ShellViewChoice,
  split: { readonly root: string; readonly dir: string; readonly cwd: string },
  git: { readonly objects: readonly string[] } | null,
  label: string,
  control: string,
): ShellPlace {
  const fork = `${split.dir}/${label}`;
  const under = (top: string) => split.cwd === "" ? top : `${top}/${split.cwd}`;
  if (choice.view === "fork") return { cwd: under(fork) };
  return {
    cwd: under(split.root),
    view: {
      root: split.root,
      fork,
      admin: git === null ? null : `${split.dir}/.admin/${label}`,
      objectDirs: git?.objects ?? [],
      control,
    },
  };
}

/**
 * The cwd a shell branch's CLI reports, as the split-filesystem service must
 * see it: a branch with the project view sees its fork at `root`, so a cwd
 * in `root` (outside its `.marsh`) is that place in `fork`. Anything else is
 * passed on as it is (and refused there if it is not in the fork).
 */
export function branchCwd(
  cwd: string,
  branch: { readonly view: View | null; readonly fork: string },
  root: string,
): string {
  if (branch.view !== "project") return cwd;
  if (!isWithin(cwd, root) || isWithin(cwd, `${root}/${MARSH_DIR}`)) return cwd;
  return `${branch.fork}${cwd.slice(root.length)}`;
}
