/**
 * Argv branches (`::: LABEL CMD ARGS...`, issue 5 §3) through the real CLI,
 * daemon and worker against a real engine holding the fixture Kit: one
 * fresh container per branch, the patch and status back through `join`,
 * the manifest's placement and job id, the container gone afterwards,
 * hostile admin config and nested `.git`, planted symlinks, the 16 MiB
 * output limit, an unregistered CMD, `marsh jobs`, and `kill -9` of the
 * daemon mid-branch (uncertain, container reported, slot held until
 * `marsh workers reset`).
 *
 * The engine is the one {@linkcode ensureEngine} provides (see
 * `tests/_engine.ts`): a missing engine fails these tests, never skips them.
 * Every container a test's splits made is removed at its end.
 */

import assert from "node:assert/strict";
import {
  exists,
  finish,
  handleId,
  PERMISSIONS as permissions,
  show,
  waitFor,
} from "./_acceptance.ts";
import { pidsNaming, World } from "./_kit_world.ts";

Deno.test({
  name: "argv branches: patch and status through join, kit placement, job id, containers gone",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n", "sub/keep.txt": "k\n" });
  const { sb } = w;
  const r = await w.split([
    "-b",
    "s=echo shell > s.txt",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    "echo x > f.txt; echo out; echo err >&2",
    ":::",
    "b",
    "fixture",
    "sh",
    "-c",
    "exit 3",
    ":::",
    "c",
    "fixture",
    "sh",
    "-c",
    'pwd > where.txt; cat > in.txt; printf "%s|" "$@" > args.txt',
    "x",
    "two words",
    ":::a",
    "",
  ], { cwd: `${sb.project}/sub`, stdin: "spooled input\n" });
  assert.equal(r.code, 3, show(r));
  const id = handleId(r.stdout);

  const m = await w.manifest(id);
  assert.equal(m.state, "await");
  assert.equal(m.status, 3);
  assert.deepEqual(
    m.branches.map((b) => [b.label, b.kind, b.placement, b.state, b.status]),
    [
      ["s", "shell", "shell-vm", "captured", "exited 0"],
      ["a", "argv", "kit:fixture", "captured", "exited 0"],
      ["b", "argv", "kit:fixture", "captured", "exited 3"],
      ["c", "argv", "kit:fixture", "captured", "exited 0"],
    ],
  );
  for (const b of m.branches) {
    assert.equal(b.fork_strategy, "overlay", b.label);
    if (b.kind === "argv") assert.match(b.job_id ?? "", /^[a-z0-9]{8,}$/, b.label);
    else assert.equal(b.job_id, undefined);
  }
  const fork = (label: string) => `${m.dir}/${label}`;
  // cwd: the fork's copy of the caller's cwd, at the same absolute path inside the container.
  assert.equal(Deno.readTextFileSync(`${fork("c")}/sub/where.txt`), `${fork("c")}/sub\n`);
  assert.equal(Deno.readTextFileSync(`${fork("c")}/sub/in.txt`), "spooled input\n");
  // argv verbatim: an empty word and ":::a" are arguments like any other.
  assert.equal(Deno.readTextFileSync(`${fork("c")}/sub/args.txt`), "two words|:::a||");
  assert.equal(Deno.readTextFileSync(`${m.out}/a/stdout`), "out\n");
  assert.equal(Deno.readTextFileSync(`${m.out}/a/stderr`), "err\n");

  const join = await sb.marsh(["join"], { stdin: r.stdout });
  assert.equal(join.code, 0, show(join));
  assert.match(
    join.stdout,
    /== a: exited 0 \(1 file changed\)\ndiff --git a\/sub\/f\.txt b\/sub\/f\.txt/,
  );
  assert.match(join.stdout, /^\+x$/m);
  assert.match(join.stdout, /== b: exited 3 \(no changes\)/);
  assert.match(join.stderr, new RegExp(`split ${id} kept: branch b: exited 3`));
  // The patch applies to the user's tree.
  const apply = await sb.runGit(["apply", "--check", `${m.out}/a/diff.patch`]);
  assert.equal(apply.code, 0, show(apply));

  // Every container was deleted before its branch was captured.
  assert.deepEqual(await w.containersOf(id), []);
  const jobs = (await w.jobs()).filter((j) => j.split === id);
  assert.deepEqual(jobs.map((j) => j.label).sort(), ["a", "b", "c"]);
  for (const j of jobs) {
    const b = m.branches.find((x) => x.label === j.label)!;
    assert.equal(j.id, b.job_id);
    assert.equal(j.kit, "fixture");
    assert.equal(j.state, "finished");
    assert.equal(j.cleanup, "removed");
    assert.equal(j.code, j.label === "b" ? 3 : 0);
    assert.equal(j.status, b.status);
    assert.match(j.container ?? "", /^[0-9a-f]{64}$/);
    assert.ok(j.started_unix_ms !== null && j.finished_unix_ms !== null);
    assert.ok(j.finished_unix_ms >= j.started_unix_ms);
  }
  assert.deepEqual(jobs.find((j) => j.label === "b")?.args, ["fixture", "sh", "-c", "exit 3"]);
  // The listing's format is golden-tested in tests/acceptance_jobs_test.ts.
  const text = await sb.marsh(["jobs"]);
  assert.equal(text.code, 0, show(text));
  assert.match(text.stdout, /^ID +STARTED +STATE +EXIT +RUN +PARENT +COMMAND$/m);
  const b = jobs.find((j) => j.label === "b")!;
  assert.match(
    text.stdout,
    new RegExp(
      `^${b.id.slice(0, 8)} +\\d+s ago +finished +3 +[0-9.]+s +${
        id.slice(0, 8)
      } +fixture sh -c 'exit 3'$`,
      "m",
    ),
  );

  const rm = await sb.marsh(["splits", "rm", id]);
  assert.equal(rm.code, 0, show(rm));
});

Deno.test({
  name: "argv branches: an unregistered CMD is refused with the list, nothing created",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const r = await w.split(["-n", ":::", "a", "fixture", "true", ":::", "x", "nope", "-p", "y"]);
  assert.equal(r.code, 2, show(r));
  assert.equal(r.stdout, "");
  assert.equal(
    r.stderr,
    'marsh split: unknown Kit command "nope" in branch "x"; registered: fixture (add one with: marsh kits add NAME --image IMAGE)\n',
  );
  assert.deepEqual(await sb.splits(), []);
  assert.deepEqual(await w.jobs(), []);
  assert.ok(!exists(`${sb.project}/.marsh/split`));

  // With a spool still streaming when the refusal comes, the refusal still arrives (every time).
  for (let i = 0; i < 10; i++) {
    const again = await w.split([":::", "x", "nope"], { stdin: "input\n".repeat(1000) });
    assert.equal(again.code, 2, show(again));
    assert.match(again.stderr, /^marsh split: unknown Kit command "nope" in branch "x"/);
  }

  const usage = await w.split(["-n", ":::", "a"]);
  assert.equal(usage.code, 2, show(usage));
  assert.match(usage.stderr, /^marsh split: argv branch 1 needs a label and a command after :::/);
});

Deno.test({
  name:
    "argv branches: hostile admin config and nested .git fail or are rejected; host git runs nothing",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const marker = `${sb.scratch}/ran`;
  const hook = `touch ${marker}`;
  const r = await w.split([
    "-n",
    ":::",
    "cfg",
    "fixture",
    "sh",
    "-c",
    `dir=$(git rev-parse --git-dir) || exit 9
git config core.fsmonitor '${hook}'; echo "fsmonitor $?" >> r.txt
git config core.hooksPath /tmp; echo "hooksPath $?" >> r.txt
printf '[core]\\n\\tfsmonitor = ${hook}\\n' >> "$dir/config"; echo "append $?" >> r.txt
printf 'gitdir: /etc\\n' > .git; echo "gitfile $?" >> r.txt
echo "$dir" > gitdir.txt`,
    ":::",
    "nested",
    "fixture",
    "sh",
    "-c",
    `mkdir -p sub/.git && printf '[core]\\n\\tfsmonitor = ${hook}\\n' > sub/.git/config && echo HEAD > sub/.git/HEAD`,
    ":::",
    "hooks",
    "fixture",
    "sh",
    "-c",
    `dir=$(git rev-parse --git-dir) && mkdir "$dir/hooks" && printf '#!/bin/sh\\n${hook}\\n' > "$dir/hooks/post-checkout"`,
  ]);
  assert.equal(r.code, 125, show(r));
  const id = handleId(r.stdout);
  const m = await w.manifest(id);
  const branch = (label: string) => m.branches.find((b) => b.label === label)!;

  // The config, HEAD and gitfile are read-only binds: every write failed.
  assert.equal(branch("cfg").state, "captured", show(r));
  const cfgFork = `${m.dir}/cfg`;
  const results = Deno.readTextFileSync(`${cfgFork}/r.txt`).trim().split("\n");
  assert.equal(results.length, 4);
  for (const line of results) assert.doesNotMatch(line, / 0$/, line);
  assert.equal(Deno.readTextFileSync(`${cfgFork}/gitdir.txt`).trim(), `${m.dir}/.admin/cfg`);
  assert.doesNotMatch(
    Deno.readTextFileSync(`${m.dir}/.admin/cfg/config`),
    /fsmonitor = touch|hooksPath = \/tmp/,
  );

  assert.equal(branch("nested").state, "rejected");
  assert.match(branch("nested").status ?? "", /^rejected: .*\.git/);
  assert.equal(branch("hooks").state, "rejected");
  assert.match(branch("hooks").status ?? "", /^rejected: .*hooks/);
  // Argv branches go through the same verification: rejected forks are kept
  // and untrusted, the branch's hooks set aside with its admin dir.
  for (const label of ["nested", "hooks"]) {
    assert.equal(branch(label).trust, "untrusted", label);
    assert.ok(exists(branch(label).fork), `${label}: its fork is kept`);
  }
  assert.ok(exists(`${m.dir}/.admin/.rejected-hooks/hooks/post-checkout`));
  assert.ok(!exists(`${m.dir}/.admin/hooks/hooks`));

  // A host git in the surviving fork (and an IDE) meets nothing the branch wrote.
  const status = await sb.runGit(["-C", cfgFork, "status", "--porcelain"]);
  assert.equal(status.code, 0, show(status));
  for (const label of ["nested", "hooks"]) {
    const dir = label === "nested" ? `${m.dir}/${label}/sub` : `${m.dir}/${label}`;
    // A rejected fork is kept, its admin dir set aside for marsh's own: git
    // there finds no repository of the branch's making that it would obey.
    await sb.runGit(["-C", dir, "status"]);
  }
  assert.ok(!exists(marker), "a branch-written fsmonitor or hook ran on the host");
  assert.deepEqual(await w.containersOf(id), []);
});

Deno.test({
  name: "argv branches: planted symlinks come back as symlinks in the patch",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const r = await w.split([
    "-n",
    ":::",
    "links",
    "fixture",
    "sh",
    "-c",
    "ln -s /etc/passwd pw && ln -s .. up && ln -s ../../.. far",
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const m = await w.manifest(id);
  assert.equal(m.branches[0]?.state, "captured", show(r));
  const patch = Deno.readTextFileSync(`${m.out}/links/diff.patch`);
  const links: [string, string][] = [["pw", "/etc/passwd"], ["up", ".."], ["far", "../../.."]];
  for (const [path, target] of links) {
    assert.match(
      patch,
      new RegExp(
        `diff --git a/${path} b/${path}\\nnew file mode 120000\\n[^\\n]*\\n--- /dev/null\\n\\+\\+\\+ b/${path}\\n@@ -0,0 \\+1 @@\\n\\+${
          target.replace(/[./]/g, "\\$&")
        }\\n\\\\ No newline at end of file`,
      ),
    );
  }
  assert.equal(
    Deno.readTextFileSync(`${m.out}/links/files`),
    "A\tfar\nA\tpw\nA\tup\n",
  );
  // Applied, they stay links: nothing is followed.
  const apply = await sb.runGit(["apply", `${m.out}/links/diff.patch`]);
  assert.equal(apply.code, 0, show(apply));
  assert.equal(Deno.readLinkSync(`${sb.project}/pw`), "/etc/passwd");
  assert.equal(Deno.readLinkSync(`${sb.project}/up`), "..");
});

Deno.test({
  name: "argv branches: 20 MiB on stdout cancels the split at the 16 MiB limit",
  permissions,
}, async () => {
  await using w = await World.create();
  const r = await w.split([
    "-n",
    ":::",
    "loud",
    "fixture",
    "sh",
    "-c",
    "head -c 20971520 /dev/zero; sleep 30",
    ":::",
    "quiet",
    "fixture",
    "sleep",
    "30",
  ]);
  assert.equal(r.code, 130, show(r));
  const id = handleId(r.stdout);
  assert.match(
    r.stderr,
    new RegExp(`split ${id} cancelled: captured output limit of 16 MiB exceeded`),
  );
  const m = await w.manifest(id);
  assert.equal(m.state, "cancelled");
  assert.equal(m.reason, "captured output limit of 16 MiB exceeded");
  for (const b of m.branches) assert.equal(b.status, "cancelled", b.label);
  // Every end was confirmed, so the split dir is gone and so are the containers.
  assert.ok(!exists(m.dir));
  assert.deepEqual(await w.containersOf(id), []);
  const jobs = (await w.jobs()).filter((j) => j.split === id);
  assert.deepEqual(jobs.map((j) => [j.label, j.state, j.cleanup]).sort(), [
    ["loud", "cancelled", "removed"],
    ["quiet", "cancelled", "removed"],
  ]);
});

Deno.test({
  name:
    "argv branches: kill -9 mid-branch gives uncertain, the container reported, its slot held until workers reset",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  // The daemon that registered the Kit gives way to one that pauses after launching.
  const stop = await sb.marsh(["daemon", "stop"]);
  assert.equal(stop.code, 0, show(stop));
  const started = await sb.marsh(["daemon", "start"], { env: { MARSH_TEST_PAUSE_AT: "mid-run" } });
  assert.equal(started.code, 0, show(started));
  const oldPid = sb.daemonPid();
  assert.ok(oldPid);
  const creator = sb.spawnMarsh(["split", "-n", ":::", "slow", "fixture", "sleep", "600"]);
  await waitFor("the daemon to pause mid-run", () => exists(`${sb.home}/paused-mid-run`));
  const job = await waitFor("the job's container", async () => {
    const j = (await w.jobs())[0];
    return j?.container ? j : undefined;
  });
  w.splits.push(job.split);
  const container = job.container!;
  assert.equal(job.state, "running");
  assert.equal(job.cleanup, "live");
  // The daemon and its worker die at once: nothing is left to remove the container.
  const workers = await pidsNaming("worker/main.ts", sb.home);
  assert.equal(workers.length, 1, `worker pids ${workers}`);
  // Frozen first, then killed: the worker may not see its daemon go and stop the container.
  for (const pid of [workers[0]!, oldPid]) Deno.kill(pid, "SIGSTOP");
  for (const pid of [workers[0]!, oldPid]) Deno.kill(pid, "SIGKILL");
  const lost = await finish(creator, "the creator's marsh split");
  assert.notEqual(lost.code, 0, show(lost));
  const id = job.split;

  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));
  const left = await w.containersOf(id);
  assert.deepEqual(left.map((c) => c.id), [container], "the container outlived its daemon");

  const s = await w.manifest(id);
  assert.equal(s.state, "uncertain");
  assert.equal(
    s.reason,
    `daemon restarted; branch slow (kit fixture): its container ${
      container.slice(0, 12)
    } may still run: run marsh workers reset fixture`,
  );
  const b = s.branches[0]!;
  assert.equal(b.state, "uncertain");
  assert.equal(b.trust, "untrusted");
  assert.match(b.status ?? "", /may still run: run marsh workers reset fixture$/);
  const text = await sb.marsh(["splits", id]);
  assert.match(text.stdout, new RegExp(`reason: .*${container.slice(0, 12)}`));
  assert.match(
    Deno.readTextFileSync(`${sb.home}/marshd.log`),
    new RegExp(`container ${container}`),
  );
  const [after] = (await w.jobs()).filter((j) => j.id === job.id);
  assert.equal(after?.state, "uncertain");
  assert.equal(after?.cleanup, "uncertain");
  assert.equal(after?.container, container, "marsh jobs show names the container");
  const listed = await sb.marsh(["jobs"]);
  assert.match(
    listed.stdout,
    new RegExp(
      `^${
        job.id.slice(0, 8)
      } .* uncertain .*  cleanup uncertain \\(run marsh workers reset fixture\\)$`,
      "m",
    ),
  );

  // The slot is held: seven more branches fit in the host pool, the eighth does not.
  const full = await w.split(
    ["-n", ...Array.from({ length: 8 }, (_, i) => ["-b", `s${i}=true`]).flat()],
  );
  assert.equal(full.code, 125, show(full));
  assert.match(
    full.stderr,
    /branch s7: failed: capacity: 8 branches \(1 held by uncertain jobs on Kit fixture: run marsh workers reset fixture\)/,
  );
  const fm = await w.manifest(handleId(full.stdout));
  assert.equal(fm.branches.at(-1)?.status, "failed: capacity");
  // Nor can the split be removed while its container may run.
  const rm = await sb.marsh(["splits", "rm", id]);
  assert.equal(rm.code, 2, show(rm));
  assert.match(rm.stderr, /may still run; remove it first with: marsh workers reset fixture/);

  const reset = await sb.marsh(["workers", "reset", "fixture"]);
  assert.equal(reset.code, 0, show(reset));
  assert.equal(
    reset.stdout,
    `removed container ${container.slice(0, 12)} (${id}/slow, job ${job.id})\n` +
      `released the slot of job ${job.id} (${id}/slow)\n`,
  );
  assert.deepEqual(await w.containersOf(id), []);
  assert.equal((await w.jobs()).find((j) => j.id === job.id)?.cleanup, "removed");
  const again = await sb.marsh(["workers", "reset", "fixture"]);
  assert.equal(again.code, 0, show(again));
  assert.equal(again.stdout, "kit fixture: no leftover containers and no held slots\n");

  const fits = await w.split(
    ["-n", ...Array.from({ length: 8 }, (_, i) => ["-b", `s${i}=true`]).flat()],
  );
  assert.equal(fits.code, 0, show(fits));
  const rm2 = await sb.marsh(["splits", "rm", id]);
  assert.equal(rm2.code, 0, show(rm2));
});
