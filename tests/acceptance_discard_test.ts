/**
 * Acceptance (issue 13 §1, §3): `marsh discard` through the real CLI,
 * daemon, worker and splitfs service. A running shell branch discarded
 * alone: its processes gone, its overlay unmounted, its fork gone, its
 * `out/` and lineage kept, its sibling untouched; a whole running split
 * discarded; the verb refused from inside a branch of the split; and a
 * running Kit branch discarded, its container verified gone.
 */

import assert from "node:assert/strict";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { Manifest, ManifestBranch } from "../protocol/manifest.ts";
import { World } from "./_kit_world.ts";

/** A script that waits until the test creates `gate`. */
function held(gate: string): string {
  return `while [ ! -e '${gate}' ]; do sleep 0.05; done`;
}

function branch(s: Manifest | undefined, label: string): ManifestBranch {
  const b = s?.branches.find((x) => x.label === label);
  assert.ok(b, `no branch ${label} in ${JSON.stringify(s)}`);
  return b;
}

const dec = new TextDecoder();

/** Mount points at or below `dir` in this process's mount namespace (awk: Deno reads /proc only with --allow-all). */
async function mountsBelow(dir: string): Promise<string[]> {
  const out = await new Deno.Command("awk", { args: ["{print $5}", "/proc/self/mountinfo"] })
    .output();
  assert.ok(out.success, dec.decode(out.stderr));
  return dec.decode(out.stdout).split("\n")
    .filter((p) => p === dir || p.startsWith(`${dir}/`));
}

/** Whether `pid` is a live process (not a zombie). */
async function alive(pid: number): Promise<boolean> {
  const out = await new Deno.Command("ps", { args: ["-o", "stat=", "-p", String(pid)] }).output();
  const stat = dec.decode(out.stdout).trim();
  return out.success && stat !== "" && !stat.startsWith("Z");
}

Deno.test({
  name: "marsh discard ID LABEL: a running branch stopped, its fork gone, its lineage kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/go`, pidFile = `${sb.scratch}/pid`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=echo a > a.txt; sleep 1000 & echo $! > '${pidFile}'; wait`,
    "-b",
    `b=echo b > b.txt; ${held(gate)}`,
  ]);
  const s = await sb.runningSplit();
  const pid = await waitFor("a's sleep", () => {
    const text = exists(pidFile) ? Deno.readTextFileSync(pidFile).trim() : "";
    return text === "" ? undefined : Number(text);
  });
  assert.ok(await alive(pid));
  await waitFor("b to write", () => exists(`${s.dir}/b/b.txt`));
  // Overlay forks (a root daemon): the mount checks below mean something.
  assert.equal(branch(s, "a").fork_strategy, "overlay");
  assert.deepEqual(await mountsBelow(`${s.dir}/a`), [`${s.dir}/a`]);

  const unknown = await sb.marsh(["discard", s.id, "a", "zz"]);
  assert.equal(unknown.code, 2, show(unknown));
  assert.equal(
    unknown.stderr,
    `marsh discard: split ${s.id} has no branch "zz"; its branches: a, b; nothing was discarded\n`,
  );
  assert.ok(await alive(pid), "a refused discard stops nothing");

  const r = await sb.marsh(["discard", s.id, "a", "--reason", "too slow", "--json"]);
  assert.equal(r.code, 0, show(r));
  const body = JSON.parse(r.stdout);
  assert.equal(body.scope, "branches");
  assert.equal(body.by, "host");
  assert.deepEqual(body.branches, [
    { label: "a", after: "cancelled", status: "cancelled", stopped: true, already: false },
  ]);
  // Its processes, its mount and its fork are gone; out/a stays as the record.
  assert.ok(!(await alive(pid)), `the branch's sleep ${pid} is gone`);
  assert.deepEqual(await mountsBelow(`${s.dir}/a`), []);
  for (const gone of ["a", ".overlay/a", ".admin/a"]) {
    assert.ok(!exists(`${s.dir}/${gone}`), `${gone} is removed`);
  }
  assert.equal(Deno.readTextFileSync(`${s.dir}/out/a/status`), "cancelled\n");
  // The sibling is untouched and still runs in its fork.
  assert.equal(Deno.readTextFileSync(`${s.dir}/b/b.txt`), "b\n");
  assert.deepEqual(await mountsBelow(`${s.dir}/b`), [`${s.dir}/b`]);
  const m = await sb.split(s.id);
  assert.equal(m?.state, "run");
  assert.equal(branch(m, "b").state, "running");
  const a = branch(m, "a");
  assert.equal(a.state, "discarded");
  assert.equal(a.discarded?.reason, "too slow");
  assert.equal(a.discarded?.by, "host");
  assert.equal(a.discarded?.after, "cancelled");
  const text = await sb.marsh(["splits", s.id]);
  assert.match(
    text.stdout,
    /\n {2}a {2}discarded .*\n {4}discarded after cancelled by host at .*: too slow\n/,
  );

  const again = await sb.marsh(["discard", s.id, "a"]);
  assert.equal(again.code, 1, show(again));
  assert.equal(
    again.stderr,
    `marsh discard: split ${s.id}: branch a was discarded already; nothing was changed\n`,
  );

  Deno.writeTextFileSync(gate, "");
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 0, `a discarded branch is not the split's status: ${show(done)}`);
  // join: b's patch, a named and not shown; every branch left exited 0, so it is removed.
  const join = await sb.marsh(["join"], { stdin: done.stdout });
  assert.equal(join.code, 0, show(join));
  assert.match(join.stdout, /^== b: exited 0 \(1 file changed\)$/m);
  assert.match(join.stdout, /^== a: discarded \(too slow; by host\), not shown$/m);
  assert.ok(!join.stdout.includes("+a"), join.stdout);
  assert.ok(!exists(s.dir));
  assert.equal(handleId(done.stdout), s.id);
});

Deno.test({
  name: "marsh discard from inside a branch is refused; the host discards the whole split",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const idFile = `${sb.scratch}/id`, pidFile = `${sb.scratch}/pid`;
  const res = (n: string) => `${sb.scratch}/${n}`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=${held(idFile)}; id=$(cat '${idFile}'); ` +
    `"$M" discard "$id" 2> '${res("err1")}'; echo $? > '${res("st1")}'; ` +
    `"$M" discard "$id" b 2> '${res("err2")}'; echo $? > '${res("st2")}'; sleep 1000`,
    "-b",
    `b=echo b > b.txt; sleep 1000 & echo $! > '${pidFile}'; wait`,
  ]);
  const s = await sb.runningSplit();
  Deno.writeTextFileSync(idFile, s.id);
  await waitFor("a's two tries", () => exists(res("st2")) && exists(res("st1")));
  const refusal =
    `marsh discard: refused: a branch cannot discard its own split or its siblings; ` +
    `only split ${s.id}'s creator may discard it: the host, from a session shell (marsh discard there). ` +
    `Nothing was changed\n`;
  for (const n of ["1", "2"]) {
    assert.equal(Deno.readTextFileSync(res(`st${n}`)), "1\n");
    assert.equal(Deno.readTextFileSync(res(`err${n}`)), refusal);
  }
  const m = await sb.split(s.id);
  assert.deepEqual(m?.branches.map((b) => b.state), ["running", "running"], "nothing changed");
  const pid = Number(Deno.readTextFileSync(pidFile).trim());
  assert.ok(await alive(pid));
  assert.equal((await mountsBelow(s.dir)).length, 3, "the base and two overlay forks");

  const r = await sb.marsh(["discard", s.id, "--reason", "wrong approach"]);
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, new RegExp(`^split ${s.id} discarded: 2 branches discarded`));
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 130, show(done));
  assert.ok(!(await alive(pid)), "b's sleep is gone");
  assert.deepEqual(await mountsBelow(s.dir), []);
  assert.ok(!exists(s.dir), "the split's directory is removed");
  const after = await sb.split(s.id);
  assert.equal(after?.state, "cancelled");
  assert.equal(after?.reason, "discarded by host: wrong approach");
  assert.deepEqual(
    after?.branches.map((b) => [b.label, b.state, b.discarded?.after, b.discarded?.reason]),
    [["a", "discarded", "cancelled", "wrong approach"], [
      "b",
      "discarded",
      "cancelled",
      "wrong approach",
    ]],
  );
  const join = await sb.marsh(["join"], { stdin: done.stdout });
  assert.equal(join.code, 130, show(join));
  assert.match(join.stderr, /was discarded \(discarded by host: wrong approach\): nothing to join/);
  // The record stays until marsh splits rm.
  const rm = await sb.marsh(["splits", "rm", s.id]);
  assert.equal(rm.code, 0, show(rm));
  assert.equal(await sb.split(s.id), undefined);
});

Deno.test({
  name: "marsh discard ID LABEL of a running Kit branch: its container gone, its job cancelled",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const gate = `${sb.scratch}/go`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `b=echo b > b.txt; ${held(gate)}`,
    ":::",
    "k",
    "fixture",
    "sleep",
    "600",
  ]);
  const job = await waitFor("the job's container", async () => {
    const j = (await w.jobs())[0];
    return j?.container ? j : undefined;
  });
  const id = job.split;
  w.splits.push(id);
  assert.equal((await w.containersOf(id)).length, 1);
  const r = await sb.marsh(["discard", id, "k", "--reason", "not needed"]);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stdout, `split ${id}: discarded branch k: its fork removed, out/ kept\n`);
  assert.deepEqual(await w.containersOf(id), [], "the container is gone");
  const [after] = (await w.jobs()).filter((j) => j.id === job.id);
  assert.deepEqual([after?.state, after?.cleanup], ["cancelled", "removed"]);
  const m = await w.manifest(id);
  assert.ok(!exists(`${m.dir}/k`), "its fork is gone");
  assert.deepEqual([branch(m, "k").state, branch(m, "k").discarded?.reason], [
    "discarded",
    "not needed",
  ]);
  assert.equal(branch(m, "b").state, "running");
  Deno.writeTextFileSync(gate, "");
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 0, show(done));
});

Deno.test({
  name:
    "marsh discard from a Kit job reaches the creator rule (a job resolves only the splits it made)",
  permissions: PERMISSIONS,
}, async () => {
  await using w = await World.create();
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    "env -i /run/marsh/bin/marsh discard zzzzzzzz > d.out 2>&1; echo $? >> d.out",
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const patch = Deno.readTextFileSync(`${m.out}/a/diff.patch`);
  assert.match(
    patch,
    /\n\+marsh discard: no split zzzzzzzz\n\+2\n/,
  );
});
