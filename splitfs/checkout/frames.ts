/**
 * The service's checkout frames (protocol/splitfs_checkout.ts;
 * docs/checkpoints.md "Checkout and commit"): `checkout-plan`, which reads
 * the project and two sealed stacks and writes nothing, and
 * `checkout-apply`, which runs the plan through the transactional applier
 * (docs/resolution.md, "The applier"), each taken file copied from the
 * layer that shows it. Each first holds the project's lock and recovers any
 * resolution a crash interrupted there, as the resolution frames do.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { AppliedReply, ApplyRefusedReply } from "../../protocol/splitfs_resolve.ts";
import { MAX_LISTED_PATHS } from "../../protocol/splitfs_resolve.ts";
import type {
  CheckoutApplyRequest,
  CheckoutPlannedReply,
  CheckoutPlanRequest,
  CheckoutRequest,
  StackRef,
} from "../../protocol/splitfs_checkout.ts";
import type { SplitfsReply } from "../../protocol/splitfs.ts";
import { isClean } from "../../model/resolution_plan.ts";
import { Dir } from "../fd/dir.ts";
import { readRel } from "../fd/read_rel.ts";
import { GITFILE_ROOT_REFUSAL, readGitSource } from "../git/git_source.ts";
import { ignoreRulesOf, loadIgnoreInputs } from "../git/ignore_load.ts";
import type { IgnoreScope } from "../git/ignore_rules.ts";
import { LayerError } from "../layers/layer_seal.ts";
import { RefusedError, SnapshotError } from "../errors.ts";
import { applyPlan, type Content } from "../apply/transaction.ts";
import { StackDir, StackView } from "../export/stack_view.ts";
import { applyErrorReply, refusedReply } from "../resolve/apply_frame.ts";
import type { ProjectRecovery } from "../resolve/recovery.ts";
import { planCheckout, targetDirModes } from "./plan_checkout.ts";

/**
 * Answers one checkout frame. The applier's failures become error replies
 * with their own messages; other errors are thrown, for the service's own
 * mapping.
 */
export async function handleCheckout(
  req: CheckoutRequest,
  recovery: ProjectRecovery,
): Promise<SplitfsReply> {
  try {
    await recovery.ready(req.root);
    return req.t === "checkout-plan" ? planFrame(req) : await applyFrame(req);
  } catch (error) {
    const reply = applyErrorReply(error);
    if (reply !== null) return reply;
    throw error;
  }
}

/**
 * Opens `ref`'s stack in the project and checks its root id.
 *
 * @throws {LayerError} for a stack that is not sealed and whole, or another root
 */
function openStack(root: Dir, ref: StackRef): StackView {
  const view = StackView.open(root, ref.layers);
  if (view.rootId !== ref.rootId) {
    const top = ref.layers[ref.layers.length - 1] ?? "(empty)";
    view.close();
    throw new LayerError(top, `shows the root ${view.rootId}, not the ${ref.rootId} asked for`);
  }
  return view;
}

/** The project's ignore rules, as a session's snapshot reads them; `null` admits everything. */
function ignoreOf(root: Dir, req: CheckoutPlanRequest): IgnoreScope | null {
  if (req.withIgnored) return null;
  const kind = root.statAt(".git")?.kind;
  if (kind === undefined) return null;
  if (kind === "file") throw new SnapshotError(GITFILE_ROOT_REFUSAL);
  if (kind !== "dir") {
    throw new SnapshotError(`project root .git is a ${kind}, not a directory: ${req.root}/.git`);
  }
  const git = readGitSource((rel, max) => readRel(root, rel, max));
  if (git === null) return null;
  return ignoreRulesOf(loadIgnoreInputs(root, req.root, git, req.env ?? {}));
}

function planFrame(req: CheckoutPlanRequest): CheckoutPlannedReply {
  using root = Dir.openAbsolute(req.root);
  using target = openStack(root, req.target);
  using base = openStack(root, req.base);
  const r = planCheckout({
    project: root,
    base,
    target,
    ignore: ignoreOf(root, req),
    maxListed: MAX_LISTED_PATHS,
  });
  return {
    v: 1,
    t: "checkout-planned",
    plan: r.plan,
    projectChanges: r.projectChanges,
    projectChangesMore: r.projectChangesMore,
  };
}

/** The target's directories, opened once each while the apply stages its files. */
class TargetDirs implements Disposable {
  readonly #view: StackView;
  readonly #dirs = new Map<string, StackDir>();

  constructor(view: StackView) {
    this.#view = view;
  }

  #dir(path: string): StackDir {
    let d = this.#dirs.get(path);
    if (d !== undefined) return d;
    const at = path.lastIndexOf("/");
    d = path === ""
      ? this.#view.rootDir()
      : this.#dir(at < 0 ? "" : path.slice(0, at)).child(path.slice(at + 1));
    this.#dirs.set(path, d);
    return d;
  }

  /** Where the target's file `path` is: its layer's directory (borrowed) and name. */
  file(path: string): Content {
    const at = path.lastIndexOf("/");
    const name = path.slice(at + 1);
    const found = this.#dir(at < 0 ? "" : path.slice(0, at)).locate(name);
    if (found === null || found.st.kind !== "file") {
      throw new LayerError(
        "(stack)",
        `has no file ${JSON.stringify(path)} where its index names one; plan the checkout again`,
      );
    }
    // Copied, then checked against the plan's blob id and mode once staged.
    return { from: found.dir, name };
  }

  [Symbol.dispose](): void {
    for (const d of this.#dirs.values()) d.close();
    this.#dirs.clear();
  }
}

async function applyFrame(req: CheckoutApplyRequest): Promise<AppliedReply | ApplyRefusedReply> {
  if (!isClean(req.plan)) {
    throw new RefusedError(
      "a checkout plan has no conflicts; this one does, so nothing was changed",
    );
  }
  using root = Dir.openAbsolute(req.root);
  using target = openStack(root, req.target);
  using dirs = new TargetDirs(target);
  try {
    const applied = await applyPlan(req.root, req.plan, {
      id: req.resolution,
      content: (f) => dirs.file(f.path),
      dirModes: targetDirModes(req.plan, target.index),
    });
    return { v: 1, t: "applied", resolution: applied.id, changed: applied.ops.length };
  } catch (error) {
    const refused = refusedReply(error);
    if (refused !== null) return refused;
    throw error;
  }
}
