/**
 * Acceptance for a full disk and the control dir's attempt dirs (issue 10
 * §6): a project on a small tmpfs that a branch fills, so the capture, the
 * publish of the branch's output and the manifest cannot be written. Join
 * refuses to run a consumer on that half `out/` and keeps the split; once
 * space is freed, `marsh join` writes what was missing and the consumer
 * reads it. Attempt dirs kept for a failed publish go with their split
 * (`splits rm`, the join's release), and `marsh gc` and a daemon start
 * remove those whose split is gone. The real `./marsh` CLI and daemon, real
 * mounts (the tests run as root).
 */

import assert from "node:assert/strict";
import { mountsBelow } from "../splitfs/_testing.ts";
import type { Manifest } from "../protocol/manifest.ts";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

const MiB = 1024 * 1024;

/** A Git project copied onto a 3 MiB tmpfs, with 1 MiB of ballast beside it to free later. */
async function fullDisk(sb: Sandbox): Promise<{ project: string; ballast: string }> {
  const fs = `${sb.base}/fs`;
  Deno.mkdirSync(fs);
  const m = await sb.bash(`mount -t tmpfs -o size=3m marsh-full "${fs}"`);
  assert.equal(m.code, 0, show(m));
  const cp = await sb.bash(`cp -a "${sb.project}" "${fs}/project"`);
  assert.equal(cp.code, 0, show(cp));
  const ballast = `${fs}/ballast`;
  Deno.writeFileSync(ballast, new Uint8Array(MiB).fill(7));
  return { project: `${fs}/project`, ballast };
}

/** A split whose branch fills the disk; its handle and manifest (from `marsh splits`). */
async function fillingSplit(sb: Sandbox, project: string): Promise<Manifest> {
  const r = await sb.marsh(
    ["split", "-n", "-b", "fill=head -c 8M /dev/urandom > fill.bin; echo filled"],
    { cwd: project },
  );
  // The capture failed (its blobs did not fit): the branch failed, 125.
  assert.equal(r.code, 125, show(r));
  assert.match(r.stderr, /out\/manifest\.json was not written: .*no space left on device/, show(r));
  const s = await sb.split(handleId(r.stdout));
  assert.ok(s);
  assert.equal(s.state, "await");
  assert.match(s.branches[0]?.status ?? "", /^failed: .*no space left on device/);
  assert.ok(!exists(`${s.out}/manifest.json`), "the manifest could not be written");
  assert.ok(!exists(`${s.out}/fill/status`), "the publish could not be written");
  return s;
}

/** The control dir's attempt dirs. */
function attempts(sb: Sandbox): string[] {
  return exists(`${sb.home}/attempts`)
    ? [...Deno.readDirSync(`${sb.home}/attempts`)].map((e) => e.name).sort()
    : [];
}

const consumer = (marker: string) =>
  `touch "${marker}"; cat "$SPLIT_MANIFEST" > "${marker}.manifest" && cat "$SPLIT_DIR/fill/status"`;

Deno.test({
  name:
    "on a full disk join refuses to run the consumer and keeps the split; after space is freed join writes what was missing and the consumer reads it",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const { project, ballast } = await fullDisk(sb);
  const s = await fillingSplit(sb, project);
  const marker = `${sb.scratch}/consumer-ran`;
  const handle = `{"marsh_split":1,"id":"${s.id}"}\n`;
  assert.deepEqual(attempts(sb).filter((a) => a.startsWith(`${s.id}-`)).length, 1);

  const refused = await sb.marsh(["join", "--", "sh", "-c", consumer(marker)], {
    stdin: handle,
    cwd: project,
  });
  assert.equal(refused.code, 2, show(refused));
  assert.match(
    refused.stderr,
    new RegExp(
      `cannot hand split ${s.id} to the consumer: out/fill/status was not written: .*no space left on device`,
    ),
  );
  assert.match(refused.stderr, /free space .*then run marsh join again/);
  assert.ok(!exists(marker), "the consumer never ran");
  const kept = await sb.split(s.id);
  assert.equal(kept?.state, "kept");
  assert.ok(exists(s.dir));
  assert.ok(!exists(`${s.out}/manifest.json`));

  Deno.removeSync(ballast);
  const joined = await sb.marsh(["join", "--", "sh", "-c", consumer(marker)], {
    stdin: handle,
    cwd: project,
  });
  assert.equal(joined.code, 0, show(joined));
  assert.match(joined.stdout, /^failed: .*no space left on device \(ENOSPC\)$/m);
  const seen = JSON.parse(Deno.readTextFileSync(`${marker}.manifest`)) as Manifest;
  assert.equal(seen.id, s.id);
  assert.match(seen.branches[0]?.status ?? "", /^failed: .*no space left on device/);
  assert.equal((await sb.split(s.id))?.state, "joined");
  assert.ok(!exists(s.dir), "the released split is removed");
  assert.deepEqual(attempts(sb), [], "its attempt dir went with it");
  await sb.marsh(["daemon", "stop"]);
  assert.deepEqual(mountsBelow(`${sb.base}/fs`).filter((p) => p !== `${sb.base}/fs`), []);
});

Deno.test({
  name:
    "attempt dirs kept by a failed publish go with splits rm; marsh gc and a daemon start remove those whose split is gone",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const { project } = await fullDisk(sb);
  const s = await fillingSplit(sb, project);
  const own = attempts(sb);
  assert.equal(own.length, 1);
  assert.ok(own[0]!.startsWith(`${s.id}-fill-`));

  // Left by a crash, or by a daemon before this one: no split of this journal.
  const orphan = (n: number) => {
    const dir = `${sb.home}/attempts/zz${n}qqqqq-lost-ab${n}c`;
    Deno.mkdirSync(dir, { recursive: true });
    Deno.writeTextFileSync(`${dir}/stdout`, "old\n");
    return dir;
  };
  const first = orphan(1);
  const gc = await sb.marsh(["gc"], { cwd: project });
  assert.equal(gc.code, 0, show(gc));
  assert.ok(!exists(first), "gc removes an attempt dir whose split is gone");
  assert.deepEqual(attempts(sb), own, "the awaiting split's attempt dir stays");

  const rm = await sb.marsh(["splits", "rm", s.id], { cwd: project });
  assert.equal(rm.code, 0, show(rm));
  assert.deepEqual(attempts(sb), [], "splits rm removes the split's attempt dir");

  const second = orphan(2);
  const stop = await sb.marsh(["daemon", "stop"]);
  assert.equal(stop.code, 0, show(stop));
  const start = await sb.marsh(["daemon", "start"]);
  assert.equal(start.code, 0, show(start));
  assert.ok(!exists(second), "a daemon start removes an attempt dir whose split is gone");
});

Deno.test({
  name:
    "a cancelled split on a full disk is removed with the attempt dirs its failed publishes kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const { project } = await fullDisk(sb);
  const child = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    "fill=head -c 8M /dev/urandom > fill.bin; true",
    "-b",
    `wait=while [ ! -e "${sb.scratch}/never" ]; do sleep 0.1; done`,
  ], { cwd: project });
  const s = await waitFor("the filling branch to end", async () => {
    const found = (await sb.splits()).find((m) => m.state === "run");
    const fill = found?.branches.find((b) => b.label === "fill");
    return fill && fill.state !== "running" && fill.state !== "pending" ? found : undefined;
  });
  assert.equal(attempts(sb).length, 2, "the failed publish kept the filling branch's attempt dir");
  const cancel = await sb.marsh(["splits", "cancel", s.id]);
  assert.equal(cancel.code, 0, show(cancel));
  const done = await finish(child, "marsh split");
  assert.equal(done.code, 130, show(done));
  assert.equal((await sb.split(s.id))?.state, "cancelled");
  assert.ok(!exists(s.dir), "every branch's end was confirmed: the split was removed");
  assert.deepEqual(attempts(sb), [], "its attempt dirs went with it");
});
