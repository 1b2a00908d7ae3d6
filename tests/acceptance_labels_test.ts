/**
 * Issue 11 §3: a label of any length gets the label message through the
 * real CLI and daemon (the daemon's frames once cut labels at 256
 * characters with `bad frame: malformed undefined frame: label`), and the
 * reserved names are refused, `layers` among them. Nothing is created.
 */

import assert from "node:assert/strict";
import { exists, PERMISSIONS, Sandbox, show } from "./_acceptance.ts";

const RULE = 'use 1-63 letters, digits, "_", "." or "-", starting with a letter or digit';

Deno.test({
  name: "labels of 64, 255, 256, 257 and 5000 characters are too long, as -b and as ::: labels",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const ok = await sb.marsh(["split", "-n", "-b", `${"a".repeat(63)}=true`]);
  assert.equal(ok.code, 0, show(ok));
  const splits = (await sb.splits()).length;
  for (const n of [64, 255, 256, 257, 5000]) {
    const label = "x".repeat(n);
    const want = `invalid label "${"x".repeat(32)}"... is too long (${n} characters): ${RULE}`;
    const shell = await sb.marsh(["split", "-n", "-b", `${label}=true`]);
    assert.equal(shell.code, 2, show(shell));
    assert.equal(shell.stdout, "");
    assert.equal(shell.stderr, `marsh split: ${want}\n`);
    const argv = await sb.marsh(["split", "-n", ":::", label, "tool"]);
    assert.equal(argv.code, 2, show(argv));
    assert.equal(argv.stderr, `marsh split: ${want}\n`);
  }
  assert.equal((await sb.splits()).length, splits, "no refused split was recorded");
});

Deno.test({
  name: "the reserved labels base, layers, out and store.git are refused before anything is made",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  for (const name of ["base", "layers", "out", "store.git"]) {
    const r = await sb.marsh(["split", "-n", "-b", `${name}=true`]);
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stderr, `marsh split: invalid label "${name}": the name is reserved\n`);
  }
  assert.deepEqual(await sb.splits(), []);
  assert.ok(!exists(`${sb.project}/.marsh`), "nothing was made in the project");
});
