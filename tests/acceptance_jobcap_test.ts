/**
 * The job capability (issue 5 §4, §5; docs/rules.md "The job capability"): `/run/marsh/`
 * in a real Kit container through the real CLI, daemon and worker. What a
 * job sees there (read-only dir, stubs, `job.json`, `PATH`, `MARSH_JOB`),
 * which requests its socket admits (`split` and `join` only, argv branches
 * only, `env -i` works), its connection cap, nested splits from a job
 * (creator, depth, cancelled with their job, containers verified gone), and
 * what a nested branch can see of the project (nothing but its fork).
 *
 * A branch reports what it saw by writing files into its fork; the test
 * reads them back from the captured patch.
 */

import assert from "node:assert/strict";
import type { Manifest } from "../protocol/manifest.ts";
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

/** The lines a branch's patch adds to `path` (a new file), joined with newlines. */
function added(patch: string, path: string): string {
  const at = patch.indexOf(`diff --git a/${path} b/${path}\n`);
  assert.ok(at >= 0, `${path} in the patch:\n${patch}`);
  const rest = patch.slice(at).split("\n").slice(1);
  const end = rest.findIndex((l) => l.startsWith("diff --git "));
  return (end < 0 ? rest : rest.slice(0, end))
    .filter((l) => l.startsWith("+") && !l.startsWith("+++"))
    .map((l) => l.slice(1))
    .join("\n");
}

async function allSplits(w: World): Promise<Manifest[]> {
  const r = await w.sb.marsh(["splits", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
}

Deno.test({
  name: "job capability: read-only /run/marsh, links, job.json, PATH; only split and join admitted",
  permissions,
}, async () => {
  await using w = await World.create();
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    [
      "ls /run/marsh/bin > bin.txt",
      "cat /run/marsh/job.json > job.txt",
      'echo "$PATH" > path.txt',
      'echo "$MARSH_JOB $MARSH_ENTRY" > env.txt',
      "touch /run/marsh/x 2>/dev/null; echo $? > ro.txt",
      "head -1 /run/marsh/context.md > context.txt",
      "env -i /run/marsh/bin/marsh splits > splits.out 2>&1; echo $? >> splits.out",
      "env -i /run/marsh/bin/marsh splits rm x > rm.out 2>&1; echo $? >> rm.out",
      "env -i /run/marsh/bin/marsh split -n -b x=true > b.out 2>&1; echo $? >> b.out",
      "env -i /run/marsh/bin/marsh split -n ::: y nosuch > unknown.out 2>&1; echo $? >> unknown.out",
    ].join("; "),
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const m = await w.manifest(id);
  const job = m.branches[0]!.job_id!;
  const patch = Deno.readTextFileSync(`${m.out}/a/diff.patch`);

  assert.deepEqual(added(patch, "bin.txt").split("\n"), ["fixture", "marsh"]);
  const jobJson = JSON.parse(added(patch, "job.txt"));
  assert.equal(jobJson.version, 1);
  assert.equal(jobJson.job, job);
  assert.equal(jobJson.name, "fixture");
  assert.equal(jobJson.socket, "/run/marsh/cap.sock");
  assert.deepEqual(jobJson.registered, ["fixture"]);
  assert.match(jobJson.path, /^\/run\/marsh\/bin:\//);
  assert.equal(added(patch, "path.txt"), jobJson.path);
  assert.equal(added(patch, "env.txt"), `${job} 1`);
  assert.notEqual(added(patch, "ro.txt"), "0", "touch in /run/marsh must fail");
  assert.match(added(patch, "context.txt"), new RegExp(`^# marsh job ${job} \\(fixture\\)$`));

  // `marsh splits` (SplitShow) and `splits rm` are refused by the capability, from env -i.
  const splits = added(patch, "splits.out");
  assert.match(
    splits,
    /marsh splits: refused in a Kit job: .*admits only marsh split, marsh join, marsh logs and marsh jobs/,
  );
  assert.match(splits, /\n2$/);
  assert.match(added(patch, "rm.out"), /refused in a Kit job.*\n2$/s);
  // A job's split is argv-only, with the spec's wording.
  assert.match(
    added(patch, "b.out"),
    /x: shell branches \(-b, split \{ \}\) run only from the session shell; from a job or a split branch use argv branches: ::: LABEL CMD \[ARG\.\.\.\]\n2$/,
  );
  assert.match(added(patch, "unknown.out"), /unknown Kit command "nosuch".*\n2$/s);
  // Nothing ran from those refusals: the only split is the host's.
  assert.deepEqual((await allSplits(w)).map((s) => s.id), [id]);
  assert.equal((await w.containersOf(id)).length, 0);
});

Deno.test({
  name:
    "job capability: env -i marsh split ::: ... | marsh join from a job; the child sees only its fork",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n", "secret.txt": "s\n" });
  const { sb } = w;
  const root = sb.project;
  const nested = [
    `ls -a ${root} > ls_root.txt 2>&1`,
    `ls -a ${root}/.git > ls_git.txt 2>&1`,
    `ls -a ${root}/.marsh > ls_marsh.txt 2>&1`,
    `cat ${root}/secret.txt > cat_secret.txt 2>&1; echo $? >> cat_secret.txt`,
    // $1 is the parent split's id: of it, only the read-only object dirs are bound.
    `ls -a ${root}/.marsh/split/$1 > parent_seen.txt 2>&1`,
    `ls ${root}/.marsh/split/$1/a > parent_fork.txt 2>&1; echo $? >> parent_fork.txt`,
    "cat a.txt > seen_a.txt",
    "echo nested > n.txt",
  ].join("; ");
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    // The parent edits its fork first: the nested split's snapshot is the job's view.
    `echo parent >> a.txt; rm secret.txt; ` +
    `P=$(basename "$(dirname "$PWD")"); ` +
    `env -i /run/marsh/bin/marsh split -n ::: n fixture sh -c '${nested}' x "$P" ` +
    `| env -i /run/marsh/bin/marsh join > join.out 2>&1; echo "rc=$?" >> join.out; ` +
    `env -i /run/marsh/bin/marsh jobs --json > jobs.txt 2>&1`,
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const m = await w.manifest(id);
  const patch = Deno.readTextFileSync(`${m.out}/a/diff.patch`);
  const join = added(patch, "join.out");
  assert.match(join, /rc=0$/, join);
  // The nested branch's patch came back through the job's join.
  assert.equal(added(join, "n.txt"), "nested");
  // It saw the job's edited fork, not the user's tree.
  assert.equal(added(join, "seen_a.txt"), "hello\nparent");
  // Of the project it saw only the dirs leading to its own fork. The user's
  // .git/objects is bound read-only (docs/rules.md "Snapshot and forks") at .marsh/git-objects, the
  // name the alternates use (protocol/fork_view.ts), so there is no .git.
  assert.equal(added(join, "ls_root.txt"), ".\n..\n.marsh");
  assert.match(added(join, "ls_git.txt"), /No such file or directory/);
  assert.equal(added(join, "ls_marsh.txt"), ".\n..\ngit-objects\nsplit");
  assert.match(added(join, "cat_secret.txt"), /No such file or directory\n1$/);
  assert.equal(added(join, "parent_seen.txt"), ".\n..\n.admin\nstore.git");
  assert.match(added(join, "parent_fork.txt"), /No such file or directory\n1$/);

  // The nested split: created by the job, depth 2, child of a, joined.
  const child = (await allSplits(w)).find((s) => s.id !== id);
  assert.ok(child, "the nested split is on record");
  assert.equal(child.depth, 2);
  assert.deepEqual(child.parent, { split: id, label: "a" });
  assert.equal(child.state, "joined");
  assert.deepEqual(child.creator, { kind: "job", id: m.branches[0]!.job_id });
  // `marsh jobs` in the job lists its own subtree: the nested branch's job.
  const seen = JSON.parse(added(patch, "jobs.txt")) as { jobs: { split: string; label: string }[] };
  assert.deepEqual(seen.jobs.map((j) => [j.split, j.label]), [[child.id, "n"]]);
  assert.equal((await w.containersOf(id)).length, 0);
});

Deno.test({
  name: "job capability: marsh logs reads the job's own splits, and only those",
  permissions,
}, async () => {
  await using w = await World.create();
  const m = "env -i /run/marsh/bin/marsh";
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    [
      'P=$(basename "$(dirname "$PWD")")',
      `h=$(${m} split -n ::: n fixture sh -c 'echo from-n; echo warn-n >&2')`,
      `id=$(echo "$h" | sed 's/.*"id":"\\([a-z0-9]*\\)".*/\\1/')`,
      `${m} logs "$id" n > logs.txt 2>&1; echo $? >> logs.txt`,
      `${m} logs --stderr "$id" n > err.txt 2>&1; echo $? >> err.txt`,
      `${m} logs "$P" a > parent.txt 2>&1; echo $? >> parent.txt`,
      `echo "$h" | ${m} join > /dev/null 2>&1`,
    ].join("; "),
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const patch = Deno.readTextFileSync(`${(await w.manifest(id)).out}/a/diff.patch`);
  assert.equal(added(patch, "logs.txt"), "from-n\nwarn-n\n0");
  assert.equal(added(patch, "err.txt"), "warn-n\n0");
  assert.equal(
    added(patch, "parent.txt"),
    `marsh logs: split ${id} was not created by this caller\n2`,
  );
});

Deno.test({
  name: "job capability: a nested split is cancelled when its job exits; its containers are gone",
  permissions,
}, async () => {
  await using w = await World.create(undefined, { MARSH_CANCEL_GRACE_MS: "2000" });
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    // The nested split runs in the background; the job exits without joining it.
    "env -i /run/marsh/bin/marsh split -n ::: n fixture sleep 300 > h.txt 2>&1 & sleep 12; exit 0",
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const child = await waitFor("the nested split to end", async () => {
    const s = (await allSplits(w)).find((s) => s.id !== id);
    return s && s.state !== "run" ? s : undefined;
  }, 60_000);
  assert.equal(child.state, "cancelled");
  assert.equal(child.depth, 2);
  assert.deepEqual(child.parent, { split: id, label: "a" });
  assert.equal(child.branches[0]!.state, "cancelled");
  assert.deepEqual(await listContainers(w.socket, [`marsh.split=${child.id}`]), []);
  const jobs = await w.jobs();
  const nestedJob = jobs.find((j) => j.split === child.id);
  assert.ok(nestedJob, JSON.stringify(jobs));
  assert.notEqual(nestedJob.cleanup, "uncertain");
});

Deno.test({
  name: "job capability: the ninth open connection of a job is refused with the spec's frame",
  permissions,
}, async () => {
  await using w = await World.create();
  const script = `
const conns = [];
for (let i = 0; i < 8; i++) conns.push(await Deno.connect({ transport: "unix", path: "/run/marsh/cap.sock" }));
const ninth = await Deno.connect({ transport: "unix", path: "/run/marsh/cap.sock" });
const buf = new Uint8Array(4096);
const n = await ninth.read(buf);
// The frame's length prefix holds NUL bytes: printable text only, or the patch is binary.
console.log(new TextDecoder().decode(buf.subarray(0, n ?? 0)).replace(/[^ -~]/g, "."));
const again = await ninth.read(buf);
console.log("closed=" + (again === null));
for (const c of conns) c.close();
`;
  const r = await w.split([
    "-n",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    'printf "%s" "$0" > /tmp/c.js; /run/marsh/deno run --quiet --no-config --no-lock ' +
    "--allow-read=/tmp,/run/marsh --allow-net=unix:/run/marsh/cap.sock --allow-write=/run/marsh/cap.sock " +
    "/tmp/c.js > conns.txt 2>&1; echo rc=$? >> conns.txt",
    script,
  ]);
  const m = await w.manifest(handleId(r.stdout));
  assert.equal(r.code, 0, `${show(r)}\n${Deno.readTextFileSync(`${m.out}/a/diff.patch`)}`);
  const out = added(Deno.readTextFileSync(`${m.out}/a/diff.patch`), "conns.txt");
  assert.match(out, /too many concurrent daemon requests in this job/, out);
  assert.match(out, /closed=true/);
});

Deno.test({
  name: "the daemon raises its descriptor soft limit (up to 4096) for the job sockets",
  permissions,
}, async () => {
  await using sb = await Sandbox.create();
  // A low soft limit the shell inherits: the daemon must raise it, not keep it.
  const r = await sb.bash(`ulimit -S -n 256; "$M" daemon start`);
  assert.equal(r.code, 0, show(r));
  // Deno guards /proc with --allow-all; cat reads it.
  const limits = (await sb.bash(`cat "/proc/$(cat "$MARSH_HOME/marshd.pid")/limits"`)).stdout;
  const m = /^Max open files\s+(\d+)\s+(\d+|unlimited)/m.exec(limits);
  assert.ok(m, limits);
  const hard = m[2] === "unlimited" ? Infinity : Number(m[2]);
  // Deno raises its soft limit to the hard one at start, which covers 4096.
  assert.ok(Number(m[1]) >= Math.min(4096, hard), limits);
});

Deno.test({
  name: "job capability: a daemon restart revokes a running job's capability",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  // The Kit home is bound read-write: the job reports there, past its daemon's death.
  const kitHome = `${sb.home}/kits/fixture/home`;
  const creator = sb.spawnMarsh([
    "split",
    "-n",
    ":::",
    "j",
    "fixture",
    "sh",
    "-c",
    // Written whole, then renamed: the test reads it as soon as it exists.
    'env -i /run/marsh/bin/marsh jobs --json > "$HOME/b.tmp" 2>&1; mv "$HOME/b.tmp" "$HOME/before.txt"; ' +
    'until [ -e "$HOME/go" ]; do sleep 0.2; done; ' +
    'env -i /run/marsh/bin/marsh split -n ::: x fixture true > "$HOME/after.txt" 2>&1; ' +
    'echo "rc=$?" >> "$HOME/after.txt"; sleep 600',
  ]);
  const job = await waitFor("the job's container", async () => {
    const j = (await w.jobs())[0];
    return j?.container && exists(`${kitHome}/before.txt`) ? j : undefined;
  });
  w.splits.push(job.split);
  // While its daemon lives, the capability answers.
  assert.match(Deno.readTextFileSync(`${kitHome}/before.txt`), /^\{"jobs":\[\]\}/);
  const workers = await pidsNaming("worker/main.ts", sb.home);
  assert.equal(workers.length, 1, `worker pids ${workers}`);
  // Frozen first, then killed: neither may see the other go and stop the container.
  const daemon = sb.daemonPid()!;
  for (const pid of [workers[0]!, daemon]) Deno.kill(pid, "SIGSTOP");
  for (const pid of [workers[0]!, daemon]) Deno.kill(pid, "SIGKILL");
  await finish(creator, "the creator's marsh split");
  const restarted = await sb.marsh(["daemon", "start"]);
  assert.equal(restarted.code, 0, show(restarted));

  Deno.writeTextFileSync(`${kitHome}/go`, "");
  const read = (name: string) =>
    exists(`${kitHome}/${name}`) ? Deno.readTextFileSync(`${kitHome}/${name}`) : "";
  const after = await waitFor("the job's second request", () => {
    const text = read("after.txt");
    return /rc=\d+/.test(text) ? text : undefined;
  }, 90_000).catch(async (error) => {
    const left = await w.containersOf(job.split);
    throw new Error(
      `${error.message}; after.txt: ${JSON.stringify(read("after.txt"))}; containers: ${
        JSON.stringify(left)
      }; log: ${Deno.readTextFileSync(`${sb.home}/marshd.log`).slice(-3000)}`,
    );
  });
  assert.match(after, /capability was revoked/);
  assert.match(after, /rc=125/);
  // Nothing was created for the revoked job.
  assert.deepEqual((await allSplits(w)).map((s) => s.id), [job.split]);
  const reset = await sb.marsh(["workers", "reset", "fixture"]);
  assert.equal(reset.code, 0, show(reset));
});

Deno.test({
  name: "a shell branch's split is a nested split of its fork: argv-only, depth 2, joined by it",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n" });
  const r = await w.split([
    "-n",
    "-b",
    `s=echo branch >> a.txt; "$M" split -n ::: n fixture sh -c 'cat a.txt > seen.txt' ` +
    `| "$M" join > join.out 2>&1; echo "rc=$?" >> join.out`,
  ]);
  assert.equal(r.code, 0, show(r));
  const id = handleId(r.stdout);
  const m = await w.manifest(id);
  const join = added(Deno.readTextFileSync(`${m.out}/s/diff.patch`), "join.out");
  assert.match(join, /rc=0$/, join);
  // The nested branch saw the shell branch's fork, edit included.
  assert.equal(added(join, "seen.txt"), "hello\nbranch");
  const child = (await allSplits(w)).find((s) => s.id !== id);
  assert.ok(child);
  assert.equal(child.depth, 2);
  assert.deepEqual(child.parent, { split: id, label: "s" });
  assert.equal(child.state, "joined");
});

Deno.test({
  name:
    "a shell branch's nested split from a subdirectory: its join consumer applies $SPLIT_DIR's patch in the branch's view",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n", "sub/x.txt": "x\n" });
  const r = await w.split([
    "-n",
    "-b",
    `s=cd sub && "$M" split -n ::: n fixture sh -c 'echo nested > n.txt' ` +
    `| "$M" join -- sh -c 'cat >/dev/null; cd .. && git apply "$SPLIT_DIR/n/diff.patch"' ` +
    `> ../join.out 2>&1; echo "rc=$?" >> ../join.out`,
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  assert.equal(m.branches[0]?.view, "project");
  const patch = Deno.readTextFileSync(`${m.out}/s/diff.patch`);
  assert.equal(added(patch, "join.out"), "rc=0", patch);
  // The nested branch ran in sub/ of the shell branch's fork; its patch was applied there.
  assert.equal(added(patch, "sub/n.txt"), "nested");
  const child = (await allSplits(w)).find((s) => s.id !== m.id);
  assert.equal(child?.cwd, "sub");
  assert.equal(child?.state, "joined");
});

Deno.test({
  name:
    "links: the entry case runs the image's own program once; image tools stay local; other names are child jobs",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  // `git` as a Kit of its own, with no entrypoint: Docker resolves argv[0]
  // through PATH, which finds the link first; the entry case execs the image's git.
  const add = await sb.marsh(["kits", "add", "git", "--image", w.ref]);
  assert.equal(add.code, 0, show(add));
  // `ghost` is registered but the image has no such program: a child case.
  const ghost = await sb.marsh(["kits", "add", "ghost", "--image", w.ref, "--entrypoint", "env"]);
  assert.equal(ghost.code, 0, show(ghost));
  const r = await w.split([
    "-n",
    ":::",
    "e",
    "git",
    "--version",
    ":::",
    "t",
    "fixture",
    "sh",
    "-c",
    [
      "command -v git > type.txt",
      // Another registered name the image has: the image's program, not a child job.
      "git --version > tool.txt 2>&1",
      // The marker is not honoured off the entrypoint: the link is a child case here.
      "ghost x > ghost.txt 2>&1; echo $? >> ghost.txt",
      "MARSH_ENTRY=1 fixture x > own.txt 2>&1; echo $? >> own.txt",
    ].join("; "),
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  assert.match(Deno.readTextFileSync(`${m.out}/e/stdout`), /^git version \d/);
  const patch = Deno.readTextFileSync(`${m.out}/t/diff.patch`);
  assert.equal(added(patch, "type.txt"), "/run/marsh/bin/git");
  assert.match(added(patch, "tool.txt"), /^git version \d/);
  // A child job of the branch's job: its own container runs `env x` (the Kit's entrypoint).
  assert.equal(
    added(patch, "ghost.txt"),
    "env: can't execute 'x': No such file or directory\n127",
  );
  // Its own name from a shell (not docker-init's child): the child case too.
  assert.equal(added(patch, "own.txt"), "env: can't execute 'x': No such file or directory\n127");
});

Deno.test({
  name: "a shell branch's fork and a Kit branch's each have their own index (none is shared)",
  permissions,
}, async () => {
  await using w = await World.create();
  const r = await w.split(["-n", "-b", "s=sleep 0.1", ":::", "k", "fixture", "true"]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const admin = `${m.dir}/.admin`;
  const st = (p: string) => Deno.statSync(p);
  assert.notEqual(st(`${admin}/s/index`).ino, st(`${admin}/k/index`).ino);
  for (const label of ["s", "k"]) assert.equal(st(`${admin}/${label}/index`).nlink, 1);
  assert.deepEqual(Deno.readFileSync(`${admin}/k/index`), Deno.readFileSync(`${admin}/s/index`));
  assert.deepEqual([...Deno.readDirSync(admin)].map((e) => e.name).sort(), ["k", "s"]);
});

Deno.test({
  name:
    "SPLIT_ROOT of nested splits: the project's path for a shell branch's, the fork's for a job's; the recipe applies there from sub/",
  permissions,
}, async () => {
  await using w = await World.create({ "a.txt": "hello\n", "sub/x.txt": "x\n" });
  // Depth 3: the job (n) makes a split of its own fork and records its consumer's SPLIT_ROOT.
  const deep = `env -i /run/marsh/bin/marsh split -n ::: d fixture true ` +
    `| env -i /run/marsh/bin/marsh join -- sh -c "cat >/dev/null; echo \\$SPLIT_ROOT > ../job_root.txt"`;
  const r = await w.split([
    "-n",
    "-b",
    // Depth 2, from sub/ of the shell branch's fork: its consumer follows the guide's recipe.
    `s=cd sub && "$M" split -n ::: n fixture sh -c '${deep}; echo top > ../top.txt' ` +
    `| "$M" join -- sh -c 'cat >/dev/null; echo "$SPLIT_ROOT $PWD" > ../root.txt; ` +
    `cd "\${SPLIT_ROOT:?}" && git apply --3way --check "$SPLIT_DIR/n/diff.patch" && ` +
    `git apply --3way "$SPLIT_DIR/n/diff.patch"' > ../join.out 2>&1; echo "rc=$?" >> ../join.out`,
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  assert.equal(m.branches[0]?.view, "project");
  const patch = Deno.readTextFileSync(`${m.out}/s/diff.patch`);
  assert.equal(added(patch, "join.out").split("\n").at(-1), "rc=0", patch);
  // The shell branch sees its fork at the project's path: that is its consumer's root.
  assert.equal(added(patch, "root.txt"), `${w.sb.project} ${w.sb.project}/sub`);
  // Applied from there: the job's changes outside sub/ arrived in the shell branch's fork.
  assert.equal(added(patch, "top.txt"), "top");
  const splits = await allSplits(w);
  const child = splits.find((s) => s.depth === 2);
  assert.equal(child?.cwd, "sub");
  assert.equal(child?.state, "joined");
  // The job sees its fork at the fork's own path, and that is its consumer's root.
  assert.equal(added(patch, "job_root.txt"), `${child.dir}/n`);
  assert.equal(splits.find((s) => s.depth === 3)?.state, "joined");
});
