/**
 * Acceptance (issue 10 §6, "children die with the daemon"): after a
 * `kill -9` of the daemon, its split-filesystem service and worker are gone
 * (the service by its parent-death signal, the worker when its pipe
 * closes), and a new daemon ends whatever the last one left (recorded in
 * `children.json` by pid and start time) before its recovery, never a
 * process that merely reuses a recorded pid.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

const dec = new TextDecoder();

/** Every process as `ps` shows it: pid, parent, state and command line. */
async function ps(): Promise<{ pid: number; ppid: number; stat: string; args: string }[]> {
  const out = await new Deno.Command("ps", {
    args: ["-eo", "pid=,ppid=,stat=,args="],
    stdout: "piped",
  }).output();
  assert.equal(out.code, 0, "ps failed");
  return dec.decode(out.stdout).split("\n").flatMap((line) => {
    const m = /^\s*(\d+)\s+(\d+)\s+(\S+)\s+(.*)$/.exec(line);
    return m ? [{ pid: Number(m[1]), ppid: Number(m[2]), stat: m[3]!, args: m[4]! }] : [];
  });
}

/** Whether `pid` is a live process (a zombie has dropped its files and mounts: not live). */
async function alive(pid: number): Promise<boolean> {
  return (await ps()).some((p) => p.pid === pid && !p.stat.startsWith("Z"));
}

/** The daemon's children running `entry` (`splitfs/main.ts`, `worker/main.ts`). */
async function childOf(daemon: number, entry: string): Promise<number> {
  const found = (await ps()).filter((p) => p.ppid === daemon && p.args.includes(entry));
  assert.equal(found.length, 1, `${entry} children of ${daemon}: ${JSON.stringify(found)}`);
  return found[0]!.pid;
}

/** `/proc/<pid>/stat` field 22, through awk: Deno reads /proc only with --allow-all. */
async function startTime(pid: number): Promise<number> {
  const out = await new Deno.Command("awk", {
    args: ["{ print $22 }", `/proc/${pid}/stat`],
    stdout: "piped",
  }).output();
  assert.equal(out.code, 0, `no /proc/${pid}/stat`);
  return Number(dec.decode(out.stdout).trim());
}

/** Polls until `pid` is gone; returns how long that took. */
async function goneWithin(pid: number, ms: number, what: string): Promise<number> {
  const t0 = Date.now();
  await waitFor(`${what} (pid ${pid}) to be gone`, async () => !(await alive(pid)), ms);
  return Date.now() - t0;
}

Deno.test({
  name: "children: kill -9 mid-capture stops the service at once; splits rm then works at once",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const started = await sb.marsh(["daemon", "start"]);
  assert.equal(started.code, 0, show(started));
  const daemon = sb.daemonPid()!;
  const service = await childOf(daemon, "splitfs/main.ts");
  const worker = await childOf(daemon, "worker/main.ts");
  // A large change: its capture (a 30 MB text diff) takes seconds.
  const creator = sb.spawnMarsh(["split", "-n", "-b", "a=seq 1 4000000 > big.txt"]);
  const s = await waitFor("a running split", async () => (await sb.splits())[0]);
  const patch = `${s.dir}/out/a/diff.patch`;
  await waitFor("the capture to start", () => exists(patch), 60_000);
  Deno.kill(daemon, "SIGKILL");
  const took = await goneWithin(service, 1000, "the split-filesystem service");
  assert.ok(took <= 1000, `the service took ${took} ms`);
  // Nothing writes the patch any more.
  const size = Deno.statSync(patch).size;
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(Deno.statSync(patch).size, size, "the patch still grows");
  // The worker ends too: its pipe from the daemon closed.
  await goneWithin(worker, 15_000, "the worker");
  const lost = await finish(creator, "the creator's marsh split");
  assert.notEqual(lost.code, 0, show(lost));

  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  assert.equal((await sb.split(s.id))?.state, "uncertain");
  const t0 = Date.now();
  const rm = await sb.marsh(["splits", "rm", s.id]);
  assert.equal(rm.code, 0, show(rm));
  assert.ok(Date.now() - t0 < 5000, `splits rm took ${Date.now() - t0} ms`);
  assert.ok(!exists(s.dir));
});

Deno.test({
  name:
    "children: kill -9 mid-run ends the worker and its branch (its pipe closed), not only later",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/never`;
  const pidFile = `${sb.scratch}/branch.pid`;
  const started = await sb.marsh(["daemon", "start"]);
  assert.equal(started.code, 0, show(started));
  const daemon = sb.daemonPid()!;
  const worker = await childOf(daemon, "worker/main.ts");
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=echo $$ > '${pidFile}'; while [ ! -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  await sb.runningSplit();
  const branch = await waitFor("the branch's pid", () => {
    const text = exists(pidFile) ? Deno.readTextFileSync(pidFile).trim() : "";
    return text === "" ? undefined : Number(text);
  });
  Deno.kill(daemon, "SIGKILL");
  // The worker is busy (a branch runs): it cancels the branch (SIGINT) and exits.
  await goneWithin(worker, 15_000, "the worker");
  await goneWithin(branch, 1000, "the branch");
  await finish(creator, "the creator's marsh split");
  Deno.writeTextFileSync(gate, "");
});

Deno.test({
  name: "children: a new daemon kills the frozen worker a killed daemon left, before recovery",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/never`;
  const started = await sb.marsh(["daemon", "start"]);
  assert.equal(started.code, 0, show(started));
  const daemon = sb.daemonPid()!;
  const worker = await childOf(daemon, "worker/main.ts");
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=while [ ! -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  const s = await sb.runningSplit();
  // A frozen worker cannot see its pipe close: only the next daemon can end it.
  Deno.kill(worker, "SIGSTOP");
  Deno.kill(daemon, "SIGKILL");
  await finish(creator, "the creator's marsh split");
  await new Promise((r) => setTimeout(r, 500));
  assert.ok(await alive(worker), "the frozen worker is still there before the restart");

  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  assert.ok(!(await alive(worker)), "the old worker is gone once the new daemon serves");
  const log = Deno.readTextFileSync(`${sb.home}/marshd.log`);
  const killed = log.indexOf(
    `restart: the last daemon's worker (pid ${worker}) was still running: killed (SIGKILL)`,
  );
  const marked = log.indexOf(`restart: split ${s.id} run -> uncertain`);
  assert.ok(killed >= 0 && marked > killed, `killed before recovery:\n${log}`);
  Deno.writeTextFileSync(gate, "");
});

/** A `sleep` the test owns, and its start time. */
async function sleeper(): Promise<{ child: Deno.ChildProcess; pid: number; start: number }> {
  const child = new Deno.Command("sleep", { args: ["300"], stdout: "null" }).spawn();
  return { child, pid: child.pid, start: await startTime(child.pid) };
}

const REUSE_CASES = [
  { name: "a recorded child with its start time is killed", offset: 0, killed: true },
  { name: "a reused pid (another start time) is left alone", offset: 1, killed: false },
] as const;

for (const c of REUSE_CASES) {
  Deno.test({ name: `children: ${c.name}`, permissions: PERMISSIONS }, async () => {
    await using sb = await Sandbox.create();
    const p = await sleeper();
    try {
      Deno.mkdirSync(sb.home, { mode: 0o700 });
      Deno.writeTextFileSync(
        `${sb.home}/children.json`,
        JSON.stringify({
          v: 1,
          children: [{ role: "splitfs", pid: p.pid, start: p.start + c.offset }],
        }),
      );
      const started = await sb.marsh(["daemon", "start"]);
      assert.equal(started.code, 0, show(started));
      assert.equal(await alive(p.pid), !c.killed);
      const log = Deno.readTextFileSync(`${sb.home}/marshd.log`);
      assert.match(
        log,
        c.killed
          ? new RegExp(`service \\(pid ${p.pid}\\) was still running: killed`)
          : new RegExp(`service \\(pid ${p.pid}\\) was already gone`),
      );
    } finally {
      if (await alive(p.pid)) p.child.kill("SIGKILL");
      await p.child.status;
    }
  });
}
