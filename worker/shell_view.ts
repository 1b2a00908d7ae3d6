/**
 * A shell branch's project view (docs/engine.md, "Containment"): the steps
 * the supervisor takes in the branch's own mount namespace so that the fork
 * is at the project's own path and nothing else of the project's `.marsh`
 * can be written.
 *
 * | at | what | access |
 * |---|---|---|
 * | the control dir | itself (journal, sockets, attempt files) | read-only (`connect(2)` to `MARSH_SOCK` still works) |
 * | `<root>` | the fork | read-write |
 * | `<root>/.git` | the fork's gitfile | read-only |
 * | `<root>/.marsh` | a small tmpfs holding only what follows (and a `.gitignore` of `*` for a Git project) | read-only once built |
 * | `<root>/.marsh/split` | the project's split dirs, without the mounts in them (so no other overlay fork and no base) | read-only |
 * | `.admin/<label>/` and the object dirs | `protocol/fork_view.ts`'s table | admin dir read-write, `info/` and objects read-only |
 *
 * `.marsh/split` is there read-only because a branch's own nested splits
 * (`marsh split ... | marsh join -- CMD`) are made there after the view, and
 * their consumer reads `$SPLIT_DIR`. The layers, `.trash` and everything
 * else of `.marsh` are absent.
 *
 * A checkpoint operation's view (its fork is
 * `<root>/.marsh/session/<name>/op/<op>/merged`, docs/checkpoints.md "An
 * operation") differs: the user's own `<root>/.git`, when there is one, is
 * bound read-only at its place (`git log`, `diff` and `status` work; a write
 * fails), and `.marsh` holds only the `.gitignore`: no split dirs, no
 * session dirs, no layers.
 *
 * @module
 */

import { forkBinds, VIEW_ADMIN_READ_ONLY } from "../protocol/fork_view.ts";
import type { ShellView } from "../protocol/worker.ts";
import type { ViewStep } from "./supervisor.ts";

/** The view's steps, in the order the supervisor takes them. */
export function viewSteps(view: ShellView): ViewStep[] {
  const { root } = view;
  const marsh = `${root}/.marsh`;
  const splits = `${marsh}/split`;
  const op = !view.fork.startsWith(`${splits}/`);
  const binds = forkBinds({
    fork: view.fork,
    forkTarget: root,
    admin: view.admin,
    objectDirs: view.objectDirs,
    adminReadOnly: VIEW_ADMIN_READ_ONLY,
  });
  const bind = (b: { source: string; target: string; readOnly: boolean }): ViewStep => ({
    step: b.readOnly ? "bind-ro" : "bind",
    source: b.source,
    target: b.target,
  });
  const steps: ViewStep[] = [
    // First, while its path still names the host's: under the fork bind it
    // would not be reachable by name any more.
    { step: "bind-ro", source: view.control, target: view.control },
  ];
  // The fork over the root, then its gitfile over its own place there.
  const onRoot = binds.filter((b) => b.role === "fork" || b.role === "gitfile");
  steps.push(...onRoot.map(bind));
  if (op && view.admin === null) {
    // Opened before the fork covers the root, so it is the user's own.
    steps.push({ step: "bind-ro-if", source: `${root}/.git`, target: `${root}/.git` });
  }
  // A snapshot never holds .marsh, so the fork gets the (empty) mount point;
  // an empty directory adds nothing to a patch.
  steps.push(
    { step: "mkdir", source: "", target: marsh },
    { step: "tmpfs", source: "", target: marsh },
  );
  if (view.admin !== null || op) {
    // Git in the view must not list .marsh as untracked, as on the host.
    steps.push({ step: "file", source: "*\n", target: `${marsh}/.gitignore` });
  }
  if (!op) {
    steps.push(
      { step: "mkdir", source: "", target: splits },
      { step: "bind-ro", source: splits, target: splits },
    );
  }
  for (const b of binds) {
    if (onRoot.includes(b)) continue;
    // The user's objects get a mount point in the tmpfs; the rest lie in .marsh/split.
    if (!b.target.startsWith(`${splits}/`)) {
      steps.push({ step: "mkdir", source: "", target: b.target });
    }
    steps.push(bind(b));
  }
  steps.push({ step: "remount-ro", source: "", target: marsh });
  return steps;
}
