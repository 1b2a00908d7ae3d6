/**
 * `marsh compare ID --test CMD` through the real CLI, daemon, service and
 * worker (docs/resolution.md, "Comparing branches"): each captured branch's
 * result is tested in a throwaway fork; the branch's fork and patch never
 * change; the output is kept in `out/<label>/compare/`; `--timeout` stops a
 * test; Ctrl-C cancels them all.
 */

import assert from "node:assert/strict";
import { exists, finish, handleId, PERMISSIONS, Sandbox, show, waitFor } from "./_acceptance.ts";

interface Row {
  readonly label: string;
  readonly captured: boolean;
  readonly test?: { readonly exit: number | null; readonly ms: number; readonly status: string };
}

/** A split of two shell branches, `good` making ok.txt and `bad` not; its id once both ended. */
async function twoBranches(sb: Sandbox, extra: string[] = []): Promise<string> {
  const r = await sb.marsh([
    "split",
    "-n",
    "-b",
    "good=echo ok > ok.txt",
    "-b",
    "bad=echo other > other.txt",
    ...extra,
  ]);
  assert.equal(r.code, 0, show(r));
  return handleId(r.stdout);
}

async function compareJson(sb: Sandbox, args: string[]): Promise<Row[]> {
  const r = await sb.marsh(["compare", ...args, "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { branches: Row[] }).branches;
}

function row(rows: readonly Row[], label: string): Row {
  const r = rows.find((x) => x.label === label);
  assert.ok(r, `no row ${label} in ${JSON.stringify(rows)}`);
  return r;
}

/** A checksum of a tree: names, modes, sizes, times and contents (`tar` in name order). */
async function treeSum(sb: Sandbox, dir: string): Promise<string> {
  const r = await sb.bash(`tar --sort=name --numeric-owner -C '${dir}' -cf - . | sha256sum`);
  assert.equal(r.code, 0, show(r));
  return r.stdout;
}

/** The project's own tree, without `.marsh` (where the splits live). */
async function projectSum(sb: Sandbox): Promise<string> {
  const r = await sb.bash(
    `tar --sort=name --numeric-owner --exclude=./.marsh -C '${sb.project}' -cf - . | sha256sum`,
  );
  assert.equal(r.code, 0, show(r));
  return r.stdout;
}

/** What of the split's state a test must never change: each fork, its upper dir, its out/. */
async function branchSums(sb: Sandbox, id: string): Promise<string[]> {
  const dir = `${sb.project}/.marsh/split/${id}`;
  const sums = [];
  for (const label of ["good", "bad"]) {
    sums.push(await treeSum(sb, `${dir}/${label}`));
    sums.push(await treeSum(sb, `${dir}/.admin/${label}`));
    if (exists(`${dir}/.overlay/${label}`)) {
      sums.push(await treeSum(sb, `${dir}/.overlay/${label}`));
    }
    sums.push(Deno.readTextFileSync(`${dir}/out/${label}/diff.patch`));
    sums.push(Deno.readTextFileSync(`${dir}/out/${label}/files`));
  }
  return sums;
}

/** The throwaway forks, admin dirs and upper dirs of tests still on disk. */
function throwawayLeft(sb: Sandbox, id: string): string[] {
  const dir = `${sb.project}/.marsh/split/${id}`;
  return [dir, `${dir}/.admin`, `${dir}/.overlay`].flatMap((d) =>
    exists(d) ? [...Deno.readDirSync(d)].map((e) => `${d}/${e.name}`) : []
  ).filter((p) => p.includes(".compare-"));
}

/** Nothing of a test is left: no throwaway fork, admin dir or mount. */
async function assertNoThrowaway(sb: Sandbox, id: string): Promise<void> {
  assert.deepEqual(throwawayLeft(sb, id), []);
  // The test runner may not read /proc (Deno grants it only with every permission).
  const mounts = await sb.bash("grep -F '/.compare-' /proc/self/mountinfo || true");
  assert.equal(mounts.stdout, "");
}

Deno.test({
  name:
    "marsh compare --test: each branch's exit in its row; fork and patch unchanged; output kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const id = await twoBranches(sb);
  const split = `${sb.project}/.marsh/split/${id}`;

  const rows = await compareJson(sb, [id, "--test", "test -f ok.txt"]);
  assert.equal(row(rows, "good").test?.exit, 0);
  assert.equal(row(rows, "good").test?.status, "exited 0");
  assert.equal(row(rows, "bad").test?.exit, 1);
  assert.equal(row(rows, "bad").test?.status, "exited 1");
  await assertNoThrowaway(sb, id);

  // A test that writes, deletes and runs git: none of it reaches the branch or the project.
  const before = await branchSums(sb, id);
  const project = await projectSum(sb);
  const writer = [
    "echo new > new.txt",
    "rm -f ok.txt other.txt a.txt",
    "git add -A >/dev/null",
    'echo "out $(pwd)"',
    "echo err >&2",
    "test ! -e a.txt",
  ].join("; ");
  const again = await compareJson(sb, [id, "--test", writer]);
  assert.deepEqual(again.map((r) => r.test?.exit), [0, 0]);
  assert.deepEqual(await branchSums(sb, id), before);
  assert.equal(await projectSum(sb), project);
  assert.equal(Deno.readTextFileSync(`${sb.project}/a.txt`), "hello\n");
  assert.ok(!exists(`${sb.project}/new.txt`));
  for (const label of ["good", "bad"]) {
    // The project view: the throwaway fork is seen at the project's own path.
    assert.equal(
      Deno.readTextFileSync(`${split}/out/${label}/compare/stdout`),
      `out ${sb.project}\n`,
    );
    assert.equal(Deno.readTextFileSync(`${split}/out/${label}/compare/stderr`), "err\n");
  }
  await assertNoThrowaway(sb, id);

  // The next run replaces the output; the text table gets TEST and TIME.
  const text = await sb.marsh(["compare", id, "--test", "test -f ok.txt && echo yes"]);
  assert.equal(text.code, 0, show(text));
  const [header, ...lines] = text.stdout.split("\n");
  assert.match(header!, /MERGE\s+TEST\s+TIME\s+OVERLAPS/);
  assert.match(lines.find((l) => l.startsWith("good"))!, /\s0\s+\d+(ms|\.\ds)\s/);
  assert.match(lines.find((l) => l.startsWith("bad"))!, /\s1\s+\d+(ms|\.\ds)\s/);
  assert.equal(Deno.readTextFileSync(`${split}/out/good/compare/stdout`), "yes\n");
  assert.equal(Deno.readTextFileSync(`${split}/out/bad/compare/stdout`), "");
  assert.equal(Deno.readTextFileSync(`${split}/out/good/compare/stderr`), "");
  // Without --test, no test columns and no test field.
  const plain = await compareJson(sb, [id]);
  assert.ok(plain.every((r) => r.test === undefined));
});

Deno.test({
  name: "marsh compare --test: a branch that was not captured is not tested, and says why",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const r = await sb.marsh([
    "split",
    "-n",
    "-b",
    "ok=echo ok > ok.txt",
    "-b",
    "no=sleep 30",
    "-t",
    "no=1",
  ]);
  const id = handleId(r.stdout);
  const rows = await compareJson(sb, [id, "--test", "test -f ok.txt"]);
  assert.deepEqual(row(rows, "ok").test?.exit, 0);
  const no = row(rows, "no");
  assert.equal(no.captured, false);
  assert.deepEqual(no.test, {
    exit: null,
    ms: 0,
    status: "not run: not captured (failed: time limit of 1 s reached)",
  });
});

Deno.test({
  name: "marsh compare --test --timeout 1: a hanging test is stopped; its fork is removed",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: { MARSH_CANCEL_GRACE_MS: "500" } });
  const id = await twoBranches(sb);
  const t0 = Date.now();
  // An INT trap outlives SIGINT: only the grace and SIGKILL end it.
  const rows = await compareJson(sb, [
    id,
    "--test",
    `trap '' INT; if [ -e ok.txt ]; then sleep 29.173; fi`,
    "--timeout",
    "1",
  ]);
  assert.ok(Date.now() - t0 < 15_000, `took ${Date.now() - t0} ms`);
  const good = row(rows, "good").test!;
  assert.equal(good.status, "failed: time limit of 1 s reached");
  assert.equal(good.exit, null);
  assert.ok(good.ms >= 1000 && good.ms < 10_000, `ms ${good.ms}`);
  assert.equal(row(rows, "bad").test?.status, "exited 0");
  await assertNoThrowaway(sb, id);
  const ps = await sb.bash("pgrep -f 'sleep 29[.]173' || true");
  assert.equal(ps.stdout, "", "the hanging test's processes are gone");
});

Deno.test({
  name:
    "marsh compare --timeout: 1 and 3600 are taken, 0 and 3601 refused (exit 2), a test under its limit exits",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const id = await twoBranches(sb);
  for (const bad of ["0", "3601", "1.5", "-1", "x", ""]) {
    const r = await sb.marsh(["compare", id, "--test", "true", "--timeout", bad]);
    assert.equal(r.code, 2, `--timeout ${bad}: ${show(r)}`);
    assert.match(r.stderr, /marsh compare: --timeout/);
  }
  const alone = await sb.marsh(["compare", id, "--timeout", "5"]);
  assert.equal(alone.code, 2, show(alone));
  assert.match(alone.stderr, /--timeout needs --test CMD/);
  const empty = await sb.marsh(["compare", id, "--test", " "]);
  assert.equal(empty.code, 2, show(empty));
  for (const ok of ["1", "3600"]) {
    const rows = await compareJson(sb, [id, "--test", "true", "--timeout", ok]);
    assert.deepEqual(rows.map((r) => r.test?.status), ["exited 0", "exited 0"]);
  }
  // Just under the limit: sleeps 1 s of a 3 s limit and exits by itself.
  const under = await compareJson(sb, [id, "--test", "sleep 1; true", "--timeout", "3"]);
  assert.deepEqual(under.map((r) => r.test?.status), ["exited 0", "exited 0"]);
  // Just over: 3 s of a 2 s limit.
  const over = await compareJson(sb, [id, "--test", "sleep 3", "--timeout", "2"]);
  assert.deepEqual(over.map((r) => r.test?.status), [
    "failed: time limit of 2 s reached",
    "failed: time limit of 2 s reached",
  ]);
  await assertNoThrowaway(sb, id);
});

Deno.test({
  name: "Ctrl-C at marsh compare --test cancels every test: rows shown, exit 130, nothing left",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: { MARSH_CANCEL_GRACE_MS: "500" } });
  const id = await twoBranches(sb);
  const marker = `${sb.scratch}/started`;
  const child = sb.spawnMarsh([
    "compare",
    id,
    "--test",
    `touch '${marker}-'$RANDOM; sleep 29.173`,
  ]);
  await waitFor(
    "both tests to start",
    () =>
      [...Deno.readDirSync(sb.scratch)].filter((e) => e.name.startsWith("started-")).length === 2,
  );
  const sent = Date.now();
  child.kill("SIGINT");
  const r = await finish(child, "the interrupted marsh compare");
  assert.ok(Date.now() - sent < 8_000, `took ${Date.now() - sent} ms`);
  assert.equal(r.code, 130, show(r));
  assert.match(r.stderr, /marsh compare: cancelling the tests/);
  assert.match(r.stdout, /^good .* cancelled /m);
  assert.match(r.stdout, /^bad .* cancelled /m);
  await assertNoThrowaway(sb, id);
  const ps = await sb.bash("pgrep -f 'sleep 29[.]173' || true");
  assert.equal(ps.stdout, "");
});

Deno.test({
  name:
    "marsh compare --test after a daemon restart: the forks are untrusted, no test runs, rows shown",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const id = await twoBranches(sb);
  const stop = await sb.marsh(["daemon", "stop"]);
  assert.equal(stop.code, 0, show(stop));
  const rows = await compareJson(sb, [id, "--test", "touch ran; true"]);
  for (const r of rows) {
    assert.equal(r.test?.exit, null);
    assert.match(r.test!.status, /^failed: .*reopened after a restart/);
  }
  await assertNoThrowaway(sb, id);
});

Deno.test({
  name:
    "marsh compare --test with copy forks (MARSH_FORKS=copy): the throwaway fork is a copy, removed after",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create({ env: { MARSH_FORKS: "copy" } });
  const id = await twoBranches(sb);
  const split = `${sb.project}/.marsh/split/${id}`;
  assert.ok(!exists(`${split}/.overlay`), "copy forks: no overlay dirs");
  const before = await branchSums(sb, id);
  const rows = await compareJson(sb, [
    id,
    "--test",
    "test -f ok.txt; e=$?; echo more >> a.txt; git add -A; git status --short; exit $e",
  ]);
  assert.equal(row(rows, "good").test?.exit, 0);
  assert.equal(row(rows, "bad").test?.exit, 1);
  assert.deepEqual(await branchSums(sb, id), before);
  // Its own index: the test's git saw the branch's file as new, beside its own edit.
  assert.equal(
    Deno.readTextFileSync(`${split}/out/good/compare/stdout`),
    "M  a.txt\nA  ok.txt\n",
  );
  await assertNoThrowaway(sb, id);
});

/** The most intervals `[start, end]` that overlap at any one time. */
function maxOverlap(intervals: readonly (readonly [number, number])[]): number {
  const edges = intervals.flatMap(([a, b]) => [[a, 1], [b, -1]] as const)
    .sort((x, y) => x[0] - y[0] || x[1] - y[1]);
  let now = 0, max = 0;
  for (const [, d] of edges) max = Math.max(max, now += d);
  return max;
}

Deno.test({
  name:
    "marsh compare --test under the pool: with one of 8 slots held by a running branch, 8 tests run 7 at a time and all finish",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const labels = ["b1", "b2", "b3", "b4", "b5", "b6", "b7", "b8"];
  const made = await sb.marsh([
    "split",
    "-n",
    ...labels.flatMap((l) => ["-b", `${l}=echo ${l} > ${l}.txt`]),
  ]);
  assert.equal(made.code, 0, show(made));
  const id = handleId(made.stdout);
  // Another split of yours holds one slot until the gate opens.
  const gate = `${sb.scratch}/gate`;
  const holder = sb.spawnMarsh([
    "split",
    "-n",
    "-b",
    `hold=touch '${sb.scratch}/holding'; while [ ! -e '${gate}' ]; do sleep 0.05; done`,
  ]);
  await waitFor("the holding branch to run", () => exists(`${sb.scratch}/holding`));
  const r = await sb.marsh([
    "compare",
    id,
    "--json",
    "--test",
    `s=$(date +%s%N); sleep 1; echo "$s $(date +%s%N)" > '${sb.scratch}/t-'$(ls b*.txt)`,
  ]);
  Deno.writeTextFileSync(gate, "");
  assert.equal((await finish(holder, "the holding split")).code, 0);
  assert.equal(r.code, 0, show(r));
  const rows = (JSON.parse(r.stdout) as { branches: Row[] }).branches;
  assert.deepEqual(rows.map((x) => x.test?.status), labels.map(() => "exited 0"));
  assert.match(
    r.stderr,
    /marsh compare: the test of b8 waits for a slot \(8 branches and tests of yours are running\)/,
  );
  const intervals = labels.map((l) => {
    const [a, b] = Deno.readTextFileSync(`${sb.scratch}/t-${l}.txt`).trim().split(" ").map(Number);
    return [a!, b!] as const;
  });
  assert.equal(maxOverlap(intervals), 7, JSON.stringify(intervals));
  await assertNoThrowaway(sb, id);
});

Deno.test({
  name:
    "marsh compare --test: a symlink planted at out/<label>/compare is not followed; the row says the output was not kept",
  permissions: PERMISSIONS,
}, async () => {
  await using sb = await Sandbox.create();
  const id = await twoBranches(sb);
  const out = `${sb.project}/.marsh/split/${id}/out`;
  Deno.mkdirSync(`${sb.scratch}/elsewhere`);
  Deno.symlinkSync(`${sb.scratch}/elsewhere`, `${out}/good/compare`);
  const rows = await compareJson(sb, [id, "--test", "echo secret"]);
  assert.equal(
    row(rows, "good").test?.status,
    "exited 0; its output was not kept: out/good/compare was tampered with",
  );
  assert.equal(row(rows, "good").test?.exit, 0);
  assert.deepEqual([...Deno.readDirSync(`${sb.scratch}/elsewhere`)], []);
  assert.equal(row(rows, "bad").test?.status, "exited 0");
  assert.equal(Deno.readTextFileSync(`${out}/bad/compare/stdout`), "secret\n");
  await assertNoThrowaway(sb, id);
});

Deno.test({
  name:
    "a second Ctrl-C at marsh compare --test stops waiting: exit 130 at once, the tests still end",
  permissions: PERMISSIONS,
}, async () => {
  // The default 10 s grace: the INT trap keeps the tests alive after the first Ctrl-C.
  await using sb = await Sandbox.create();
  const id = await twoBranches(sb);
  const child = sb.spawnMarsh([
    "compare",
    id,
    "--test",
    `trap '' INT; touch '${sb.scratch}/started-'$RANDOM; sleep 29.173`,
  ]);
  await waitFor(
    "both tests to start",
    () =>
      [...Deno.readDirSync(sb.scratch)].filter((e) => e.name.startsWith("started-")).length === 2,
  );
  child.kill("SIGINT");
  // Two signals at once could be heard as one.
  await new Promise((r) => setTimeout(r, 200));
  const sent = Date.now();
  child.kill("SIGINT");
  const r = await finish(child, "the twice interrupted marsh compare");
  assert.ok(Date.now() - sent < 3_000, `took ${Date.now() - sent} ms`);
  assert.equal(r.code, 130, show(r));
  assert.match(r.stderr, /stopped waiting; the tests are cancelled without their rows/);
  assert.equal(r.stdout, "");
  await waitFor("the tests to end and their forks to go", async () => {
    const ps = await sb.bash("pgrep -f 'sleep 29[.]173' || true");
    return ps.stdout === "";
  });
  // The daemon removes them after the CLI stopped waiting: the fork, then its admin and upper dirs.
  await waitFor("the throwaway forks to be removed", () => throwawayLeft(sb, id).length === 0);
  await assertNoThrowaway(sb, id);
});
