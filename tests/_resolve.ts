/**
 * Helpers of the resolution acceptance tests (docs/resolution.md): a
 * checksummed picture of a tree, and a split that waits for its merge.
 */

import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { handleId, type Sandbox, show } from "./_acceptance.ts";

/**
 * Every entry under `root` (`.marsh` skipped; `.git` too unless asked):
 * type, permission bits, and the SHA-256 of a file's bytes or a symlink's
 * target. Two equal pictures are byte-identical trees.
 */
export function picture(root: string, opts: { withGit?: boolean } = {}): Map<string, string> {
  const out = new Map<string, string>();
  const walk = (rel: string) => {
    for (const e of Deno.readDirSync(rel === "" ? root : `${root}/${rel}`)) {
      const path = rel === "" ? e.name : `${rel}/${e.name}`;
      if (path === ".marsh" || (path === ".git" && !opts.withGit)) continue;
      const full = `${root}/${path}`;
      const st = Deno.lstatSync(full);
      const perm = ((st.mode ?? 0) & 0o7777).toString(8);
      if (st.isSymlink) out.set(path, `symlink ${Deno.readLinkSync(full)}`);
      else if (st.isDirectory) {
        out.set(path, `dir ${perm}`);
        walk(path);
      } else {
        const sum = createHash("sha256").update(Deno.readFileSync(full)).digest("hex");
        out.set(path, `file ${perm} ${sum}`);
      }
    }
  };
  walk("");
  return out;
}

/** The differences between two pictures, one line each, for assertion messages. */
export function pictureDiff(a: Map<string, string>, b: Map<string, string>): string[] {
  const out: string[] = [];
  for (const k of new Set([...a.keys(), ...b.keys()])) {
    if (a.get(k) !== b.get(k)) out.push(`${k}: ${a.get(k) ?? "absent"} -> ${b.get(k) ?? "absent"}`);
  }
  return out.sort();
}

/** Asserts that `root` still looks as `before` says, `.git` included when it was. */
export function assertUnchanged(
  root: string,
  before: Map<string, string>,
  what: string,
  opts: { withGit?: boolean } = {},
): void {
  assert.deepEqual(pictureDiff(before, picture(root, opts)), [], `${what}: the tree changed`);
}

/**
 * Runs `marsh split -n` with the given `-b` branches to its end and returns
 * the split id; the split then awaits a join (or a resolution).
 */
export async function splitOf(sb: Sandbox, branches: Record<string, string>): Promise<string> {
  const args = ["split", "-n"];
  for (const [label, script] of Object.entries(branches)) args.push("-b", `${label}=${script}`);
  const r = await sb.marsh(args);
  assert.equal(r.code, 0, show(r));
  return handleId(r.stdout);
}

/** Runs a marsh command and asserts its exit status, returning the result. */
export async function expectExit(
  sb: Sandbox,
  args: readonly string[],
  code: number,
  opts: { cwd?: string } = {},
): Promise<{ stdout: string; stderr: string }> {
  const r = await sb.marsh(args, opts);
  assert.equal(r.code, code, `marsh ${args.join(" ")}: ${show(r)}`);
  return r;
}
