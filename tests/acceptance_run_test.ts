/**
 * `marsh run` (docs/guide.md "marsh run", docs/rules.md "Running a
 * registered command as a job") through the real CLI, daemon, worker and
 * Docker engine: stdio and exit status passed through, the project's view
 * from the host (`.git` read-only), lineage across a three-level tree,
 * spawn sets, the caps, a shell branch's links, and Ctrl-C.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  finish,
  handleId,
  MARSH,
  PERMISSIONS as permissions,
  show,
  waitFor,
} from "./_acceptance.ts";
import { listContainers, withLock } from "./_engine.ts";
import { pidsNaming, World } from "./_kit_world.ts";

/** A second Kit identity (another image than `fixture`'s), registered as `tools` with entrypoint `env`. */
async function addTools(w: World): Promise<void> {
  // Under the engine lock: builds must not interleave (tests/_engine.ts).
  const b = await withLock(() => w.sb.marsh(["kit", "build", "tools", "--from-host"]));
  assert.equal(b.code, 0, show(b));
  const add = await w.sb.marsh(["kits", "add", "tools", "--image", "tools", "--entrypoint", "env"]);
  assert.equal(add.code, 0, show(add));
}

/** Every job's lineage columns, straight from the daemon's journal (read-only). */
function lineages(w: World) {
  const db = new DatabaseSync(`${w.sb.home}/journal.db`, { readOnly: true });
  try {
    return db.prepare(
      "SELECT id, kit, parent, parent_job, root, depth, spawn, state, code, cleanup, cap FROM jobs ORDER BY created_ms, rowid",
    ).all() as {
      id: string;
      kit: string;
      parent: string;
      parent_job: string | null;
      root: string;
      depth: number;
      spawn: string;
      state: string;
      code: number | null;
      cleanup: string;
      cap: string;
    }[];
  } finally {
    db.close();
  }
}

/** The containers of `marsh run` jobs of this world (their label `marsh.split` is `run`). */
function runContainers(w: World) {
  return listContainers(w.socket, ["marsh.split=run", `marsh.owner=${w.sb.home}`]);
}

Deno.test({
  name:
    "marsh run from the host: stdin, stdout, stderr, exit; writes land in the project; .git read-only",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n" });
  const r = await w.sb.marsh([
    "run",
    "fixture",
    "sh",
    "-c",
    [
      "cat",
      "echo to-err >&2",
      "pwd",
      "echo written > out.txt",
      "touch .git/hooks/planted 2>/dev/null; echo git=$?",
      "cat a.txt",
      "exit 3",
    ].join("; "),
  ], { stdin: "from-stdin\n" });
  assert.equal(r.code, 3, show(r));
  assert.equal(r.stdout, `from-stdin\n${w.sb.project}\ngit=1\nhello\n`, show(r));
  assert.equal(r.stderr, "to-err\n", show(r));
  assert.equal(Deno.readTextFileSync(`${w.sb.project}/out.txt`), "written\n");
  assert.throws(() => Deno.statSync(`${w.sb.project}/.git/hooks/planted`), Deno.errors.NotFound);
  const jobs = await w.jobs();
  assert.equal(jobs.length, 1);
  assert.deepEqual([jobs[0]!.state, jobs[0]!.code, jobs[0]!.cleanup], ["finished", 3, "removed"]);
  assert.deepEqual(await runContainers(w), []);
  // An unregistered name: nothing recorded, 127 with the fix.
  const none = await w.sb.marsh(["run", "nosuch", "x"]);
  assert.deepEqual([none.code, none.stdout, none.stderr], [
    127,
    "",
    "marsh: nosuch is not a registered command (marsh kits ls shows them; marsh kits add registers one)\n",
  ]);
  assert.equal((await w.jobs()).length, 1);
});

Deno.test({
  name:
    "marsh run: a job's link starts a child, which runs marsh run for a grandchild; exact lineage",
  permissions,
}, async () => {
  await using w = await World.create({
    "l1.sh": 'echo "L1 $MARSH_JOB"; tools sh ./l2.sh; echo "L1 after $?"\n',
    "l2.sh": 'echo "L2 $MARSH_JOB"; marsh run fixture sh ./l3.sh; echo "L2 after $?"\n',
    "l3.sh": 'echo "L3 $MARSH_JOB"; echo "to stderr" >&2; exit 7\n',
  });
  await addTools(w);
  const r = await w.sb.marsh(["run", "fixture", "sh", "./l1.sh"]);
  assert.equal(r.code, 0, show(r));
  const lines = r.stdout.trimEnd().split("\n");
  assert.equal(lines.length, 5, show(r));
  const [l1, l2, l3] = lines.slice(0, 3).map((l) => l.split(" ")[1]!);
  assert.deepEqual(lines.map((l) => l.replace(/ [a-z0-9]{8}$/, "")), [
    "L1",
    "L2",
    "L3",
    "L2 after 7",
    "L1 after 0",
  ]);
  assert.equal(r.stderr, "to stderr\n", show(r));
  const rows = lineages(w);
  assert.deepEqual(rows.map((j) => [j.id, j.kit, j.parent, j.parent_job, j.root, j.depth]), [
    [l1, "fixture", "session:host", null, l1, 1],
    [l2, "tools", `job:${l1}`, l1, l1, 2],
    [l3, "fixture", `job:${l2}`, l2, l1, 3],
  ]);
  for (const j of rows) {
    assert.deepEqual([j.state, j.cleanup, j.cap], ["finished", "removed", "revoked"], j.id);
    assert.deepEqual(JSON.parse(j.spawn), ["fixture", "tools"]);
  }
  assert.deepEqual(rows.map((j) => j.code), [0, 0, 7]);
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: MARSH_SPAWN narrows; the link refuses 126, marsh run 125; --spawn never widens",
  permissions,
}, async () => {
  await using w = await World.create({
    "link.sh": 'tools true; echo "link $?"\n',
    "run.sh": 'marsh run tools true; echo "run $?"\n',
    "json.sh": "cat /run/marsh/job.json\n",
    "widen.sh": "marsh run --spawn fixture,tools fixture sh ./json.sh\n",
  });
  await addTools(w);
  const env = { MARSH_SPAWN: "fixture" };
  const link = await w.sb.marsh(["run", "fixture", "sh", "./link.sh"], { env });
  assert.equal(link.code, 0, show(link));
  assert.equal(link.stdout, "link 126\n");
  assert.equal(
    link.stderr,
    "marsh: spawn refused: tools not in this job's spawn set (MARSH_SPAWN)\n",
  );
  const run = await w.sb.marsh(["run", "fixture", "sh", "./run.sh"], { env });
  assert.equal(run.stdout, "run 125\n", show(run));
  assert.equal(
    run.stderr,
    "marsh: spawn refused: tools not in this job's spawn set (MARSH_SPAWN)\n",
  );
  // A child asking for more than its parent has gets the intersection, and a warning.
  const widen = await w.sb.marsh(["run", "fixture", "sh", "./widen.sh"], { env });
  assert.equal(widen.code, 0, show(widen));
  const job = JSON.parse(widen.stdout);
  assert.deepEqual([job.spawn, job.registered], [["fixture"], ["fixture", "tools"]]);
  assert.deepEqual(job.limits, { pool: 8, depth: 4, same_kit: 2, fan_out: 4, total: 64 });
  assert.equal(
    widen.stderr,
    "marsh: --spawn: tools left out: a spawn set only narrows (it was: fixture)\n",
  );
  // --no-spawn: the job keeps its socket and links, and starts nothing.
  const none = await w.sb.marsh(["run", "--no-spawn", "fixture", "sh", "./link.sh"]);
  assert.equal(none.stdout, "link 126\n", show(none));
  const rows = lineages(w);
  // Refusals recorded no job: the two roots of the first two runs, the widen pair, the last root.
  assert.deepEqual(rows.map((j) => [j.depth, JSON.parse(j.spawn)]), [
    [1, ["fixture"]],
    [1, ["fixture"]],
    [1, ["fixture"]],
    [2, ["fixture"]],
    [1, []],
  ]);
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: depth 4 and the same-Kit chain 2, each just under, at and just over",
  permissions,
}, async () => {
  await using w = await World.create({
    // Alternating Kits: only the depth limit stops it.
    "deep.sh": [
      'echo "depth $1"',
      'if [ "$2" = fixture ]; then next=tools; else next=fixture; fi',
      'marsh run "$next" sh ./deep.sh $(($1 + 1)) "$next"',
      'echo "exit $?"',
      "",
    ].join("\n"),
    "same.sh": 'echo same; marsh run fixture sh ./same.sh; echo "exit $?"\n',
  });
  await addTools(w);
  const deep = await w.sb.marsh(["run", "fixture", "sh", "./deep.sh", "1", "fixture"]);
  assert.equal(deep.code, 0, show(deep));
  assert.equal(
    deep.stdout,
    "depth 1\ndepth 2\ndepth 3\ndepth 4\nexit 125\nexit 0\nexit 0\nexit 0\n",
    show(deep),
  );
  assert.equal(deep.stderr, "marsh: depth limit 4\n");
  assert.deepEqual(lineages(w).map((j) => j.depth), [1, 2, 3, 4]);
  const same = await w.sb.marsh(["run", "fixture", "sh", "./same.sh"]);
  assert.equal(same.stdout, "same\nsame\nexit 125\nexit 0\n", show(same));
  assert.equal(
    same.stderr,
    "marsh: fixture → fixture → fixture refused: same-Kit chain limit 2 (see /run/marsh/context.md)\n",
  );
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: fan-out 4 live children, the fifth refused; MARSH_TREE_KIT_VMS read at start",
  permissions,
}, async () => {
  await using w = await World.create({
    "child.sh": "while [ ! -f gate ]; do sleep 0.1; done\n",
    "fan.sh": [
      "for i in 1 2 3 4 5; do",
      '  (marsh run fixture sh ./child.sh; echo "exit $?" >> statuses) &',
      "  sleep 0.5",
      "done",
      "wait",
      "",
    ].join("\n"),
    "vms.sh": 'marsh run tools true; echo "exit $?"\n',
  }, { MARSH_TREE_KIT_VMS: "1" });
  await addTools(w);
  const run = w.sb.spawnMarsh(["run", "fixture", "sh", "./fan.sh"]);
  const statuses = `${w.sb.project}/statuses`;
  await waitFor("the fifth child refused", () => {
    try {
      return Deno.readTextFileSync(statuses).includes("exit 125");
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
  });
  // The four admitted ones are still running: the refusal was the fan-out's.
  assert.equal(
    lineages(w).filter((j) => ["queued", "running"].includes(j.state) && j.depth === 2).length,
    4,
  );
  Deno.writeTextFileSync(`${w.sb.project}/gate`, "");
  const r = await run.output();
  const err = new TextDecoder().decode(r.stderr);
  assert.equal(r.code, 0, err);
  assert.deepEqual(Deno.readTextFileSync(statuses).split("\n").filter((l) => l).sort(), [
    "exit 0",
    "exit 0",
    "exit 0",
    "exit 0",
    "exit 125",
  ]);
  assert.equal(err, "marsh: fan-out limit 4\n");
  // With MARSH_TREE_KIT_VMS=1 a tree of fixture cannot add tools; tools alone is one VM.
  const vms = await w.sb.marsh(["run", "fixture", "sh", "./vms.sh"]);
  assert.equal(vms.stdout, "exit 125\n", show(vms));
  assert.equal(
    vms.stderr,
    "marsh: tools refused: tree already uses 1 Kit VMs (fixture) (MARSH_TREE_KIT_VMS)\n",
  );
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: Ctrl-C stops the job and its child at once; both containers verified gone",
  permissions,
}, async () => {
  await using w = await World.create({
    "top.sh": "fixture sh -c 'echo child-up > up; sleep 300'\n",
  }, { MARSH_CANCEL_GRACE_MS: "2000" });
  const run = w.sb.spawnMarsh(["run", "fixture", "sh", "./top.sh"]);
  await waitFor("the child running", async () => {
    try {
      Deno.statSync(`${w.sb.project}/up`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return false;
      throw error;
    }
    return (await runContainers(w)).length === 2;
  });
  const t0 = Date.now();
  run.kill("SIGINT");
  const r = await run.output();
  assert.equal(r.code, 130, new TextDecoder().decode(r.stderr));
  // INT, the 2 s grace, KILL: both at once, not one after the other.
  assert.ok(Date.now() - t0 < 8_000, `took ${Date.now() - t0} ms`);
  assert.deepEqual(await runContainers(w), []);
  const rows = lineages(w);
  assert.deepEqual(rows.map((j) => [j.depth, j.state, j.code, j.cleanup, j.cap]), [
    [1, "cancelled", 130, "removed", "revoked"],
    [2, "cancelled", 130, "removed", "revoked"],
  ]);
});

Deno.test({
  name:
    "marsh run: a shell branch's registered name runs as a confined job; its write is in the patch",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n" });
  const r = await w.split([
    "-n",
    "-b",
    'fix=fixture sh -c "echo hi > f; cat a.txt; echo \\$MARSH_JOB > job"; echo "after $?"',
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const b = m.branches[0]!;
  assert.equal(b.status, "exited 0", JSON.stringify(b));
  const patch = Deno.readTextFileSync(`${m.out}/fix/diff.patch`);
  assert.match(
    patch,
    /diff --git a\/f b\/f\nnew file mode 100644\n.*\n--- \/dev\/null\n\+\+\+ b\/f\n@@ -0,0 \+1 @@\n\+hi\n/,
  );
  assert.equal(Deno.readTextFileSync(`${m.out}/fix/stdout`), "hello\nafter 0\n");
  // The project itself is untouched: the job wrote the branch's fork.
  assert.throws(() => Deno.statSync(`${w.sb.project}/f`), Deno.errors.NotFound);
  const rows = lineages(w);
  assert.equal(rows.length, 1);
  assert.deepEqual([rows[0]!.parent, rows[0]!.depth, rows[0]!.state], [
    `split:${m.id}/fix`,
    1,
    "finished",
  ]);
  assert.match(patch, new RegExp(`\\+${rows[0]!.id}\\n`));
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name:
    "marsh run streams: output comes while stdin is still open; a host terminal is allowed, no PTY",
  permissions,
}, async () => {
  await using w = await World.create();
  const child = new Deno.Command(MARSH, {
    args: ["run", "fixture", "sh", "-c", 'read a; echo "got $a"; read b; echo "got $b"'],
    cwd: w.sb.project,
    env: w.sb.env,
    clearEnv: true,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const stdin = child.stdin.getWriter();
  const stdout = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
  await stdin.write(new TextEncoder().encode("one\n"));
  let seen = "";
  while (!seen.includes("got one\n")) {
    const { value, done } = await stdout.read();
    assert.ok(!done, `stdout ended early: ${JSON.stringify(seen)}`);
    seen += value;
  }
  // The first answer came before the second line was even written: nothing waited for EOF.
  await stdin.write(new TextEncoder().encode("two\n"));
  await stdin.close();
  for (;;) {
    const { value, done } = await stdout.read();
    if (done) break;
    seen += value;
  }
  const status = await child.status;
  await child.stderr.cancel();
  assert.equal(status.code, 0);
  assert.equal(seen, "got one\ngot two\n");
  // From the host with a terminal on stdin and stdout: allowed (not a child), the command sees pipes.
  const tty = await w.sb.bash(
    `script -qec "$M run fixture sh -c 'test -t 0; echo in=\\$?; test -t 1; echo out=\\$?'" /dev/null`,
  );
  assert.equal(tty.code, 0, show(tty));
  assert.equal(tty.stdout.replaceAll("\r", ""), "in=1\nout=1\n", show(tty));
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: a branch job's child sees, of the project, only the fork (its parent's mounts)",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n", "secret.txt": "s\n" });
  const root = w.sb.project;
  const child = [
    `ls -a ${root} > ls_root.txt 2>&1`,
    `ls -a ${root}/.git > ls_git.txt 2>&1`,
    `cat ${root}/secret.txt > cat_secret.txt 2>&1; echo $? >> cat_secret.txt`,
    "cat a.txt > seen_a.txt",
    "pwd > cwd.txt",
  ].join("; ");
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    // The branch job edits its fork, then its child (through the link) looks around.
    `echo parent >> a.txt; rm secret.txt; marsh run fixture sh -c '${child}'; echo "rc=$?" > rc.txt`,
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const patch = Deno.readTextFileSync(`${m.out}/a/diff.patch`);
  const added = (path: string) => {
    const at = patch.indexOf(`diff --git a/${path} b/${path}\n`);
    assert.ok(at >= 0, `${path} in the patch:\n${patch}`);
    const rest = patch.slice(at).split("\n").slice(1);
    const end = rest.findIndex((l) => l.startsWith("diff --git "));
    return (end < 0 ? rest : rest.slice(0, end))
      .filter((l) => l.startsWith("+") && !l.startsWith("+++")).map((l) => l.slice(1)).join("\n");
  };
  assert.equal(added("rc.txt"), "rc=0");
  // Of the project, only the dirs leading to the fork: no .git, no secret, the fork's own a.txt.
  assert.equal(added("ls_root.txt"), ".\n..\n.marsh");
  assert.match(added("ls_git.txt"), /No such file or directory/);
  assert.match(added("cat_secret.txt"), /No such file or directory\n1$/);
  assert.equal(added("seen_a.txt"), "hello\nparent");
  assert.equal(added("cwd.txt"), m.branches[0]!.fork);
  const rows = lineages(w);
  assert.deepEqual(rows.map((j) => [j.kit, j.parent_job, j.depth]), [
    ["fixture", null, 1],
    ["fixture", m.branches[0]!.job_id, 2],
  ]);
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name:
    "marsh run: MARSH_JOB_WALL_SECONDS stops the job (124); its child's deadline is the parent's",
  permissions,
}, async () => {
  await using w = await World.create({
    // The root outlives its child's end either way: its own wall kill ends it.
    "top.sh": "marsh run fixture sleep 60; sleep 60\n",
  }, { MARSH_JOB_WALL_SECONDS: "4", MARSH_CANCEL_GRACE_MS: "1000" });
  const t0 = Date.now();
  const r = await w.sb.marsh(["run", "fixture", "sh", "./top.sh"]);
  assert.equal(r.code, 124, show(r));
  assert.ok(Date.now() - t0 < 20_000, `took ${Date.now() - t0} ms`);
  const db = new DatabaseSync(`${w.sb.home}/journal.db`, { readOnly: true });
  try {
    const rows = db.prepare(
      "SELECT depth, deadline_ms, parent_deadline, created_ms, state, status FROM jobs ORDER BY depth",
    ).all() as {
      depth: number;
      deadline_ms: number;
      parent_deadline: number;
      created_ms: number;
      state: string;
      status: string;
    }[];
    assert.equal(rows.length, 2);
    const [top, child] = rows as [typeof rows[0], typeof rows[0]];
    // The root's deadline: its start plus MARSH_JOB_WALL_SECONDS (the Kit's own limit is longer).
    assert.ok(Math.abs(top.deadline_ms - top.created_ms - 4_000) < 1_000, JSON.stringify(top));
    assert.equal(top.parent_deadline, 0);
    // The child's is its parent's, and says so.
    assert.deepEqual([child.deadline_ms, child.parent_deadline], [top.deadline_ms, 1]);
    assert.equal(top.status, "failed: wall clock limit reached (limit:wall)");
    // The child ends at the same deadline: by its own wall kill, or cancelled by its parent's end.
    assert.ok(
      ["failed: wall clock limit reached (limit:wall: parent deadline)", "cancelled"].includes(
        child.status,
      ),
      child.status,
    );
  } finally {
    db.close();
  }
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: the daemon dies mid-run; the client says job uncertain (125), reset frees it",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const run = sb.spawnMarsh(["run", "fixture", "sleep", "600"]);
  const container = await waitFor("the job's container", async () => {
    const c = await runContainers(w);
    return c.length === 1 ? c[0]!.id : undefined;
  });
  const pid = sb.daemonPid();
  assert.ok(pid);
  const workers = await pidsNaming("worker/main.ts", sb.home);
  assert.equal(workers.length, 1, `worker pids ${workers}`);
  // Frozen first, then killed: the worker may not see its daemon go and stop the container.
  for (const p of [workers[0]!, pid]) Deno.kill(p, "SIGSTOP");
  for (const p of [workers[0]!, pid]) Deno.kill(p, "SIGKILL");
  const lost = await finish(run, "marsh run");
  assert.equal(lost.code, 125, show(lost));
  assert.match(
    lost.stderr,
    /^marsh: job uncertain: the daemon went away while job [a-z0-9]{8} ran \(marsh jobs shows it\)\n$/,
  );
  // A new daemon: the job is uncertain and its container still there; nothing is rerun.
  const jobs = await w.jobs();
  assert.deepEqual(jobs.map((j) => [j.state, j.cleanup]), [["uncertain", "uncertain"]]);
  assert.deepEqual((await runContainers(w)).map((c) => c.id), [container]);
  const reset = await sb.marsh(["workers", "reset", "fixture"]);
  assert.equal(reset.code, 0, show(reset));
  assert.deepEqual(await runContainers(w), []);
});

Deno.test({
  name: "marsh run: a caller that dies (kill -9) cancels its job; the container is verified gone",
  permissions,
}, async () => {
  await using w = await World.create(undefined, { MARSH_CANCEL_GRACE_MS: "1000" });
  const run = w.sb.spawnMarsh(["run", "fixture", "sleep", "300"]);
  await waitFor("the job's container", async () => (await runContainers(w)).length === 1);
  // The launcher execs Deno: this pid is the CLI itself, and nothing tells the daemon it died.
  run.kill("SIGKILL");
  await run.output();
  await waitFor("the job cancelled", () => {
    const rows = lineages(w);
    return rows.length === 1 && rows[0]!.state === "cancelled" ? rows : undefined;
  });
  const [job] = lineages(w);
  assert.deepEqual([job!.code, job!.cleanup, job!.cap], [130, "removed", "revoked"]);
  assert.deepEqual(await runContainers(w), []);
});
