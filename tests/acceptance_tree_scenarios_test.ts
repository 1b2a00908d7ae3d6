/**
 * The job tree's acceptance scenarios (docs/rules.md "Acceptance") that the
 * other acceptance files leave out, each through the real CLI, daemon,
 * worker and Docker engine: an unchanged third-party-style image whose
 * `#!/bin/sh` entrypoint wrapper execs the Kit's own name (the link's
 * entry case: the image's program runs once per job) and whose `bash -c`
 * runs registered names as child jobs, `env -i` links, TTY children
 * refused, `marsh split | marsh join` from its `bash -c`, and a read-only
 * `/run/marsh`; and self-replicating `marsh run` trees stopped at the
 * same-Kit chain (two names of one image are one Kit), fan-out and total
 * caps with the spec's messages, each refusal counted by `marsh status`.
 * (Depth 4 and the chain of one name: `acceptance_run_test.ts`.)
 */

import assert from "node:assert/strict";
import { handleId, PERMISSIONS as permissions, show, waitFor } from "./_acceptance.ts";
import { listContainers, withEntrypoint, withLock } from "./_engine.ts";
import { World } from "./_kit_world.ts";

/** Every container this world's daemon made (`docker ps -a` on the test engine, by owner). */
function ownContainers(w: World) {
  return listContainers(w.socket, [`marsh.owner=${w.sb.home}`]);
}

/** `marsh jobs show ID --json`. */
async function shown(w: World, id: string): Promise<Record<string, unknown>> {
  const r = await w.sb.marsh(["jobs", "show", id, "--json"]);
  assert.equal(r.code, 0, show(r));
  return JSON.parse(r.stdout);
}

/**
 * A third-party-style image: its own `agent` program and a `#!/bin/sh`
 * entrypoint wrapper in the image config (as `docker-entrypoint.sh`
 * images do), registered as `agent` with no `--entrypoint`, so the
 * container starts the image's own wrapper with `agent ARGS…` as CMD.
 */
async function addAgent(w: World): Promise<void> {
  const dir = `${w.sb.scratch}/agent-image`;
  Deno.mkdirSync(dir);
  Deno.writeTextFileSync(
    `${dir}/entry.sh`,
    [
      "#!/bin/sh",
      "set -e",
      "# a first argument that is an option is for agent; anything else runs as given",
      'if [ "${1#-}" != "$1" ]; then set -- agent "$@"; fi',
      'exec "$@"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  Deno.writeTextFileSync(
    `${dir}/agent`,
    [
      "#!/bin/sh",
      "# the image's own agent: counts its starts in its home, then runs its arguments",
      'echo "$MARSH_JOB ${MARSH_ENTRY:-unset}" >> "$HOME/entries"',
      'exec "$@"',
      "",
    ].join("\n"),
    { mode: 0o755 },
  );
  const b = await withLock(() =>
    w.sb.marsh([
      "kit",
      "build",
      "agent",
      "--from-host",
      "--bin",
      "bash",
      "--bin",
      "script",
      "--file",
      `${dir}/entry.sh:/usr/local/bin/docker-entrypoint.sh`,
      "--file",
      `${dir}/agent:/usr/local/bin/agent`,
    ])
  );
  assert.equal(b.code, 0, show(b));
  const ref = await withLock(() =>
    withEntrypoint(w.socket, "marsh-kit/agent:latest", "thirdparty/agent:1", [
      "docker-entrypoint.sh",
    ])
  );
  assert.match(ref, /^sha256:/);
  const add = await w.sb.marsh(["kits", "add", "agent", "--image", "thirdparty/agent:1"]);
  assert.equal(add.code, 0, show(add));
}

/** The ids of the jobs the image's own `agent` started in, one line each (its home's `entries`). */
function entries(w: World): string[] {
  return Deno.readTextFileSync(`${w.sb.home}/kits/agent/home/entries`).trimEnd().split("\n");
}

const TTY =
  "marsh: interactive child jobs are not supported yet: fixture has a terminal on stdin or stdout; run it non-interactively with neither attached, e.g. `fixture ... </dev/null | cat`\n";

Deno.test({
  name:
    "third-party image: its #!/bin/sh wrapper's exec agent runs the image's agent once; bash -c starts children, env -i too; no TTY child",
  permissions,
}, async () => {
  await using w = await World.create();
  await addAgent(w);
  const r = await w.sb.marsh([
    "run",
    "agent",
    "bash",
    "-c",
    [
      'echo "root $MARSH_JOB"',
      "type agent fixture",
      // Another registered name, and the job's own name, from the image's bash: child jobs.
      `fixture sh -c 'echo "fixture child $MARSH_JOB"'`,
      `agent sh -c 'echo "agent child $MARSH_JOB"'`,
      // env -i: the link starts from job.json alone.
      `env -i /run/marsh/bin/fixture sh -c 'echo "env-i child $MARSH_JOB $PWD"'`,
      // A terminal on stdin and stdout, on stdout only, on stdin only: refused; neither: runs.
      "script -qec 'fixture true 2>tty-both.err' /dev/null; echo \"tty both $?\"",
      "script -qec 'fixture true </dev/null 2>tty-out.err' /dev/null; echo \"tty out $?\"",
      "script -qec '(fixture true 2>tty-in.err; echo $? > tty-in.rc) | cat' /dev/null",
      'echo "tty in $(cat tty-in.rc)"',
      `script -qec 'fixture sh -c "echo no-tty \\$MARSH_JOB" </dev/null | cat' /dev/null`,
    ].join("\n"),
  ]);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stderr, "", show(r));
  const out = r.stdout.replaceAll("\r", "");
  const ids = [...out.matchAll(/(?:root|child|no-tty) ([a-z0-9]{8})/g)].map((m) => m[1]!);
  assert.equal(ids.length, 5, out);
  const [root, fixture, agent, envI, noTty] = ids as [string, string, string, string, string];
  assert.equal(
    out,
    [
      `root ${root}`,
      "agent is /run/marsh/bin/agent",
      "fixture is /run/marsh/bin/fixture",
      `fixture child ${fixture}`,
      `agent child ${agent}`,
      `env-i child ${envI} ${w.sb.project}`,
      "tty both 125",
      "tty out 125",
      "tty in 125",
      `no-tty ${noTty}`,
      "",
    ].join("\n"),
  );
  for (const f of ["tty-both.err", "tty-out.err", "tty-in.err"]) {
    assert.equal(Deno.readTextFileSync(`${w.sb.project}/${f}`), TTY, f);
  }
  // The image's agent ran once in each agent job: the root's entry and the child's own entry.
  // The link unset MARSH_ENTRY before it exec'd the image's agent.
  assert.deepEqual(entries(w), [`${root} unset`, `${agent} unset`]);
  // Lineage, as marsh jobs show --json gives it: every child is the root's, at depth 2.
  const spawn = ["agent", "fixture"];
  const top = await shown(w, root);
  assert.deepEqual(
    [top.command, top.state, top.exit_code],
    ["agent", "finished", 0],
  );
  const lineage = top.lineage as Record<string, unknown>;
  assert.deepEqual(
    [lineage.parent, lineage.root, lineage.depth, lineage.spawn, lineage.children],
    ["session:host", root, 1, spawn, [fixture, agent, envI, noTty]],
  );
  for (
    const [id, kit] of [[fixture, "fixture"], [agent, "agent"], [envI, "fixture"], [
      noTty,
      "fixture",
    ]]
  ) {
    const j = await shown(w, id!);
    const l = j.lineage as Record<string, unknown>;
    assert.deepEqual(
      [j.command, j.state, j.exit_code, l.parent, l.root, l.depth, l.spawn, l.children],
      [kit, "finished", 0, `job:${root}`, root, 2, spawn, []],
      id,
    );
  }
  // The three TTY refusals left no record and were counted.
  assert.equal((await w.jobs()).length, 5);
  const st = await w.sb.marsh(["status", "--json"]);
  assert.deepEqual(JSON.parse(st.stdout).processes, { running: 0, refused: 3, held: 0 });
  assert.deepEqual(await ownContainers(w), []);
});

Deno.test({
  name:
    "third-party image: marsh split ::: ... | marsh join from its bash -c; nested agent entry once; exact lineage",
  permissions,
}, async () => {
  await using w = await World.create();
  await addAgent(w);
  const r = await w.split([
    "-n",
    ":::",
    "top",
    "agent",
    "bash",
    "-c",
    [
      'echo "top $MARSH_JOB"',
      `marsh split -n ::: a agent sh -c 'echo $MARSH_JOB > na.txt' ::: f fixture sh -c 'echo $MARSH_JOB > nf.txt' | marsh join`,
      'echo "join $?"',
    ].join("\n"),
  ]);
  assert.equal(r.code, 0, show(r));
  const m = await w.manifest(handleId(r.stdout));
  const top = m.branches[0]!.job_id!;
  const out = Deno.readTextFileSync(`${m.out}/top/stdout`);
  const wrote = (f: string) =>
    new RegExp(`\\+\\+\\+ b/${f}\n@@ -0,0 \\+1 @@\n\\+([a-z0-9]{8})\n`).exec(out)?.[1];
  const a = wrote("na.txt");
  const f = wrote("nf.txt");
  assert.ok(a && f, show(r) + out);
  // The branch's output: the in-job join's rendering of the nested branches, then its status.
  assert.deepEqual([m.branches[0]!.status, m.branches[0]!.files], ["exited 0", 0]);
  const joined = (label: string, file: string, id: string) => [
    `== ${label}: exited 0 (1 file changed)`,
    `diff --git a/${file} b/${file}`,
    "new file mode 100644",
    "index 0000000..H",
    "--- /dev/null",
    `+++ b/${file}`,
    "@@ -0,0 +1 @@",
    `+${id}`,
    "",
  ];
  assert.equal(
    out.replace(
      /^index 0+\.\.[0-9a-f]+$/gm,
      "index 0000000..H",
    ),
    [`top ${top}`, ...joined("a", "na.txt", a), ...joined("f", "nf.txt", f), "join 0", ""].join(
      "\n",
    ),
  );
  // The image's agent ran once per agent container: the branch job's and the nested branch's.
  assert.deepEqual(entries(w), [`${top} unset`, `${a} unset`]);
  const nested = (await w.sb.splits()).find((s) => s.id !== m.id);
  assert.ok(nested, "the nested split is on record");
  assert.deepEqual([nested.state, nested.parent], ["joined", { split: m.id, label: "top" }]);
  const spawn = ["agent", "fixture"];
  const tl = (await shown(w, top)).lineage as Record<string, unknown>;
  // The deadline is the Kit's own wall limit from its start (no parent's to inherit).
  assert.equal(typeof tl.deadline_unix_ms, "number");
  assert.deepEqual(tl, {
    parent: `split:${m.id}/top`,
    root: top,
    depth: 1,
    spawn,
    split: m.id,
    label: "top",
    deadline_unix_ms: tl.deadline_unix_ms,
    children: [a, f],
  });
  for (const [id, label, kit] of [[a, "a", "agent"], [f, "f", "fixture"]]) {
    const j = await shown(w, id!);
    const l = j.lineage as Record<string, unknown>;
    assert.deepEqual(
      [j.command, j.state, l.parent, l.root, l.depth, l.spawn, l.split, l.label, l.children],
      [kit, "finished", `job:${top}`, top, 2, spawn, nested.id, label, []],
    );
  }
  assert.deepEqual(await ownContainers(w), []);
});

Deno.test({
  name: "the artifact is read-only: job.json, bin/, the client bundle and deno cannot be written",
  permissions,
}, async () => {
  await using w = await World.create();
  const r = await w.sb.marsh([
    "run",
    "fixture",
    "sh",
    "-c",
    [
      "before=$(md5sum /run/marsh/job.json /run/marsh/bin/* /run/marsh/marsh.js /run/marsh/link /run/marsh/deno)",
      'try() { if ( eval "$1" ) 2>/dev/null; then echo "wrote: $1"; else echo "refused: $1"; fi; }',
      "try 'echo {} > /run/marsh/job.json'",
      "try 'echo x >> /run/marsh/bin/fixture'",
      "try 'cp /bin/sh /run/marsh/bin/sh'",
      "try 'rm /run/marsh/bin/marsh'",
      "try 'echo x >> /run/marsh/marsh.js'",
      "try 'echo x >> /run/marsh/deno'",
      "try 'mv /run/marsh/link /run/marsh/link2'",
      "try 'chmod 777 /run/marsh/deno'",
      "try 'touch /run/marsh/new'",
      "after=$(md5sum /run/marsh/job.json /run/marsh/bin/* /run/marsh/marsh.js /run/marsh/link /run/marsh/deno)",
      '[ "$before" = "$after" ] && echo unchanged',
      // Every mount at or under /run/marsh is read-only (mountinfo's 6th field: the mount's options).
      'awk \'$5 ~ "^/run/marsh" { split($6, o, ","); print $5, o[1] }\' /proc/self/mountinfo | sort -u',
      // And the job still works: its marsh reads job.json and reaches the daemon.
      "marsh jobs --json >/dev/null && echo jobs-ok",
    ].join("\n"),
  ]);
  assert.equal(r.code, 0, show(r));
  const lines = r.stdout.trimEnd().split("\n");
  assert.deepEqual(lines.slice(0, 10), [
    "refused: echo {} > /run/marsh/job.json",
    "refused: echo x >> /run/marsh/bin/fixture",
    "refused: cp /bin/sh /run/marsh/bin/sh",
    "refused: rm /run/marsh/bin/marsh",
    "refused: echo x >> /run/marsh/marsh.js",
    "refused: echo x >> /run/marsh/deno",
    "refused: mv /run/marsh/link /run/marsh/link2",
    "refused: chmod 777 /run/marsh/deno",
    "refused: touch /run/marsh/new",
    "unchanged",
  ]);
  const mounts = lines.slice(10, -1);
  assert.ok(mounts.some((l) => l.startsWith("/run/marsh ")), lines.join("\n"));
  for (const l of mounts) assert.match(l, /^\/run\/marsh\S* ro$/, lines.join("\n"));
  assert.equal(lines.at(-1), "jobs-ok");
  assert.deepEqual(await ownContainers(w), []);
});

/** `marsh status --json`'s `processes`. */
async function processes(w: World): Promise<Record<string, number>> {
  const r = await w.sb.marsh(["status", "--json"]);
  assert.equal(r.code, 0, show(r));
  return JSON.parse(r.stdout).processes;
}

/** The lines of a project file, or none while it does not exist. */
function linesOf(w: World, file: string): string[] {
  try {
    return Deno.readTextFileSync(`${w.sb.project}/${file}`).split("\n").filter((l) => l);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return [];
    throw error;
  }
}

const CHAIN =
  "marsh: fixture → fixture → fixture refused: same-Kit chain limit 2 (see /run/marsh/context.md)";

Deno.test({
  name:
    "self-replicating marsh run: two names of one image are one Kit (chain 2); five copies per level stop at fan-out 4 and the chain",
  permissions,
}, async () => {
  await using w = await World.create({
    // Each job runs itself again under the other name.
    "self.sh": 'echo "$MARSH_JOB"; marsh run "$1" sh ./self.sh "$2" "$1"; echo "exit $?"\n',
    // Each job starts five copies of itself at once, then waits for the gate.
    "fan.sh": [
      "for i in 1 2 3 4 5; do",
      '  (marsh run fixture sh ./fan.sh >/dev/null; echo "$MARSH_JOB $?" >> statuses) &',
      "done",
      "while [ ! -f gate ]; do sleep 0.1; done",
      "wait",
      "",
    ].join("\n"),
  });
  const alias = await w.sb.marsh(["kits", "add", "alias", "--image", w.ref, "--entrypoint", "env"]);
  assert.equal(alias.code, 0, show(alias));
  // fixture → alias → fixture: the chain counts the Kit (its image), not the name.
  const self = await w.sb.marsh(["run", "fixture", "sh", "./self.sh", "alias", "fixture"]);
  assert.equal(self.code, 0, show(self));
  const [one, two] = self.stdout.split("\n");
  assert.equal(self.stdout, `${one}\n${two}\nexit 125\nexit 0\n`, show(self));
  assert.equal(
    self.stderr,
    "marsh: fixture → alias → fixture refused: same-Kit chain limit 2 (see /run/marsh/context.md)\n",
  );
  assert.deepEqual((await w.jobs()).map((j) => [j.id, j.kit, j.lineage.depth]), [
    [one, "fixture", 1],
    [two, "alias", 2],
  ]);
  assert.deepEqual(await processes(w), { running: 0, refused: 1, held: 0 });

  // Five copies per job: the root's fifth is refused (fan-out 4); each of its four
  // children's five would be a third fixture in a row (the chain 2).
  const run = w.sb.spawnMarsh(["run", "fixture", "sh", "./fan.sh"]);
  const refusals = await waitFor("every refusal", () => {
    const st = linesOf(w, "statuses");
    return st.filter((l) => l.endsWith(" 125")).length === 21 ? st : undefined;
  });
  // While the gate holds: the root and its four children run, nothing else was recorded.
  assert.deepEqual(await processes(w), { running: 5, refused: 22, held: 0 });
  const live = (await w.jobs()).filter((j) => j.state === "running");
  assert.equal(live.length, 5);
  const root = live.find((j) => j.lineage.depth === 1)!;
  const children = live.filter((j) => j.lineage.parent === `job:${root.id}`).map((j) => j.id);
  assert.equal(children.length, 4);
  assert.deepEqual(
    refusals.sort(),
    [`${root.id} 125`, ...children.flatMap((c) => Array(5).fill(`${c} 125`))].sort(),
  );
  Deno.writeTextFileSync(`${w.sb.project}/gate`, "");
  const r = await run.output();
  const err = new TextDecoder().decode(r.stderr);
  assert.equal(r.code, 0, err);
  assert.deepEqual(
    err.trimEnd().split("\n").sort(),
    ["marsh: fan-out limit 4", ...Array(20).fill(CHAIN)].sort(),
  );
  assert.deepEqual(
    linesOf(w, "statuses").filter((l) => l.endsWith(" 0")).sort(),
    Array(4).fill(`${root.id} 0`),
  );
  const jobs = await w.jobs();
  assert.equal(jobs.length, 7);
  assert.deepEqual(jobs.map((j) => [j.state, j.cleanup]), Array(7).fill(["finished", "removed"]));
  assert.deepEqual(await processes(w), { running: 0, refused: 22, held: 0 });
  assert.deepEqual(await ownContainers(w), []);
});

Deno.test({
  name:
    "self-replicating marsh run: the tree's 64th launch runs, the 65th is refused (total limit 64)",
  permissions,
}, async () => {
  await using w = await World.create({
    "total.sh": [
      // Four children that stay until the gate: the fan-out is full.
      "for i in 1 2 3 4; do",
      "  marsh run fixture sh -c 'touch \"up.$MARSH_JOB\"; while [ ! -f gate ]; do sleep 0.1; done' &",
      "done",
      'until [ "$(ls up.* 2>/dev/null | wc -l)" -eq 4 ]; do sleep 0.1; done',
      // Refused launches count too: the root, four children and 58 refusals make 63.
      "i=0",
      "while [ $i -lt 58 ]; do",
      '  marsh run fixture true 2>> fan.err; echo "$?" >> fan.rc',
      "  i=$((i + 1))",
      "done",
      "touch gate",
      "wait",
      `marsh run fixture sh -c 'echo "64th $MARSH_JOB"'; echo "exit $?"`,
      'marsh run fixture true; echo "exit $?"',
      "",
    ].join("\n"),
  });
  const r = await w.sb.marsh(["run", "fixture", "sh", "./total.sh"], { timeoutMs: 240_000 });
  assert.equal(r.code, 0, show(r));
  const last = /^64th ([a-z0-9]{8})\n/.exec(r.stdout)?.[1];
  assert.equal(r.stdout, `64th ${last}\nexit 0\nexit 125\n`, show(r));
  assert.equal(r.stderr, "marsh: total limit 64\n");
  assert.deepEqual(linesOf(w, "fan.err"), Array(58).fill("marsh: fan-out limit 4"));
  assert.deepEqual(linesOf(w, "fan.rc"), Array(58).fill("125"));
  const jobs = await w.jobs();
  assert.equal(jobs.length, 6);
  const root = jobs.find((j) => j.lineage.depth === 1)!;
  assert.ok(jobs.every((j) => j.lineage.root === root.id && j.state === "finished"));
  assert.ok(jobs.some((j) => j.id === last));
  assert.deepEqual(await processes(w), { running: 0, refused: 59, held: 0 });
  assert.deepEqual(await ownContainers(w), []);
});
