/**
 * Acceptance (issue 14 §4): `kill -9` of the daemon at each step of an
 * operation (`MARSH_TEST_PAUSE_AT`: the daemon writes
 * `<control dir>/paused-<step>` and stops there), then two starts of the
 * daemon: recovery settles the operation once (docs/checkpoints.md
 * "Recovery"), never runs the command again, and the second start finds
 * nothing more to do. The project's own tree is never written.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import { assertUnchanged, picture } from "./_resolve.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";

/** Each step, and whether the operation's checkpoint exists after recovery. */
const STEPS: Readonly<Record<string, { bound: boolean; state: RegExp }>> = {
  // Recorded, maybe launched: only a person can say; nothing is published.
  "op-recorded": { bound: false, state: /recorded -> recovery-required \(require\)/ },
  // Drained: captured again from its upper dir, sealed and bound.
  "op-drained": { bound: true, state: /drained -> bound \(capture\)/ },
  // Intent journaled, layer not sealed: sealed again, then bound.
  "op-intent": { bound: true, state: /sealing -> bound \(reseal\)/ },
  // Layer sealed, head not moved: bound.
  "op-sealed": { bound: true, state: /sealing -> bound \(bind\)/ },
  // Bound: nothing to do; the view shows it after the restart.
  "op-bound": { bound: true, state: /^$/ },
};

async function sessions(sb: Sandbox): Promise<SessionInfo[]> {
  const r = await sb.marsh(["sessions", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
}

async function log(sb: Sandbox): Promise<LogEntryInfo[]> {
  const r = await sb.marsh(["log", "--json", "--all"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { entries: LogEntryInfo[] }).entries;
}

function restartLines(sb: Sandbox): string {
  return Deno.readTextFileSync(`${sb.home}/marshd.log`).split("\n")
    .filter((l) => l.includes("restart: operation")).join("\n");
}

for (const [step, expected] of Object.entries(STEPS)) {
  Deno.test({
    name: `kill -9 of the daemon at ${step}: recovery settles the operation once, never reruns it`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
    const before = picture(sb.project, { withGit: true });
    const started = await sb.marsh(["daemon", "start"], { env: { MARSH_TEST_PAUSE_AT: step } });
    assert.equal(started.code, 0, show(started));
    const s = await sb.marsh(["session", "start", "fix"]);
    assert.equal(s.code, 0, show(s));
    const [fix] = await sessions(sb);
    // Counts its runs outside the session: a rerun would show.
    const runs = `${sb.scratch}/runs`;
    const op = sb.spawnMarsh(["op", "--", "bash", "-c", `echo run >> '${runs}'; echo x >> n.txt`]);
    await waitFor(`the daemon to pause at ${step}`, () => exists(`${sb.home}/paused-${step}`));
    const pid = sb.daemonPid();
    assert.ok(pid);
    Deno.kill(pid, "SIGKILL");
    const lost = await finish(op, "the interrupted marsh op");
    assert.notEqual(lost.code, 0, show(lost));

    for (const round of [1, 2]) {
      const restarted = await sb.marsh(["daemon", "start"]);
      assert.equal(restarted.code, 0, show(restarted));
      const lines = restartLines(sb);
      if (round === 1) assert.match(lines, expected.state, `round 1: ${lines}`);
      else assert.equal(lines, "", `round 2 settles nothing more: ${lines}`);
      const [now] = await sessions(sb);
      const entries = await log(sb);
      if (expected.bound) {
        assert.equal(entries.length, 2, JSON.stringify(entries));
        assert.equal(entries[0]!.checkpoint, now!.head);
        assert.deepEqual(entries[0]!.paths, [{ path: "n.txt", change: "added" }]);
        assert.equal(Deno.readTextFileSync(`${now!.view}/n.txt`), "x\n", "the view shows it");
        assert.equal(now!.view_root, now!.root);
      } else {
        assert.equal(entries.length, 1);
        assert.equal(now!.head, fix!.head, "the head did not move");
        assert.ok(!exists(`${now!.view}/n.txt`));
      }
      const ran = exists(runs) ? Deno.readTextFileSync(runs) : "";
      assert.ok(ran === "" || ran === "run\n", `the command ran at most once: ${ran}`);
      const stopped = await sb.marsh(["daemon", "stop"]);
      assert.equal(stopped.code, 0, show(stopped));
      Deno.writeTextFileSync(`${sb.home}/marshd.log`, "");
    }

    // The session goes on: the next operation runs on the recovered head.
    const next = await sb.marsh(["op", "--", "bash", "-c", "echo y >> n.txt"]);
    assert.equal(next.code, 0, show(next));
    const [after] = await sessions(sb);
    assert.equal(
      Deno.readTextFileSync(`${after!.view}/n.txt`),
      expected.bound ? "x\ny\n" : "y\n",
    );
    assertUnchanged(sb.project, before, "the project", { withGit: true });
  });
}

Deno.test({
  name: "kill -9 of the daemon while the command runs: recovery makes it escaped, never sealed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "a\n" } });
  const s = await sb.marsh(["session", "start", "fix"]);
  assert.equal(s.code, 0, show(s));
  const [fix] = await sessions(sb);
  const ready = `${sb.scratch}/ready`, gate = `${sb.scratch}/gate`;
  const op = sb.spawnMarsh([
    "op",
    "--",
    "bash",
    "-c",
    `echo x > n.txt; touch '${ready}'; while [ ! -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  try {
    await waitFor("the command to run", () => exists(ready));
    const pid = sb.daemonPid();
    assert.ok(pid);
    Deno.kill(pid, "SIGKILL");
    const lost = await finish(op, "the interrupted marsh op");
    assert.notEqual(lost.code, 0, show(lost));
    for (const round of [1, 2]) {
      const restarted = await sb.marsh(["daemon", "start"]);
      assert.equal(restarted.code, 0, show(restarted));
      const lines = restartLines(sb);
      if (round === 1) assert.match(lines, /launched -> escaped \(escape\)/, lines);
      else assert.equal(lines, "", `round 2 settles nothing more: ${lines}`);
      const [now] = await sessions(sb);
      assert.equal(now!.head, fix!.head, "nothing was sealed");
      assert.equal((await log(sb)).length, 1);
      const stopped = await sb.marsh(["daemon", "stop"]);
      assert.equal(stopped.code, 0, show(stopped));
      Deno.writeTextFileSync(`${sb.home}/marshd.log`, "");
    }
    const next = await sb.marsh(["op", "--", "touch", "m.txt"]);
    assert.equal(next.code, 0, show(next));
  } finally {
    // Whatever of the command outlived its daemon ends now.
    Deno.writeTextFileSync(gate, "");
  }
});
