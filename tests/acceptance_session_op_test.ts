/**
 * Acceptance (issue 14 §1-§2, docs/checkpoints.md "An operation"): `marsh
 * op`'s streams and its end through the real CLI, daemon, worker and
 * splitfs service. Binary stdin and stdout over 1 MiB byte for byte; Ctrl-C
 * with `--on-cancel=seal` (the changes checkpointed, exit 130) and
 * `--on-cancel=discard`; the CLI killed (its connection's end cancels and
 * seals); a second operation of a busy session refused; a rollback while an
 * operation runs makes it stale (nothing published); an argv over the limit
 * refused before anything runs.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, type Result, Sandbox, show, waitFor } from "./_acceptance.ts";
import { assertUnchanged, picture } from "./_resolve.ts";
import type { LogEntryInfo, SessionInfo } from "../protocol/daemon_session.ts";
import { MAX_ARGV_BYTES } from "../model/checkpoint.ts";

async function head(sb: Sandbox): Promise<SessionInfo> {
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

async function started(sb: Sandbox): Promise<SessionInfo> {
  const r = await sb.marsh(["session", "start", "fix"]);
  assert.equal(r.code, 0, show(r));
  return await head(sb);
}

/** A command that writes `file`, marks `ready` (outside the project), then waits for `gate`. */
function held(file: string, ready: string, gate: string): string[] {
  return [
    "bash",
    "-c",
    `echo changed > ${file}; touch '${ready}'; while [ ! -e '${gate}' ]; do sleep 0.05; done`,
  ];
}

Deno.test({
  name: "marsh op: binary stdin and stdout over 1 MiB pass through byte for byte",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  await started(sb);
  const bytes = crypto.getRandomValues(new Uint8Array(65_536));
  const big = new Uint8Array(1_572_864 + 7);
  for (let off = 0; off < big.length; off += bytes.length) {
    big.set(bytes.subarray(0, Math.min(bytes.length, big.length - off)), off);
  }
  const child = sb.spawnMarsh(["op", "--", "bash", "-c", "tee copy.bin"], { stdin: big });
  const out = await child.output();
  assert.equal(out.code, 0, new TextDecoder().decode(out.stderr));
  assert.equal(out.stdout.length, big.length);
  assert.ok(out.stdout.every((b, i) => b === big[i]), "stdout is stdin, byte for byte");
  const s = await head(sb);
  assert.deepEqual(Deno.readFileSync(`${s.view}/copy.bin`), big);
  // Durable, then visible: two results, each timed (the daemon's log).
  assert.match(
    Deno.readTextFileSync(`${sb.home}/marshd.log`),
    new RegExp(
      `op o-[a-z0-9-]+: checkpoint ${s.head} bound \\d+\\.\\d\\d ms after the drain; view remounted in \\d+\\.\\d\\d ms\n`,
    ),
  );
});

for (const onCancel of ["seal", "discard"] as const) {
  Deno.test({
    name: `marsh op: Ctrl-C drains the command, then ${onCancel}s its changes (exit 130)`,
    permissions: PERMISSIONS,
  }, async () => {
    await using sb = await Sandbox.create();
    const before = picture(sb.project, { withGit: true });
    const s0 = await started(sb);
    const ready = `${sb.scratch}/ready`, gate = `${sb.scratch}/gate`;
    const child = sb.spawnMarsh([
      "op",
      `--on-cancel=${onCancel}`,
      "--",
      ...held("c.txt", ready, gate),
    ]);
    await waitFor("the command to run", () => exists(ready));
    child.kill("SIGINT");
    const r = await finish(child, "the cancelled marsh op");
    assert.equal(r.code, 130, show(r));
    const s = await head(sb);
    if (onCancel === "seal") {
      assert.match(r.stderr, /marsh: checkpoint [0-9a-f]{64} \(1 path changed\)\n$/);
      assert.equal(Deno.readTextFileSync(`${s.view}/c.txt`), "changed\n");
      const [e] = await log(sb);
      assert.equal(e!.operation?.execution, "cancelled");
      assert.equal(e!.operation?.disposition, "sealed");
    } else {
      assert.match(
        r.stderr,
        /marsh: cancelled; its changes were discarded \(--on-cancel=discard\)\n$/,
      );
      assert.equal(s.head, s0.head, "the head did not move");
      assert.ok(!exists(`${s.view}/c.txt`));
    }
    assertUnchanged(sb.project, before, "the project", { withGit: true });
  });
}

Deno.test({
  name: "marsh op: the CLI killed cancels the command, whose changes are sealed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  await started(sb);
  const ready = `${sb.scratch}/ready`, gate = `${sb.scratch}/gate`;
  const child = sb.spawnMarsh(["op", "--", ...held("k.txt", ready, gate)]);
  await waitFor("the command to run", () => exists(ready));
  child.kill("SIGKILL");
  await finish(child, "the killed marsh op");
  const e = await waitFor("the cancelled op's checkpoint", async () => {
    const [first] = await log(sb);
    return first?.kind === "operation" ? first : undefined;
  });
  assert.equal(e.operation?.execution, "cancelled");
  assert.deepEqual(e.paths, [{ path: "k.txt", change: "added" }]);
});

Deno.test({
  name: "marsh op: a busy session refuses a second op; a rollback meanwhile makes the first stale",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const s0 = await started(sb);
  const first = await sb.marsh(["op", "--", "touch", "one.txt"]);
  assert.equal(first.code, 0, show(first));
  const c1 = (await head(sb)).head;
  const ready = `${sb.scratch}/ready`, gate = `${sb.scratch}/gate`;
  const running = sb.spawnMarsh(["op", "--", ...held("two.txt", ready, gate)]);
  await waitFor("the command to run", () => exists(ready));

  const busy = await sb.marsh(["op", "--", "touch", "three.txt"]);
  assert.equal(busy.code, 1, show(busy));
  assert.match(
    busy.stderr,
    /^marsh op: session fix is running another operation \(one at a time\): wait for it to end, then try again; nothing ran\n$/,
  );
  const removing = await sb.marsh(["session", "rm", "fix"]);
  assert.equal(removing.code, 1, show(removing));

  // The head moves under the running op: its bind finds it moved and publishes nothing.
  const back = await sb.marsh(["rollback", s0.head]);
  assert.equal(back.code, 0, show(back));
  Deno.writeTextFileSync(gate, "");
  const r: Result = await finish(running, "the stale marsh op");
  assert.equal(r.code, 1, show(r));
  assert.match(
    r.stderr,
    new RegExp(
      `^marsh op: session fix moved while the command ran \\(its head is ${s0.head}, not ${c1}\\); nothing was published`,
    ),
  );
  const s = await head(sb);
  assert.equal(s.head, s0.head);
  assert.ok(!exists(`${s.view}/two.txt`) && !exists(`${s.view}/one.txt`));
  assert.equal((await log(sb, "--all")).length, 2, "no checkpoint was added");
});

Deno.test({
  name: "marsh op: an argv over the limit is refused before anything runs",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const s0 = await started(sb);
  // Three words, so that no one argument passes the kernel's own limit (the CLI must start).
  const third = "x".repeat(Math.ceil(MAX_ARGV_BYTES / 3));
  const r = await sb.marsh(["op", "--", "echo", third, third, third]);
  assert.equal(r.code, 2, show(r));
  assert.match(r.stderr, /^marsh op: the command is too long \(\d+ bytes; at most 262144\)\n$/);
  assert.equal((await head(sb)).head, s0.head);
});

Deno.test({
  name:
    "marsh op: on a head stack of 64 layers (compaction held back) the next op is refused before it runs",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  // Compaction stops after its first step: the last resort is what is left.
  const daemon = await sb.marsh(["daemon", "start"], {
    env: { MARSH_TEST_PAUSE_AT: "compact-copying" },
  });
  assert.equal(daemon.code, 0, show(daemon));
  await started(sb);
  const runs = `${sb.scratch}/runs`;
  // One snapshot layer, then one layer per changing op, until one is refused.
  const r = await sb.bash(
    `for i in $(seq 1 70); do "$M" op -- bash -c "echo $i >> '${runs}'; echo $i >> a.txt" ` +
      `2>'${sb.scratch}/err' || { echo "$i $?"; cat '${sb.scratch}/err'; exit 0; }; done; echo none`,
    { timeoutMs: 120_000 },
  );
  const [first, ...rest] = r.stdout.split("\n");
  assert.equal(first, "64 1", show(r));
  assert.match(
    rest.join("\n"),
    /^marsh op: session fix's head is a stack of 64 layers, and an operation's layer can go on at most 63: its compaction, which runs in the background after each operation, has not caught up; nothing ran: try again once it has \(see marshd.log\), roll back \(marsh rollback\), or start a new session\n/,
  );
  const ran = Deno.readTextFileSync(runs).trim().split("\n");
  assert.equal(ran.length, 63, "the refused command never ran");
  // A rollback makes room again.
  const entries = await log(sb);
  const back = await sb.marsh(["rollback", entries[1]!.checkpoint]);
  assert.equal(back.code, 0, show(back));
  const next = await sb.marsh(["op", "--", "touch", "n.txt"]);
  assert.equal(next.code, 0, show(next));
});

Deno.test({
  name:
    "the agent recipe: a wrapper shell makes each -c command a checkpoint; roll back the last N",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ files: { "a.txt": "0\n" } });
  const before = picture(sb.project, { withGit: true });
  // docs/checkpoints.md "Agents: every tool call a checkpoint", as written there (marsh is $M here).
  const wrapper = `${sb.scratch}/marsh-sh`;
  Deno.writeTextFileSync(
    wrapper,
    `#!/bin/sh
# marsh-sh: a shell whose every \`-c COMMAND\` is one checkpoint of the session in $MARSH_SESSION.
[ "$1" = -c ] || exec bash "$@"
shift
exec "$M" op -- bash -c "$@"
`,
  );
  Deno.chmodSync(wrapper, 0o755);
  const s = await sb.marsh(["session", "start", "agent"]);
  assert.equal(s.code, 0, show(s));
  const view = `${sb.project}/.marsh/session/agent/view`;
  const env = { MARSH_SESSION: "agent", SHELL: wrapper };
  // Three tool calls, as an agent makes them: $SHELL -c "...", from the view.
  for (const n of [1, 2, 3]) {
    const r = await sb.bash(`"$SHELL" -c 'echo ${n} >> a.txt'`, { cwd: view, env });
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /marsh: checkpoint [0-9a-f]{64} \(1 path changed\)\n$/);
  }
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "0\n1\n2\n3\n");
  const back = await sb.bash(
    `n=2
"$M" rollback "$("$M" log --json | jq -r --argjson n "$n" '.entries[$n].checkpoint')"`,
    { env },
  );
  assert.equal(back.code, 0, show(back));
  assert.equal(Deno.readTextFileSync(`${view}/a.txt`), "0\n1\n", "the last two calls are undone");
  assertUnchanged(sb.project, before, "the project", { withGit: true });
});

Deno.test({
  name: "marsh op: two sessions forked from one checkpoint advance at once, each on its own",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const s0 = await started(sb);
  const forked = await sb.marsh(["fork", "--from", s0.head, "other"]);
  assert.equal(forked.code, 0, show(forked));
  const ready = `${sb.scratch}/ready`, gate = `${sb.scratch}/gate`;
  // Both run at the same time: each waits until both have written.
  const a = sb.spawnMarsh(["op", "--session", "fix", "--", ...held("x.txt", `${ready}-a`, gate)]);
  const b = sb.spawnMarsh(["op", "--session", "other", "--", ...held("x.txt", `${ready}-b`, gate)]);
  await waitFor("both commands to run", () => exists(`${ready}-a`) && exists(`${ready}-b`));
  Deno.writeTextFileSync(gate, "");
  const [ra, rb] = await Promise.all([finish(a, "op in fix"), finish(b, "op in other")]);
  assert.equal(ra.code, 0, show(ra));
  assert.equal(rb.code, 0, show(rb));
  const r = await sb.marsh(["sessions", "--json"]);
  const listed = (JSON.parse(r.stdout) as { sessions: SessionInfo[] }).sessions;
  assert.deepEqual(listed.map((s) => s.name), ["fix", "other"]);
  // The same change on the same parent: the same root, two checkpoints, two heads.
  assert.notEqual(listed[0]!.head, listed[1]!.head);
  assert.equal(listed[0]!.root, listed[1]!.root);
  for (const s of listed) assert.equal(Deno.readTextFileSync(`${s.view}/x.txt`), "changed\n");
});
