/**
 * Acceptance (issue 10 §6, "two daemons on one project"): two real daemons
 * with two control dirs on one project. Whichever uses the project first
 * holds `.marsh/lock` until it stops; the other's split, gc and `splits rm`
 * are refused at once, naming the holder and the fix, and change nothing
 * in the project. Once the holder stops, the other works.
 */

import assert from "node:assert/strict";
import { handleId, PERMISSIONS, type Result, Sandbox, show } from "./_acceptance.ts";

/** Every path under `dir` with its size and mtime: what a refusal must leave as it was. */
function tree(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of Deno.readDirSync(d)) {
      const p = `${d}/${e.name}`;
      const st = Deno.lstatSync(p);
      out.push(`${p} ${st.size} ${st.mtime?.getTime()}`);
      if (e.isDirectory) walk(p);
    }
  };
  walk(dir);
  return out.sort();
}

Deno.test({
  name: "project lock: a second daemon's split, gc and rm are refused until the first stops",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const other = `${sb.base}/other-home`;
  const asOther = { env: { MARSH_HOME: other } };
  try {
    // The other daemon uses the project first, leaves a split, and stops.
    const early = await sb.marsh(["split", "-n", "-b", "e=echo e > e.txt"], asOther);
    assert.equal(early.code, 0, show(early));
    const earlyId = handleId(early.stdout);
    assert.equal((await sb.marsh(["daemon", "stop"], asOther)).code, 0);

    // Now the first daemon uses it, and holds it.
    const first = await sb.marsh(["split", "-n", "-b", "a=echo a > a.txt"]);
    assert.equal(first.code, 0, show(first));
    const pid = sb.daemonPid();
    const before = tree(`${sb.project}/.marsh`);

    const refused = (r: Result) => {
      assert.equal(r.code, 2, show(r));
      assert.ok(
        r.stderr.includes(
          `project ${sb.project} is in use by another marsh daemon (pid ${pid}, MARSH_HOME="${sb.home}"): one daemon per project; stop it with: MARSH_HOME="${sb.home}" marsh daemon stop (as its user), or use that daemon for this project`,
        ),
        show(r),
      );
    };
    const split = await sb.marsh(["split", "-n", "-b", "b=echo b > b.txt"], asOther);
    assert.notEqual(split.code, 0, show(split));
    assert.match(split.stderr, /is in use by another marsh daemon/);
    refused(await sb.marsh(["gc"], asOther));
    refused(await sb.marsh(["gc", "--dry-run"], asOther));
    const rm = await sb.marsh(["splits", "rm", earlyId], asOther);
    assert.equal(rm.code, 2, show(rm));
    assert.match(rm.stderr, new RegExp(`split ${earlyId} not removed: project .* is in use`));
    assert.deepEqual(tree(`${sb.project}/.marsh`), before, "the refused daemon changed nothing");
    const kept = JSON.parse((await sb.marsh(["splits", "--json"], asOther)).stdout);
    assert.ok(kept.splits.some((s: { id: string }) => s.id === earlyId), "its record is kept");

    // The first stops; the other now works on the project.
    assert.equal((await sb.marsh(["daemon", "stop"])).code, 0);
    const later = await sb.marsh(["split", "-n", "-b", "b=echo b > b.txt"], asOther);
    assert.equal(later.code, 0, show(later));
    const gc = await sb.marsh(["gc"], asOther);
    assert.equal(gc.code, 0, show(gc));
    const rmLater = await sb.marsh(["splits", "rm", earlyId], asOther);
    assert.equal(rmLater.code, 0, show(rmLater));
    const lock = JSON.parse(Deno.readTextFileSync(`${sb.project}/.marsh/lock`));
    assert.equal(lock.home, other);
  } finally {
    await sb.marsh(["daemon", "stop"], asOther);
  }
});
