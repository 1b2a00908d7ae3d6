/**
 * Acceptance (docs/checkpoints.md "An operation", step 3, DG-O05): an
 * operation ends when its whole process tree is gone, through the real CLI,
 * daemon, worker and splitfs service. A `setsid` descendant the command left
 * running keeps the operation open, and its late write is in the
 * checkpoint; when the worker loses track of the tree (its supervisor
 * killed under a running descendant), the operation ends `escaped`:
 * nothing is sealed, the head and the view do not move, and `marsh op`
 * says what happened and what to do.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";

async function session(sb: Sandbox): Promise<SessionInfo> {
  const r = await sb.marsh(["sessions", "--json"]);
  assert.equal(r.code, 0, show(r));
  const [s] = (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
  assert.ok(s);
  return s;
}

async function log(sb: Sandbox, ...args: string[]): Promise<LogEntryInfo[]> {
  const r = await sb.marsh(["log", "--json", ...args]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { entries: LogEntryInfo[] }).entries;
}

/** Every live process: pid, parent, command line (`ps`: Deno keeps /proc to `--allow-all`). */
async function processes(): Promise<{ pid: number; ppid: number; args: string }[]> {
  const out = await new Deno.Command("ps", {
    args: ["-eo", "pid=,ppid=,stat=,args="],
    stdout: "piped",
    stderr: "inherit",
  }).output();
  assert.equal(out.code, 0, "ps failed");
  const found = [];
  for (const line of new TextDecoder().decode(out.stdout).split("\n")) {
    const m = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    if (!m || m[3]!.startsWith("Z")) continue;
    found.push({ pid: Number(m[1]), ppid: Number(m[2]), args: m[4]!.trim() });
  }
  return found;
}

/** The live processes whose command line is exactly `cmd`. */
async function processesRunning(cmd: string): Promise<number[]> {
  return (await processes()).filter((p) => p.args === cmd).map((p) => p.pid);
}

Deno.test({
  name: "marsh op: a setsid descendant keeps the operation open; its late write is checkpointed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const start = await sb.marsh(["session", "start", "fix"]);
  assert.equal(start.code, 0, show(start));
  const t0 = Date.now();
  // The command exits at once; what it left writes two seconds later.
  const r = await sb.marsh([
    "op",
    "--",
    "sh",
    "-c",
    `setsid sh -c 'sleep 2; echo late > late.txt' & echo early > early.txt; exit 0`,
  ]);
  assert.equal(r.code, 0, show(r));
  assert.ok(Date.now() - t0 >= 2_000, "marsh op waited for the descendant");
  // While it waited, it said on what (the worker's report, about a second after the exit).
  assert.match(
    r.stderr,
    /^marsh: the command exited, but 2 processes it started still run: \d+ \(.+\), \d+ \(.+\); the operation ends, and is checkpointed, when they have ended \(Ctrl-C stops them\)\n/m,
  );
  assert.match(r.stderr, /\(sh -c sleep 2; echo late > late\.txt\)/);
  assert.match(r.stderr, /\(sleep 2\)/);
  assert.match(r.stderr, /marsh: checkpoint [0-9a-f]{64} \(2 paths changed\)\n$/);
  const [e] = await log(sb);
  assert.deepEqual(e!.paths, [
    { path: "early.txt", change: "added" },
    { path: "late.txt", change: "added" },
  ]);
  assert.equal(e!.operation?.disposition, "sealed");
  const s = await session(sb);
  assert.equal(Deno.readTextFileSync(`${s.view}/late.txt`), "late\n");
});

for (const drain of ["cgroup", "subreaper"] as const) {
  Deno.test({
    name:
      `marsh op: the worker loses track of a running descendant (${drain}): escaped, nothing sealed, the head unchanged`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create({
      env: drain === "subreaper" ? { MARSH_WORKER_FORCE_SUBREAPER: "1" } : {},
    });
    const start = await sb.marsh(["session", "start", "fix"]);
    assert.equal(start.code, 0, show(start));
    const s0 = await session(sb);
    const ready = `${sb.scratch}/ready`;
    // A descendant in a session of its own that writes after the command exited.
    const sleeper = drain === "cgroup" ? "sleep 37.25" : "sleep 2.25";
    const child = sb.spawnMarsh([
      "op",
      "--",
      "sh",
      "-c",
      `setsid sh -c '${sleeper}; echo late > late.txt' & echo early > early.txt; touch '${ready}'`,
    ]);
    await waitFor("the command to run", () => exists(ready));
    // Once the command has exited, the descendant's parent is the supervisor (a subreaper).
    const supervisor = await waitFor("the descendant to be the supervisor's", async () => {
      const all = await processes();
      const byPid = new Map(all.map((p) => [p.pid, p]));
      const sleep = all.find((p) => p.args === sleeper);
      // sleep's parent is the `sh -c` setsid made, whose parent becomes the supervisor.
      const up = byPid.get(byPid.get(sleep?.ppid ?? 0)?.ppid ?? 0);
      return up !== undefined && /\bperl\b/.test(up.args) ? up.pid : undefined;
    });
    Deno.kill(supervisor, "SIGKILL");
    const r = await finish(child, "the escaped marsh op");
    try {
      assert.equal(r.code, 125, show(r));
      assert.match(
        r.stderr,
        new RegExp(
          `^marsh op: the operation escaped: the supervisor of attempt o-[a-z0-9-]+ was killed by SIGKILL; ${
            drain === "cgroup"
              ? "every process left in its cgroup was killed"
              : "processes of the attempt may still be running"
          }; `,
        ),
      );
      assert.match(
        r.stderr,
        /; its process tree was not seen to end, so nothing was checkpointed and session fix's head did not move: make sure nothing the command started still runs \(ps -ef\), then run the command again\n$/,
      );
      const s = await session(sb);
      assert.equal(s.head, s0.head, "the head did not move");
      assert.equal(s.view_root, s0.root, "the view did not move");
      assert.ok(!exists(`${s.view}/early.txt`), "nothing was sealed");
      // Its overlay is gone (nothing will seal it), before the answer.
      assert.deepEqual([...Deno.readDirSync(`${sb.project}/.marsh/session/fix/op`)], []);
      assert.match(Deno.readTextFileSync(`${sb.home}/marshd.log`), /op o-[a-z0-9-]+: escaped: /);
      assert.equal((await log(sb, "--all")).length, 1, "no checkpoint was added");
      if (drain === "cgroup") {
        // What was left running in the attempt's cgroup was ended with it.
        await waitFor(
          "the descendant to be gone",
          async () => (await processesRunning(sleeper)).length === 0,
        );
      } else {
        // Truly escaped: it runs on, and its late write reaches nothing a checkpoint or the
        // project shows.
        assert.equal((await processesRunning(sleeper)).length, 1, "the descendant runs on");
        await waitFor(
          "the descendant to end",
          async () => (await processesRunning(sleeper)).length === 0,
        );
      }
      await new Promise((res) => setTimeout(res, 200));
      assert.ok(!exists(`${s.view}/late.txt`) && !exists(`${sb.project}/late.txt`));
      assert.equal((await session(sb)).head, s0.head);
      // The session takes the next operation.
      const next = await sb.marsh(["op", "--", "touch", "n.txt"]);
      assert.equal(next.code, 0, show(next));
    } finally {
      for (const pid of await processesRunning(sleeper)) Deno.kill(pid, "SIGKILL");
    }
  });
}
