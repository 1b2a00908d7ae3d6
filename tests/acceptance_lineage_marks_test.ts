/**
 * A job's display marks through the real CLI, daemon, worker and Docker
 * (docs/rules.md "Lineage"): `marsh fanout | marsh collect` whose branches
 * run `marsh run` from the host records `lineage.fanout` and `marsh jobs
 * --tree` draws one fanout node with the two jobs under it; a split made in
 * a fanout branch gives its argv branch's job the mark too; `marsh split |
 * marsh join -- marsh run …` records `lineage.consumes` and the tree says
 * `(consumes split ID)`; a fanout inside a job starts ordinary children (no
 * fanout row); a forged `SPLIT_ID` and a malformed `FANOUT_BRANCH`
 * mark nothing and stop nothing.
 *
 * The goldens normalise only ids (named) and times (`T ago`, `R`), after
 * checking that every row's columns start where the header's do; then runs
 * of spaces are one column gap.
 */

import assert from "node:assert/strict";
import { handleId, MARSH, PERMISSIONS as permissions, show } from "./_acceptance.ts";
import { World } from "./_kit_world.ts";

/** `text` with each id of `names` (and its 8-character prefix) replaced by its name. */
function renamed(text: string, names: ReadonlyMap<string, string>): string {
  for (const [id, n] of names) text = text.replaceAll(id, n).replaceAll(id.slice(0, 8), n);
  return text;
}

/** A listing with its columns checked, ids named, times made `T ago` and `R`, gaps two spaces. */
function normalise(text: string, names: ReadonlyMap<string, string>): string {
  const lines = text.split("\n");
  const starts = [...lines[0]!.matchAll(/\S+/g)].map((m) => m.index);
  for (const line of lines.slice(1)) {
    if (line === "") continue;
    for (const c of starts.slice(1)) {
      const last = c === starts.at(-1);
      assert.ok(
        line[c - 1] === " " && line[c - 2] === " " && (last || line[c] !== " "),
        `column at ${c} misaligned:\n${text}`,
      );
    }
  }
  const command = starts.at(-1)!;
  return lines.map((line) =>
    renamed(line.slice(0, command), names)
      .replace(/\b\d+[smhd] ago\b/g, "T ago")
      .replace(/(?<= )(\d+\.\ds|\d+m\d\ds|\d+h\d\dm)(?= )/g, "R")
      .replace(/ {2,}/g, "  ") + renamed(line.slice(command), names)
  ).join("\n");
}

/** `tools`: the fixture image registered under a second name, as a separate command. */
async function addTools(w: World): Promise<void> {
  const add = await w.sb.marsh(["kits", "add", "tools", "--image", w.ref, "--entrypoint", "env"]);
  assert.equal(add.code, 0, show(add));
}

type Node = Record<string, unknown> & { node: string; children: Node[] };

/** One job of `marsh jobs --json`. */
interface Job {
  job_id: string;
  command: string;
  args: string[];
  created_unix_ms: number;
  lineage: Record<string, unknown>;
}

/** `marsh jobs --json`'s jobs (in the listing's order: newest tree first) and them by launch. */
async function jobsJson(w: World): Promise<{ listed: Job[]; byLaunch: Job[] }> {
  const r = await w.sb.marsh(["jobs", "--json"]);
  assert.equal(r.code, 0, show(r));
  const listed = (JSON.parse(r.stdout) as { jobs: Job[] }).jobs;
  return { listed, byLaunch: listed.toSorted((p, q) => p.created_unix_ms - q.created_unix_ms) };
}

Deno.test({
  name: "lineage.fanout: fanout branches' marsh run jobs under one fanout node; a split's too",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  await addTools(w);
  // b starts its job once a's job ran, and c its split once b's did: launch order is declaration order.
  const wait = (f: string) => `while [ ! -e ${f} ]; do sleep 0.1; done`;
  const r = await sb.bash(
    `set -o pipefail; "$M" fanout -n ` +
      `::: a "$M" run tools sh -c 'echo a > a.ran; echo from-a' ` +
      `::: b sh -c '${wait("a.ran")}; exec "$M" run tools sh -c "echo b > b.ran; echo from-b"' ` +
      `::: c sh -c '${wait("b.ran")}; "$M" split -n ::: x tools echo from-x | "$M" join' ` +
      `| "$M" collect`,
  );
  assert.equal(r.code, 0, show(r));
  assert.match(r.stdout, /^== a: exited 0\nfrom-a\n\n== b: exited 0\nfrom-b\n\n== c: exited 0\n/);

  const { listed, byLaunch } = await jobsJson(w);
  assert.equal(listed.length, 3, show(r));
  const [a, b, x] = byLaunch;
  const fa = a!.lineage.fanout as string;
  const fanoutId = fa.slice(0, fa.indexOf("/"));
  assert.match(fanoutId, /^[a-z0-9]{12}$/);
  const splitId = x!.lineage.split as string;
  // The documents: fanout on the two root jobs and on the split branch's job.
  assert.deepEqual(
    byLaunch.map((j) => [j.command, j.lineage.parent, j.lineage.fanout, j.lineage.consumes]),
    [
      ["tools", "session:host", `${fanoutId}/a`, undefined],
      ["tools", "session:host", `${fanoutId}/b`, undefined],
      ["tools", `split:${splitId}/x`, `${fanoutId}/c`, undefined],
    ],
  );
  const names = new Map([
    [String(a!.job_id), "JOB_A"],
    [String(b!.job_id), "JOB_B"],
    [String(x!.job_id), "JOB_X"],
    [fanoutId, "FANOUT"],
    [splitId, "SPLIT_1"],
  ]);

  const tree = await sb.marsh(["jobs", "--tree"]);
  assert.equal(tree.code, 0, show(tree));
  assert.equal(
    normalise(tree.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  COMMAND",
      "SPLIT_1  T ago  joined  0  R  split (x)",
      "JOB_X  T ago  finished  0  R  └─ x: tools echo from-x",
      "FANOUT  T ago  finished  0  R  fanout (a, b)",
      `JOB_A  T ago  finished  0  R  ├─ a: tools sh -c 'echo a > a.ran; echo from-a'`,
      `JOB_B  T ago  finished  0  R  └─ b: tools sh -c 'echo b > b.ran; echo from-b'`,
      "",
    ].join("\n"),
  );
  const flat = await sb.marsh(["jobs"]);
  assert.equal(
    normalise(flat.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  PARENT  COMMAND",
      "JOB_X  T ago  finished  0  R  SPLIT_1  tools echo from-x",
      `JOB_A  T ago  finished  0  R  -  tools sh -c 'echo a > a.ran; echo from-a'`,
      `JOB_B  T ago  finished  0  R  -  tools sh -c 'echo b > b.ran; echo from-b'`,
      "",
    ].join("\n"),
  );
  const forest = JSON.parse((await sb.marsh(["jobs", "--tree", "--json"])).stdout) as {
    jobs: Node[];
  };
  const fanout = forest.jobs.find((n) => n.node === "fanout")!;
  assert.ok(fanout, JSON.stringify(forest));
  assert.deepEqual(
    [fanout.fanout_id, fanout.state, fanout.status],
    [fanoutId, "finished", 0],
  );
  assert.deepEqual(
    fanout.children.map((br) => [br.node, br.fanout_id, br.label, br.job_id, br.children[0]!.node]),
    [
      ["branch", fanoutId, "a", a!.job_id, "job"],
      ["branch", fanoutId, "b", b!.job_id, "job"],
    ],
  );
  assert.equal(
    (fanout.children[0]!.children[0]!.lineage as Record<string, unknown>).fanout,
    `${fanoutId}/a`,
  );
  // The flat document lists the same jobs in the text listing's order.
  assert.deepEqual(listed.map((j) => j.job_id), [x!.job_id, a!.job_id, b!.job_id]);
});

Deno.test({
  name: "lineage.consumes: a stage after join records the split; forged marks record nothing",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  await addTools(w);
  const split = await w.split(["-n", ":::", "x", "tools", "echo", "from-x"]);
  assert.equal(split.code, 0, show(split));
  const id = handleId(split.stdout);
  const join = await sb.marsh(["join", "--", MARSH, "run", "tools", "echo", "consumed"], {
    stdin: split.stdout,
  });
  assert.equal(join.code, 0, show(join));
  // A SPLIT_ID no join handed over, and a FANOUT_BRANCH that is not one: the run runs, unmarked.
  const forged = await sb.marsh(["run", "tools", "true"], {
    env: { SPLIT_ID: "zz0000000000", FANOUT_BRANCH: "not-a-fanout" },
  });
  assert.equal(forged.code, 0, show(forged));
  const { listed, byLaunch } = await jobsJson(w);
  assert.equal(listed.length, 3);
  const [x, consumer, plain] = byLaunch;
  assert.deepEqual(
    byLaunch.map((j) => [j.lineage.parent, j.lineage.consumes, j.lineage.fanout]),
    [
      [`split:${id}/x`, undefined, undefined],
      ["session:host", id, undefined],
      ["session:host", undefined, undefined],
    ],
  );
  const names = new Map([
    [String(x!.job_id), "JOB_X"],
    [String(consumer!.job_id), "JOB_C"],
    [String(plain!.job_id), "JOB_P"],
    [id, "SPLIT_1"],
  ]);
  const tree = await sb.marsh(["jobs", "--tree"]);
  assert.equal(tree.code, 0, show(tree));
  assert.equal(
    normalise(tree.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  COMMAND",
      "JOB_P  T ago  finished  0  R  tools true",
      "JOB_C  T ago  finished  0  R  tools echo consumed  (consumes split SPLIT_1)",
      "SPLIT_1  T ago  joined  0  R  split (x)",
      "JOB_X  T ago  finished  0  R  └─ x: tools echo from-x",
      "",
    ].join("\n"),
  );
  const forest = JSON.parse((await sb.marsh(["jobs", "--tree", "--json"])).stdout) as {
    jobs: Node[];
  };
  assert.deepEqual(
    forest.jobs.map((
      n,
    ) => [n.node, n.job_id ?? n.split_id, (n.lineage as { consumes?: string })?.consumes]),
    [
      ["job", plain!.job_id, undefined],
      ["job", consumer!.job_id, id],
      ["split", id, undefined],
    ],
  );
  const shown = await sb.marsh(["jobs", "show", String(consumer!.job_id)]);
  assert.match(shown.stdout, new RegExp(`^consumes: +${id}$`, "m"), show(shown));
});

Deno.test({
  name:
    "lineage.fanout: a fanout inside a job starts ordinary children, drawn without a fanout row",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  await addTools(w);
  // In the job: `a` through the link, `b` with marsh run; both children of the job.
  const r = await sb.marsh([
    "run",
    "fixture",
    "sh",
    "-c",
    `marsh fanout -n ::: a tools sh -c "echo a > a.ran; echo in-a" ` +
    `::: b sh -c 'while [ ! -e a.ran ]; do sleep 0.1; done; marsh run tools echo in-b' | marsh collect`,
  ]);
  assert.equal(r.code, 0, show(r));
  assert.equal(r.stdout, "== a: exited 0\nin-a\n\n== b: exited 0\nin-b\n\n", show(r));
  const { byLaunch } = await jobsJson(w);
  assert.equal(byLaunch.length, 3, show(r));
  const [top, ...kids] = byLaunch;
  assert.deepEqual(
    kids.map((j) => [j.lineage.parent, "fanout" in j.lineage]),
    [[`job:${top!.job_id}`, false], [`job:${top!.job_id}`, false]],
  );
  const forest = JSON.parse((await sb.marsh(["jobs", "--tree", "--json"])).stdout) as {
    jobs: Node[];
  };
  const shape = (n: Node): unknown => [n.node, n.job_id, ...n.children.map(shape)];
  assert.deepEqual(forest.jobs.map(shape), [
    ["job", top!.job_id, ["job", kids[0]!.job_id], ["job", kids[1]!.job_id]],
  ]);
});
