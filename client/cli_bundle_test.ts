/**
 * Superseded CLI bundles: marked when superseded, removed only after the
 * grace, and a bundle that is current again loses its mark (real dirs).
 */
import assert from "node:assert/strict";
import { removeStale } from "./cli_bundle.ts";

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

Deno.test("a superseded bundle is marked, kept through the grace, then removed; the current one is never touched", async () => {
  const dir = await Deno.makeTempDir({ prefix: "marsh-cli-bundles-" });
  try {
    for (const n of ["cli-aa", "cli-bb", "other"]) await Deno.mkdir(`${dir}/${n}`);
    await removeStale(dir, "cli-aa");
    assert.ok(await exists(`${dir}/cli-bb/superseded`), "marked when superseded");
    assert.ok(!(await exists(`${dir}/cli-aa/superseded`)));
    // Built long ago but superseded just now: still there.
    await Deno.utime(`${dir}/cli-bb`, 0, 0);
    await removeStale(dir, "cli-aa");
    assert.ok(await exists(`${dir}/cli-bb`), "kept through the grace");
    // Superseded more than the grace ago: removed; other names are not ours.
    await Deno.utime(`${dir}/cli-bb/superseded`, 0, 0);
    await removeStale(dir, "cli-aa");
    assert.ok(!(await exists(`${dir}/cli-bb`)), "removed after the grace");
    assert.ok(await exists(`${dir}/other`));
    assert.ok(await exists(`${dir}/cli-aa`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a bundle current again loses its mark, so a later supersede starts a fresh grace", async () => {
  const dir = await Deno.makeTempDir({ prefix: "marsh-cli-bundles-" });
  try {
    for (const n of ["cli-aa", "cli-bb"]) await Deno.mkdir(`${dir}/${n}`);
    await removeStale(dir, "cli-aa");
    await Deno.utime(`${dir}/cli-bb/superseded`, 0, 0);
    await removeStale(dir, "cli-bb");
    assert.ok(!(await exists(`${dir}/cli-bb/superseded`)), "current again: unmarked");
    assert.ok(await exists(`${dir}/cli-aa/superseded`));
    await removeStale(dir, "cli-aa");
    assert.ok(await exists(`${dir}/cli-bb`), "a fresh grace, not the old mark");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
