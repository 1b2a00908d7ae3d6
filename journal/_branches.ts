/**
 * The journal's branch and capability records: a split's branches (added
 * all or none, updated, compare-and-set of their state) and the capabilities
 * of a split or branch (created, revoked, listed). Each function takes the
 * open {@linkcode Connection}; `Journal` (journal.ts) is their public face.
 *
 * @module
 */

import {
  branchColumns,
  branchFromRow,
  branchPatchColumns,
  capabilityColumns,
  capabilityFromRow,
  discardColumns,
} from "./_codec.ts";
import {
  branchNotFound,
  checkStates,
  type Connection,
  mutable,
  splitNotFound,
} from "./_connection.ts";
import {
  BRANCH_MUTABLE,
  type BranchPatch,
  type BranchRecord,
  type BranchState,
  type CapabilityRecord,
  isBranchState,
} from "./records.ts";
import { branchMayMove } from "../model/branch_state.ts";

/**
 * Records a split's branches, all or none.
 *
 * @throws {Deno.errors.NotFound} for an unknown split.
 * @throws {Deno.errors.AlreadyExists} for a label or index already used.
 * @throws {TypeError} for a branch of another split.
 */
export function addBranches(
  c: Connection,
  splitId: string,
  branches: readonly BranchRecord[],
): void {
  const rows = branches.map((b) => {
    if (b.split !== splitId) {
      throw new TypeError(`Branch "${b.label}" names split "${b.split}", not "${splitId}"`);
    }
    return branchColumns(b);
  });
  c.write("add branches", () => {
    if (c.get("SELECT 1 AS x FROM splits WHERE id = :id", { id: splitId }) === undefined) {
      throw splitNotFound(splitId);
    }
    for (const [i, b] of branches.entries()) {
      const clash = c.get(
        "SELECT label FROM branches WHERE split = :split AND (label = :label OR idx = :idx)",
        { split: splitId, label: b.label, idx: b.index },
      );
      if (clash !== undefined) {
        throw new Deno.errors.AlreadyExists(
          `Branch already exists: "${splitId}/${
            String(clash.label)
          }" (label "${b.label}", index ${b.index})`,
        );
      }
      c.insert("branches", rows[i] ?? {});
    }
  });
}

/** Reads one branch, or null. */
export function getBranch(c: Connection, splitId: string, label: string): BranchRecord | null {
  return c.read("read branch", () => {
    const row = c.get(
      "SELECT * FROM branches WHERE split = :split AND label = :label",
      { split: splitId, label },
    );
    return row === undefined ? null : branchFromRow(row);
  });
}

/** A split's branches in declaration order. */
export function branches(c: Connection, splitId: string): BranchRecord[] {
  return c.read(
    "list branches",
    () =>
      c.all("SELECT * FROM branches WHERE split = :split ORDER BY idx", { split: splitId })
        .map((r) => branchFromRow(r)),
  );
}

/**
 * Changes a branch's mutable fields ({@linkcode BRANCH_MUTABLE}); its state
 * changes only through `Journal.transitionBranch`.
 *
 * @throws {Deno.errors.NotFound} for an unknown branch.
 * @throws {TypeError} for a field that is not mutable.
 */
export function updateBranch(
  c: Connection,
  splitId: string,
  label: string,
  patch: BranchPatch,
): void {
  const { discard, ...rest } = patch;
  if (discard !== undefined) {
    throw new TypeError("A branch is discarded only by a move to discarded (transitionBranch)");
  }
  const cols = branchPatchColumns(mutable(rest, BRANCH_MUTABLE, "branch"));
  c.write("update branch", () => {
    const found = c.update("branches", cols, "split = :k_split AND label = :k_label", {
      k_split: splitId,
      k_label: label,
    });
    if (!found) throw branchNotFound(splitId, label);
  });
}

/**
 * Compare-and-set of a branch's state: moves it to `to` (with `patch`)
 * only if its state is one of `from`. Returns false, changing nothing,
 * otherwise.
 *
 * @throws {Deno.errors.NotFound} for an unknown branch.
 */
export function transitionBranch(
  c: Connection,
  splitId: string,
  label: string,
  from: readonly BranchState[],
  to: BranchState,
  patch: BranchPatch = {},
): boolean {
  checkStates(from, to, isBranchState, "branch", branchMayMove);
  const { discard, ...rest } = patch;
  if ((to === "discarded") !== (discard !== undefined)) {
    throw new TypeError("A move to discarded, and only that move, says who discarded it and why");
  }
  // A discard keeps the state column (the state it ended in): _codec.ts reads it as discarded.
  const cols = {
    ...branchPatchColumns(mutable(rest, BRANCH_MUTABLE, "branch")),
    ...(discard === undefined ? { state: to } : discardColumns(discard)),
  };
  return c.write("transition branch", () => {
    const key = { k_split: splitId, k_label: label };
    const current = c.get(
      "SELECT state, discarded_ms FROM branches WHERE split = :k_split AND label = :k_label",
      key,
    );
    if (current === undefined) throw branchNotFound(splitId, label);
    const state = current.discarded_ms === null ? current.state : "discarded";
    if (!(from as readonly unknown[]).includes(state)) return false;
    return c.update("branches", cols, "split = :k_split AND label = :k_label", key);
  });
}

/**
 * Records a capability of a split (`label` null) or of one of its branches.
 *
 * @throws {Deno.errors.NotFound} for an unknown split or branch.
 * @throws {Deno.errors.AlreadyExists} for a known id.
 */
export function createCapability(c: Connection, rec: CapabilityRecord): void {
  const cols = capabilityColumns(rec);
  c.write("create capability", () => {
    if (c.get("SELECT 1 AS x FROM splits WHERE id = :id", { id: rec.split }) === undefined) {
      throw splitNotFound(rec.split);
    }
    if (rec.label !== null && getBranch(c, rec.split, rec.label) === null) {
      throw branchNotFound(rec.split, rec.label);
    }
    if (
      c.get("SELECT 1 AS x FROM capabilities WHERE id = :id", { id: rec.id }) !== undefined
    ) {
      throw new Deno.errors.AlreadyExists(`Capability already exists: "${rec.id}"`);
    }
    c.insert("capabilities", cols);
  });
}

/** Reads one capability, or null. */
export function getCapability(c: Connection, id: string): CapabilityRecord | null {
  return c.read("read capability", () => {
    const row = c.get("SELECT * FROM capabilities WHERE id = :id", { id });
    return row === undefined ? null : capabilityFromRow(row);
  });
}

/**
 * Revokes one capability. Returns false when it was already revoked.
 *
 * @throws {Deno.errors.NotFound} for an unknown capability.
 */
export function revokeCapability(c: Connection, id: string, nowMs: number = Date.now()): boolean {
  return c.write("revoke capability", () => {
    const changed = c.run(
      "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE id = :id AND state = 'live'",
      { id, now: nowMs },
    );
    if (changed > 0) return true;
    if (getCapability(c, id) === null) {
      throw new Deno.errors.NotFound(`Capability not found: "${id}"`);
    }
    return false;
  });
}

/**
 * Revokes every live capability of a split (its own and its branches'),
 * and with `subtree` those of every split below it too, in one
 * transaction (CancelPropagates). Returns the ids revoked.
 */
export function revokeCapabilitiesOfSplit(
  c: Connection,
  splitId: string,
  nowMs: number = Date.now(),
  options: { readonly subtree?: boolean } = {},
): string[] {
  const sql = options.subtree
    ? `WITH RECURSIVE tree (id) AS (
         SELECT :split UNION SELECT s.id FROM splits s JOIN tree t ON s.parent_split = t.id
       )
       SELECT id FROM capabilities WHERE state = 'live' AND split IN (SELECT id FROM tree)
       ORDER BY created_ms, id`
    : `SELECT id FROM capabilities WHERE state = 'live' AND split = :split
       ORDER BY created_ms, id`;
  return c.write("revoke capabilities", () => {
    const ids = c.all(sql, { split: splitId }).map((r) => String(r.id));
    for (const id of ids) {
      c.run(
        "UPDATE capabilities SET state = 'revoked', revoked_ms = :now WHERE id = :id",
        { id, now: nowMs },
      );
    }
    return ids;
  });
}

/** Every live capability, oldest first. */
export function liveCapabilities(c: Connection): CapabilityRecord[] {
  return c.read(
    "list capabilities",
    () =>
      c.all("SELECT * FROM capabilities WHERE state = 'live' ORDER BY created_ms, id")
        .map((r) => capabilityFromRow(r)),
  );
}
