/**
 * Issue 11 §3, housekeeping through the real `./marsh` CLI and daemon:
 * `marsh splits` lists the current project's splits (`--all`: every
 * project's), `marsh splits rm A B ...` removes several, and `marsh splits
 * prune` removes the finished ones (joined, kept, cancelled) and says what
 * it could not remove (a mount inside a split).
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
import { mountsBelow } from "../splitfs/_testing.ts";
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

/** A lease far beyond the test: an awaiting split stays awaiting. */
const ENV = { MARSH_LEASE_MS: "600000" };

/** `{"splits":[...],"root"?}` of `marsh splits --json ARGS` run in `cwd`. */
async function listed(
  sb: Sandbox,
  args: readonly string[],
  cwd?: string,
): Promise<{ splits: Manifest[]; root?: string }> {
  const r = await sb.marsh(["splits", "--json", ...args], { cwd });
  assert.equal(r.code, 0, show(r));
  return JSON.parse(r.stdout);
}

function ids(splits: readonly Manifest[]): string[] {
  return splits.map((s) => s.id).sort();
}

/** A second Git project beside the sandbox's. */
async function otherProject(sb: Sandbox): Promise<string> {
  const other = `${sb.base}/other`;
  Deno.mkdirSync(other);
  const r = await sb.bash(
    "git init -q -b main && echo o > o.txt && git add -A && git commit -q -m o",
    { cwd: other },
  );
  assert.equal(r.code, 0, show(r));
  return other;
}

/** A split joined with `--keep` (state kept), made in `cwd`; its id. */
async function keptSplit(sb: Sandbox, script: string, cwd?: string): Promise<string> {
  const r = await sb.marsh(["split", "-n", "-b", `a=${script}`], { cwd });
  assert.equal(r.code, 0, show(r));
  const keep = await sb.marsh(["join", "--keep", "--", "true"], { stdin: r.stdout, cwd });
  assert.equal(keep.code, 0, show(keep));
  return handleId(r.stdout);
}

/** A split joined by a consumer that exits 0 (state joined, nothing on disk); its id. */
async function joinedSplit(sb: Sandbox): Promise<string> {
  const r = await sb.marsh(["split", "-n", "-b", "j=echo j > j.txt"]);
  assert.equal(r.code, 0, show(r));
  const join = await sb.marsh(["join", "--", "true"], { stdin: r.stdout });
  assert.equal(join.code, 0, show(join));
  return handleId(r.stdout);
}

/** A split whose branch waits for `gate` to exist; resolves once it runs. */
async function gatedSplit(
  sb: Sandbox,
  gate: string,
): Promise<{ id: string; creator: Deno.ChildProcess }> {
  const before = new Set(ids((await listed(sb, ["--all"])).splits));
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `g=until [ -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  const id = await waitFor("the gated split to run", async () => {
    const s = (await listed(sb, ["--all"])).splits.find((m) =>
      !before.has(m.id) && m.state === "run" && m.branches[0]?.state === "running"
    );
    return s?.id;
  });
  return { id, creator };
}

/** A cancelled split; its id. */
async function cancelledSplit(sb: Sandbox): Promise<string> {
  const gate = `${sb.scratch}/never`;
  const { id, creator } = await gatedSplit(sb, gate);
  const cancel = await sb.marsh(["splits", "cancel", id]);
  assert.equal(cancel.code, 0, show(cancel));
  const ended: Result = await finish(creator, "the cancelled split");
  assert.equal(ended.code, 130, show(ended));
  assert.equal((await sb.split(id))?.state, "cancelled");
  return id;
}

async function tool(cmd: "mount" | "umount", args: string[]): Promise<void> {
  const r = await new Deno.Command(cmd, { args, stdout: "null", stderr: "piped" }).output();
  assert.ok(r.success, `${cmd} ${args.join(" ")}: ${dec.decode(r.stderr)}`);
}

Deno.test({
  name:
    "marsh splits lists this project's splits from anywhere in it (a subdir, a kept fork); --all and an ID reach the others; / is refused with the hint",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n", "sub/b.txt": "b\n" } });
  const other = await otherProject(sb);
  const mine = await keptSplit(sb, "echo m > m.txt");
  const theirs = await keptSplit(sb, "echo t > t.txt", other);

  for (const cwd of [sb.project, `${sb.project}/sub`]) {
    const here = await listed(sb, [], cwd);
    assert.deepEqual(ids(here.splits), [mine], cwd);
    assert.equal(here.root, sb.project);
  }
  // Inside marsh's own state (a kept fork, out/): the project holding it.
  const dir = (await sb.split(mine))!.dir;
  assert.deepEqual(ids((await listed(sb, [], `${dir}/out/a`)).splits), [mine]);
  assert.deepEqual(ids((await listed(sb, [], `${dir}/a`)).splits), [mine]);
  assert.deepEqual(ids((await listed(sb, [], other)).splits), [theirs]);
  assert.deepEqual(ids((await listed(sb, ["--all"])).splits), [mine, theirs].sort());
  assert.equal((await listed(sb, ["--all"])).root, undefined);
  // An ID is shown wherever it was made.
  assert.deepEqual(ids((await listed(sb, [theirs])).splits), [theirs]);

  const text = await sb.marsh(["splits"]);
  assert.equal(text.code, 0, show(text));
  assert.match(text.stdout, new RegExp(`^${mine}  kept  `));
  assert.ok(!text.stdout.includes(theirs), text.stdout);
  // A directory without a .git is its own project, as for marsh split.
  const none = await sb.marsh(["splits"], { cwd: sb.scratch });
  assert.equal(none.code, 0, show(none));
  assert.equal(
    none.stdout,
    `no splits in ${sb.scratch}; 2 in other projects (marsh splits --all)\n`,
  );
  const json = await listed(sb, [], sb.scratch);
  assert.deepEqual(json, { splits: [], root: sb.scratch });
  // A shell branch sees the splits it created (none here), wherever it asks from.
  const inBranch = await sb.marsh([
    "split",
    "-n",
    "-b",
    'b="$M" splits --json && "$M" splits --all && "$M" splits',
  ]);
  assert.equal(inBranch.code, 0, show(inBranch));
  const b = (await sb.split(handleId(inBranch.stdout)))!;
  assert.equal(
    Deno.readTextFileSync(`${b.out}/b/stdout`),
    '{"splits":[]}\nno splits\nno splits\n',
    Deno.readTextFileSync(`${b.out}/b/stderr`),
  );
  const slash = await sb.marsh(["splits"], { cwd: "/" });
  assert.equal(slash.code, 2, show(slash));
  assert.equal(
    slash.stderr,
    "marsh splits: cannot use / as the project root: run marsh split in a project directory; marsh splits --all lists every project's splits\n",
  );
});

Deno.test({
  name:
    "marsh splits rm A B ...: each removed or refused on its own, in order; exit 2 when one was refused; --json",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: ENV });
  const a = await keptSplit(sb, "echo a > a2.txt");
  const b = await joinedSplit(sb);
  const c = await keptSplit(sb, "echo c > c.txt");
  const gate = `${sb.scratch}/gate`;
  const running = await gatedSplit(sb, gate);
  try {
    const r = await sb.marsh(["splits", "rm", a, "nosuch", running.id, b, a]);
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, `split ${a} removed\nsplit ${b} removed\n`);
    assert.equal(
      r.stderr,
      [
        "marsh splits rm: no split nosuch",
        `marsh splits rm: split ${running.id} is running; cancel it first with: marsh splits cancel ${running.id}`,
        "",
      ].join("\n"),
    );
    assert.deepEqual(ids((await listed(sb, [])).splits), [c, running.id].sort());
    assert.equal((await sb.split(running.id))?.state, "run", "the running split runs on");

    const all = await sb.marsh(["splits", "rm", "--json", c]);
    assert.equal(all.code, 0, show(all));
    assert.deepEqual(JSON.parse(all.stdout), {
      removed: [{ id: c, message: `split ${c} removed` }],
      failed: [],
    });
    const refused = await sb.marsh(["splits", "rm", "--json", c]);
    assert.equal(refused.code, 2, show(refused));
    assert.equal(refused.stderr, "");
    assert.deepEqual(JSON.parse(refused.stdout), {
      removed: [],
      failed: [{ id: c, reason: `no split ${c}` }],
    });
  } finally {
    Deno.writeTextFileSync(gate, "");
  }
  const done = await finish(running.creator, "the gated split");
  assert.equal(done.code, 0, show(done));
});

Deno.test({
  name:
    "marsh splits prune removes this project's joined, kept and cancelled splits, reports one a mount keeps, and leaves running, awaiting and other projects' splits",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: ENV });
  const other = await otherProject(sb);
  const theirs = await keptSplit(sb, "echo t > t.txt", other);
  const kept = await keptSplit(sb, "echo k > k.txt");
  const joined = await joinedSplit(sb);
  const cancelled = await cancelledSplit(sb);
  // A kept split with a bind mount of an outside cache in its upper dir.
  const stuck = await keptSplit(sb, "mkdir vm && echo s > s.txt");
  const stuckDir = (await sb.split(stuck))!.dir;
  const cache = `${sb.scratch}/cache`;
  Deno.mkdirSync(cache);
  Deno.writeTextFileSync(`${cache}/keep.txt`, "keep\n");
  const point = `${stuckDir}/.overlay/a/upper/vm`;
  const awaiting = await sb.marsh(["split", "-n", "-b", "w=true"]);
  assert.equal(awaiting.code, 0, show(awaiting));
  const awaitingId = handleId(awaiting.stdout);
  const gate = `${sb.scratch}/gate`;
  const running = await gatedSplit(sb, gate);
  const finished = [kept, joined, cancelled, stuck].sort();
  const everything = ids((await listed(sb, ["--all"])).splits);
  try {
    // A bad duration: refused before anything is asked, nothing removed.
    for (const bad of ["3x", "2", "h", "-1h", "1.5h", ""]) {
      const r = await sb.marsh(["splits", "prune", "--older-than", bad]);
      assert.equal(r.code, 2, show(r));
      assert.equal(
        r.stderr,
        `marsh splits prune: --older-than ${
          JSON.stringify(bad)
        } is not a duration: give a whole number and a unit, s, m, h, d or w (e.g. 30m, 2h, 3d); nothing was removed\n`,
      );
    }
    const young = await sb.marsh(["splits", "prune", "--older-than", "1h"]);
    assert.equal(young.code, 0, show(young));
    assert.equal(young.stdout, `no finished splits created more than 1h ago in ${sb.project}\n`);
    const dry = await sb.marsh(["splits", "prune", "--dry-run", "--json"]);
    assert.equal(dry.code, 0, show(dry));
    const plan = JSON.parse(dry.stdout);
    assert.equal(plan.root, sb.project);
    assert.equal(plan.dry_run, true);
    assert.deepEqual(plan.removed.map((s: { id: string }) => s.id).sort(), finished);
    assert.deepEqual(plan.failed, []);
    assert.deepEqual(
      ids((await listed(sb, ["--all"])).splits),
      everything,
      "a dry run removes nothing",
    );

    await tool("mount", ["--bind", cache, point]);
    const pruned = await sb.marsh(["splits", "prune"]);
    assert.equal(pruned.code, 2, show(pruned));
    const lines = pruned.stdout.trim().split("\n").sort();
    assert.deepEqual(lines, [kept, joined, cancelled].sort().map((id) => `split ${id} removed`));
    assert.equal(
      pruned.stderr,
      `marsh splits prune: split ${stuck} not removed: cannot remove ${stuckDir}: ${point} is a mount point (umount ${point}, then marsh splits rm ${stuck})\n`,
    );
    assert.deepEqual(
      ids((await listed(sb, ["--all"])).splits),
      [theirs, stuck, awaitingId, running.id].sort(),
    );
    assert.equal(Deno.readTextFileSync(`${cache}/keep.txt`), "keep\n");
    assert.ok(exists(`${stuckDir}/.overlay/a/upper/s.txt`), "nothing of the stuck split went");

    await tool("umount", [point]);
    const again = await sb.marsh(["splits", "prune", "--json"]);
    assert.equal(again.code, 0, show(again));
    const body = JSON.parse(again.stdout);
    assert.deepEqual(Object.keys(body), ["root", "dry_run", "removed", "failed"]);
    assert.deepEqual(body.removed.map((s: { id: string; message: string }) => [s.id, s.message]), [
      [stuck, `split ${stuck} removed`],
    ]);
    assert.deepEqual(
      ids((await listed(sb, ["--all"])).splits),
      [theirs, awaitingId, running.id].sort(),
    );
    // --all reaches the other project's kept split too.
    const all = await sb.marsh(["splits", "prune", "--all"]);
    assert.equal(all.code, 0, show(all));
    assert.equal(all.stdout, `split ${theirs} removed\n`);
    assert.deepEqual(ids((await listed(sb, ["--all"])).splits), [awaitingId, running.id].sort());
  } finally {
    Deno.writeTextFileSync(gate, "");
    if (mountsBelow(point).includes(point)) await tool("umount", [point]);
  }
  assert.equal((await finish(running.creator, "the gated split")).code, 0);
});
