/**
 * Acceptance (issue 14 §1, docs/checkpoints.md "Compaction"): deep session
 * stacks are compacted in the background through the real CLI, daemon and
 * splitfs service. 100 serial operations on one session, none refused; the
 * log (checkpoint ids, roots, parents, paths) the same before and after a
 * compaction; a rollback to a checkpoint from before it shows the same
 * bytes; `marsh commit` and `marsh show --patch` read a compacted stack;
 * `kill -9` of the service in the middle of a compaction leaves the
 * old stacks in use, and the next compaction removes the leftover copy and
 * finishes; `marsh gc` keeps every layer a checkpoint names.
 */

import assert from "node:assert/strict";
import { exists, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";

async function session(sb: Sandbox): Promise<SessionInfo> {
  const r = await sb.marsh(["sessions", "--json"]);
  assert.equal(r.code, 0, show(r));
  const [s] = (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
  assert.ok(s);
  return s;
}

async function log(sb: Sandbox): Promise<LogEntryInfo[]> {
  const r = await sb.marsh(["log", "--json", "--all"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { entries: LogEntryInfo[] }).entries;
}

/**
 * The log without what moves with the head (`head`, `on_head`) and without
 * the step times (kept in the daemon's memory only: `null` after a restart),
 * oldest first.
 */
function history(entries: readonly LogEntryInfo[]): unknown[] {
  return entries.map(({ head: _h, on_head: _o, timing_ms: _t, ...rest }) => rest).reverse();
}

/** Runs ops `from`..`to` (each appends its number to a.txt and writes f<n>); returns the first failure. */
async function ops(sb: Sandbox, from: number, to: number): Promise<string> {
  const r = await sb.bash(
    `for i in $(seq ${from} ${to}); do "$M" op -- bash -c "echo $i >> a.txt; echo $i > f$i" ` +
      `2>'${sb.scratch}/err' || { echo "$i $?"; cat '${sb.scratch}/err'; exit 0; }; done; echo none`,
    { timeoutMs: 300_000 },
  );
  assert.equal(r.code, 0, show(r));
  return r.stdout.trim();
}

/** The stack the session's view is pinned on (its dir's `layers`). */
function viewStack(sb: Sandbox): string[] {
  return Deno.readTextFileSync(`${sb.project}/.marsh/session/fix/layers`).split("\n")
    .filter((l) => l !== "");
}

function daemonLog(sb: Sandbox): string {
  return Deno.readTextFileSync(`${sb.home}/marshd.log`);
}

/** Waits for the `n`th journal rewrite of a compaction in the daemon's log. */
function compactions(sb: Sandbox, n: number): Promise<true> {
  return waitFor(
    `compaction ${n} to reach the journal`,
    () =>
      (daemonLog(sb).match(/compact fix: \d+ checkpoint stacks now start with /g) ?? []).length >=
        n,
    120_000,
  );
}

/** Pids of the split-filesystem service of this sandbox's daemon. */
async function servicePids(sb: Sandbox): Promise<number[]> {
  const r = await sb.bash("ps -eo pid=,args=");
  return r.stdout.split("\n").filter((l) => l.includes("splitfs/main.ts") && l.includes(sb.home))
    .map((l) => Number(l.trim().split(/\s+/)[0]));
}

Deno.test({
  name:
    "compaction: 100 serial ops on one session, none refused; the log unchanged by compaction; a rollback to before it shows the same bytes; gc keeps what checkpoints name",
  permissions: PERMISSIONS,
}, async () => {
  const files: Record<string, string> = { "a.txt": "0\n" };
  for (let i = 0; i < 200; i++) files[`src/m${i % 10}/f${i}.txt`] = `file ${i}\n`;
  await using sb = await Sandbox.create({ files });
  const s = await sb.marsh(["session", "start", "fix"]);
  assert.equal(s.code, 0, show(s));
  // 1 snapshot layer + 31: the head is at the threshold, nothing compacted yet.
  assert.equal(await ops(sb, 1, 31), "none");
  assert.equal(viewStack(sb).length, 32);
  const before = await log(sb);
  assert.doesNotMatch(daemonLog(sb), /compact fix/);
  // The 32nd op's bind leaves 33 layers: compacted in the background.
  assert.equal(await ops(sb, 32, 32), "none");
  await compactions(sb, 1);
  assert.match(daemonLog(sb), /compact fix: 33 layers into [a-z0-9]+ \(\d+ files, \d+ bytes/);
  const after = await log(sb);
  assert.deepEqual(
    history(after).slice(0, before.length),
    history(before),
    "checkpoint ids, roots, parents and paths do not change",
  );
  // The next op binds on the compacted stack; the view follows it.
  assert.equal(await ops(sb, 33, 33), "none");
  const short = viewStack(sb);
  assert.equal(short.length, 2, `the view's stack is the compacted layer and one: ${short}`);
  const view = (await session(sb)).view;
  assert.equal(Deno.readTextFileSync(`${view}/f33`), "33\n");
  assert.equal(Deno.readTextFileSync(`${view}/src/m3/f13.txt`), "file 13\n");

  // A rollback to a checkpoint from before the compaction: its old stack mounts, same bytes.
  const fifth = before.find((e) => e.operation?.argv.join(" ").includes("echo 5 >>"));
  assert.ok(fifth);
  const back = await sb.marsh(["rollback", fifth.checkpoint]);
  assert.equal(back.code, 0, show(back));
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "0\n1\n2\n3\n4\n5\n");
  assert.ok(!exists(`${view}/f6`));
  const head = after.find((e) => e.head)!;
  const forward = await sb.marsh([
    "rollback",
    (await log(sb)).find((e) => e.operation?.argv.join(" ").includes("echo 33 >>"))!.checkpoint,
  ]);
  assert.equal(forward.code, 0, show(forward));
  assert.ok(head);

  // The rest, up to 100: compaction keeps up, nothing is refused.
  assert.equal(await ops(sb, 34, 100), "none");
  const lines = Deno.readTextFileSync(`${view}/a.txt`).trim().split("\n");
  assert.equal(lines.length, 101);
  assert.equal(lines.at(-1), "100");
  const all = await log(sb);
  assert.equal(all.filter((e) => e.on_head).length, 101);
  assert.ok(viewStack(sb).length <= 33, `the head's stack stays short: ${viewStack(sb).length}`);

  // Promotion and patches read compacted stacks as any other.
  const top = all.find((x) => x.head)!;
  const commit = await sb.marsh(["commit", "--ref", "refs/heads/agent"]);
  assert.equal(commit.code, 0, show(commit));
  assert.equal((await sb.git("rev-parse", "refs/heads/agent^{tree}")).trim(), top.root);
  const patch = await sb.marsh(["show", "--patch", top.checkpoint]);
  assert.equal(patch.code, 0, show(patch));
  assert.match(patch.stdout, /\+100\n/);

  // gc keeps every layer a checkpoint names: every one still mounts.
  const gc = await sb.marsh(["gc"]);
  assert.equal(gc.code, 0, show(gc));
  for (const e of [fifth, all.find((x) => x.head)!]) {
    const r = await sb.marsh(["rollback", e.checkpoint]);
    assert.equal(r.code, 0, show(r));
  }
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`).trim().split("\n").length, 101);
});

Deno.test({
  name:
    "compaction: kill -9 of the service in the middle of one leaves the old stacks in use; the next one removes the leftover and finishes; gc keeps every named layer",
  permissions: PERMISSIONS,
}, async () => {
  // Enough files that the first 50 ms step can never copy them all (about 0.2 ms a file here):
  // with 400 a quiet machine sealed in the first step, and there was no partial copy to kill.
  const files: Record<string, string> = { "a.txt": "0\n" };
  for (let i = 0; i < 4000; i++) files[`src/f${i}.txt`] = `file ${i}\n`.repeat(20);
  await using sb = await Sandbox.create({ files });
  const started = await sb.marsh(["daemon", "start"], {
    env: { MARSH_TEST_PAUSE_AT: "compact-copying" },
  });
  assert.equal(started.code, 0, show(started));
  const s = await sb.marsh(["session", "start", "fix"]);
  assert.equal(s.code, 0, show(s));
  assert.equal(await ops(sb, 1, 32), "none");
  // The daemon stops after the first step: the service holds a partial copy.
  await waitFor("the compaction to pause", () => exists(`${sb.home}/paused-compact-copying`));
  const compactDir = `${sb.project}/.marsh/session/fix/compact`;
  const [partial] = [...Deno.readDirSync(compactDir)].map((e) => e.name);
  assert.ok(partial, "a compaction dir is there");
  const before = await log(sb);
  const stack = viewStack(sb);
  const service = await servicePids(sb);
  assert.equal(service.length, 1, `one service: ${service}`);
  Deno.kill(service[0]!, "SIGKILL");
  Deno.kill(sb.daemonPid()!, "SIGKILL");
  await waitFor("the service to end", async () => (await servicePids(sb)).length === 0);

  // Restarted: the journal's stacks are the old ones; the view mounts them.
  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  assert.deepEqual(history(await log(sb)), history(before));
  assert.deepEqual(viewStack(sb), stack, "the view is on the old stack");
  assert.ok(!exists(`${sb.project}/.marsh/layers/${partial}`), "nothing was sealed");
  const view = (await session(sb)).view;
  assert.equal(Deno.readTextFileSync(`${view}/f32`), "32\n");
  // The next op compacts again, from nothing; its leftover dir goes.
  assert.equal(await ops(sb, 33, 33), "none");
  await compactions(sb, 1);
  assert.ok(!exists(`${compactDir}/${partial}`), "the leftover copy is removed");
  assert.equal(await ops(sb, 34, 34), "none");
  assert.equal(viewStack(sb).length, 2);
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`).trim().split("\n").length, 35);
  const gc = await sb.marsh(["gc"]);
  assert.equal(gc.code, 0, show(gc));
  for (const id of [...stack, ...viewStack(sb)]) {
    assert.ok(exists(`${sb.project}/.marsh/layers/${id}`), `${id} is named: gc keeps it`);
  }
});
