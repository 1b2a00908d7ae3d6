/**
 * From a plan to the applier's ops, and the re-check of the tree against
 * them (docs/resolution.md, "The applier"): the parent directories a taken
 * path needs are made, the subdirectories of a directory that goes are
 * removed when they hold only planned deletions, and nothing the plan does
 * not name is ever removed.
 *
 * Needs `--allow-ffi=<libc path>`.
 *
 * @module
 */

import type { Dir } from "../fd/dir.ts";
import { comparePaths, type MergePlan, type Signature } from "../../model/resolution_plan.ts";
import { ApplyRefusedError, type Changed } from "./errors.ts";
import { openParent } from "./fs_extra.ts";
import type { Op, Prior } from "./intent_log.ts";
import { describeState, type Found, matches, readState } from "./path_state.ts";

/** Something in the tree the plan cannot get past, as a changed path and as a problem. */
export interface Blocked extends Changed {
  readonly problem: string;
}

/** The length of the plan's blob ids: 40 (SHA-1) or 64 (SHA-256). */
export function hexLengthOf(plan: MergePlan): number {
  for (const e of plan.entries) {
    if (e.op === "take" && e.after.kind === "file") return e.after.blob.length;
    if ((e.op === "take" || e.op === "delete") && e.before.kind === "file") {
      return e.before.blob.length;
    }
  }
  return 40;
}

/** Entries of directory `path` the plan does not name, as blocks; `null` when it is no directory. */
function unplanned(
  root: Dir,
  path: string,
  planned: ReadonlySet<string>,
): { dirs: string[]; others: Blocked[] } | null {
  const p = openParent(root, path);
  if (!p.ok) return null;
  using parent = p.dir;
  if (parent.statAt(p.name)?.kind !== "dir") return null;
  using dir = parent.openDir(p.name);
  const { entries, invalid } = dir.listing();
  const dirs: string[] = [];
  const found: { path: string; what: string }[] = invalid.map((e) => ({
    path: `${path}/${e.shown}`,
    what: "a name that is not UTF-8",
  }));
  for (const e of entries) {
    const q = `${path}/${e.name}`;
    if (planned.has(q)) continue;
    const kind = e.kind ?? dir.statAt(e.name)?.kind ?? "file";
    if (kind === "dir") dirs.push(q);
    else found.push({ path: q, what: `a ${kind}` });
  }
  const shown = found.slice(0, 3).map((f) => f.path).join(", ") + (found.length > 3 ? ", ..." : "");
  const problem =
    `${path} is a directory that still holds ${shown}, which the plan does not remove: move them away, or plan them`;
  return {
    dirs,
    others: found.map((f) => ({ path: f.path, expected: "absent", found: f.what, problem })),
  };
}

/**
 * The subdirectories below `path` (which goes) that hold only planned
 * deletions, deepest last; whatever else is there blocks.
 */
function emptiedDirs(
  root: Dir,
  path: string,
  planned: ReadonlySet<string>,
  blocked: Blocked[],
): string[] {
  const u = unplanned(root, path, planned);
  if (u === null) return [];
  blocked.push(...u.others);
  const out: string[] = [];
  for (const d of u.dirs) {
    const before = blocked.length;
    const below = emptiedDirs(root, d, planned, blocked);
    if (blocked.length === before) out.push(d, ...below);
  }
  return out;
}

/**
 * The ops of a plan, numbered in path order, with the directories it needs
 * made or emptied, and what blocks it.
 *
 * @throws {ApplyRefusedError} for a plan with a conflict
 */
export function opsOf(
  root: Dir,
  plan: MergePlan,
  dirModes?: ReadonlyMap<string, number>,
): { ops: Op[]; blocked: Blocked[] } {
  const conflicts = plan.entries.filter((e) => e.op === "conflict").map((e) =>
    `${e.path} conflicts`
  );
  if (conflicts.length > 0) throw new ApplyRefusedError(conflicts);
  const inPlan = new Set(plan.entries.map((e) => e.path));
  const raw: Omit<Op, "n">[] = [];
  const implicit = new Map<string, string>();
  const blocked: Blocked[] = [];
  for (const e of plan.entries) {
    if (e.op !== "take" && e.op !== "delete") continue;
    const after: Signature = e.op === "take" ? e.after : { kind: "absent" };
    const dirMode = dirModes?.get(e.path);
    raw.push({
      path: e.path,
      before: e.before,
      after,
      ...(dirMode !== undefined ? { dirMode } : {}),
    });
    if (after.kind !== "dir") {
      for (const d of emptiedDirs(root, e.path, inPlan, blocked)) {
        raw.push({ path: d, before: { kind: "dir" }, after: { kind: "absent" }, implicit: true });
      }
    }
    if (e.op !== "take") continue;
    const parts = e.path.split("/");
    for (let i = 1; i < parts.length; i++) {
      const a = parts.slice(0, i).join("/");
      if (inPlan.has(a) || implicit.has(a)) continue;
      const p = openParent(root, a);
      let kind = "absent";
      if (p.ok) {
        using dir = p.dir;
        kind = dir.statAt(p.name)?.kind ?? "absent";
      }
      implicit.set(a, kind);
      if (kind !== "dir" && kind !== "absent") {
        blocked.push({
          path: a,
          expected: "a directory",
          found: `a ${kind}`,
          problem:
            `${a} is a ${kind}, not a directory, and the plan does not replace it (needed for ${e.path})`,
        });
      }
    }
  }
  for (const [path, kind] of implicit) {
    if (kind === "absent") {
      raw.push({ path, before: { kind: "absent" }, after: { kind: "dir" }, implicit: true });
    }
  }
  raw.sort((a, b) => comparePaths(a.path, b.path));
  return { ops: raw.map((op, n) => ({ n, ...op })), blocked };
}

/**
 * The state of every op's path now (the restore point), what changed since
 * the plan, and what blocks it: a directory that goes must hold nothing the
 * plan does not remove.
 */
export function checkOps(
  root: Dir,
  ops: readonly Op[],
  gitModes: boolean,
  hexLength: number,
): { prior: Prior[]; identities: (string | null)[]; changed: Changed[]; blocked: Blocked[] } {
  const prior: Prior[] = [];
  const identities: (string | null)[] = [];
  const changed: Changed[] = [];
  const blocked: Blocked[] = [];
  const removed = new Set(ops.filter((o) => o.after.kind === "absent").map((o) => o.path));
  for (const op of ops) {
    const { identity, ...found } = readState(root, op.path, hexLength) as Found & {
      identity?: string;
    };
    prior.push(found.kind === "other" ? { kind: "absent" } : found);
    identities.push(identity ?? null);
    if (!matches(found, op.before, gitModes)) {
      changed.push({
        path: op.path,
        expected: describeState(op.before),
        found: describeState(found),
      });
    }
    if (found.kind !== "dir" || op.after.kind === "dir") continue;
    const u = unplanned(root, op.path, removed);
    if (u === null) continue;
    blocked.push(...u.others);
    for (const d of u.dirs) {
      blocked.push({
        path: d,
        expected: "absent",
        found: "a directory",
        problem:
          `${op.path} is a directory that still holds ${d}, which the plan does not remove: move it away, or plan it`,
      });
    }
  }
  return { prior, identities, changed, blocked };
}
