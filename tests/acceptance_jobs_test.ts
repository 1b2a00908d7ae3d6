/**
 * `marsh jobs` through the real CLI and daemon (docs/rules.md "Lineage"):
 * golden listings of real jobs from a real split with Docker (a shell
 * branch, an argv branch whose job makes its own split, a failing argv
 * branch), the in-job listing (only its own subtree), `marsh jobs show`,
 * `marsh splits ID` with its nested split, `marsh status`'s processes, and
 * a split drawn from its jobs' lineage once `marsh splits rm` forgot it.
 *
 * The goldens normalise only ids (named in order) and times (`T ago`, `R`),
 * after checking that every row's columns start where the header's do; then
 * runs of spaces are one column gap.
 */

import assert from "node:assert/strict";
import { handleId, PERMISSIONS as permissions, show } from "./_acceptance.ts";
import { World } from "./_kit_world.ts";

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

/** `text` with each id of `names` (and its 8-character prefix) replaced by its name. */
function renamed(text: string, names: ReadonlyMap<string, string>): string {
  for (const [id, n] of names) text = text.replaceAll(id, n).replaceAll(id.slice(0, 8), n);
  return text;
}

/**
 * A listing with its columns checked against the header's, then ids
 * replaced by `names` (full ids and 8-character prefixes), times by `T ago`
 * and `R`, and each column gap made two spaces.
 */
function normalise(text: string, names: ReadonlyMap<string, string>): string {
  const lines = text.split("\n");
  const header = lines[0]!;
  const starts = [...header.matchAll(/\S+/g)].map((m) => m.index);
  for (const line of lines.slice(1)) {
    if (line === "" || line.startsWith("(")) continue;
    for (const c of starts.slice(1)) {
      // A command drawn under a parent's last child starts with the tree's spaces.
      const last = c === starts.at(-1);
      assert.ok(
        line[c - 1] === " " && line[c - 2] === " " && (last || line[c] !== " "),
        `column at ${c} misaligned:\n${text}`,
      );
    }
  }
  const name = (t: string) => renamed(t, names);
  // The columns before COMMAND: times normalised, each gap two spaces; the command as drawn.
  const command = starts.at(-1)!;
  return lines.map((line) => {
    if (line.startsWith("(")) return line;
    const cells = name(line.slice(0, command))
      .replace(/\b\d+[smhd] ago\b/g, "T ago")
      .replace(/(?<= )(\d+\.\ds|\d+m\d\ds|\d+h\d\dm)(?= )/g, "R")
      .replace(/ {2,}/g, "  ");
    return cells + name(line.slice(command));
  }).join("\n");
}

Deno.test({
  name: "marsh jobs: golden listings, --tree, --json, show, in a job, splits ID, status",
  permissions,
}, async () => {
  await using w = await World.create();
  const { sb } = w;
  const m = "env -i /run/marsh/bin/marsh";
  const script = [
    `${m} split -n ::: n fixture sh -c 'echo n > n.txt' | ${m} join > join.out 2>&1`,
    `${m} jobs --tree > tree.txt 2>&1`,
    `${m} jobs show "$MARSH_JOB" > show.txt 2>&1`,
  ].join("; ");
  const r = await w.split([
    "-n",
    "-b",
    "s=echo s > s.txt",
    ":::",
    "a",
    "fixture",
    "sh",
    "-c",
    script,
    ":::",
    "b",
    "fixture",
    "sh",
    "-c",
    "exit 3",
  ]);
  assert.equal(r.code, 3, show(r));
  const id = handleId(r.stdout);
  const join = await sb.marsh(["join"], { stdin: r.stdout });
  // b exited 3: the split is kept, the join itself succeeds.
  assert.equal(join.code, 0, show(join));
  const top = await w.manifest(id);
  const [, a, b] = top.branches;
  const nested = (await w.jobs()).find((j) => j.split !== id)!;
  assert.ok(nested, "the nested split's job");
  const names = new Map([
    [a!.job_id!, "JOB_A"],
    [b!.job_id!, "JOB_B"],
    [nested.id, "JOB_N"],
    [id, "SPLIT_1"],
    [nested.split, "SPLIT_2"],
  ]);

  const tree = await sb.marsh(["jobs", "--tree"]);
  assert.equal(tree.code, 0, show(tree));
  assert.equal(
    normalise(tree.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  COMMAND",
      "SPLIT_1  T ago  kept  3  R  split (s, a, b)",
      "SPLIT_1/s  T ago  finished  0  R  ├─ s: echo s > s.txt",
      `JOB_A  T ago  finished  0  R  ├─ a: fixture sh -c 'env -i /run/marsh/bin/marsh split -n ::: n fixtu…`,
      "SPLIT_2  T ago  joined  0  R  │  └─ split (n)",
      "JOB_N  T ago  finished  0  R  │     └─ n: fixture sh -c 'echo n > n.txt'",
      "JOB_B  T ago  finished  3  R  └─ b: fixture sh -c 'exit 3'",
      "",
    ].join("\n"),
  );
  const flat = await sb.marsh(["jobs"]);
  assert.equal(flat.code, 0, show(flat));
  assert.equal(
    normalise(flat.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  PARENT  COMMAND",
      `JOB_A  T ago  finished  0  R  SPLIT_1  fixture sh -c 'env -i /run/marsh/bin/marsh split -n ::: n fixtu…`,
      "JOB_N  T ago  finished  0  R  SPLIT_2  fixture sh -c 'echo n > n.txt'",
      "JOB_B  T ago  finished  3  R  SPLIT_1  fixture sh -c 'exit 3'",
      "",
    ].join("\n"),
  );

  // Inside job a: only its own subtree, itself running.
  const patch = Deno.readTextFileSync(`${top.out}/a/diff.patch`);
  assert.equal(
    normalise(added(patch, "tree.txt") + "\n", names),
    [
      "ID  STARTED  STATE  EXIT  RUN  COMMAND",
      "JOB_A  T ago  running  -  R  fixture sh -c 'env -i /run/marsh/bin/marsh split -n ::: n fixtu…",
      "SPLIT_2  T ago  joined  0  R  └─ split (n)",
      "JOB_N  T ago  finished  0  R     └─ n: fixture sh -c 'echo n > n.txt'",
      "",
    ].join("\n"),
  );
  const inJob = added(patch, "show.txt");
  assert.match(inJob, new RegExp(`^job: +${a!.job_id}$`, "m"));
  assert.match(inJob, new RegExp(`^parent: +split:${id}/a$`, "m"));
  assert.match(inJob, new RegExp(`^children: +${nested.id}$`, "m"));

  // The documents: every job, and the forest with split and branch nodes.
  const doc = JSON.parse((await sb.marsh(["jobs", "--json"])).stdout) as {
    schema: string;
    jobs: { job_id: string; lineage: Record<string, unknown> }[];
  };
  assert.equal(doc.schema, "marsh.jobs/v1");
  assert.deepEqual(doc.jobs.map((j) => j.job_id), [a!.job_id, nested.id, b!.job_id]);
  assert.equal(doc.jobs[1]!.lineage.split, nested.split);
  assert.equal(doc.jobs[1]!.lineage.label, "n");
  type Node = Record<string, unknown> & { node: string; children: Node[] };
  const forest = JSON.parse((await sb.marsh(["jobs", "--tree", "--json"])).stdout) as {
    schema: string;
    jobs: Node[];
  };
  assert.equal(forest.schema, "marsh.jobs.tree/v1");
  const shape = (n: Node): unknown => [
    n.node,
    names.get(String(n.job_id ?? n.split_id)) ?? n.split_id,
    n.label ?? n.state,
    ...n.children.map(shape),
  ];
  assert.deepEqual(forest.jobs.map(shape), [
    ["split", "SPLIT_1", "kept", ["branch", "SPLIT_1", "s"], [
      "branch",
      "JOB_A",
      "a",
      ["job", "JOB_A", "finished", ["split", "SPLIT_2", "joined", [
        "branch",
        "JOB_N",
        "n",
        ["job", "JOB_N", "finished"],
      ]]],
    ], ["branch", "JOB_B", "b", ["job", "JOB_B", "finished"]]],
  ]);

  // show: by an 8-character prefix, text and JSON; the errors say what to give.
  const shown = await sb.marsh(["jobs", "show", a!.job_id!.slice(0, 8)]);
  assert.equal(shown.code, 0, show(shown));
  assert.equal(
    renamed(shown.stdout, names).replace(/\b\d+[smhd] ago$/m, "T ago")
      .replace(/^run: {7}\S+$/m, "run:       R"),
    [
      "job:       JOB_A",
      "command:   fixture sh -c " +
      // Each argument kept is cut to 200 characters.
      `'${[...script].slice(0, 200).join("").replaceAll("'", `'\\''`)}'`,
      "state:     finished",
      "status:    exited 0",
      "exit:      0",
      "cleanup:   removed",
      "started:   T ago",
      "run:       R",
      "parent:    split:SPLIT_1/a",
      "root:      JOB_A",
      "depth:     1",
      "spawn:     fixture",
      "split:     SPLIT_1/a",
      "children:  JOB_N",
      "",
    ].join("\n"),
  );
  const shownJson = JSON.parse(
    (await sb.marsh(["jobs", "show", a!.job_id!, "--json"])).stdout,
  ) as { lineage: { children: string[] }; container: string; status: string };
  assert.deepEqual(shownJson.lineage.children, [nested.id]);
  assert.match(shownJson.container, /^[0-9a-f]{64}$/);
  assert.equal(shownJson.status, "exited 0");
  const unknown = await sb.marsh(["jobs", "show", "zzzzzzzz"]);
  assert.equal(unknown.code, 2, show(unknown));
  assert.equal(unknown.stderr, "marsh jobs show: unknown job zzzzzzzz (see marsh jobs --all)\n");
  const short = await sb.marsh(["jobs", "show", a!.job_id!.slice(0, 4)]);
  assert.equal(short.code, 2, show(short));
  assert.equal(
    short.stderr,
    `marsh jobs show: invalid job "${
      a!.job_id!.slice(0, 4)
    }": give its id, or at least 8 of its leading characters (see marsh jobs)\n`,
  );

  // marsh splits ID shows the split its branch's job made, nested under it.
  const splits = await sb.marsh(["splits", id]);
  assert.equal(splits.code, 0, show(splits));
  assert.match(splits.stdout, new RegExp(`^${id}  kept  `, "m"));
  assert.match(splits.stdout, new RegExp(`^    ${nested.split}  joined  .*  from ${id}:a$`, "m"));
  const splitsJson = JSON.parse((await sb.marsh(["splits", id, "--json"])).stdout) as {
    splits: { id: string }[];
  };
  assert.deepEqual(splitsJson.splits.map((s) => s.id), [id, nested.split]);

  // marsh status: nothing runs, nothing was refused, nothing is held.
  const status = await sb.marsh(["status"]);
  assert.match(status.stdout, /^processes: 0 running, 0 refused, 0 held$/m);
  const statusJson = JSON.parse((await sb.marsh(["status", "--json"])).stdout);
  assert.deepEqual(statusJson.processes, { running: 0, refused: 0, held: 0 });

  // A removed split: its jobs stay, the split drawn from their lineage, its state unknown.
  const rm = await sb.marsh(["splits", "rm", id]);
  assert.equal(rm.code, 0, show(rm));
  const gone = await sb.marsh(["jobs", "--tree"]);
  assert.equal(
    normalise(gone.stdout, names),
    [
      "ID  STARTED  STATE  EXIT  RUN  COMMAND",
      "SPLIT_1  T ago  unknown  -  -  split (a, b)",
      `JOB_A  T ago  finished  0  R  ├─ a: fixture sh -c 'env -i /run/marsh/bin/marsh split -n ::: n fixtu…`,
      "SPLIT_2  T ago  joined  0  R  │  └─ split (n)",
      "JOB_N  T ago  finished  0  R  │     └─ n: fixture sh -c 'echo n > n.txt'",
      "JOB_B  T ago  finished  3  R  └─ b: fixture sh -c 'exit 3'",
      "",
    ].join("\n"),
  );
  const goneJson = JSON.parse((await sb.marsh(["jobs", "--tree", "--json"])).stdout) as {
    jobs: Node[];
  };
  assert.deepEqual(goneJson.jobs.map((n) => [n.node, n.split_id, n.state]), [
    ["split", id, null],
  ]);
});
