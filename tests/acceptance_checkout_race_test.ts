/**
 * Acceptance (docs/guide.md "Checking out a checkpoint"; docs/resolution.md
 * "The applier", "The recovery rule"): `marsh checkout` against a writer
 * and a crash. The head adds a few thousand files, so the apply stages for
 * long enough to be caught part-way by watching its resolution directory.
 *
 * - A write to a planned path between the plan and the apply aborts it,
 *   naming the path; nothing else changed.
 * - `kill -9` of the split-filesystem service during the apply, then a
 *   daemon restart (twice): the tree is exactly the pre-state or the
 *   post-state, as the resolution's state says.
 */

import assert from "node:assert/strict";
import { exists, finish, show } from "./_acceptance.ts";
import { assertUnchanged, picture, pictureDiff } from "./_resolve.ts";
import { type Listed, PERMS, world } from "./_checkout_world.ts";

const BULK = 3000;

/** The entries of resolution dirs' `sub` dir (`stage` or `backup`), once any has `min` of them. */
function entriesIn(project: string, sub: string, min: number): string | undefined {
  const dir = `${project}/.marsh/resolve`;
  if (!exists(dir)) return undefined;
  for (const e of Deno.readDirSync(dir)) {
    const at = `${dir}/${e.name}/${sub}`;
    if (!exists(at)) continue;
    let n = 0;
    for (const _ of Deno.readDirSync(at)) if (++n >= min) return e.name;
  }
  return undefined;
}

/** Probes every 5 ms (the apply is a race): `waitFor`'s back-off would miss it. */
async function poll<T>(what: string, probe: () => T | undefined): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const got = probe();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

Deno.test({
  name: "marsh checkout: a write between the plan and the apply aborts it, naming the path",
  permissions: PERMS,
}, async () => {
  await using w = await world({ bulk: BULK });
  const { sb } = w;
  const running = sb.spawnMarsh(["checkout"]);
  await poll("the apply to stage", () => entriesIn(sb.project, "stage", 1));
  Deno.writeTextFileSync(`${sb.project}/a.txt`, "racing\n");
  const r = await finish(running, "marsh checkout");
  assert.equal(r.code, 1, show(r));
  assert.match(r.stderr, /a\.txt/);
  assert.match(r.stderr, /nothing was changed/);
  const expected = new Map(w.pre);
  expected.set("a.txt", picture(sb.project).get("a.txt")!);
  assert.deepEqual(pictureDiff(expected, picture(sb.project)), [], "only the racing write");
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "racing\n");
  const list = await sb.marsh(["resolutions", "--json"]);
  const [c] = (JSON.parse(list.stdout) as { resolutions: Listed[] }).resolutions;
  assert.equal(c?.state, "failed", list.stdout);
  assert.ok(!exists(`${sb.project}/.marsh/resolve/${c!.id}`), "no restore point of a refusal");
});

Deno.test({
  name:
    "kill -9 of the split-filesystem service mid-checkout: a restart leaves exactly pre or post",
  permissions: PERMS,
}, async () => {
  await using w = await world({ bulk: BULK });
  const { sb } = w;
  ok(await sb.marsh(["daemon", "start"]), "daemon start");
  const children = JSON.parse(Deno.readTextFileSync(`${sb.home}/children.json`)) as {
    children: { role: string; pid: number }[];
  };
  const service = children.children.find((c) => c.role === "splitfs")!.pid;
  const running = sb.spawnMarsh(["checkout"]);
  // Past the re-check: the applier is moving entries and renaming staged files into place.
  const id = await poll("the apply's steps", () => entriesIn(sb.project, "backup", 1));
  Deno.kill(service, "SIGKILL");
  const lost = await finish(running, "the interrupted marsh checkout");
  assert.notEqual(lost.code, 0, show(lost));
  assert.notEqual(lost.code, 1, show(lost));
  for (const round of [1, 2]) {
    ok(await sb.marsh(["daemon", "stop"]), `round ${round}: stop`);
    ok(await sb.marsh(["daemon", "start"]), `round ${round}: start`);
    const list = await sb.marsh(["resolutions", "--json"]);
    const all = (JSON.parse(list.stdout) as { resolutions: Listed[] }).resolutions;
    assert.equal(all.length, 1, list.stdout);
    const r = all[0]!;
    assert.equal(r.id, id);
    assert.ok(r.state === "applied" || r.state === "failed", list.stdout);
    if (r.state === "failed") assertUnchanged(sb.project, w.pre, `round ${round}: pre`);
    else {
      assert.deepEqual(pictureDiff(w.post, picture(sb.project)), [], `round ${round}: post`);
    }
    assert.ok(!exists(`${sb.project}/.marsh/resolve/${id}/stage`), "no staging left");
  }
});

function ok(r: { code: number; stdout: string; stderr: string }, what: string): void {
  assert.equal(r.code, 0, `${what}: ${show(r as never)}`);
}
