/**
 * Resolution plans (docs/resolution.md): what a merge, a promote or an undo
 * would do to the project, path by path, before anything is done. Every
 * scope produces one {@linkcode MergePlan}; one applier executes it.
 *
 * - A {@linkcode Signature} is what a path holds, compared for equality:
 *   type, permission bits and content id (the Git blob id) for a regular
 *   file, the target for a symlink, "a directory", or absent.
 * - {@linkcode threeWay} is the conservative path-level rule: source equals
 *   base → take the branch's; source equals branch → converged; otherwise a
 *   conflict.
 * - {@linkcode planProblems} checks a plan's shape before it is shown or
 *   applied: normalised paths, no admin paths, no path that ends up both a
 *   file and the parent of another.
 *
 * Pure: needs no permission.
 *
 * @module
 */

/** What a path holds, as far as a plan compares it. */
export type Signature =
  | { readonly kind: "absent" }
  | {
    readonly kind: "file";
    /** Permission bits (`0o7777` at most); the `--git` scope knows only `0o644` and `0o755`. */
    readonly mode: number;
    /** The Git blob id of the bytes, lowercase hex (40 digits, or 64 for SHA-256). */
    readonly blob: string;
  }
  | { readonly kind: "symlink"; readonly target: string }
  | { readonly kind: "dir" };

/** A signature that is there. */
export type Present = Exclude<Signature, { kind: "absent" }>;

/** The absent signature. */
export const ABSENT: Signature = Object.freeze({ kind: "absent" });

/** Where an applier finds a file's new bytes: a blob in the split's store, or the branch's result at the same path. */
export type BytesFrom = "store" | "branch";

/** The scopes of `marsh merge`, and `promote`/`undo`/`checkout`, which make plans too. */
export type Scope = "git" | "filesystem" | "paths" | "promote" | "undo" | "checkout";

/** The scopes, for parsers. */
export const SCOPES: readonly Scope[] = [
  "git",
  "filesystem",
  "paths",
  "promote",
  "undo",
  "checkout",
];

/** One path of a plan. `before` is the source's state the plan was computed against. */
export type PlanEntry =
  | {
    readonly op: "take";
    readonly path: string;
    readonly before: Signature;
    readonly after: Present;
    /** Set for a file: where its bytes are. */
    readonly bytes?: BytesFrom;
  }
  | { readonly op: "delete"; readonly path: string; readonly before: Present }
  | { readonly op: "converged"; readonly path: string; readonly state: Signature }
  | {
    readonly op: "conflict";
    readonly path: string;
    readonly base: Signature;
    readonly source: Signature;
    readonly branch: Signature;
    /** Why, in a few words (`both sides changed it`, or Git's conflict message). */
    readonly reason: string;
  };

/** The plan operations, in the order the text form explains them. */
export const OPS = ["take", "delete", "converged", "conflict"] as const;

/** Tree ids a plan was computed from, where the scope has them. */
export interface PlanTrees {
  readonly base: string | null;
  readonly source: string | null;
  readonly branch: string | null;
  /** The `--git` scope's merged tree when the merge was clean. */
  readonly result: string | null;
}

/** A whole plan: entries sorted by path (code point order, which is UTF-8 byte order), each path once. */
export interface MergePlan {
  readonly scope: Scope;
  readonly trees: PlanTrees;
  readonly entries: readonly PlanEntry[];
}

/** A plan or a plan file is malformed. */
export class PlanError extends Error {
  override name = "PlanError";
  /** Every problem found (at most {@linkcode MAX_PROBLEMS}). */
  readonly problems: readonly string[];
  constructor(problems: readonly string[]) {
    super(`invalid resolution plan: ${problems.join("; ")}`);
    this.problems = problems;
  }
}

/** How many problems a {@linkcode PlanError} lists. */
export const MAX_PROBLEMS = 20;
/** The longest path (bytes), as Linux's `PATH_MAX`. */
export const MAX_PATH_BYTES = 4096;
/** The longest path segment (bytes), as Linux's `NAME_MAX`. */
export const MAX_NAME_BYTES = 255;

const HEX_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;
const enc = new TextEncoder();

/** Whether two signatures are the same state. */
export function sameSignature(a: Signature, b: Signature): boolean {
  switch (a.kind) {
    case "absent":
    case "dir":
      return b.kind === a.kind;
    case "file":
      return b.kind === "file" && a.mode === b.mode && a.blob === b.blob;
    case "symlink":
      return b.kind === "symlink" && a.target === b.target;
  }
}

/** What the conservative three-way rule decides for one path. */
export type Decision =
  | { readonly op: "take"; readonly after: Present }
  | { readonly op: "delete" }
  | { readonly op: "converged" }
  | { readonly op: "conflict" }
  /** The branch left the path as the base had it: nothing to do, whatever the source did. */
  | { readonly op: "unchanged" };

/**
 * The conservative three-way rule, at path granularity: the source already
 * holds the branch's state → converged; the branch did not change the path
 * → unchanged; the source still holds the base's state → take the branch's
 * (a delete when the branch removed it); otherwise both changed it
 * differently → conflict. Never a content merge: a SQLite file or an image
 * changed on both sides is a conflict.
 */
export function threeWay(base: Signature, source: Signature, branch: Signature): Decision {
  if (sameSignature(source, branch)) return { op: "converged" };
  if (sameSignature(base, branch)) return { op: "unchanged" };
  if (sameSignature(base, source)) {
    return branch.kind === "absent" ? { op: "delete" } : { op: "take", after: branch };
  }
  return { op: "conflict" };
}

/**
 * The plan entry for one path under {@linkcode threeWay}, or `null` when the
 * branch did not change it. A taken file's bytes come from `bytes`.
 */
export function threeWayEntry(
  path: string,
  base: Signature,
  source: Signature,
  branch: Signature,
  bytes: BytesFrom,
): PlanEntry | null {
  const d = threeWay(base, source, branch);
  switch (d.op) {
    case "unchanged":
      return null;
    case "converged":
      return { op: "converged", path, state: source };
    case "delete":
      return { op: "delete", path, before: source as Present };
    case "take":
      return d.after.kind === "file"
        ? { op: "take", path, before: source, after: d.after, bytes }
        : { op: "take", path, before: source, after: d.after };
    case "conflict":
      return { op: "conflict", path, base, source, branch, reason: "both sides changed it" };
  }
}

/** What the source holds at `entry.path` once the plan is applied (a conflict changes nothing). */
export function afterOf(entry: PlanEntry): Signature {
  switch (entry.op) {
    case "take":
      return entry.after;
    case "delete":
      return ABSENT;
    case "converged":
      return entry.state;
    case "conflict":
      return entry.source;
  }
}

/** What the source held at `entry.path` when the plan was computed. */
export function beforeOf(entry: PlanEntry): Signature {
  switch (entry.op) {
    case "take":
    case "delete":
      return entry.before;
    case "converged":
      return entry.state;
    case "conflict":
      return entry.source;
  }
}

/** A UTF-16 surrogate: only where one is compared does code unit order differ from code point order. */
const SURROGATE = /[\ud800-\udfff]/;

/** Code point order, which is the UTF-8 byte order Git sorts paths by. */
export function comparePaths(a: string, b: string): number {
  // Without a surrogate the engine's own comparison (code units) is code point order.
  if (!SURROGATE.test(a) && !SURROGATE.test(b)) return a < b ? -1 : a > b ? 1 : 0;
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.codePointAt(i)!, y = b.codePointAt(i)!;
    if (x !== y) return x - y;
    if (x > 0xffff) i++;
  }
  return a.length - b.length;
}

/** Whether a path segment is Git's own directory under any spelling Git refuses (`.git`, `.GIT `, `git~1`). */
const GIT_STEMS = [".git", "git~1"];
/** The first characters of {@linkcode GIT_STEMS}: `.`, `g`, `G`. */
const DOT = 0x2e, G = 0x67, UPPER_G = 0x47;

function isGitSegment(segment: string): boolean {
  // Most names start with neither stem's first letter: they are not lowercased (a plan's
  // every segment is looked at, and a dry run may list thousands of paths).
  const c = segment.charCodeAt(0);
  if (c !== DOT && c !== G && c !== UPPER_G) return false;
  const lower = segment.toLowerCase();
  return GIT_STEMS.some((stem) =>
    lower.startsWith(stem) && /^[ .]*$/.test(lower.slice(stem.length))
  );
}

/**
 * A path every check of {@linkcode pathProblem} passes: `/`-separated names
 * of at most 255 ASCII letters, digits, `_`, `-` and `.`, none starting with
 * a dot (so none is empty, `.`, `..`, `.git` or `.marsh`; `git~1` has a `~`).
 */
const PLAIN_PATH = /^[\w-][\w.-]{0,254}(?:\/[\w-][\w.-]{0,254})*$/;

/** Whether `s` is longer than `max` bytes in UTF-8 (at most 3 per UTF-16 unit: a short one is not encoded). */
function longerThan(s: string, max: number): boolean {
  return s.length * 3 > max && enc.encode(s).length > max;
}

/**
 * Why `path` cannot be in a plan, or `null`: it must be relative, `/`
 * separated and normalised (no empty, `.` or `..` segment, no NUL), within
 * Linux's length limits, and name neither Git's directory at any depth nor
 * marsh's own `.marsh` at the top.
 */
export function pathProblem(path: string): string | null {
  // Most paths pass every check below at a glance: one regular expression, not a loop.
  if (path.length <= MAX_PATH_BYTES && PLAIN_PATH.test(path)) return null;
  const shown = () => JSON.stringify(path.length > 200 ? `${path.slice(0, 200)}...` : path);
  if (path === "") return "empty path";
  if (path.includes("\0")) return `path ${shown()} contains a NUL byte`;
  if (longerThan(path, MAX_PATH_BYTES)) {
    return `path ${shown()} is longer than ${MAX_PATH_BYTES} bytes`;
  }
  if (path.startsWith("/")) return `path ${shown()} is absolute`;
  const segments = path.split("/");
  for (const s of segments) {
    if (s === "" || s === "." || s === "..") return `path ${shown()} is not normalised`;
    if (longerThan(s, MAX_NAME_BYTES)) {
      return `path ${shown()} has a name longer than ${MAX_NAME_BYTES} bytes`;
    }
    if (isGitSegment(s)) return `path ${shown()} is inside a Git directory`;
  }
  if (segments[0] === ".marsh") return `path ${shown()} is marsh's own state`;
  return null;
}

function signatureProblem(s: Signature, scope: Scope): string | null {
  switch (s.kind) {
    case "absent":
    case "dir":
      return null;
    case "file":
      if (!Number.isInteger(s.mode) || s.mode < 0 || s.mode > 0o7777) {
        return `file mode ${s.mode} is not permission bits`;
      }
      if (scope === "git" && s.mode !== 0o644 && s.mode !== 0o755) {
        return `file mode ${s.mode.toString(8)} is not 644 or 755 (the --git scope)`;
      }
      return HEX_ID.test(s.blob) ? null : `blob id ${JSON.stringify(s.blob)} is not lowercase hex`;
    case "symlink":
      if (s.target === "" || s.target.includes("\0")) {
        return `symlink target ${JSON.stringify(s.target)} is empty or holds a NUL byte`;
      }
      return longerThan(s.target, MAX_PATH_BYTES)
        ? `symlink target is longer than ${MAX_PATH_BYTES} bytes`
        : null;
    default:
      return `unknown signature kind ${JSON.stringify((s as { kind: unknown }).kind)}`;
  }
}

function entryProblems(e: PlanEntry, scope: Scope): string[] {
  const out: string[] = [];
  const add = (problem: string) => out.push(`${JSON.stringify(e.path)}: ${problem}`);
  const sigs: Signature[] = e.op === "conflict"
    ? [e.base, e.source, e.branch]
    : e.op === "converged"
    ? [e.state]
    : e.op === "take"
    ? [e.before, e.after]
    : [e.before];
  for (const s of sigs) {
    const p = signatureProblem(s, scope);
    if (p !== null) add(p);
  }
  if (e.op === "take") {
    if ((e.after as Signature).kind === "absent") add("take of nothing (use delete)");
    if (sameSignature(e.before, e.after)) add("take of what is already there");
    if ((e.after.kind === "file") !== (e.bytes !== undefined)) {
      add("a taken file, and only a file, says where its bytes are");
    }
    if (e.bytes !== undefined && e.bytes !== "store" && e.bytes !== "branch") {
      add(`unknown bytes source ${JSON.stringify(e.bytes)}`);
    }
  }
  if (e.op === "delete" && (e.before as Signature).kind === "absent") {
    add("delete of nothing");
  }
  return out;
}

/** The strict ancestors of `path` (`a/b/c` → `a`, `a/b`). */
export function ancestors(path: string): string[] {
  const out: string[] = [];
  for (let i = path.indexOf("/"); i !== -1; i = path.indexOf("/", i + 1)) {
    out.push(path.slice(0, i));
  }
  return out;
}

/**
 * Every problem with `plan` (at most {@linkcode MAX_PROBLEMS}), or none.
 * Besides each path and signature, the tree shape is checked on both sides:
 * a path with something at it before (or after) the plan may have an
 * ancestor in the plan only if that ancestor is a directory before (after).
 */
export function planProblems(plan: MergePlan): string[] {
  const out: string[] = [];
  const add = (p: string) => {
    if (out.length < MAX_PROBLEMS) out.push(p);
  };
  if (!SCOPES.includes(plan.scope)) add(`unknown scope ${JSON.stringify(plan.scope)}`);
  for (const [name, id] of Object.entries(plan.trees)) {
    if (id !== null && !HEX_ID.test(id)) add(`${name} tree id ${JSON.stringify(id)} is not hex`);
  }
  const before = new Map<string, Signature>();
  const after = new Map<string, Signature>();
  let prev: string | null = null;
  for (const e of plan.entries) {
    const bad = pathProblem(e.path);
    if (bad !== null) add(bad);
    if (prev !== null && comparePaths(prev, e.path) >= 0) {
      add(
        prev === e.path
          ? `path ${JSON.stringify(e.path)} appears twice`
          : `paths are not sorted: ${JSON.stringify(prev)} before ${JSON.stringify(e.path)}`,
      );
    }
    prev = e.path;
    for (const p of entryProblems(e, plan.scope)) add(p);
    before.set(e.path, beforeOf(e));
    after.set(e.path, afterOf(e));
  }
  for (const [side, states] of [["before", before], ["after", after]] as const) {
    for (const [path, s] of states) {
      if (s.kind === "absent") continue;
      for (const a of ancestors(path)) {
        const up = states.get(a);
        if (up !== undefined && up.kind !== "dir") {
          const what = up.kind === "absent" ? "absent" : `both a ${up.kind}`;
          add(
            `${JSON.stringify(a)} would be ${what} and the parent of ${
              JSON.stringify(path)
            } (${side} the plan)`,
          );
        }
      }
    }
  }
  return out;
}

/**
 * The plans {@linkcode checkPlan} passed. A plan is read-only, so one that
 * passed passes again: it is not checked twice (a dry run's plan is checked
 * as it is read and again as it is shown, thousands of paths each time).
 */
const passed = new WeakSet<MergePlan>();

/**
 * `plan`, unchanged, when {@linkcode planProblems} finds nothing.
 *
 * @throws {PlanError} listing the problems
 */
export function checkPlan(plan: MergePlan): MergePlan {
  if (passed.has(plan)) return plan;
  const problems = planProblems(plan);
  if (problems.length > 0) throw new PlanError(problems);
  passed.add(plan);
  return plan;
}

/** Entries sorted into plan order (a copy). */
export function sortEntries(entries: readonly PlanEntry[]): PlanEntry[] {
  return [...entries].sort((a, b) => comparePaths(a.path, b.path));
}

/** How many entries a plan has of each op. */
export function countOps(plan: MergePlan): Record<PlanEntry["op"], number> {
  const n = { take: 0, delete: 0, converged: 0, conflict: 0 };
  for (const e of plan.entries) n[e.op]++;
  return n;
}

/** Whether a plan can be applied as is: no conflict. */
export function isClean(plan: MergePlan): boolean {
  return plan.entries.every((e) => e.op !== "conflict");
}
