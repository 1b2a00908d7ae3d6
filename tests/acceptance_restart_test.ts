/**
 * Acceptance (docs/rules.md "Life cycle and restart", issue 3 §3): `kill -9` of the
 * daemon at each step boundary of a split, then a fresh daemon. The split
 * is uncertain, launched branches uncertain and untrusted, unlaunched ones
 * cancelled, forks kept, and nothing runs again.
 *
 * The daemon's test hook `MARSH_TEST_PAUSE_AT=<step>` makes it write
 * `<control dir>/paused-<step>` and stop there.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

type Step = "before-snapshot" | "after-snapshot" | "mid-run" | "mid-capture" | "after-capture";

/** What each step leaves behind. */
const EXPECTED: Record<Step, {
  /** Branch state after the restart. */
  readonly branch: "cancelled" | "uncertain" | "captured";
  /** Whether the branches ran (once each). */
  readonly ran: boolean;
  /** Whether the split dir (snapshot, and forks when `ran`) is on disk. */
  readonly dir: boolean;
}> = {
  "before-snapshot": { branch: "cancelled", ran: false, dir: false },
  "after-snapshot": { branch: "cancelled", ran: false, dir: true },
  "mid-run": { branch: "uncertain", ran: true, dir: true },
  "mid-capture": { branch: "uncertain", ran: true, dir: true },
  "after-capture": { branch: "captured", ran: true, dir: true },
};

function lines(path: string): string[] {
  return exists(path) ? Deno.readTextFileSync(path).split("\n").filter((l) => l !== "") : [];
}

for (const [step, expected] of Object.entries(EXPECTED) as [Step, typeof EXPECTED[Step]][]) {
  Deno.test({
    name: `restart: kill -9 at ${step} gives uncertain and untrusted, with no replay`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create();
    const counter = `${sb.scratch}/runs`;
    const gate = `${sb.scratch}/never`;
    const started = await sb.marsh(["daemon", "start"], { env: { MARSH_TEST_PAUSE_AT: step } });
    assert.equal(started.code, 0, show(started));
    const oldPid = sb.daemonPid();
    assert.ok(oldPid);

    // Mid-run, the branches must still be running when the daemon dies;
    // mid-capture and after, they must have ended for capture to start.
    const hold = step === "mid-run" ? `while [ ! -e '${gate}' ]; do sleep 0.05; done` : "true";
    const creator = sb.spawnMarsh([
      "split",
      "-n",
      "-b",
      `a=echo a >> '${counter}'; echo a > a.out; ${hold}`,
      "-b",
      `b=echo b >> '${counter}'; ${hold}`,
    ]);
    await waitFor(`the daemon to pause at ${step}`, () => exists(`${sb.home}/paused-${step}`));
    if (expected.ran) {
      await waitFor("both branches to start", () => lines(counter).length === 2);
    }
    Deno.kill(oldPid, "SIGKILL");
    const lost = await finish(creator, "the creator's marsh split");
    assert.notEqual(lost.code, 0, show(lost));
    assert.equal(lost.stdout, "", "no handle for a split whose end is unknown");
    const id =
      /^marsh split: job uncertain: .* before split ([a-z0-9]+) finished; see marsh splits \1$/m
        .exec(lost.stderr)?.[1];
    assert.equal(lost.code, 125, show(lost));
    assert.ok(id, show(lost));

    const restarted = await sb.marsh(["daemon", "start"]);
    assert.equal(restarted.code, 0, show(restarted));
    assert.notEqual(sb.daemonPid(), oldPid);
    const s = await sb.split(id);
    assert.ok(s);
    assert.equal(s.state, "uncertain");
    assert.equal(s.reason, "daemon restarted");
    assert.deepEqual(s.branches.map((b) => b.label), ["a", "b"]);
    for (const b of s.branches) {
      assert.equal(b.state, expected.branch, `branch ${b.label}`);
      if (expected.branch === "uncertain") assert.equal(b.trust, "untrusted");
      if (expected.branch === "cancelled") assert.equal(b.status, "cancelled");
      if (expected.branch === "captured") assert.equal(b.status, "exited 0");
      assert.equal(exists(b.fork), expected.ran, `fork ${b.fork}`);
    }
    assert.equal(exists(s.dir), expected.dir, `split dir ${s.dir}`);
    if (expected.ran) assert.equal(Deno.readTextFileSync(`${s.dir}/a/a.out`), "a\n");

    // Nothing is resumed or replayed: the fresh daemon runs no branch, now or a little later.
    assert.deepEqual(lines(counter).sort(), expected.ran ? ["a", "b"] : []);
    await new Promise((r) => setTimeout(r, 500));
    assert.deepEqual(lines(counter).sort(), expected.ran ? ["a", "b"] : []);
    assert.equal((await sb.split(id))?.state, "uncertain");
    // Issue 15 changes this: the root client of an interrupted tree exits 125, `job uncertain`.
    const join = await sb.marsh(["join"], { stdin: `{"marsh_split":1,"id":"${id}"}\n` });
    assert.equal(join.code, 125, show(join));
    assert.match(
      join.stderr,
      /^marsh join: job uncertain: split [a-z0-9]+ was running when the daemon restarted/,
    );

    if (expected.dir) {
      // The operator can still remove what was kept.
      const rm = await sb.marsh(["splits", "rm", id]);
      assert.equal(rm.code, 0, show(rm));
      assert.ok(!exists(s.dir));
    }
  });
}

Deno.test({
  name: "restart: kill -9 mid-release keeps the split, still joinable, nothing removed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const started = await sb.marsh(["daemon", "start"], {
    env: { MARSH_TEST_PAUSE_AT: "mid-release" },
  });
  assert.equal(started.code, 0, show(started));
  const oldPid = sb.daemonPid();
  assert.ok(oldPid);
  const split = await sb.marsh(["split", "-n", "-b", "a=echo a > a.txt"]);
  assert.equal(split.code, 0, show(split));
  const id = JSON.parse(split.stdout.trim()).id as string;
  const joiner = sb.spawnMarsh(["join", "--", "true"], { stdin: split.stdout });
  await waitFor("the daemon to pause mid-release", () => exists(`${sb.home}/paused-mid-release`));
  Deno.kill(oldPid, "SIGKILL");
  const lost = await finish(joiner, "the joiner");
  assert.notEqual(lost.code, 0, show(lost));

  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  const s = await sb.split(id);
  assert.ok(s);
  // The release never happened: the split is kept, whole, and joinable again.
  assert.equal(s.state, "kept");
  assert.equal(s.reason, "daemon restarted");
  assert.ok(exists(`${s.dir}/out/a/diff.patch`));
  const again = await sb.marsh(["join", "--", "true"], { stdin: split.stdout });
  assert.equal(again.code, 0, show(again));
  assert.equal((await sb.split(id))?.state, "joined");
  assert.ok(!exists(s.dir));
});
