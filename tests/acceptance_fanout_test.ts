/**
 * Acceptance (docs/guide.md, "marsh fanout and marsh collect"): the real `./marsh fanout` and
 * `./marsh collect` with real branches in a real project: shared files, one spooled stdin, at
 * once, signals forwarded to every branch's process group, every limit just under, at and just
 * over, and the rendering byte for byte; `marsh context` outside a job.
 */

import assert from "node:assert/strict";
import { exists, finish, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";
import { FANOUT_INPUT_LIMIT, FANOUT_OUTPUT_LIMIT, parseFanoutLine } from "../model/fanout.ts";
import { contextText } from "../model/job_context.ts";

Deno.test({
  name: "fanout | collect: branches share the cwd's files and stdin, run at once; golden rendering",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  // `a` and `b` each wait for the other's file: only branches running at once both finish.
  const meet = (me: string, other: string) =>
    `touch ${me}.ready; for i in $(seq 200); do [ -e ${other}.ready ] && break; sleep 0.05; done; [ -e ${other}.ready ]`;
  const r = await sb.bash(
    `set -o pipefail; printf 'one\\ntwo\\n' | "$M" fanout ` +
      `-b a='${meet("a", "b")} && wc -l && echo from-a > shared.txt' ` +
      `-b b='${meet("b", "a")} && cat && echo "$FANOUT_BRANCH" > b.env' ` +
      `-b fail='echo oops >&2; echo partial; exit 3' ` +
      `::: argv printf '%s|' x 'y z' ` +
      `| "$M" collect`,
  );
  assert.equal(r.code, 3, show(r));
  assert.equal(
    r.stdout,
    [
      "== a: exited 0",
      "2",
      "",
      "== b: exited 0",
      "one",
      "two",
      "",
      "== fail: exited 3",
      "partial",
      "== fail stderr ==",
      "oops",
      "",
      "== argv: exited 0",
      "x|y z|",
      "",
      "",
    ].join("\n"),
  );
  assert.equal(r.stderr, "");
  // The branches wrote the caller's own files: no fork.
  assert.equal(Deno.readTextFileSync(`${sb.project}/shared.txt`), "from-a\n");
  assert.match(Deno.readTextFileSync(`${sb.project}/b.env`), /^[a-z0-9]{12}\/b\n$/);
});

Deno.test({
  name: "fanout's line: ids, FANOUT_BRANCH, -n, exit statuses; collect --stderr, --timing, --json",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.marsh(
    [
      "fanout",
      "-n",
      "-b",
      'ok=echo "$FANOUT_BRANCH"; echo note >&2; wc -c',
      ":::",
      "missing",
      "no-such-command-here",
      ":::",
      "slow",
      "sh",
      "-c",
      "sleep 0.3; exit 4",
    ],
    { stdin: "not read: -n\n" },
  );
  assert.equal(r.code, 127, show(r));
  const line = parseFanoutLine(r.stdout);
  assert.match(r.stdout, /^\{"schema":"marsh\.fanout\/v1",[^\n]*\}\n$/);
  assert.deepEqual(line.branches.map((b) => [b.label, b.kind, b.exit, b.status]), [
    ["ok", "shell", 0, "exited 0"],
    ["missing", "argv", 127, "exited 127"],
    ["slow", "argv", 4, "exited 4"],
  ]);
  const dec = new TextDecoder();
  assert.equal(dec.decode(line.branches[0]!.stdout), `${line.id}/ok\n0\n`);
  assert.equal(dec.decode(line.branches[0]!.stderr), "note\n");
  assert.equal(
    dec.decode(line.branches[1]!.stderr),
    "marsh fanout: no-such-command-here: command not found\n",
  );
  const slow = line.branches[2]!;
  assert.ok(slow.finishedMs - slow.startedMs >= 300, "slow ran its 0.3 s");
  assert.equal(line.status, 127);

  const stderr = await sb.marsh(["collect", "--stderr", "--timing"], { stdin: r.stdout });
  assert.equal(stderr.code, 127, show(stderr));
  assert.match(
    stderr.stdout,
    new RegExp(
      `^== ok: exited 0 \\(\\d+\\.\\ds\\)\n${line.id}/ok\n0\n== ok stderr ==\nnote\n\n` +
        `== missing: exited 127 \\(\\d+\\.\\ds\\)\n== missing stderr ==\n` +
        `marsh fanout: no-such-command-here: command not found\n\n` +
        `== slow: exited 4 \\(0\\.[3-9]s\\)\n\n$`,
    ),
  );
  const json = await sb.marsh(["collect", "--json"], { stdin: r.stdout });
  assert.equal(json.code, 127, show(json));
  const doc = JSON.parse(json.stdout);
  assert.equal(doc.schema, "marsh.collect/v1");
  assert.equal(doc.fanout_id, line.id);
  assert.equal(doc.status, 127);
  assert.deepEqual(doc.branches[0].stdout, `${line.id}/ok\n0\n`);
  assert.deepEqual(doc.branches[2].argv, ["sh", "-c", "sleep 0.3; exit 4"]);
});

Deno.test({
  name: "collect refuses what is not one fanout line: exit 2, a clear message, nothing on stdout",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const cases: [string, RegExp][] = [
    ["", /^marsh collect: nothing on stdin; marsh fanout writes one line there/],
    [
      '{"marsh_split":1,"id":"abc"}\n',
      /^marsh collect: stdin is not a marsh\.fanout\/v1 line: schema is null/,
    ],
    ["not json\n", /^marsh collect: stdin is not a marsh\.fanout\/v1 line: it is not JSON/],
    ["{}\n{}\n", /^marsh collect: stdin holds more than one line/],
  ];
  for (const [stdin, message] of cases) {
    const r = await sb.marsh(["collect"], { stdin });
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, "");
    assert.match(r.stderr, message);
  }
});

Deno.test({
  name: "fanout's limits: 16 branches, 64 MiB of stdin, 16 MiB of output: under, at, over",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const branches = (n: number) => Array.from({ length: n }, (_, i) => ["-b", `b${i}=true`]).flat();
  for (const n of [15, 16]) {
    const r = await sb.marsh(["fanout", "-n", ...branches(n)]);
    assert.equal(r.code, 0, show(r));
    assert.equal(parseFanoutLine(r.stdout).branches.length, n);
  }
  const over = await sb.marsh(["fanout", "-n", ...branches(17)]);
  assert.equal(over.code, 2, show(over));
  assert.equal(over.stderr, "marsh fanout: too many branches: 17 (at most 16 per fanout)\n");
  assert.equal(over.stdout, "");

  // stdin: every byte reaches the branch up to the limit; one more is refused before anything runs.
  for (const n of [FANOUT_INPUT_LIMIT - 1, FANOUT_INPUT_LIMIT]) {
    const r = await sb.marsh(["fanout", "-b", "n=wc -c"], { stdin: new Uint8Array(n) });
    assert.equal(r.code, 0, show(r));
    assert.equal(new TextDecoder().decode(parseFanoutLine(r.stdout).branches[0]!.stdout), `${n}\n`);
  }
  const big = await sb.marsh(["fanout", "-b", "n=touch ran"], {
    stdin: new Uint8Array(FANOUT_INPUT_LIMIT + 1),
  });
  assert.equal(big.code, 2, show(big));
  assert.match(
    big.stderr,
    /^marsh fanout: stdin holds more than 67108864 bytes \(the fanout input limit\)/,
  );
  assert.ok(!exists(`${sb.project}/ran`), "nothing ran");

  // Output: stdout and stderr of every branch together.
  const half = FANOUT_OUTPUT_LIMIT / 2;
  for (const extra of [-1, 0]) {
    const r = await sb.marsh([
      "fanout",
      "-n",
      "-b",
      `a=head -c ${half} /dev/zero`,
      "-b",
      `b=head -c ${half + extra} /dev/zero >&2`,
    ]);
    assert.equal(r.code, 0, `${extra}: exit ${r.code} ${r.stderr}`);
    const [a, b] = parseFanoutLine(r.stdout).branches;
    assert.equal(a!.stdout.length + b!.stderr.length, FANOUT_OUTPUT_LIMIT + extra);
  }
  const loud = await sb.marsh([
    "fanout",
    "-n",
    "-b",
    `a=head -c ${half} /dev/zero`,
    "-b",
    `b=head -c ${half + 1} /dev/zero >&2; sleep 30`,
  ]);
  assert.equal(loud.code, 125, show(loud));
  assert.equal(loud.stdout, "");
  assert.equal(
    loud.stderr,
    `marsh fanout: the branches wrote more than ${FANOUT_OUTPUT_LIMIT} bytes of output together (the fanout output limit); every branch was stopped and nothing is written for collect\n`,
  );
});

Deno.test({
  name: "SIGINT to fanout reaches every branch's process group; fanout exits 130; KILL after 10 s",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const s = sb.scratch;
  // Each branch leaves a background child in its group, recording what reaches it too.
  const record = (label: string) =>
    `(trap 'echo INT > ${s}/${label}.child; exit 0' INT; while :; do sleep 0.05; done) & ` +
    `trap 'echo INT > ${s}/${label}.shell; wait; exit 0' INT; echo $$ > ${s}/${label}.pid; wait`;
  const fanout = sb.spawnMarsh([
    "fanout",
    "-n",
    "-b",
    `a=${record("a")}`,
    "-b",
    `b=${record("b")}`,
    "-b",
    `deaf=trap '' INT; echo $$ > ${s}/deaf.pid; sleep 60`,
  ]);
  await waitFor(
    "every branch to start",
    () => ["a", "b", "deaf"].every((l) => exists(`${s}/${l}.pid`)),
  );
  const sent = Date.now();
  fanout.kill("SIGINT");
  const r = await finish(fanout, "the interrupted fanout");
  const took = Date.now() - sent;
  assert.equal(r.code, 130, show(r));
  for (const l of ["a", "b"]) {
    assert.equal(Deno.readTextFileSync(`${s}/${l}.shell`), "INT\n", `${l}'s shell`);
    assert.equal(Deno.readTextFileSync(`${s}/${l}.child`), "INT\n", `${l}'s background child`);
  }
  // The branch that ignores SIGINT ends by SIGKILL after the 10 s grace.
  assert.ok(took >= 9_500 && took < 20_000, `took ${took} ms`);
  const line = parseFanoutLine(r.stdout);
  assert.equal(line.signal, "SIGINT");
  assert.deepEqual(line.branches.map((b) => b.exit), [0, 0, 137]);
  const deaf = Number(Deno.readTextFileSync(`${s}/deaf.pid`));
  assert.throws(() => Deno.kill(deaf, "SIGCONT"), Deno.errors.NotFound);
});

Deno.test({
  name: "SIGTERM and SIGHUP are forwarded too: fanout exits 143 and 129",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  for (const [signal, code] of [["SIGTERM", 143], ["SIGHUP", 129]] as const) {
    const got = `${sb.scratch}/${signal}`;
    const fanout = sb.spawnMarsh([
      "fanout",
      "-n",
      "-b",
      `a=trap 'echo ${signal} > ${got}; exit 0' ${
        signal.slice(3)
      }; touch ${got}.up; while :; do sleep 0.05; done`,
    ]);
    await waitFor("the branch to start", () => exists(`${got}.up`));
    fanout.kill(signal);
    const r = await finish(fanout, `fanout after ${signal}`);
    assert.equal(r.code, code, show(r));
    assert.equal(Deno.readTextFileSync(got), `${signal}\n`);
    assert.equal(parseFanoutLine(r.stdout).signal, signal);
  }
});

Deno.test({
  name: "marsh context outside a job prints the generic text and writes nothing",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const before = [...Deno.readDirSync(sb.project)].map((e) => e.name).sort();
  const r = await sb.marsh(["context"]);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stdout, contextText(null));
  assert.deepEqual([...Deno.readDirSync(sb.project)].map((e) => e.name).sort(), before);
  assert.ok(!exists(`${sb.home}/marshd.sock`), "no daemon was asked");
});

Deno.test({
  name: "fanout on a terminal prints the rendering itself, control bytes escaped",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  // script(1) gives fanout a terminal for stdin and stdout: so stdin reads as empty.
  const r = await sb.bash(
    `script -qec '"$M" fanout -b a="printf \\"\\\\033[2Jx\\\\n\\"; wc -c" -b b="exit 2"' /dev/null`,
  );
  assert.equal(r.code, 2, show(r));
  assert.equal(
    r.stdout.replaceAll("\r\n", "\n"),
    "== a: exited 0\n\\x1b[2Jx\n0\n\n== b: exited 2\n\n",
  );
});
