/**
 * A smoke test of `deno task bench --resolve`'s CLI part (bench/resolve_cli.ts)
 * on a tiny generated tree: one run of each case through the real CLI and a
 * private daemon, the working copies left clean and nothing left running.
 */

import assert from "node:assert/strict";
import { join } from "node:path";
import { HardenedGit } from "./_git.ts";
import { marshOps } from "./marsh_ops.ts";
import { measureResolveCli, renderResolveCli } from "./resolve_cli.ts";
import { planSmallChange } from "./small_change.ts";
import { generateTree } from "./tree_gen.ts";
import { dirtyReason } from "./tree_cache.ts";

Deno.test({
  name: "bench --resolve through the CLI runs on a tiny tree and leaves its working copies clean",
  permissions: { read: true, write: true, run: true, env: true, ffi: true },
}, async () => {
  const root = await Deno.makeTempDir({ prefix: "marsh-rcli-test-" });
  await using git = await HardenedGit.create();
  try {
    const dir = join(root, "tree");
    await generateTree(dir, 400, 7, { git });
    const head = (await git.run(dir, ["rev-parse", "HEAD"])).trim();
    const t = {
      files: 400,
      dir,
      head,
      workDir: join(root, "work"),
      edits: await planSmallChange(dir, 7, git),
    };
    const r = await measureResolveCli({ git, runs: 1, trees: [t], wideFiles: 30, log: () => {} });
    assert.deepEqual(r.rows.map((row) => `${row.files} ${row.case} ${row.changed}`), [
      "400 clean 20",
      "400 both sides 20",
    ]);
    for (const row of r.rows) {
      assert.ok(row.marshMs > 0 && row.gitApplyMs > 0 && row.denoRunMs > 0, JSON.stringify(row));
      assert.equal(row.beyondMs, row.marshMs - row.cliStartMs);
    }
    assert.equal(r.dryRun?.changed, 30);
    assert.ok(Number.isFinite(r.dryRun?.beyondMs), JSON.stringify(r.dryRun));
    assert.equal(r.growth, null, "one size: no growth figure");
    assert.deepEqual(r.notes.filter((n) => n.startsWith("WARNING")), []);
    assert.match(renderResolveCli(r), /both sides/);
    assert.match(renderResolveCli(r), /an empty deno run alone is [\d.]+× git apply --3way/);
    for (const name of ["marsh", "git"]) {
      const wc = join(t.workDir, name);
      assert.equal(await dirtyReason(wc, head, git), null, `${name} working copy`);
      await assert.rejects(Deno.lstat(join(wc, ".marsh")), Deno.errors.NotFound);
    }
    // Cached: a second run reuses the working copies (their markers stay).
    const marker = await Deno.readTextFile(join(t.workDir, "marsh.json"));
    assert.match(marker, new RegExp(head));
    assert.deepEqual(marshOps.mountsUnder(root), [], "nothing left mounted");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
