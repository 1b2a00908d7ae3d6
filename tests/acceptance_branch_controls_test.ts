/**
 * Acceptance (issue 11 §3): watching and stopping one branch of a running
 * split through the real CLI, daemon and worker — `marsh logs -f` as the
 * branch prints, `marsh splits cancel ID LABEL`, a shell branch's time limit
 * (`-t LABEL=SECONDS`) and its refusals, and the processes a branch's shell
 * left running, named in `marsh splits` until they end.
 */

import assert from "node:assert/strict";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import type { Manifest, ManifestBranch } from "../protocol/manifest.ts";

const dec = new TextDecoder();

/** A script that waits until the test creates `gate`. */
function held(gate: string): string {
  return `while [ ! -e '${gate}' ]; do sleep 0.05; done`;
}

function branch(s: Manifest | undefined, label: string): ManifestBranch {
  const b = s?.branches.find((x) => x.label === label);
  assert.ok(b, `no branch ${label} in ${JSON.stringify(s)}`);
  return b;
}

/** Reads a child's stream as it comes; `until` waits for text to appear in it. */
class Reader {
  text = "";
  readonly done: Promise<void>;
  constructor(stream: ReadableStream<Uint8Array>) {
    this.done = (async () => {
      for await (const chunk of stream) this.text += dec.decode(chunk, { stream: true });
    })();
  }
  until(what: string): Promise<true> {
    return waitFor(
      `${JSON.stringify(what)} in ${JSON.stringify(this.text)}`,
      () => this.text.includes(what),
    );
  }
}

Deno.test({
  name: "marsh logs -f prints a branch's lines as it prints them and ends (0) when it ends",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const g = (n: number) => `${sb.scratch}/go${n}`;
  // Each line waits for the test to have seen the one before: nothing can arrive in one piece.
  const script = [1, 2, 3].map((n) =>
    `echo line${n}; echo warn${n} >&2; ${n < 3 ? held(g(n)) : "true"}`
  ).join("; ") + "; echo done > a.txt";
  const creator = sb.spawnMarsh(["split", "-n", "-b", `a=${script}`, "-b", `b=${held(g(9))}`]);
  const s = await sb.runningSplit();

  const follower = sb.spawnMarsh(["logs", s.id, "a", "-f"]);
  const out = new Reader(follower.stdout), err = new Reader(follower.stderr);
  await out.until("line1\n");
  await err.until("warn1\n");
  assert.ok(!out.text.includes("line2"), out.text);
  Deno.writeTextFileSync(g(1), "");
  await out.until("line2\n");
  assert.ok(!out.text.includes("line3"), out.text);
  Deno.writeTextFileSync(g(2), "");
  const status = await follower.status;
  await Promise.all([out.done, err.done]);
  assert.equal(status.code, 0, err.text);
  // Its stdout on stdout, its stderr on stderr, each whole and in order.
  assert.equal(out.text, "line1\nline2\nline3\n");
  assert.equal(err.text, "warn1\nwarn2\nwarn3\n");
  // It ended with the branch, while the split still runs (b waits).
  assert.equal((await sb.split(s.id))?.state, "run");
  assert.equal(branch(await sb.split(s.id), "a").state, "captured");

  // Without -f, and after capture (out/a/ through the daemon): the same bytes, one stream at will.
  const again = await sb.marsh(["logs", s.id, "a"]);
  assert.equal(again.code, 0, show(again));
  assert.deepEqual([again.stdout, again.stderr], [out.text, err.text]);
  const only = await sb.marsh(["logs", "--stderr", s.id, "a"]);
  assert.deepEqual([only.code, only.stdout, only.stderr], [0, "", err.text]);
  // A running branch without -f: what it printed so far (nothing here), at once.
  const now = await sb.marsh(["logs", s.id, "b"]);
  assert.deepEqual([now.code, now.stdout, now.stderr], [0, "", ""]);

  Deno.writeTextFileSync(g(9), "");
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 0, show(done));
  // A kept split's output stays readable until it is removed.
  const keep = await sb.marsh(["join", "--keep"], { stdin: done.stdout });
  assert.equal(keep.code, 0, show(keep));
  const kept = await sb.marsh(["logs", "--stdout", s.id, "a"]);
  assert.deepEqual([kept.code, kept.stdout], [0, "line1\nline2\nline3\n"]);

  // Refusals name what is wrong, and the labels there are.
  const bad = await sb.marsh(["logs", s.id, "nope"]);
  assert.equal(bad.code, 2, show(bad));
  assert.equal(bad.stderr, `marsh logs: split ${s.id} has no branch "nope"; its branches: a, b\n`);
  const none = await sb.marsh(["logs", "zzzzzzzz", "a"]);
  assert.equal(none.code, 2, show(none));
  assert.equal(
    none.stderr,
    "marsh logs: no split zzzzzzzz; marsh splits lists the splits you may see\n",
  );
  const both = await sb.marsh(["logs", "--stdout", "--stderr", s.id, "a"]);
  assert.equal(both.code, 2, show(both));
  assert.match(both.stderr, /--stdout and --stderr exclude each other/);
  const rm = await sb.marsh(["splits", "rm", s.id]);
  assert.equal(rm.code, 0, show(rm));
  const gone = await sb.marsh(["logs", s.id, "a"]);
  assert.equal(gone.code, 2, show(gone));
});

Deno.test({
  name: "marsh logs in a shell branch reads only that branch's own splits",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const idFile = `${sb.scratch}/id`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=${held(idFile)}; "$M" logs "$(cat '${idFile}')" b; echo "status $?"`,
    "-b",
    "b=echo secret",
  ]);
  const s = await sb.runningSplit();
  Deno.writeTextFileSync(idFile, s.id);
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 0, show(done));
  const a = await sb.marsh(["logs", s.id, "a"]);
  assert.equal(a.stdout, "status 2\n");
  assert.equal(a.stderr, `marsh logs: split ${s.id} was not created by this caller\n`);
});

Deno.test({
  name:
    "marsh splits cancel ID LABEL: one branch of three ends cancelled, the others' patches stay",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const gate = `${sb.scratch}/go`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=echo a > a.txt; ${held(gate)}`,
    "-b",
    "b=echo b > b.txt; sleep 100",
    "-b",
    `c=echo c > c.txt; ${held(gate)}`,
  ]);
  const s = await sb.runningSplit();
  await waitFor("b to write", () => exists(`${s.dir}/b/b.txt`));

  const unknown = await sb.marsh(["splits", "cancel", s.id, "d"]);
  assert.equal(unknown.code, 2, show(unknown));
  assert.equal(
    unknown.stderr,
    `marsh splits cancel: split ${s.id} has no branch "d"; its branches: a, b, c\n`,
  );
  const t0 = Date.now();
  const cancel = await sb.marsh(["splits", "cancel", s.id, "b"]);
  assert.equal(cancel.code, 0, show(cancel));
  assert.equal(cancel.stdout, `split ${s.id}: cancelling branch b\n`);
  const after = await waitFor("b to end", async () => {
    const m = await sb.split(s.id);
    return branch(m, "b").state === "cancelled" ? m : undefined;
  });
  assert.ok(Date.now() - t0 < 30_000, "SIGINT ended sleep 100");
  assert.equal(after?.state, "run", "the split goes on");
  assert.deepEqual(
    after?.branches.map((b) => [b.label, b.state, b.status ?? "-", b.code ?? "-"]),
    [["a", "running", "-", "-"], ["b", "cancelled", "cancelled", 130], [
      "c",
      "running",
      "-",
      "-",
    ]],
  );
  const twice = await sb.marsh(["splits", "cancel", s.id, "b"]);
  assert.equal(twice.code, 2, show(twice));
  assert.equal(
    twice.stderr,
    `marsh splits cancel: branch b of split ${s.id} has already ended: cancelled\n`,
  );

  Deno.writeTextFileSync(gate, "");
  const done = await finish(creator, "marsh split");
  // The first nonzero branch code in declaration order: b's.
  assert.equal(done.code, 130, show(done));
  assert.equal(handleId(done.stdout), s.id);
  const join = await sb.marsh([
    "join",
    "--",
    "sh",
    "-c",
    [
      'cat >/dev/null; cd "$(git rev-parse --show-toplevel)"',
      'for l in a b c; do printf "%s %s\\n" "$l" "$(cat "$SPLIT_DIR/$l/status")"; done',
      'ls "$SPLIT_DIR/b"',
      'git apply --check "$SPLIT_DIR/a/diff.patch" "$SPLIT_DIR/c/diff.patch" && echo applies',
    ].join("; "),
  ], { stdin: done.stdout });
  assert.equal(join.code, 0, show(join));
  assert.equal(
    join.stdout,
    "a exited 0\nb cancelled\nc exited 0\nstatus\nstderr\nstdout\napplies\n",
  );
});

Deno.test({
  name:
    "a time limit stops a sleep 100 branch: failed: time limit of 2 s reached (125), not captured",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const t0 = Date.now();
  const r = await sb.marsh([
    "split",
    "-n",
    "-b",
    "slow=echo started; echo s > s.txt; sleep 100",
    "-b",
    "fast=echo f > f.txt",
    "-t",
    "slow=2",
  ]);
  const took = Date.now() - t0;
  assert.equal(r.code, 125, show(r));
  assert.ok(took >= 2000 && took < 30_000, `took ${took} ms`);
  const s = await sb.split(handleId(r.stdout));
  assert.deepEqual(
    s?.branches.map((b) => [b.label, b.state, b.status, b.code, b.files]),
    [["slow", "failed", "failed: time limit of 2 s reached", 125, 0], [
      "fast",
      "captured",
      "exited 0",
      0,
      1,
    ]],
  );
  // What it printed before the limit is kept.
  const logs = await sb.marsh(["logs", s!.id, "slow"]);
  assert.deepEqual([logs.code, logs.stdout], [0, "started\n"]);
  const join = await sb.marsh(["join"], { stdin: r.stdout });
  assert.match(join.stdout, /^== slow: failed: time limit of 2 s reached \(no changes\)$/m);
  assert.match(join.stdout, /^== fast: exited 0 \(1 file changed\)$/m);
});

Deno.test({
  name: "time limits: 0, negative, not a number, over 1 h, an unknown or argv label are refused",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const cases: [string[], string][] = [
    [["-t", "a=0"], "-t a=0: the time limit must be a whole number of seconds from 1 to 3600"],
    [["-t", "a=-5"], "-t a=-5: the time limit must be a whole number of seconds from 1 to 3600"],
    [["-t", "a=ten"], "-t a=ten: the time limit must be a whole number of seconds from 1 to 3600"],
    [["-t", "a=1.5"], "-t a=1.5: the time limit must be a whole number of seconds from 1 to 3600"],
    [["-t", "a="], "-t a=: the time limit must be a whole number of seconds from 1 to 3600"],
    [["-t", "a=3601"], "-t a=3601: a time limit of 3601 s is longer than a split may run (3600 s)"],
    [["-t", "a"], '-t needs LABEL=SECONDS, got "a"; e.g. -t tests=600'],
    [["-t", "=5"], '-t needs LABEL=SECONDS, got "=5"; e.g. -t tests=600'],
    [["-t", "x=5"], '-t x=5: no shell branch "x"; the shell branches are: a'],
    [["--timeout", "a=5", "-t", "a=6"], "-t a is given twice"],
    [
      ["-t", "k=5", ":::", "k", "tool", "arg"],
      '-t k=5: "k" is an argv branch: its Kit\'s wall clock limits it (marsh kits add --wall)',
    ],
  ];
  for (const [args, message] of cases) {
    const r = await sb.marsh(["split", "-n", "-b", "a=touch ran", ...args]);
    assert.equal(r.code, 2, `${args.join(" ")}: ${show(r)}`);
    assert.equal(r.stdout, "");
    assert.equal(r.stderr, `marsh split: ${message}\n`);
  }
  // Nothing was created: no split, no .marsh, no daemon started.
  assert.ok(!exists(`${sb.project}/.marsh`));
  assert.ok(!exists(`${sb.home}/marshd.sock`));
  // 3600 is the largest accepted.
  const ok = await sb.marsh(["split", "-n", "-b", "a=true", "--timeout", "a=3600"]);
  assert.equal(ok.code, 0, show(ok));
});

Deno.test({
  name:
    "a detached process the shell left is listed (pid, command, since); the split settles once it is killed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const pidFile = `${sb.scratch}/pid`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `a=echo a > a.txt; setsid sleep 1000 >/dev/null 2>&1 </dev/null & echo $! > '${pidFile}'; exit 0`,
  ]);
  const s = await sb.runningSplit();
  const listed = await waitFor("the lingering process in marsh splits --json", async () => {
    const b = branch(await sb.split(s.id), "a");
    return b.lingering ? b : undefined;
  });
  const pid = Number(Deno.readTextFileSync(pidFile));
  assert.equal(listed.state, "running");
  assert.deepEqual(listed.lingering?.processes, [{ pid, command: "sleep 1000" }]);
  assert.equal(listed.lingering?.more, 0);
  const since = listed.lingering!.since_unix_ms;
  assert.ok(since >= listed.started_unix_ms! && since <= Date.now(), `since ${since}`);

  const text = await sb.marsh(["splits", s.id]);
  assert.equal(text.code, 0, show(text));
  assert.ok(
    text.stdout.includes(
      `    its shell exited at ${
        new Date(since).toISOString()
      }; 1 process it started still runs:\n      ${pid}  sleep 1000\n`,
    ),
    text.stdout,
  );
  // It holds the split: nothing is captured while it runs.
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal((await sb.split(s.id))?.state, "run");

  Deno.kill(pid, "SIGTERM");
  const done = await finish(creator, "marsh split");
  assert.equal(done.code, 0, show(done));
  const after = branch(await sb.split(s.id), "a");
  assert.deepEqual([after.state, after.status, after.files], ["captured", "exited 0", 1]);
  assert.equal(after.lingering, undefined);
});
