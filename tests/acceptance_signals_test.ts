/**
 * Acceptance (docs/rules.md "Terminal and signals", docs/rules.md "Cancel"): Ctrl-C at
 * the client, a client that dies, the operator's `marsh splits cancel`,
 * `marsh splits rm` and `marsh status`, and one daemon per control dir when
 * CLIs start it at once — through the real CLI and daemon.
 */

import assert from "node:assert/strict";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

/** A branch script that records its pid and then waits until the test creates `gate`. */
function held(sb: Sandbox, label: string, gate = `${sb.scratch}/never`): string {
  return `echo $$ > '${sb.scratch}/pid-${label}'; while [ ! -e '${gate}' ]; do sleep 0.05; done`;
}

/** Whether the branch shell that wrote `pid-<label>` is still alive. */
async function branchAlive(sb: Sandbox, label: string): Promise<boolean> {
  const r = await sb.bash(`kill -0 "$(cat '${sb.scratch}/pid-${label}')" 2>/dev/null`);
  return r.code === 0;
}

Deno.test({
  name: "Ctrl-C at marsh split: exit 130, branches ended (an INT trap by SIGKILL), split removed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: { MARSH_CANCEL_GRACE_MS: "500" } });
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `plain=echo $$ > '${sb.scratch}/pid-plain'; sleep 30`,
    "-b",
    `trap=trap 'echo got INT' INT; ${held(sb, "trap")}`,
  ]);
  const s = await sb.runningSplit();
  await waitFor("both branches to record their pids", () => exists(`${sb.scratch}/pid-trap`));
  const sent = Date.now();
  creator.kill("SIGINT");
  const r = await finish(creator, "the interrupted marsh split");
  // The trap outlives SIGINT; only the 500 ms grace and SIGKILL end it (the default grace is 10 s).
  assert.ok(Date.now() - sent < 8_000, `took ${Date.now() - sent} ms`);
  assert.equal(r.code, 130, show(r));
  assert.match(r.stderr, /marsh split: cancelling/);
  assert.match(r.stderr, new RegExp(`split ${s.id} cancelled: cancelled by the creator`));
  const after = await sb.split(s.id);
  assert.equal(after?.state, "cancelled");
  assert.deepEqual(after.branches.map((b) => b.status), ["cancelled", "cancelled"]);
  assert.ok(!exists(s.dir), "every end was confirmed: the split's directory is removed");
  assert.equal(await branchAlive(sb, "plain"), false);
  assert.equal(await branchAlive(sb, "trap"), false);
});

Deno.test({
  name: "a marsh split killed with SIGKILL drops its stream, which cancels the split",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const creator = sb.spawnMarsh(["split", "-n", "-b", `a=${held(sb, "a")}`]);
  const s = await sb.runningSplit();
  await waitFor("the branch to record its pid", () => exists(`${sb.scratch}/pid-a`));
  creator.kill("SIGKILL");
  await finish(creator, "the killed marsh split");
  const cancelled = await waitFor("the split to be cancelled", async () => {
    const m = await sb.split(s.id);
    return m?.state === "cancelled" ? m : undefined;
  });
  assert.equal(cancelled.reason, "the creator's stream was dropped");
  assert.equal(cancelled.branches[0]?.status, "cancelled");
  assert.ok(!exists(s.dir));
  assert.equal(await branchAlive(sb, "a"), false);
});

Deno.test({
  name: "marsh splits cancel, marsh splits rm of a kept split, and marsh status --json counts",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const counts = async () => {
    const r = await sb.marsh(["status", "--json"]);
    assert.equal(r.code, 0, show(r));
    return (JSON.parse(r.stdout) as { splits: Record<string, number> }).splits;
  };

  const none = await sb.marsh(["status", "--json"]);
  assert.equal(none.stdout, '{"daemon":null}\n', "status starts no daemon");

  const kept = await sb.bash(`"$M" split -n -b a='echo k > k.txt; exit 1' | "$M" join`);
  assert.equal(kept.code, 0, show(kept));
  const keptId = /split ([a-z0-9]+) kept: branch a: exited 1; remove it with: marsh splits rm \1$/m
    .exec(kept.stderr)?.[1];
  assert.ok(keptId, show(kept));
  const awaiting = handleId((await sb.marsh(["split", "-n", "-b", "a=true"])).stdout);
  const creator = sb.spawnMarsh(["split", "-n", "-b", `a=${held(sb, "r")}`]);
  const running = await sb.runningSplit();
  assert.deepEqual(await counts(), { active: 1, awaiting: 1, kept: 1 });

  const rmRunning = await sb.marsh(["splits", "rm", running.id]);
  assert.equal(rmRunning.code, 2, show(rmRunning));
  assert.match(
    rmRunning.stderr,
    new RegExp(`cancel it first with: marsh splits cancel ${running.id}`),
  );
  const cancel = await sb.marsh(["splits", "cancel", running.id]);
  assert.equal(cancel.code, 0, show(cancel));
  const ended = await finish(creator, "the cancelled marsh split");
  assert.equal(ended.code, 130, show(ended));
  const cancelled = await sb.split(running.id);
  assert.equal(cancelled?.state, "cancelled");
  assert.equal(cancelled.reason, "cancelled with marsh splits cancel");
  assert.ok(!exists(running.dir));
  assert.equal(await branchAlive(sb, "r"), false);
  const again = await sb.marsh(["splits", "cancel", running.id]);
  assert.equal(again.code, 2, show(again));
  assert.match(again.stderr, /is not running \(state cancelled\)/);
  assert.deepEqual(await counts(), { active: 0, awaiting: 1, kept: 1 });

  const keptDir = (await sb.split(keptId))?.dir;
  assert.ok(keptDir && exists(`${keptDir}/a`));
  const rm = await sb.marsh(["splits", "rm", keptId]);
  assert.equal(rm.code, 0, show(rm));
  assert.equal(rm.stdout, `split ${keptId} removed\n`);
  assert.ok(!exists(keptDir));
  assert.equal(await sb.split(keptId), undefined);
  assert.deepEqual(await counts(), { active: 0, awaiting: 1, kept: 0 });
  const gone = await sb.marsh(["splits", "rm", keptId]);
  assert.equal(gone.code, 2, show(gone));
  assert.match(gone.stderr, new RegExp(`no split ${keptId}`));
  assert.equal((await sb.split(awaiting))?.state, "await");
});

Deno.test({
  name: "CLIs that start the daemon at the same moment leave one daemon per control dir",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const results = await Promise.all([
    ...Array.from({ length: 3 }, () => sb.marsh(["daemon", "start"])),
    ...Array.from({ length: 3 }, () => sb.marsh(["splits", "--json"])),
  ]);
  for (const r of results) assert.equal(r.code, 0, show(r));
  const pids = new Set(
    results.flatMap((
      r,
    ) => [...r.stdout.matchAll(/marshd (?:started|already running) \(pid (\d+)\)/g)])
      .map((m) => Number(m[1])),
  );
  assert.deepEqual([...pids], [sb.daemonPid()]);
  const log = Deno.readTextFileSync(`${sb.home}/marshd.log`);
  assert.equal(log.match(/ serving /g)?.length, 1, log);
  // The one daemon has the socket: it stops, and nothing of this control dir is left running.
  const stop = await sb.marsh(["daemon", "stop"]);
  assert.equal(stop.code, 0, show(stop));
  await waitFor("every daemon of the control dir to end", async () => {
    const r = await sb.bash(`ps -eo args | grep -F -- "--allow-read=$MARSH_HOME" | grep -vc grep`);
    return r.stdout.trim() === "0";
  }, 15_000);
});
