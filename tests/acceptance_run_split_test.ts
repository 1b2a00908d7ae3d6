/**
 * `marsh split` from a `marsh run` job (docs/rules.md "Running a registered
 * command as a job" and "Nested splits") through the real CLI, daemon,
 * worker and Docker engine: the snapshot is the run job's view root, its
 * argv branches are the run job's children, its join renders inside the
 * job, and one Ctrl-C of the host `marsh run` stops the nested split too.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { handleId, PERMISSIONS as permissions, show, waitFor } from "./_acceptance.ts";
import { listContainers, removeContainers, withLock } from "./_engine.ts";
import { World } from "./_kit_world.ts";

/** A second Kit identity (another image than `fixture`'s), registered as `tools` with entrypoint `env`. */
async function addTools(w: World): Promise<void> {
  // Under the engine lock: builds must not interleave (tests/_engine.ts).
  const b = await withLock(() => w.sb.marsh(["kit", "build", "tools", "--from-host"]));
  assert.equal(b.code, 0, show(b));
  const add = await w.sb.marsh(["kits", "add", "tools", "--image", "tools", "--entrypoint", "env"]);
  assert.equal(add.code, 0, show(add));
}

/** Rows of the daemon's journal (read-only). */
function query<T>(w: World, sql: string): T[] {
  const db = new DatabaseSync(`${w.sb.home}/journal.db`, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

interface JobRow {
  id: string;
  kit: string;
  split: string;
  label: string;
  parent: string;
  parent_job: string | null;
  depth: number;
  state: string;
  code: number | null;
  cleanup: string;
  cap: string;
}

function jobRows(w: World): JobRow[] {
  return query<JobRow>(
    w,
    "SELECT id, kit, split, label, parent, parent_job, depth, state, code, cleanup, cap FROM jobs ORDER BY created_ms, rowid",
  );
}

interface SplitRow {
  id: string;
  creator_kind: string;
  creator_id: string | null;
  parent_split: string | null;
  parent_label: string | null;
  depth: number;
  root: string;
  session: string;
  state: string;
}

function splitRows(w: World): SplitRow[] {
  return query<SplitRow>(
    w,
    "SELECT id, creator_kind, creator_id, parent_split, parent_label, depth, root, session, state FROM splits ORDER BY created_ms, rowid",
  );
}

/** Every container of this world (`marsh run` jobs' and every split's). */
function containers(w: World) {
  return listContainers(w.socket, [`marsh.owner=${w.sb.home}`]);
}

/** Removes what a failed test left of this world's containers. */
async function sweep(w: World): Promise<void> {
  await removeContainers(w.socket, [`marsh.owner=${w.sb.home}`]);
}

Deno.test({
  name:
    "marsh run: the job's marsh split | marsh join prints the branch's patch; the branch job is its child",
  permissions,
}, async () => {
  await using w = await World.create({
    "keep.txt": "project\n",
    "apply.sh": [
      "marsh split -n ::: b tools sh -c 'echo b > b.txt' |",
      `  marsh join -- sh -c 'echo "root=$SPLIT_ROOT"; cd "$SPLIT_ROOT" && git apply "$SPLIT_DIR/b/diff.patch"'`,
      "",
    ].join("\n"),
  });
  try {
    await addTools(w);
    const r = await w.sb.marsh([
      "run",
      "tools",
      "sh",
      "-c",
      `echo "run $MARSH_JOB"; marsh split -n ::: a tools sh -c "echo a > a.txt; cat keep.txt" | marsh join`,
    ]);
    assert.equal(r.code, 0, show(r));
    const [first, ...rest] = r.stdout.split("\n");
    const run = /^run ([a-z0-9]{8})$/.exec(first!)?.[1];
    assert.ok(run, show(r));
    const out = rest.join("\n");
    // The branch's patch, rendered by the join inside the job.
    assert.match(
      out,
      /diff --git a\/a\.txt b\/a\.txt\nnew file mode 100644\n.*\n--- \/dev\/null\n\+\+\+ b\/a\.txt\n@@ -0,0 \+1 @@\n\+a\n/,
      show(r),
    );
    // The split was the job's: the project itself is untouched (join renders, applies nothing).
    assert.throws(() => Deno.statSync(`${w.sb.project}/a.txt`), Deno.errors.NotFound);
    const splits = splitRows(w);
    assert.equal(splits.length, 1, JSON.stringify(splits));
    const s = splits[0]!;
    // A host run's view is the project: the snapshot is of it, the state in its own .marsh.
    assert.deepEqual(
      [s.creator_kind, s.creator_id, s.parent_split, s.parent_label, s.depth, s.root, s.state],
      ["job", run, null, null, 1, w.sb.project, "joined"],
    );
    const jobs = jobRows(w);
    assert.deepEqual(
      jobs.map((j) => [j.id, j.kit, j.split, j.label, j.parent, j.parent_job, j.depth]),
      [
        [run, "tools", "", "", "session:host", null, 1],
        [jobs[1]!.id, "tools", s.id, "a", `job:${run}`, run, 2],
      ],
    );
    for (const j of jobs) {
      assert.deepEqual([j.state, j.code, j.cleanup, j.cap], ["finished", 0, "removed", "revoked"]);
    }
    // join -- CMD in the job: the patch applies to the job's view, here the project itself.
    const apply = await w.sb.marsh(["run", "fixture", "sh", "./apply.sh"]);
    assert.equal(apply.code, 0, show(apply));
    assert.equal(apply.stdout, `root=${w.sb.project}\n`, show(apply));
    assert.equal(Deno.readTextFileSync(`${w.sb.project}/b.txt`), "b\n");
    assert.deepEqual(splitRows(w).map((x) => [x.creator_kind, x.state]), [
      ["job", "joined"],
      ["job", "joined"],
    ]);
    assert.deepEqual(await containers(w), []);
  } finally {
    await sweep(w);
  }
});

Deno.test({
  name:
    "marsh run: Ctrl-C of the host marsh run cancels the job's nested split; every container verified gone",
  permissions,
}, async () => {
  await using w = await World.create({
    // A nested branch job that takes a second to end after its SIGINT: the run's end waits for it.
    "slow.sh": `trap 'sleep 1; exit 3' INT; while :; do sleep 0.1; done\n`,
  }, { MARSH_CANCEL_GRACE_MS: "2000" });
  try {
    await addTools(w);
    const run = w.sb.spawnMarsh([
      "run",
      "fixture",
      "sh",
      "-c",
      // The run job itself ends at once on its SIGINT, before its nested branch jobs.
      'trap "exit 5" INT; marsh split -n ::: a tools sh ./slow.sh ::: b tools sh ./slow.sh | marsh join & wait',
    ]);
    await waitFor("the run job and both nested branch jobs running", async () => {
      const running = jobRows(w).filter((j) => j.state === "running").length;
      return running === 3 && (await containers(w)).length === 3;
    }, 90_000);
    const t0 = Date.now();
    run.kill("SIGINT");
    const r = await run.output();
    assert.equal(r.code, 130, new TextDecoder().decode(r.stderr));
    // INT, the 2 s grace, KILL: the nested split's containers with the job's, not after it.
    assert.ok(Date.now() - t0 < 8_000, `took ${Date.now() - t0} ms`);
    // Its exit came once the whole tree was gone: every container's deletion verified, every job recorded.
    assert.deepEqual(await containers(w), []);
    const jobs = jobRows(w);
    const top = jobs[0]!.id;
    assert.deepEqual(jobs.map((j) => [j.parent, j.state, j.code, j.cleanup, j.cap]), [
      ["session:host", "cancelled", 130, "removed", "revoked"],
      [`job:${top}`, "cancelled", 130, "removed", "revoked"],
      [`job:${top}`, "cancelled", 130, "removed", "revoked"],
    ]);
    assert.deepEqual(splitRows(w).map((s) => [s.creator_id, s.state]), [[top, "cancelled"]]);
  } finally {
    await sweep(w);
  }
});

Deno.test({
  name:
    "marsh run from a shell branch: the job's split snapshots the fork (its edits), not the project",
  permissions,
}, async () => {
  await using w = await World.create({
    "keep.txt": "project\n",
    // Run by the `marsh run` job, in the shell branch's fork.
    "inner.sh": [
      "echo edited > keep.txt",
      "marsh split -n ::: a tools sh -c 'cat keep.txt > seen.txt' | marsh join > joined.txt",
      'echo "join $?" > status.txt',
      "git apply joined.txt",
      'echo "apply $?" >> status.txt',
      "rm joined.txt",
      `marsh split -n ::: r tools true | marsh join -- sh -c 'echo "$SPLIT_ROOT" > root.txt'`,
      'echo "consumer $?" >> status.txt',
      "",
    ].join("\n"),
  });
  try {
    await addTools(w);
    const r = await w.split(["-n", "-b", 'fix=fixture sh ./inner.sh; echo "run $?"']);
    assert.equal(r.code, 0, show(r));
    const m = await w.manifest(handleId(r.stdout));
    const b = m.branches[0]!;
    assert.equal(b.status, "exited 0", JSON.stringify(b));
    assert.equal(Deno.readTextFileSync(`${m.out}/fix/stdout`), "run 0\n");
    const patch = Deno.readTextFileSync(`${m.out}/fix/diff.patch`);
    // The nested branch read the run job's edit: its snapshot was the fork, not the project.
    assert.deepEqual(added(patch, "seen.txt"), "edited");
    assert.deepEqual(added(patch, "status.txt"), "join 0\napply 0\nconsumer 0");
    // The job's join sees its tree at the fork's own path.
    assert.deepEqual(added(patch, "root.txt"), b.fork);
    assert.equal(Deno.readTextFileSync(`${w.sb.project}/keep.txt`), "project\n");
    const jobs = jobRows(w);
    const run = jobs[0]!;
    assert.deepEqual([run.parent, run.depth], [`split:${m.id}/fix`, 1]);
    const nested = splitRows(w).filter((s) => s.id !== m.id);
    assert.deepEqual(
      nested.map((s) => [s.creator_kind, s.creator_id, s.parent_split, s.parent_label, s.depth]),
      [["job", run.id, m.id, "fix", 2], ["job", run.id, m.id, "fix", 2]],
    );
    assert.deepEqual(
      jobs.slice(1).map((j) => [j.split, j.label, j.parent, j.depth, j.state]),
      nested.map((s, i) => [s.id, ["a", "r"][i], `job:${run.id}`, 2, "finished"]),
    );
    assert.deepEqual(await containers(w), []);
  } finally {
    await sweep(w);
  }
});

Deno.test({
  name:
    "marsh run: the job's split branches count toward its fan-out; the fifth live one is refused",
  permissions,
}, async () => {
  await using w = await World.create({
    "gate.sh": 'while [ ! -f "$HOME/gate" ]; do sleep 0.1; done\n',
  });
  try {
    await addTools(w);
    const branches = ["a", "b", "c", "d", "e"].flatMap((
      l,
    ) => [":::", l, "tools", "sh", "./gate.sh"]);
    const run = w.sb.spawnMarsh([
      "run",
      "fixture",
      "sh",
      "-c",
      `marsh split -n ${branches.join(" ")} | marsh join > /dev/null; echo "join $?"`,
    ]);
    await waitFor(
      "the fifth branch refused",
      () =>
        query<{ state: string }>(w, "SELECT state FROM branches WHERE label = 'e'")[0]?.state ===
          "failed",
    );
    // The four admitted ones are still running: the refusal was the fan-out's.
    const top = jobRows(w)[0]!.id;
    const live = jobRows(w).filter((j) => j.parent === `job:${top}` && j.state === "running");
    assert.equal(live.length, 4);
    Deno.writeTextFileSync(`${w.sb.home}/kits/tools/home/gate`, "");
    const r = await run.output();
    const err = new TextDecoder().decode(r.stderr);
    assert.equal(r.code, 0, err);
    assert.equal(new TextDecoder().decode(r.stdout), "join 0\n", err);
    assert.match(
      err,
      /^marsh split: branch e: failed: fan-out limit 4\nsplit [a-z0-9]+ kept: branch e: failed: fan-out limit 4; /,
    );
    const rows = query<{ label: string; status: string; job_id: string | null }>(
      w,
      "SELECT label, status, job_id FROM branches ORDER BY idx",
    );
    assert.deepEqual(rows.map((b) => [b.label, b.status]), [
      ["a", "exited 0"],
      ["b", "exited 0"],
      ["c", "exited 0"],
      ["d", "exited 0"],
      ["e", "failed: fan-out limit 4"],
    ]);
    // The kept split is the job's: the host may not join it.
    const kept = query<{ id: string }>(w, "SELECT id FROM splits")[0]!.id;
    const join = await w.sb.marsh(["join"], { stdin: `{"marsh_split":1,"id":"${kept}"}\n` });
    assert.deepEqual([join.code, join.stderr], [
      2,
      `marsh join: split ${kept} was not created by this caller; only its creator may join it\n`,
    ]);
    // A refused branch has no job record; the four are the run job's children.
    assert.deepEqual(
      jobRows(w).slice(1).map((j) => [j.label, j.parent, j.depth]),
      ["a", "b", "c", "d"].map((l) => [l, `job:${top}`, 2]),
    );
    assert.deepEqual(await containers(w), []);
  } finally {
    await sweep(w);
  }
});

/** The lines a patch adds to the new file `path`, joined with newlines. */
function added(patch: string, path: string): string {
  const at = patch.indexOf(`diff --git a/${path} b/${path}\n`);
  assert.ok(at >= 0, `${path} in the patch:\n${patch}`);
  const rest = patch.slice(at).split("\n").slice(1);
  const end = rest.findIndex((l) => l.startsWith("diff --git "));
  return (end < 0 ? rest : rest.slice(0, end))
    .filter((l) => l.startsWith("+") && !l.startsWith("+++")).map((l) => l.slice(1)).join("\n");
}
