/**
 * The applier's refusals and failures (docs/resolution.md, "The applier"):
 * each says which paths and what to do, and whether the tree was changed.
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** One path whose state is not what a plan (or an undo) was computed against. */
export interface Changed {
  readonly path: string;
  readonly expected: string;
  readonly found: string;
}

/** How many paths a message lists before "and N more". */
const SHOWN = 10;

function listed(items: readonly string[]): string {
  const more = items.length > SHOWN ? `; and ${items.length - SHOWN} more` : "";
  return items.slice(0, SHOWN).join("; ") + more;
}

/** Paths changed since the plan was computed: nothing was changed. */
export class ConcurrentChangeError extends Error {
  override name = "ConcurrentChangeError";
  constructor(readonly changed: readonly Changed[], what = "the plan") {
    super(
      `${changed.length} path(s) changed since ${what} was computed, so nothing was changed: ${
        listed(changed.map((c) => `${c.path} (expected ${c.expected}, found ${c.found})`))
      }; plan again`,
    );
  }
}

/** An undo refused: the paths the resolution changed have changed since; nothing was changed. */
export class UndoRefusedError extends Error {
  override name = "UndoRefusedError";
  constructor(readonly resolution: string, readonly changed: readonly Changed[]) {
    super(
      `cannot undo resolution ${resolution}: ${changed.length} path(s) changed since it was applied, ` +
        `so nothing was changed: ${
          listed(changed.map((c) => `${c.path} (expected ${c.expected}, found ${c.found})`))
        }; put them back as the resolution left them, or merge by hand`,
    );
  }
}

/** A plan this tree cannot take as it is (a parent that is a file, a directory holding unplanned files). */
export class ApplyRefusedError extends Error {
  override name = "ApplyRefusedError";
  constructor(readonly problems: readonly string[]) {
    super(`the plan cannot be applied, so nothing was changed: ${listed(problems)}`);
  }
}

/** A step failed; every step done before it was undone, so the tree is as it was. */
export class ApplyFailedError extends Error {
  override name = "ApplyFailedError";
  constructor(readonly id: string, cause: unknown) {
    super(
      `resolution ${id} failed and was rolled back, so the project is as it was: ${
        cause instanceof Error ? cause.message : String(cause)
      }`,
      { cause },
    );
  }
}

/** A step failed and so did its rollback: the log is kept, for `recover` once the path is fixed. */
export class RollbackFailedError extends Error {
  override name = "RollbackFailedError";
  constructor(readonly id: string, cause: unknown, rollback: unknown) {
    super(
      `resolution ${id} failed (${cause instanceof Error ? cause.message : String(cause)}) ` +
        `and could not be rolled back: ${
          rollback instanceof Error ? rollback.message : String(rollback)
        }; the project is partly changed: fix that path, then recover resolution ${id}`,
      { cause: rollback },
    );
  }
}

/** A resolution that cannot be recovered or undone as asked (unknown id, not applied, undone already). */
export class ResolutionStateError extends Error {
  override name = "ResolutionStateError";
}
