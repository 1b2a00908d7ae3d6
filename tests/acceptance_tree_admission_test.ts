/**
 * A split's argv branch jobs are members of their job tree (docs/rules.md
 * "Admission"), with the real CLI, daemon, worker and Docker: a job's
 * nested split counts against the job's fan-out (4 live children, its
 * splits' branches included) and its tree's Kit VMs (`MARSH_TREE_KIT_VMS`),
 * each just under, at and just over the limit. A refused branch fails with
 * the rule's message (the creator's stderr, the manifest, join), leaves no
 * job record and is counted as refused.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import type { Manifest } from "../protocol/manifest.ts";
import {
  exists,
  finish,
  handleId,
  PERMISSIONS as permissions,
  show,
  waitFor,
} from "./_acceptance.ts";
import { withLock } from "./_engine.ts";
import { World } from "./_kit_world.ts";

/** Reads the daemon's journal (read-only): `sql`'s rows. */
function query<T>(w: World, sql: string): T[] {
  const db = new DatabaseSync(`${w.sb.home}/journal.db`, { readOnly: true });
  try {
    return db.prepare(sql).all() as T[];
  } finally {
    db.close();
  }
}

function refusedCount(w: World): number {
  return query<{ n: number }>(w, "SELECT n FROM admission_counts WHERE name = 'refused'")[0]!.n;
}

async function allSplits(w: World): Promise<Manifest[]> {
  const r = await w.sb.marsh(["splits", "--json"]);
  assert.equal(r.code, 0, show(r));
  return (JSON.parse(r.stdout) as { splits: Manifest[] }).splits;
}

/** `n` argv branches `b1..bn` running `cmd` (one shell word per element). */
function branches(n: number, cmd: string): string {
  return Array.from({ length: n }, (_, i) => `::: b${i + 1} ${cmd}`).join(" ");
}

/** The line a join renders for a branch, from a join's output. */
function header(out: string, label: string): string | undefined {
  return out.split("\n").find((l) => l.startsWith(`== ${label}: `));
}

Deno.test({
  name: "tree admission: a job's nested split of 3, 4 and 6 argv branches: fan-out 4 live children",
  permissions,
}, async () => {
  const wait = `fixture sh -c 'until [ -e "$HOME/go" ]; do sleep 0.1; done'`;
  const m = "/run/marsh/bin/marsh";
  await using w = await World.create({
    "fan.sh": [
      `${m} split -n ${
        branches(3, "fixture true")
      } 2> "$HOME/under.err" | ${m} join > "$HOME/under.out" 2>&1`,
      `${m} split -n ${
        branches(4, "fixture true")
      } 2> "$HOME/at.err" | ${m} join > "$HOME/at.out" 2>&1`,
      `${m} split -n ${branches(6, wait)} 2> "$HOME/over.err" | ${m} join > "$HOME/over.out" 2>&1`,
      "",
    ].join("\n"),
  });
  const home = `${w.sb.home}/kits/fixture/home`;
  const before = refusedCount(w);
  const top = w.sb.spawnMarsh(["split", "-n", ":::", "a", "fixture", "sh", "./fan.sh"]);
  // The six-branch split: once two are refused, the four admitted still run.
  const over = await waitFor("the over split's refusals", async () => {
    const s = (await allSplits(w)).find((x) => x.branches.length === 6);
    const failed = s?.branches.filter((b) => b.state === "failed").length ?? 0;
    return failed === 2 ? s : undefined;
  }, 120_000);
  const running = query<{ n: number }>(
    w,
    `SELECT count(*) AS n FROM jobs WHERE split = '${over.id}' AND state = 'running'`,
  )[0]!.n;
  assert.equal(running, 4, "four of its jobs run at once");
  Deno.writeTextFileSync(`${home}/go`, "");
  const done = await finish(top, "the top split", 120_000);
  assert.equal(done.code, 0, show(done));
  w.splits.push(handleId(done.stdout));

  // Just under and at the limit: every branch ran.
  for (const [name, n] of [["under", 3], ["at", 4]] as const) {
    const out = Deno.readTextFileSync(`${home}/${name}.out`);
    for (let i = 1; i <= n; i++) assert.match(header(out, `b${i}`) ?? "", /exited 0/, out);
    assert.equal(Deno.readTextFileSync(`${home}/${name}.err`).includes("refused"), false);
  }
  // Just over: the fifth and sixth are refused with the rule's message, everywhere.
  const out = Deno.readTextFileSync(`${home}/over.out`);
  for (let i = 1; i <= 4; i++) assert.match(header(out, `b${i}`) ?? "", /exited 0/, out);
  for (const label of ["b5", "b6"]) {
    assert.match(header(out, label) ?? "", /^== b\d: failed: fan-out limit 4/, out);
    const b = (await w.manifest(over.id)).branches.find((x) => x.label === label)!;
    assert.equal(b.status, "failed: fan-out limit 4");
    assert.equal(b.state, "failed");
  }
  const err = Deno.readTextFileSync(`${home}/over.err`);
  assert.match(err, /marsh split: branch b5: failed: fan-out limit 4/);
  assert.match(err, /marsh split: branch b6: failed: fan-out limit 4/);
  // No record for a refused branch's job; both refusals counted.
  const jobs = query<{ label: string; parent: string; depth: number }>(
    w,
    `SELECT label, parent, depth FROM jobs WHERE split = '${over.id}' ORDER BY label`,
  );
  assert.deepEqual(jobs.map((j) => j.label), ["b1", "b2", "b3", "b4"]);
  const [topJob] = query<{ id: string }>(w, "SELECT id FROM jobs WHERE depth = 1");
  for (const j of jobs) {
    assert.equal(j.parent, `job:${topJob!.id}`);
    assert.equal(j.depth, 2);
  }
  assert.equal(refusedCount(w) - before, 2);
  assert.ok(exists(`${home}/go`));
});

/** Registers `tools` and `tools2`: two more Kit identities (images other than `fixture`'s). */
async function addKits(w: World): Promise<void> {
  const marker = `${w.sb.scratch}/marker`;
  Deno.writeTextFileSync(marker, "tools2\n");
  // Under the engine lock: builds must not interleave (tests/_engine.ts).
  for (
    const [name, extra] of [["tools", []], ["tools2", ["--file", `${marker}:/marker`]]] as const
  ) {
    const b = await withLock(() => w.sb.marsh(["kit", "build", name, "--from-host", ...extra]));
    assert.equal(b.code, 0, show(b));
    const add = await w.sb.marsh(["kits", "add", name, "--image", name, "--entrypoint", "env"]);
    assert.equal(add.code, 0, show(add));
  }
}

Deno.test({
  name: "tree admission: a job's split branches and MARSH_TREE_KIT_VMS=2: under, at, over",
  permissions,
}, async () => {
  const m = "/run/marsh/bin/marsh";
  await using w = await World.create({
    // Each step a split of its own: the tree holds fixture (the job) and what the step adds.
    "vms.sh": [
      // Under: a second call to fixture costs no VM (one in use of 2).
      `${m} split -n ::: f fixture true | ${m} join > "$HOME/under.out" 2>&1`,
      // At: tools makes two of 2, and a second tools costs nothing.
      `${m} split -n ::: t tools true ::: u tools true | ${m} join > "$HOME/at.out" 2>&1`,
      // Over: tools and tools2 would make three.
      // t still runs (5 s) when x is admitted.
      `${m} split -n ::: t tools sleep 5 ::: x tools2 true 2> "$HOME/over.err" | ${m} join > "$HOME/over.out" 2>&1`,
      "",
    ].join("\n"),
  }, { MARSH_TREE_KIT_VMS: "2" });
  await addKits(w);
  const r = await w.split(["-n", ":::", "a", "fixture", "sh", "./vms.sh"]);
  assert.equal(r.code, 0, show(r));
  const home = `${w.sb.home}/kits/fixture/home`;
  const under = Deno.readTextFileSync(`${home}/under.out`);
  assert.match(header(under, "f") ?? "", /exited 0/, under);
  const at = Deno.readTextFileSync(`${home}/at.out`);
  assert.match(header(at, "t") ?? "", /exited 0/, at);
  assert.match(header(at, "u") ?? "", /exited 0/, at);
  const over = Deno.readTextFileSync(`${home}/over.out`);
  assert.match(
    header(over, "x") ?? "",
    /^== x: failed: tools2 refused: tree already uses 2 Kit VMs \(fixture, tools\) \(MARSH_TREE_KIT_VMS\)/,
    over,
  );
  assert.match(
    Deno.readTextFileSync(`${home}/over.err`),
    /branch x: failed: tools2 refused: tree already uses 2 Kit VMs/,
  );
});

Deno.test({
  name: "tree admission: the same-Kit chain walk stops at a split argv branch's job",
  permissions,
}, async () => {
  const m = "/run/marsh/bin/marsh";
  await using w = await World.create({
    // J, a branch job, splits: its branch job B (fixture too) runs C, which runs D.
    "top.sh": `${m} split -n ::: b fixture sh ./b.sh | ${m} join > "$HOME/join.out" 2>&1\n`,
    "b.sh":
      `${m} run fixture sh ./c.sh < /dev/null > "$HOME/c.log" 2>&1; echo "c=$?" >> "$HOME/rc"\n`,
    "c.sh": `${m} run fixture true < /dev/null > "$HOME/d.log" 2>&1; echo "d=$?" >> "$HOME/rc"\n`,
  });
  const r = await w.split(["-n", ":::", "j", "fixture", "sh", "./top.sh"]);
  assert.equal(r.code, 0, show(r));
  const home = `${w.sb.home}/kits/fixture/home`;
  // J → B is a split's branch, no same-Kit step: B → C is a chain of 2, admitted; C → D a third.
  assert.deepEqual(Deno.readTextFileSync(`${home}/rc`).trim().split("\n"), ["d=125", "c=0"]);
  assert.equal(
    Deno.readTextFileSync(`${home}/d.log`),
    "marsh: fixture → fixture → fixture refused: same-Kit chain limit 2 (see /run/marsh/context.md)\n",
  );
  const rows = query<{ depth: number; parent: string; branch: number }>(
    w,
    "SELECT depth, parent, branch FROM jobs ORDER BY depth",
  );
  assert.deepEqual(rows.map((j) => [j.depth, j.parent.split(":")[0], j.branch]), [
    [1, "split", 1],
    [2, "job", 1],
    [3, "job", 0],
  ]);
});
