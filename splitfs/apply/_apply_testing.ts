/**
 * Test helpers for the applier's tests: trees described as specs, written
 * with plain Deno calls (not through the code under test), plans computed
 * from a pre-state and a post-state spec, and whole-tree fingerprints.
 * Imported only by tests.
 *
 * @module
 */

import { blobId, hexOf } from "../git/tree_id.ts";
import {
  comparePaths,
  type MergePlan,
  type PlanEntry,
  type Scope,
  type Signature,
} from "../../model/resolution_plan.ts";
import { fingerprint } from "../_testing.ts";
import type { Content, TakenFile } from "./transaction.ts";

const enc = new TextEncoder();

/** One path of a tree spec. Parent directories are implied. */
export type Want =
  | { readonly file: string | Uint8Array; readonly mode?: number }
  | { readonly link: string }
  | { readonly dir: true; readonly mode?: number };

/** A tree: path → what it holds. */
export type Spec = Readonly<Record<string, Want>>;

const bytesOf = (w: { file: string | Uint8Array }) =>
  typeof w.file === "string" ? enc.encode(w.file) : w.file;

/** Writes a spec under `root` (which must exist), parents first, with exact modes. */
export function writeSpec(root: string, spec: Spec): void {
  for (const path of Object.keys(spec).sort(comparePaths)) {
    const w = spec[path]!;
    const full = `${root}/${path}`;
    Deno.mkdirSync(full.slice(0, full.lastIndexOf("/")), { recursive: true });
    if ("file" in w) {
      Deno.writeFileSync(full, bytesOf(w));
      Deno.chmodSync(full, w.mode ?? 0o644);
    } else if ("link" in w) Deno.symlinkSync(w.link, full);
    else {
      Deno.mkdirSync(full, { recursive: true });
      Deno.chmodSync(full, w.mode ?? 0o755);
    }
  }
}

/** Every path's signature in a spec, implied parent directories included. */
export function signatures(spec: Spec, gitModes = false): Map<string, Signature> {
  const out = new Map<string, Signature>();
  for (const [path, w] of Object.entries(spec)) {
    const parts = path.split("/");
    for (let i = 1; i < parts.length; i++) out.set(parts.slice(0, i).join("/"), { kind: "dir" });
    if ("file" in w) {
      const mode = w.mode ?? 0o644;
      out.set(path, {
        kind: "file",
        mode: gitModes ? (mode & 0o100 ? 0o755 : 0o644) : mode,
        blob: hexOf(blobId(bytesOf(w))),
      });
    } else if ("link" in w) out.set(path, { kind: "symlink", target: w.link });
    else out.set(path, { kind: "dir" });
  }
  return out;
}

/** Options of {@linkcode planOf}. */
export interface PlanOptions {
  readonly scope?: Scope;
  /** Leave out directories made or removed, as a Git plan of files does. */
  readonly filesOnly?: boolean;
}

/**
 * The plan that turns tree `pre` into tree `post`, and a content callback
 * giving each taken file's bytes.
 */
export function planOf(pre: Spec, post: Spec, opts: PlanOptions = {}): {
  plan: MergePlan;
  content: (f: TakenFile) => Content;
} {
  const scope = opts.scope ?? "filesystem";
  const gitModes = scope === "git";
  const a = signatures(pre, gitModes), b = signatures(post, gitModes);
  const entries: PlanEntry[] = [];
  const absent: Signature = { kind: "absent" };
  for (const path of new Set([...a.keys(), ...b.keys()])) {
    const before = a.get(path) ?? absent, after = b.get(path) ?? absent;
    if (JSON.stringify(before) === JSON.stringify(after)) continue;
    // As Git's recursive diff: a directory made or removed is no entry of its own.
    if (opts.filesOnly && (before.kind === "dir" || after.kind === "dir")) {
      if (before.kind === "absent" || after.kind === "absent") continue;
    }
    if (after.kind === "absent") {
      entries.push({
        op: "delete",
        path,
        before: before as Exclude<Signature, { kind: "absent" }>,
      });
    } else if (after.kind === "file") {
      entries.push({ op: "take", path, before, after, bytes: "store" });
    } else entries.push({ op: "take", path, before, after });
  }
  entries.sort((x, y) => comparePaths(x.path, y.path));
  const blobs = new Map<string, Uint8Array>();
  for (const w of Object.values(post)) {
    if ("file" in w) blobs.set(hexOf(blobId(bytesOf(w))), bytesOf(w));
  }
  return {
    plan: { scope, trees: { base: null, source: null, branch: null, result: null }, entries },
    content: (f) => ({ bytes: blobs.get(f.after.blob)! }),
  };
}

/** The project's fingerprint without marsh's own state: kind, mode, bytes or target of every path. */
export function treeOf(root: string): Map<string, string> {
  return fingerprint(root, { skip: (rel) => rel === ".marsh" });
}

/** The fingerprint a spec written fresh would have (in a scratch dir under `top`). */
export function treeOfSpec(top: string, spec: Spec): Map<string, string> {
  const dir = Deno.makeTempDirSync({ dir: top, prefix: "expect-" });
  try {
    writeSpec(dir, spec);
    return treeOf(dir);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/** Deterministic pseudo-random bytes (binary content with NULs and high bytes). */
export function binary(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < size; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = x & 0xff;
  }
  return out;
}

/** Awaits `p`, which must reject with an instance of `cls`; returns the error for more checks. */
export async function rejection<E extends Error>(
  p: Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  cls: new (...args: any[]) => E,
): Promise<E> {
  try {
    await p;
  } catch (error) {
    if (error instanceof cls) return error;
    throw new Error(`expected a ${cls.name}, got: ${error}`, { cause: error });
  }
  throw new Error(`expected a ${cls.name}, but it resolved`);
}
