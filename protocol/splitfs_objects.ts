/**
 * The splitfs frames that write a split's objects into the consumer's object
 * store before a join (part of `protocol/splitfs.ts`; docs/engine.md
 * "Publish, manifest and render").
 *
 * @module
 */

import { labelProblem } from "../model/layout.ts";
import { MAX_BRANCHES } from "../model/limits.ts";
import { num, optParent, type SplitParent, str } from "./splitfs_fields.ts";
import { ProtocolError } from "./protocol_error.ts";

/**
 * Before join's consumer runs (and before a bare join's rendering): write
 * the blobs the patches of `labels` name (the `index` lines of each
 * `out/<label>/diff.patch`) from the split's `store.git` into the objects
 * dir the consumer's Git uses, so what `git apply --3way` stages outlives
 * the split. That is the project's `.git/objects` for a root split, and the
 * creator fork's `.admin/<parent.label>/objects` for a nested one (`parent`,
 * as journaled). Each object is verified against its id; existing ones are
 * left untouched. Answered with `exported`.
 */
export interface ExportObjectsRequest {
  readonly v: 1;
  readonly t: "export-objects";
  readonly id: string;
  /** The branches whose patches to read, at most {@linkcode MAX_BRANCHES}. */
  readonly labels: readonly string[];
  /** A nested split's creator branch, as journaled. */
  readonly parent?: SplitParent;
}

/** The answer to `export-objects`. */
export interface ExportedReply {
  readonly v: 1;
  readonly t: "exported";
  /**
   * The objects dir written to, absolute; `null` when there was nothing to
   * do (a SHA-256 repository: the patches' ids are SHA-1).
   */
  readonly target: string | null;
  /** Objects written. */
  readonly written: number;
  /** Objects the target already held (left untouched). */
  readonly present: number;
}

/** Validates an `export-objects` request (its `v` and `t` are checked by the caller). */
export function parseExportObjectsRequest(x: Record<string, unknown>): ExportObjectsRequest {
  const labels = x.labels;
  if (
    !Array.isArray(labels) || labels.length > MAX_BRANCHES ||
    !labels.every((l) => typeof l === "string" && labelProblem(l) === null)
  ) {
    throw new ProtocolError(
      `malformed export-objects frame: labels must be a list of at most ${MAX_BRANCHES} labels`,
    );
  }
  return { v: 1, t: "export-objects", id: str(x, "id"), labels, ...optParent(x) };
}

/** Validates an `exported` reply. */
export function parseExportedReply(x: Record<string, unknown>): ExportedReply {
  return {
    v: 1,
    t: "exported",
    target: x.target === null ? null : str(x, "target"),
    written: num(x, "written"),
    present: num(x, "present"),
  };
}
