/**
 * An operation's completeness receipt (docs/checkpoints.md "An operation",
 * step 3): what makes its checkpoint the complete final state of its writes.
 * Two proofs, both kept in the journal: its whole process tree was seen gone
 * (the attempt's cgroup emptied, or the child subreaper's last reap), and a
 * private mount namespace showed its overlay at the project's own path, so
 * the overlay was the only writable view of the project it had. Without the
 * namespace (`relative`) a write by absolute path may have bypassed the
 * overlay: the checkpoint holds what it captured, and is never called
 * complete.
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** What proved the operation's process tree gone. */
export type DrainProof = "cgroup" | "subreaper";

/** How the operation saw the project. */
export type OperationViewKind = "project" | "relative";

/** The receipt as `marsh log --json` and `marsh show --json` print it. */
export interface CompletenessReceipt {
  /** True only with both proofs: a drain and the `project` view. */
  readonly complete: boolean;
  /** Null: not recorded (an operation from before receipts were kept). */
  readonly drain: DrainProof | null;
  /** `project`: a private mount namespace made the overlay the only writable view. */
  readonly view: OperationViewKind;
  /** One sentence: why it is, or is not, complete. */
  readonly why: string;
}

/** The receipt of a drained operation that ran with `view` and was drained by `drain`. */
export function completenessReceipt(
  view: OperationViewKind,
  drain: DrainProof | null,
): CompletenessReceipt {
  if (view === "relative") {
    return {
      complete: false,
      drain,
      view,
      why: "relative: it saw the project by its cwd only, so a write by absolute path may " +
        "have bypassed its overlay and be missing from the checkpoint",
    };
  }
  if (drain === null) {
    return {
      complete: false,
      drain,
      view,
      why: "what proved its process tree gone was not recorded (an operation from before receipts)",
    };
  }
  return {
    complete: true,
    drain,
    view,
    why: `its whole process tree was seen gone (${
      drain === "cgroup" ? "its cgroup emptied" : "the subreaper's last reap"
    }) and a private mount namespace made its overlay the only writable view of the project`,
  };
}
