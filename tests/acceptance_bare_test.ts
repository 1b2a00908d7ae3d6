/**
 * Acceptance (issue 10 §6): a bare repository has no tree to split. marsh
 * refuses it up front, as a user meets it, and creates nothing inside it:
 * no `.marsh/`, no snapshot of its hooks and config.
 */

import assert from "node:assert/strict";
import { exists, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

/** Every path under `dir` with its size and mtime: what a refusal must leave as it was. */
function listing(dir: string, rel = ""): string[] {
  const out: string[] = [];
  for (const e of Deno.readDirSync(`${dir}/${rel}`)) {
    const path = rel === "" ? e.name : `${rel}/${e.name}`;
    const st = Deno.lstatSync(`${dir}/${path}`);
    out.push(`${path} ${st.size} ${st.mtime?.getTime()}`);
    if (e.isDirectory) out.push(...listing(dir, path));
  }
  return out.sort();
}

Deno.test({
  name: "marsh split in a bare repository is refused with the fix, and nothing is created",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const bare = `${sb.scratch}/repo.git`;
  await sb.git("clone", "-q", "--bare", sb.project, bare);
  const before = listing(bare);
  for (const cwd of [bare, `${bare}/hooks`]) {
    const r = await sb.marsh(["split", "-b", "a=echo hi > hi.txt"], { cwd });
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, "", "no handle");
    assert.equal(
      r.stderr,
      `marsh split: cannot split a bare Git repository: ${bare}; run marsh split in a worktree of it (git worktree add, or git clone)\n`,
    );
  }
  assert.ok(!exists(`${bare}/.marsh`), "no .marsh inside the bare repository");
  assert.deepEqual(listing(bare), before, "the bare repository is unchanged");
  assert.deepEqual(await sb.splits(), [], "no split was recorded");
});
