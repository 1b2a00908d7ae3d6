/**
 * The source's side of a filesystem-scope or promote plan
 * (docs/resolution.md, "The filesystem scopes' planner"): what one path
 * holds now, and what a directory holds that a plan does not name. Read
 * through no-follow descriptors from the source's root.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { openParent } from "../apply/fs_extra.ts";
import { signatureAt } from "./changed_paths.ts";
import { ABSENT, type Signature } from "../../model/resolution_plan.ts";

/** What the source holds at a path, and why a plan may not change it there. */
export interface SourceState {
  readonly sig: Signature;
  /** Set when the path cannot change as it is: why. */
  readonly why: string | null;
  /**
   * The ancestor that is a file or a symlink, when that is why: a plan that
   * makes it a directory first may still change the path.
   */
  readonly at: string | null;
}

/**
 * What the source holds at `path`: absent below an ancestor that is a file
 * or a symlink (`at`), and absent with a reason for a kind no plan holds (a FIFO).
 */
export function sourceState(source: Dir, path: string): SourceState {
  const p = openParent(source, path);
  if (!p.ok) {
    return p.kind === "absent" ? { sig: ABSENT, why: null, at: null } : {
      sig: ABSENT,
      why: `the source has a ${p.kind} at ${p.at}, not a directory`,
      at: p.at,
    };
  }
  using dir = p.dir;
  const st = dir.statAt(p.name);
  if (st === null) return { sig: ABSENT, why: null, at: null };
  if (st.kind !== "file" && st.kind !== "symlink" && st.kind !== "dir") {
    return {
      sig: ABSENT,
      why: `the source has a ${st.kind} there, which no plan can hold`,
      at: null,
    };
  }
  return { sig: signatureAt(dir, p.name, st), why: null, at: null };
}

/** The first entry of source directory `path` that `planned` does not name, or `null`. */
export function unplannedEntry(
  source: Dir,
  path: string,
  planned: ReadonlyMap<string, unknown>,
): string | null {
  using dir = source.openPath(path);
  const { entries, invalid } = dir.listing();
  if (invalid.length > 0) return `${path}/${invalid[0]!.shown}`;
  for (const e of entries) {
    if (!planned.has(`${path}/${e.name}`)) return `${path}/${e.name}`;
  }
  return null;
}
