/**
 * A daemon restart mid-tree (docs/rules.md "Kit jobs"), with the real CLI,
 * daemon, worker and Docker: `kill -9` of the daemon (and its worker, so
 * the containers outlive them) while a split's job runs a nested split's
 * job and a `marsh run` job runs a child. The root clients exit 125 with
 * `job uncertain`; after the restart every job is `uncertain` with cleanup
 * `uncertain` and a revoked capability, nothing runs again, the slots stay
 * held (the daemon's pool of 8 jobs admits only what is left), and `marsh
 * workers reset KIT` removes the containers and releases them. A shell
 * branch whose end a restart left unknown keeps its slot too, until its
 * supervisor is seen gone.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  exists,
  finish,
  handleId,
  PERMISSIONS as permissions,
  Sandbox,
  show,
  waitFor,
} from "./_acceptance.ts";
import { listContainers } from "./_engine.ts";
import { pidsNaming, World } from "./_kit_world.ts";

function query<T>(w: World, sql: string): T[] {
  const db = new DatabaseSync(`${w.sb.home}/journal.db`, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

function starts(home: string): string[] {
  try {
    return Deno.readTextFileSync(`${home}/starts`).split("\n").filter((l) => l !== "").sort();
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
}

Deno.test({
  name:
    "tree restart: kill -9 mid-tree: every job uncertain, nothing rerun, slots held until reset",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const home = `${sb.home}/kits/fixture/home`;
  const m = "/run/marsh/bin/marsh";
  // A split's job a, whose nested split runs job n.
  const split = sb.spawnMarsh([
    "split",
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    `${m} split -n ::: n fixture sh -c 'echo n >> "$HOME/starts"; sleep 600' > /dev/null 2>&1 & ` +
    `echo a >> "$HOME/starts"; sleep 600`,
  ]);
  // A marsh run job r, whose child rc it started with marsh run.
  const run = sb.spawnMarsh([
    "run",
    "fixture",
    "sh",
    "-c",
    `${m} run fixture sh -c 'echo rc >> "$HOME/starts"; sleep 600' < /dev/null > /dev/null 2>&1 & ` +
    `echo r >> "$HOME/starts"; sleep 600`,
  ]);
  await waitFor("four jobs running", () => {
    const running = query<{ n: number }>(
      w,
      "SELECT count(*) AS n FROM jobs WHERE state = 'running' AND container IS NOT NULL",
    )[0]!.n;
    return running === 4 && starts(home).length === 4;
  }, 120_000);
  assert.deepEqual(starts(home), ["a", "n", "r", "rc"]);
  const splitIds = query<{ split: string }>(w, "SELECT DISTINCT split FROM jobs WHERE split <> ''");
  w.splits.push(...splitIds.map((s) => s.split), "run");

  const workers = await pidsNaming("worker/main.ts", sb.home);
  assert.equal(workers.length, 1, `worker pids ${workers}`);
  // Frozen first, then killed: neither may see the other go and stop the containers.
  const daemon = sb.daemonPid()!;
  for (const pid of [workers[0]!, daemon]) Deno.kill(pid, "SIGSTOP");
  for (const pid of [workers[0]!, daemon]) Deno.kill(pid, "SIGKILL");

  // The root clients of both trees: 125, job uncertain.
  const lostSplit = await finish(split, "the split's client");
  assert.equal(lostSplit.code, 125, show(lostSplit));
  assert.match(lostSplit.stderr, /^marsh split: job uncertain: /m);
  const lostRun = await finish(run, "the run's client");
  assert.equal(lostRun.code, 125, show(lostRun));
  assert.match(lostRun.stderr, /job uncertain/);

  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  const jobs = query<{ state: string; cleanup: string; cap: string; depth: number }>(
    w,
    "SELECT state, cleanup, cap, depth FROM jobs ORDER BY depth",
  );
  assert.deepEqual(jobs.map((j) => [j.depth, j.state, j.cleanup, j.cap]), [
    [1, "uncertain", "uncertain", "revoked"],
    [1, "uncertain", "uncertain", "revoked"],
    [2, "uncertain", "uncertain", "revoked"],
    [2, "uncertain", "uncertain", "revoked"],
  ]);
  // Nothing is run again, now or a little later.
  await new Promise((r) => setTimeout(r, 1000));
  assert.deepEqual(starts(home), ["a", "n", "r", "rc"]);

  // The four slots are held: of five new jobs (alive while the others start), four fit in the pool of 8.
  const five = Array.from({ length: 5 }, (_, i) => [":::", `f${i}`, "fixture", "sleep", "8"])
    .flat();
  const full = await w.split(["-n", ...five]);
  assert.equal(full.code, 125, show(full));
  w.splits.push(handleId(full.stdout));
  assert.match(
    full.stderr,
    /branch f4: failed: capacity: 8 jobs \(4 held by uncertain jobs on Kit fixture: run marsh workers reset fixture\)/,
  );

  const reset = await sb.marsh(["workers", "reset", "fixture"]);
  assert.equal(reset.code, 0, show(reset));
  for (const label of [...splitIds.map((s) => `marsh.split=${s.split}`), "marsh.split=run"]) {
    // This daemon's only: the engine is shared with test files running in parallel.
    assert.deepEqual(await listContainers(w.socket, [label, `marsh.owner=${sb.home}`]), [], label);
  }
  const after = query<{ cleanup: string }>(w, "SELECT cleanup FROM jobs WHERE depth IS NOT NULL");
  assert.equal(after.filter((j) => j.cleanup === "uncertain").length, 0);
  // Released: five jobs at once fit now.
  const again = await w.split(["-n", ...five]);
  assert.equal(again.code, 0, show(again));
  w.splits.push(handleId(again.stdout));
});

function alive(pid: number): boolean {
  try {
    Deno.kill(pid, "SIGCONT");
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

Deno.test({
  name: "restart: kill -9 mid shell branch: its slot stays held until its supervisor is gone",
  permissions,
}, async () => {
  await using sb = await Sandbox.create();
  const marker = `${sb.scratch}/up`;
  // The branch ignores SIGINT: only its supervisor's SIGKILL ends it.
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `s=trap '' INT; echo up > '${marker}'; while :; do sleep 0.1; done`,
  ]);
  const home = sb.home;
  const supervisor = await waitFor("the branch and its supervisor's record", () => {
    if (!exists(marker)) return undefined;
    const db = new DatabaseSync(`${home}/journal.db`, { readOnly: true });
    try {
      return (db.prepare("SELECT pid FROM shell_supervisors").get() as { pid: number } | undefined)
        ?.pid;
    } finally {
      db.close();
    }
  });
  const eight = Array.from({ length: 8 }, (_, i) => ["-b", `x${i}=true`]).flat();
  // Frozen, the supervisor can neither end the branch nor exit: its end stays unknown.
  Deno.kill(supervisor, "SIGSTOP");
  try {
    Deno.kill(sb.daemonPid()!, "SIGKILL");
    const lost = await finish(creator, "the creator's marsh split");
    assert.equal(lost.code, 125, show(lost));
    assert.match(lost.stderr, /^marsh split: job uncertain: /m);
    const restarted = await sb.marsh(["daemon", "start"]);
    assert.equal(restarted.code, 0, show(restarted));

    // Held: of eight new shell branches, seven fit in the host's pool.
    const full = await sb.marsh(["split", "-n", ...eight]);
    assert.equal(full.code, 125, show(full));
    const fm = await sb.split(handleId(full.stdout));
    assert.deepEqual(
      fm?.branches.map((b) => b.status),
      [...Array(7).fill("exited 0"), "failed: capacity"],
    );
  } finally {
    // Thawed, it ends the branch by itself (SIGINT, 10 s, SIGKILL) and exits.
    Deno.kill(supervisor, "SIGCONT");
  }

  // Once it is gone, the slot frees.
  await waitFor("the supervisor to be gone", () => !alive(supervisor), 60_000);
  await waitFor("the slot to be released", () => {
    const db = new DatabaseSync(`${home}/journal.db`, { readOnly: true });
    try {
      return db.prepare("SELECT ended_ms FROM shell_supervisors").all()
        .every((r) => (r as { ended_ms: number | null }).ended_ms !== null);
    } finally {
      db.close();
    }
  }, 10_000);
  assert.match(
    Deno.readTextFileSync(`${home}/marshd.log`),
    /its supervisor \(pid \d+\) is gone, so is every process of it: its slot is free/,
  );
  const after = await sb.marsh(["split", "-n", ...eight]);
  assert.equal(after.code, 0, show(after));
});
