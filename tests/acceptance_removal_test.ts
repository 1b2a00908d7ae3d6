/**
 * Acceptance for removal at mount boundaries (docs/engine.md "Removal"): a
 * bind mount of a directory from outside the project (a "cache" with files)
 * in a fork, in an overlay fork's upper dir, or in a layer under
 * `.marsh/.trash/`, then the removal marsh runs (a rejected branch's fork,
 * `marsh splits rm`, `marsh gc`). The cache keeps every file, the removal
 * says where it stopped, the split is kept with the reason in
 * `marsh splits --json`, and after the user's umount the removal finishes.
 * Also `marsh splits rm` of a split whose directory was deleted while its
 * overlays were mounted. The real `./marsh` CLI and daemon in temp dirs.
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../splitfs/_testing.ts";
import type { Manifest } from "../protocol/manifest.ts";
import {
  exists,
  finish,
  handleId,
  PERMISSIONS,
  type Result,
  Sandbox,
  show,
  waitFor,
} from "./_acceptance.ts";

const dec = new TextDecoder();

/** Runs mount(8) or umount(8); the test fails when it does. */
async function tool(cmd: "mount" | "umount", args: string[]): Promise<void> {
  const r = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  assert.ok(r.success, `${cmd} ${args.join(" ")}: ${dec.decode(r.stderr)}`);
}

/** Unmounts what a test mounted and left mounted (it failed), deepest first. */
async function unmountLeftovers(points: readonly string[]): Promise<void> {
  for (const p of [...points].sort((a, b) => b.length - a.length)) {
    if (!mountsBelow(p).includes(p)) continue;
    const r = await new Deno.Command("umount", { args: [p], stderr: "null" }).output();
    if (!r.success) await new Deno.Command("umount", { args: ["-l", p], stderr: "null" }).output();
  }
}

/** A directory outside the project holding files that must survive every removal. */
function makeCache(sb: Sandbox): string {
  const cache = `${sb.scratch}/cache`;
  Deno.mkdirSync(`${cache}/deep/er`, { recursive: true });
  Deno.writeTextFileSync(`${cache}/keep.txt`, "keep\n");
  Deno.writeTextFileSync(`${cache}/deep/er/keep2.txt`, "keep2\n");
  return cache;
}

function assertCacheIntact(cache: string): void {
  assert.equal(Deno.readTextFileSync(`${cache}/keep.txt`), "keep\n");
  assert.equal(Deno.readTextFileSync(`${cache}/deep/er/keep2.txt`), "keep2\n");
}

function refusal(tree: string, point: string, then: string): string {
  return `cannot remove ${tree}: ${point} is a mount point (umount ${point}, then ${then})`;
}

/** Where the cache goes, given the running split. */
type Place = (s: Manifest) => string;

const PLACES: readonly { name: string; forks: "auto" | "copy"; place: Place }[] = [
  { name: "a copy fork", forks: "copy", place: (s) => `${s.dir}/a/vm` },
  { name: "an overlay fork", forks: "auto", place: (s) => `${s.dir}/a/vm` },
  {
    name: "an overlay fork's upper dir",
    forks: "auto",
    place: (s) => `${s.dir}/.overlay/a/upper/vm`,
  },
];

for (const { name, forks, place } of PLACES) {
  Deno.test({
    name:
      `a rejected branch with a bind mount of an outside cache in ${name}: the cache keeps every file, the fork and split are kept with the reason, and after umount marsh splits rm finishes`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({ env: { MARSH_FORKS: forks } });
    const cache = makeCache(sb);
    const gate = `${sb.scratch}/gate`;
    let point = "";
    try {
      // A nested .git (a cloned dependency) is enough to reject the branch.
      const creator = sb.spawnMarsh([
        "split",
        "-n",
        "-b",
        `a=mkdir -p vm dep/.git && echo work > work.txt && until [ -e '${gate}' ]; do sleep 0.05; done`,
      ]);
      const running = await sb.runningSplit();
      point = place(running);
      await waitFor(`the branch to make ${point}`, () => exists(point));
      await tool("mount", ["--bind", cache, point]);
      Deno.writeTextFileSync(gate, "");
      const made: Result = await finish(creator, "marsh split");
      const id = handleId(made.stdout);
      assert.equal(id, running.id);

      // A rejected fork is kept (its work is not lost), so nothing is removed until splits rm.
      assertCacheIntact(cache);
      const fork = `${running.dir}/a`;
      const s = await sb.split(id);
      assert.equal(s?.branches[0]?.state, "rejected", JSON.stringify(s));
      assert.equal(s?.branches[0]?.status, "rejected: nested .git at dep/.git");
      assert.equal(Deno.readTextFileSync(`${fork}/work.txt`), "work\n");
      assert.ok(mountsBelow(sb.base).includes(point), "the user's mount stays");

      const join = await sb.marsh(["join"], { stdin: made.stdout });
      assert.equal(join.code, 0, show(join));
      assert.match(join.stderr, new RegExp(`^split ${id} kept: .*branch a rejected`, "m"));
      assert.equal((await sb.split(id))?.state, "kept");

      const refused = await sb.marsh(["splits", "rm", id]);
      assert.equal(refused.code, 2, show(refused));
      assert.equal(
        refused.stderr,
        `marsh splits rm: split ${id} not removed: ${
          refusal(running.dir, point, `marsh splits rm ${id}`)
        }\n`,
      );
      assertCacheIntact(cache);
      assert.equal((await sb.split(id))?.state, "kept", "the record stays");
      assert.ok(exists(`${fork}/work.txt`), "nothing of the split was deleted");

      await tool("umount", [point]);
      const rm = await sb.marsh(["splits", "rm", id]);
      assert.equal(rm.code, 0, show(rm));
      assert.equal(rm.stdout, `split ${id} removed\n`);
      assert.ok(!exists(running.dir));
      assert.equal(await sb.split(id), undefined);
      assert.deepEqual(mountsBelow(sb.base), []);
      assertCacheIntact(cache);
    } finally {
      Deno.writeTextFileSync(gate, "");
      if (point) await unmountLeftovers([point]);
    }
  });
}

Deno.test({
  name:
    "marsh gc with a bind mount of an outside cache in a layer under .marsh/.trash: the cache keeps every file, gc says where it stopped, and after umount gc finishes",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const cache = makeCache(sb);
  const made = await sb.bash(`"$M" split -n -b a=true | "$M" join`);
  assert.equal(made.code, 0, show(made));
  // A layer a crash left in the trash mid-discard, with a mount in its data.
  const layer = `${sb.project}/.marsh/.trash/layer-0123456789abcdef-x1`;
  const point = `${layer}/data/vm`;
  Deno.mkdirSync(point, { recursive: true });
  Deno.writeTextFileSync(`${layer}/data/a.txt`, "a\n");
  try {
    await tool("mount", ["--bind", cache, point]);
    const refused = await sb.marsh(["gc"]);
    assert.equal(refused.code, 2, show(refused));
    assert.equal(refused.stderr, `marsh gc: ${refusal(layer, point, "marsh gc")}\n`);
    assertCacheIntact(cache);
    assert.ok(mountsBelow(sb.base).includes(point), "the user's mount stays");

    await tool("umount", [point]);
    const gc = await sb.marsh(["gc"]);
    assert.equal(gc.code, 0, show(gc));
    assert.ok(!exists(layer), "the trashed layer is gone");
    assertCacheIntact(cache);
  } finally {
    await unmountLeftovers([point]);
  }
});

Deno.test({
  name:
    "marsh splits rm after rm -rf of a split whose overlays are mounted unmounts them and drops the record",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const made = await sb.marsh(["split", "-n", "-b", "a=echo a > a.out", "-b", "b=true"]);
  assert.equal(made.code, 0, show(made));
  const s = (await sb.split(handleId(made.stdout)))!;
  assert.deepEqual(mountsBelow(s.dir).sort(), ["a", "b", "base"].map((n) => `${s.dir}/${n}`));
  // rm deletes what it can; the mount points stay (busy) with the split dir.
  const rmrf = await sb.bash(`rm -rf '${s.dir}'`);
  assert.notEqual(rmrf.code, 0, show(rmrf));
  assert.ok(!exists(`${s.dir}/out`));

  const rm = await sb.marsh(["splits", "rm", s.id]);
  assert.equal(rm.code, 0, show(rm));
  assert.equal(
    rm.stdout,
    `split ${s.id}: its directory was removed or replaced, so nothing was removed from disk; record dropped\n`,
  );
  assert.deepEqual(mountsBelow(sb.base), [], "the split's overlays are unmounted");
  assert.equal(await sb.split(s.id), undefined);
});

Deno.test({
  name:
    "marsh splits rm of a replaced split with a mount marsh did not make in it keeps the record, says what is left, and finishes after umount",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const cache = makeCache(sb);
  const made = await sb.marsh(["split", "-n", "-b", "a=mkdir vm"]);
  assert.equal(made.code, 0, show(made));
  const s = (await sb.split(handleId(made.stdout)))!;
  const point = `${s.dir}/a/vm`;
  try {
    await tool("mount", ["--bind", cache, point]);
    Deno.removeSync(`${s.dir}/out`, { recursive: true });
    const refused = await sb.marsh(["splits", "rm", s.id]);
    assert.equal(refused.code, 2, show(refused));
    const reason = `its directory was removed or replaced, and ${
      refusal(s.dir, point, `marsh splits rm ${s.id}`)
    }`;
    assert.equal(refused.stderr, `marsh splits rm: split ${s.id} not removed: ${reason}\n`);
    assert.equal((await sb.split(s.id))?.reason, reason, "the record stays, saying what is left");
    assert.ok(mountsBelow(s.dir).includes(`${s.dir}/a`), "nothing was unmounted");
    assertCacheIntact(cache);

    await tool("umount", [point]);
    const rm = await sb.marsh(["splits", "rm", s.id]);
    assert.equal(rm.code, 0, show(rm));
    assert.equal(await sb.split(s.id), undefined);
    assert.deepEqual(mountsBelow(sb.base), []);
    assertCacheIntact(cache);
  } finally {
    await unmountLeftovers([point]);
  }
});
